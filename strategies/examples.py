"""The spec's worked examples as workloads: tried before anything random.

The model is the examples' own, `100 * i + len(output)` for `a<i>`, so the outputs read as
in the spec's tables. Example 0 is in the original (Chinese) text only.
"""

from __future__ import annotations

from schedcheck.model.tokens import TokenModel
from schedcheck.model.workload import Config, Request, Workload

SPEC_MODEL = TokenModel(spec=True)


def _example(config: Config, *requests: tuple[str, int, int]) -> Workload:
    return Workload(config, tuple(Request(*r) for r in requests), SPEC_MODEL)


EXAMPLES: dict[str, Workload] = {
    "example0": _example(Config(100, 4, 8, 16), ("s0", 10, 3), ("s1", 10, 3), ("s2", 10, 3)),
    "example1": _example(Config(100, 4, 8, 8), ("a1", 6, 3), ("a2", 5, 2), ("a3", 3, 1)),
    "example2": _example(Config(3, 2, 8, 64), ("a1", 2, 3), ("a2", 3, 2)),
    "example3": _example(Config(5, 4, 8, 100), ("a1", 9, 4), ("a2", 9, 4), ("a3", 1, 4)),
    "example4": _example(Config(3, 2, 8, 64), ("a1", 2, 3), ("a2", 2, 3)),
}
