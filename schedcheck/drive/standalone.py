"""A file written against the reference, made a standalone submission file.

A mutant (a course's catalogue of wrong schedulers, schedcheck's own tests/mutants/) is the
reference plus one change, and says so in its first lines: `from schedcheck.scheduler
import Scheduler as _Reference`. A box cannot import schedcheck's reference (a submission
must not see the course's solution, docs/isolation.md), so before such a file goes into a
worker, `standalone()` writes a copy with those imports replaced by the reference's own
source: a whole file, as a student's is.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from pathlib import Path

from schedcheck.drive.loader import reference_source as _reference_source

_IMPORT = re.compile(r"^from schedcheck\.scheduler import (.+)$", re.M)


@functools.cache
def reference_source() -> str:
    """The reference as one module importing nothing from schedcheck."""
    return _reference_source()


def inline_reference(source: str) -> str:
    """`source` with its `from schedcheck.scheduler import ...` lines replaced by the reference."""
    if not _IMPORT.search(source):
        return source
    aliases = []
    for names in _IMPORT.findall(source):
        for name in names.split(","):
            original, _, alias = name.strip().partition(" as ")
            if alias and original != "*":
                aliases.append(f"{alias} = {original}")
    rest = _IMPORT.sub("", source).replace("from __future__ import annotations\n", "")
    return "\n".join([reference_source(), *aliases, rest])


def reference_file() -> Path:
    """The reference as a submission file, `p07_scheduler.py`, standalone."""
    return _written("p07_scheduler.py", reference_source())


def standalone(path: Path, folder: Path | None = None) -> Path:
    """A standalone copy of the catalogue file `path`, named as it is (the name shows in
    reports and process lists), in `folder` or a cache folder of this user's."""
    return _written(path.name, inline_reference(path.read_text()), folder)


def _written(name: str, source: str, folder: Path | None = None) -> Path:
    if folder is None:
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        folder = Path(tempfile.gettempdir()) / f"schedcheck-catalogue-{os.getuid()}" / digest
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / name
    if not copy.exists() or copy.read_text() != source:
        partial = copy.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source)
        partial.replace(copy)  # atomic: xdist workers may write the same copy at once
    return copy


def found_by_two_schedulers(mutant: Path) -> bool:
    """Whether a catalogued mutant's docstring says only two schedulers alive at once find
    it (issue 47): its search is that property's (strategies/workloads.py's pairs)."""
    return "Found by two schedulers alive at once" in mutant.read_text()


def found_by_the_larger_stage(mutant: Path) -> bool:
    """Whether a catalogued mutant's docstring says only the larger stage finds it (a bug
    of size): its search is that stage's (strategies/large.py), not the ordinary one's."""
    return "found by the larger stage" in mutant.read_text()


def found_by_the_marathon(mutant: Path) -> bool:
    """Whether a catalogued mutant's docstring says only the marathon finds it (a cap past a
    thousand: issue 47): its search is that run's (strategies/large.py's marathon)."""
    return "found by the marathon" in mutant.read_text()
