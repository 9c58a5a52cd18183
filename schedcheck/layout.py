"""Where schedcheck's own files are, for what must name a file at run time: the suite's
pytest files (`check` and `pytest --impl` run them) and the two docs `schedcheck spec` and
`schedcheck contract` print.

A wheel holds docs/spec.md and docs/contract.md as schedcheck/docs/ (pyproject.toml maps
the folder there); a checkout (an editable install) reads them where they are.
"""

from __future__ import annotations

from pathlib import Path

HOME = Path(__file__).resolve().parent  # the schedcheck package's folder
SUITE = HOME / "suite"
DOCS = HOME / "docs" if (HOME / "docs").is_dir() else HOME.parent / "docs"
