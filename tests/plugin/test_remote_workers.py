"""The suite over pytest-xdist's execnet gateways (`--tx`), the mechanism that reaches other
machines over ssh (docs/scale.md). The "machines" here are local popen gateways, each told
to work in a copy of the project (`//chdir=`), as a remote worker works in its checkout:
xdist then treats them as remote (it ships them its pytest, and paths on the command line
must be relative), and the tests each worker runs are the ones its copy holds.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.catalogue import standalone
from tests.helpers import ROOT, run_pytest

# What a remote worker must hold: the project at the same commit (docs/scale.md).
CHECKOUT = (
    "conftest.py",
    "pyproject.toml",
    "scheduler",
    "invariants",
    "strategies",
    "docs",
    "schedcheck",
    "bench",  # the tests of bench/'s document writer import it
)
SELECTION = "test_seed_examples or test_properties or test_probe"
PROBE = '''
import os
from pathlib import Path


def test_probe() -> None:
    """Only the copy has this file: it runs only if the workers collect from the copy."""
    assert Path.cwd() == Path(__file__).resolve().parent.parent
    assert os.environ["PYTEST_XDIST_WORKER"].startswith("gw")
'''


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project, standing for a remote machine's checkout."""
    where = tmp_path_factory.mktemp("remote") / "schedcheck"
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for name in (*CHECKOUT, "tests"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, where / name, ignore=skip)
        else:
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    (where / "tests" / "test_probe.py").write_text(PROBE)
    return where


def over_two_gateways(checkout: Path, *args: str) -> str:
    """Run the selection on two popen gateways working in `checkout`; return the output."""
    gateway = f"popen//chdir={checkout}//python={sys.executable}"
    # Started from the copy too: a gateway's python imports schedcheck from the folder it
    # starts in (as a remote machine does from its own checkout), before it changes to
    # chdir's; started here, it would import this checkout's.
    done = run_pytest(
        "-d",
        "--tx",
        gateway,
        "--tx",
        gateway,
        "-k",
        SELECTION,
        "--hypothesis-profile",
        "schedcheck-ci",
        "-vv",
        *args,
        cwd=checkout,  # -vv: run_pytest's -q, then -v
    )
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


@pytest.mark.costly  # 18 s: two gateways, each a checkout of its own
def test_the_suite_runs_on_two_gateways_from_their_checkout(checkout: Path) -> None:
    out = over_two_gateways(checkout)
    assert out.startswith("exit 0"), out
    ran = set(re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED", out, re.MULTILINE))
    assert ran == {"gw0", "gw1"}, out  # the work was shared
    assert "PASSED tests/test_probe.py::test_probe" in out
    assert (checkout / "_pytest").is_dir()  # xdist shipped its pytest, as to a remote


@pytest.mark.costly  # 16 s
def test_a_submission_fails_there_naming_the_check(checkout: Path) -> None:
    # `--impl=PATH` in one word: xdist rewrites a path argument it finds on the controller
    # relative to what it ships, and refuses one outside it. On real remote machines the
    # path is relative, so each worker finds the submission in its own checkout; these
    # gateways share this machine, so the mutant's standalone copy (a box cannot import
    # the reference it is written against, tests/catalogue.py) serves them all.
    mutant = standalone(ROOT / "tests" / "mutants" / "bt_preempted_to_tail.py")
    out = over_two_gateways(checkout, f"--impl={mutant}")
    assert out.startswith("exit 1"), out
    # the checks its docstring names (F1 where its shrunk run shows the queue order first)
    assert re.search(r"\b(I5|F1) at step", out), out
