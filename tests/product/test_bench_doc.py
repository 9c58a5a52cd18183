"""bench.run writes its figures into docs/performance.md between markers and keeps what is
written there by hand (the notes of sections 2-4, the other benchmarks' tables)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.run import splice
from tests.helpers import ROOT

DOC = """# Performance

<!-- bench.run 1 -->
- old figure
<!-- /bench.run 1 -->
Why the figure is what it is: a note written by hand.
"""


def test_a_block_is_replaced_and_the_notes_around_it_kept() -> None:
    done = splice(DOC, {"1": ("## 1. Step cost", ["- new figure"])})
    assert "- new figure" in done and "- old figure" not in done
    assert "a note written by hand" in done and done.count("bench.run 1") == 2


def test_a_block_the_document_lacks_goes_at_its_end_under_its_heading() -> None:
    done = splice(DOC, {"9": ("## 9. New", ["- appended"])})
    assert done.startswith(DOC.rstrip("\n"))
    assert done.endswith("## 9. New\n<!-- bench.run 9 -->\n- appended\n<!-- /bench.run 9 -->\n")


def test_the_document_as_committed_is_a_fixed_point() -> None:
    text = (ROOT / "docs" / "performance.md").read_text()
    pattern = r"<!-- bench.run (\S+) -->\n(.*?)\n<!-- /bench.run \1 -->"
    blocks = {m[1]: ("", m[2].split("\n")) for m in re.finditer(pattern, text, re.S)}
    assert {"date", "1", "2", "3", "4", "5", "6", "7", "ratios"} <= set(blocks)
    assert splice(text, blocks) == text


def test_every_file_a_benchmark_names_is_there() -> None:
    """The benchmarks are not run by the suite: a path of theirs that a move broke would go
    unseen until someone measured (bench.engine named tests/engines/ for a while)."""
    import importlib

    named = []
    for name in sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__"):
        module = importlib.import_module(f"bench.{name}")
        named += [value for value in vars(module).values() if isinstance(value, Path)]
    assert named  # the benchmarks do name files
    missing = [str(path) for path in named if not path.exists()]
    assert not missing, missing
