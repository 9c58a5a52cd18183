"""The catalogue's files (tests/mutants/, tests/hostile/, tests/equivalents/) as the box
loads them: standalone, with the reference written in (schedcheck/drive/standalone.py)."""

from __future__ import annotations

from pathlib import Path

from schedcheck.drive.standalone import (
    inline_reference,
    reference_file,
    reference_source,
    standalone,
)

__all__ = [
    "ROOT",
    "found_by_the_larger_stage",
    "inline_reference",
    "reference_file",
    "reference_source",
    "standalone",
]

ROOT = Path(__file__).resolve().parent.parent


def found_by_the_larger_stage(mutant: Path) -> bool:
    """Whether a mutant's docstring says only the larger stage finds it (a bug of size):
    its search is that stage's (strategies/large.py), not the ordinary workloads'."""
    return "found by the larger stage" in mutant.read_text()


if __name__ == "__main__":  # python -m tests.catalogue FILE...: print their standalone paths
    import sys

    for argument in sys.argv[1:]:
        print(standalone(Path(argument)))
