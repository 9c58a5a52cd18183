"""An exported test run as an engine's maintainers run it (issue 48): pytest alone, in a
folder of its own or the engine's checkout, without schedcheck's plugin or this checkout on
the path. Shared by the export tests of every engine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
PYTEST += ("-p", "no:schedcheck.plugin")


def run_exported(
    tests: list[Path], folder: Path, conftest: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `tests` with pytest from `folder`: copied into it where they are elsewhere, a
    `conftest` beside them where given (a mutant patched into the engine's class)."""
    folder.mkdir(parents=True, exist_ok=True)
    for test in tests:
        if test.parent.resolve() != folder.resolve():
            shutil.copy(test, folder / test.name)
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [*PYTEST, *(t.name for t in tests)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
