"""The wheel's layout: one importable name, `schedcheck`, with the rooms inside it.

In a checkout the rooms are top-level folders (scheduler/, invariants/, strategies/,
harness/, suite/, schedcheck/), which keeps the layers in view. Installed under those names
they would collide with a course's own `scheduler.py`, `strategies/` or `harness/` in the
same pytest process. So a wheel (`pip install .`, `python -m build`) gets them moved under
`schedcheck/` with their imports rewritten (`from harness.x` -> `from schedcheck.harness.x`),
as pip vendors its own dependencies, plus docs/spec.md and docs/contract.md for `schedcheck
spec` and `schedcheck contract`. An editable install (`pip install -e .`) keeps the
checkout's names. Metadata is in pyproject.toml; harness/layout.py is the run-time side.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOMS = ("scheduler", "invariants", "strategies", "harness", "suite")
NAMES = "|".join((*ROOMS, "schedcheck"))
IMPORT = re.compile(rf"^(\s*)(from|import) ({'|'.join(ROOMS)})(?=[.\s])", re.M)
PLAIN = re.compile(rf"^\s*import ({NAMES})\b", re.M)
DOCS = ("spec.md", "contract.md")


class MoveIntoSchedcheck(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the checkout's own names, as they are
        lib = Path(self.build_lib)
        top = lib / "schedcheck"
        for room in ROOMS:
            shutil.rmtree(top / room, ignore_errors=True)  # a previous build's
            shutil.move(str(lib / room), str(top / room))
        for path in top.rglob("*.py"):
            text = path.read_text()
            if PLAIN.search(text):  # `import harness.x` binds `harness`: it cannot move
                raise SystemExit(f"{path}: import our modules with `from ... import ...`")
            path.write_text(IMPORT.sub(r"\1\2 schedcheck.\3", text))
        (top / "docs").mkdir(exist_ok=True)
        for doc in DOCS:
            shutil.copyfile(Path("docs") / doc, top / "docs" / doc)


setup(cmdclass={"build_py": MoveIntoSchedcheck})
