"""Where schedcheck's own files are: in a checkout, and installed from a wheel.

In a checkout the rooms are top-level packages (`scheduler`, `invariants`, `strategies`,
`harness`, `suite`, and `schedcheck`, the command and the pytest plugin). A wheel installs
one name only, `schedcheck`, with the rooms inside it (`schedcheck.harness`, ...), so that a
course whose project has its own `scheduler.py` or `tests/` never meets ours (setup.py
moves them and rewrites their imports). What must name a module or a file at run time asks
here instead of spelling it out.
"""

from __future__ import annotations

from pathlib import Path

# "" in a checkout, "schedcheck." installed: this module is harness.layout there, or
# schedcheck.harness.layout.
PREFIX = __name__[: -len("harness.layout")]
# The checkout's root, or the installed schedcheck/ folder: the rooms are its children.
HOME = Path(__file__).resolve().parents[1]
# What goes on a worker's PYTHONPATH for `import harness` (or `schedcheck`) to work.
IMPORT_ROOT = HOME.parent if PREFIX else HOME
SUITE = HOME / "suite"  # the properties `check` and `pytest --impl` run (pytest files)
DOCS = HOME / "docs"  # spec.md and contract.md (copied in by setup.py when installed)


def module(name: str) -> str:
    """The importable name of one of our modules: `harness.sandbox.worker` in a checkout,
    `schedcheck.harness.sandbox.worker` installed."""
    return PREFIX + name
