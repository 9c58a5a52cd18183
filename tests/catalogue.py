"""The catalogue's files (tests/mutants/, tests/hostile/, tests/equivalents/) as the box
loads them: standalone, with the reference written in (schedcheck/drive/standalone.py)."""

from __future__ import annotations

from pathlib import Path

from schedcheck.drive.standalone import (
    found_by_the_larger_stage,
    found_by_the_marathon,
    found_by_two_schedulers,
    inline_reference,
    reference_file,
    reference_source,
    standalone,
)

__all__ = [
    "HANGING",
    "ROOT",
    "found_by_the_larger_stage",
    "found_by_the_marathon",
    "found_by_two_schedulers",
    "inline_reference",
    "reference_file",
    "reference_source",
    "standalone",
]

ROOT = Path(__file__).resolve().parent.parent
# The mutants whose bug is a hang: run isolated (a call timeout stops them), never in
# process, where their loop would be the test run's own.
HANGING = frozenset(
    {
        "infinite_loop_full_house",
        "hang_phase1_retry_never_preempts",
        "hang_phase2_admits_without_progress",
        "hang_update_frees_block_by_block",
    }
)


if __name__ == "__main__":  # python -m tests.catalogue FILE...: print their standalone paths
    import sys

    for argument in sys.argv[1:]:
        print(standalone(Path(argument)))
