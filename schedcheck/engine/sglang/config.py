"""Which SGLang to check, decided before anything of it runs: the installed release, or a
checkout (a folder holding `sglang/`), found without importing it; its default event loop
read off its files; as plain data for its worker."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from schedcheck.engine.adapter import EngineSetup, SetupError
from schedcheck.engine.sglang.drive import LOOPS, RUNNER
from schedcheck.engine.strategies import IN_FLIGHT_ABORT, SKIPPED

__all__ = ["overlaps_by_default", "pages_on_a_cpu", "policies_of", "sglang_setup"]

# the policies beside fcfs and priority its adapter draws (adapter.Sglang.features), which
# a release may lack
ADAPTER_POLICIES = (
    "lpm",
    "dfs-weight",
    "lof",
    "hrrn",
    "shortest-prefill-first",
    "random",
    "routing-key",
)

EXTRA = (
    "python -m pip install 'schedcheck[sglang]', or .ci/install-sglang on a machine without "
    'a GPU (docs/engines.md, "SGLang")'
)
# where a release declares its server's arguments: 0.5.2x's argument groups, older
# releases' one dataclass
DECLARED = ("srt/arg_groups/fields/schedule.py", "srt/server_args.py")
# `disable_overlap_schedule: bool = False`, or `disable_overlap_schedule: A[bool, Arg(...)]
# = False`: the first `bool =` or `] =` after the name
DEFAULT = re.compile(r"disable_overlap_schedule\s*:(?:.|\n){0,800}?(?:\]|bool)\s*=\s*(True|False)")


def overlaps_by_default(folder: Path) -> bool:
    """Whether the release's server runs the overlap loop unless told otherwise: its
    `disable_overlap_schedule` argument's default, read off where it is declared (a dense
    model on a GPU: the platform hooks turn it off for MPS and some hybrid models only)."""
    for name in DECLARED:
        path = folder / name
        if path.is_file():
            found = DEFAULT.search(path.read_text())
            if found is not None:
                return found.group(1) == "False"
    raise SetupError(
        f"{folder} declares no disable_overlap_schedule where schedcheck reads it "
        f"({', '.join(DECLARED)}): not an SGLang release this adapter knows"
    )


def pages_on_a_cpu(folder: Path) -> bool:
    """Whether the release's paged allocator (pages over 1 slot) has a CPU path: 0.5.22 on
    choose torch code where triton is missing (`use_triton_kernels`, `alloc_*_naive`);
    before, it calls its triton kernels whatever the device, and only pages of 1 run here."""
    paged = folder / "srt" / "mem_cache" / "allocator" / "paged.py"
    return "use_triton_kernels" in (paged.read_text() if paged.is_file() else "")


def policies_of(folder: Path) -> tuple[str, ...]:
    """The scheduling policies the release names (`CacheAwarePolicy`, `CacheAgnosticPolicy`:
    `NAME = "value"` in srt/managers/schedule_policy.py), read off its file: hrrn and
    shortest-prefill-first are 0.5.2x's."""
    path = folder / "srt" / "managers" / "schedule_policy.py"
    text = path.read_text() if path.is_file() else ""
    return tuple(re.findall(r'^\s+[A-Z_]+ = "([a-z-]+)"', text, re.MULTILINE))


def sglang_setup(path: str | None, args: argparse.Namespace | None = None) -> EngineSetup:
    """The setup for `schedcheck engine --engine sglang [PATH]`: where SGLang is, and the
    loops its runs draw from (--loop, --modes over the release's default). SetupError
    (exit 2) when there is no SGLang there."""
    if path is None:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise SetupError(f"SGLang is not installed here: {EXTRA}")
        root = Path(next(iter(spec.submodule_search_locations))).parent
        try:
            version = importlib.metadata.version("sglang")
        except importlib.metadata.PackageNotFoundError:
            version = "of unknown version"
        where = f"SGLang {version}, installed"
    else:
        root = Path(path).resolve()
        if not (root / "sglang" / "srt" / "managers" / "scheduler.py").is_file():
            raise SetupError(
                f"{path} holds no SGLang (no sglang/srt/managers/scheduler.py): give the "
                "folder holding sglang/ (a checkout's python/), or no PATH for the installed one"
            )
        where = f"the SGLang at {root}"
    overlap = overlaps_by_default(root / "sglang")
    default = LOOPS[0] if overlap else LOOPS[1]
    asked = getattr(args, "loop", None)
    if asked is not None and asked not in LOOPS:
        raise SetupError(f"--loop {asked}: SGLang's loops are {', '.join(LOOPS)}")
    every = getattr(args, "modes", None) == "all"
    first = asked or default
    loops = [first, *(loop for loop in LOOPS if loop != first and every)]
    options = [*(["--loop", asked] if asked else []), *(["--modes", "all"] if every else [])]
    paged = pages_on_a_cpu(root / "sglang")
    return EngineSetup(
        root=str(root),
        package="sglang",
        runner=RUNNER.name,
        runner_from="SGLang's own",
        config_from=f"{where}; ServerArgs from each workload: page_size = block_size, "
        "chunked_prefill_size = max_prefill_tokens = max_num_batched_tokens, "
        "max_running_requests = max_num_seqs, max_total_tokens = the pages less page 0; "
        "schedule_policy, priority scheduling, enable_mixed_chunk and max_queued_requests as "
        "the workload says; radix cache on, its Python tree core",
        options=tuple(options),
        modes=tuple(loops),
        # a request left out of a step; where the overlap loop runs, an abort received
        # while the request's batch is in flight (launched, its result not yet processed)
        reaches=(SKIPPED, *((IN_FLIGHT_ABORT,) if "overlap" in loops else ())),
        config={"overlap_default": overlap},
        block_sizes=() if paged else (1,),
        lacks_policies=tuple(p for p in ADAPTER_POLICIES if p not in policies_of(root / "sglang")),
        # its streaming sessions (`--enable-streaming-session`), in every release driven
        sessions=True,
    )
