"""Checkouts of the engines in tests/engine_subjects/: the correct one, and each mutant assembled
over it (the replaced module kept beside it as `_correct_<name>.py`, which the mutant
subclasses). Written once per content to a cache folder, as the box needs whole files."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORRECT = HERE / "correct"
MUTANTS = sorted((HERE / "mutants").glob("*.py"))
SHAPES = sorted((HERE / "shapes").glob("*.py"))  # correct engines of a fork's shape
# The rest of an engine (config, LLMEngine, ModelRunner, a model needing a GPU) over the
# correct scheduling code: what its own step runs (--loop own), and the runner's mutants.
ENGINE = HERE / "engine"
RUNNER_MUTANTS = sorted((HERE / "runner_mutants").glob("*.py"))
_REPLACES = re.compile(r"^# replaces (\S+)$", re.M)
_RUNNER = re.compile(r"^# runner (\S+)$", re.M)


def replaced(mutant: Path) -> str:
    found = _REPLACES.search(mutant.read_text())
    assert found, f"{mutant.name}: no '# replaces nanovllm/...' line"
    return found.group(1)


def runner_of(shape: Path) -> str | None:
    """The runner a shape is computed by, where its `# runner NAME` line names one."""
    found = _RUNNER.search(shape.read_text())
    return found.group(1) if found else None


def expected_checks(mutant: Path) -> set[str]:
    """The checks its docstring says catch it: "Caught by E2." or "Caught by E1 or E7."."""
    found = re.search(r"Caught by ([^.]*)\.", mutant.read_text())
    assert found, f"{mutant.name}: the docstring must say 'Caught by <check>.'"
    return set(re.findall(r"\bE\d\b", found.group(1)))


def checkout(mutant: Path | None = None, whole: bool = False) -> Path:
    """The correct engine's checkout, or `mutant` (or a shape) assembled over it; `whole`:
    with the rest of its engine (ENGINE), which its own step runs."""
    if mutant is None and not whole:
        return CORRECT
    source = mutant.read_text() if mutant is not None else ""
    digest = hashlib.sha256(source.encode() + _tree_digest(whole)).hexdigest()[:16]
    stem = mutant.stem if mutant is not None else "correct"
    name = f"{stem}-{'whole-' if whole else ''}{digest}"
    root = Path(tempfile.gettempdir()) / "schedcheck-engines" / name
    if not root.exists():
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(CORRECT, partial, ignore=shutil.ignore_patterns("__pycache__"))
        if whole:
            shutil.copytree(
                ENGINE, partial, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
            )
        if mutant is None:
            partial.rename(root)
            return root
        target = partial / replaced(mutant)
        target.rename(target.with_name(f"_correct_{target.name}"))
        target.write_text(source)
        partial.rename(root)  # atomic: parallel test processes may build it at once
    return root


def _tree_digest(whole: bool = False) -> bytes:
    files = sorted(p for p in CORRECT.rglob("*.py"))
    if whole:
        files += sorted(p for p in ENGINE.rglob("*.py"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).digest()
