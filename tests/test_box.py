"""The box (harness/sandbox/box.py): a submission graded beside classmates cannot touch
them, the grader or the machine. Each hostile file is graded in one class with correct
equivalents, all at once, as root as CI runs. docs/isolation.md maps each threat to its test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import textwrap
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.sandbox import uids
from harness.sandbox.isolation import Isolated, Limits
from harness.verdict.verify import verify
from tests.helpers import ROOT
from tests.workloads import EXAMPLES

HOSTILE = ROOT / "tests" / "hostile"
CLASSMATES = ("one_pass", "while_true")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own needs root")
CORRECT = "from scheduler import Scheduler, Sequence, SequenceStatus\n"


def grade_class(folder: Path, out: Path, *hostile: Path) -> dict[str, dict[str, object]]:
    """Grade the hostile files with two correct classmates, all at once; entries by stem."""
    folder.mkdir(exist_ok=True)
    for path in hostile:
        shutil.copy(path, folder / path.name)
    for name in CLASSMATES:
        shutil.copy(ROOT / "tests" / "equivalents" / f"{name}.py", folder / f"{name}.py")
    jobs = str(len(hostile) + len(CLASSMATES))
    assert main(["grade", str(folder), "--out", str(out), "-j", jobs, "--sample", "20"]) == 0
    report = json.loads((out / "report.json").read_text())
    return {Path(e["path"]).stem: e for e in report["submissions"]}


def processes_running(marker: str) -> list[int]:
    """Pids whose command line holds `marker` (a box's copy of a submission is named in
    its worker's command line, and in every process that worker forks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@ROOT_ONLY
def test_killing_every_process_it_can_harms_no_classmate(tmp_path: Path) -> None:
    graded = grade_class(tmp_path / "class", tmp_path / "out", HOSTILE / "kills_everyone.py")
    assert {name: e["verdict"] for name, e in graded.items()} == {
        "kills_everyone": "pass",
        **dict.fromkeys(CLASSMATES, "pass"),
    }
    assert all(e["isolation"] == "full" for e in graded.values())


@ROOT_ONLY
def test_a_fork_bomb_fails_alone(tmp_path: Path) -> None:
    graded = grade_class(tmp_path / "class", tmp_path / "out", HOSTILE / "fork_bomb.py")
    assert graded["fork_bomb"]["verdict"] == "fail"
    assert all(graded[name]["verdict"] == "pass" for name in CLASSMATES)
    assert processes_running("fork_bomb.py") == []


@ROOT_ONLY
def test_a_detached_child_dies_with_its_box(tmp_path: Path) -> None:
    marker = tmp_path / "class"
    graded = grade_class(marker, tmp_path / "out", HOSTILE / "detaches_a_child.py")
    assert graded["detaches_a_child"]["verdict"] == "pass"
    assert processes_running("detaches_a_child.py") == []  # after grade returned
    worker = Isolated(HOSTILE / "detaches_a_child.py", Limits())
    worker.start()
    deadline = time.monotonic() + 10  # the grandchild comes a moment after the import
    while len(processes_running("detaches_a_child.py")) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_running("detaches_a_child.py")) >= 4  # outer, init, worker, child
    worker.stop()
    assert processes_running("detaches_a_child.py") == []  # after stop() returned


def _box(source: str, folder: Path, name: str) -> Isolated:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source) + CORRECT)
    worker = Isolated(path, Limits())
    worker.start()
    return worker


@ROOT_ONLY
def test_no_connection_leaves_the_box(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        worker = _box(
            f"""
            import socket
            try:  # a bytes address: a str one needs the idna codec, not importable in a box
                socket.create_connection((b"127.0.0.1", {port}), timeout=2).sendall(b"out")
                print("connected")
            except OSError as e:
                print("refused:", e)
            """,
            tmp_path,
            "connects_home",
        )
        try:
            assert worker._out is not None and "refused" in worker._out.take()  # at import
            assert verify(worker, EXAMPLES["example2"]).ok
        finally:
            worker.stop()
        listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.accept()


@ROOT_ONLY
def test_what_one_box_writes_to_tmp_the_next_does_not_see(tmp_path: Path) -> None:
    leak = f"/tmp/schedcheck-leak-{os.getpid()}-{time.monotonic_ns()}"
    writer = _box(f"open({leak!r}, 'w').write('secret')\n", tmp_path, "writes_tmp")
    writer.stop()
    reader = _box(
        f"import os\nassert not os.path.exists({leak!r}), 'it saw the file'\n",
        tmp_path,
        "reads_tmp",
    )
    reader.stop()  # it loaded: its assertion held
    assert not os.path.exists(leak)


@ROOT_ONLY
def test_reading_its_folder_and_above_finds_no_classmate(tmp_path: Path) -> None:
    """It lists the folder its file is in, and every folder above, and prints the first
    line of every file there; graded with classmates, no classmate's text may show."""
    spy = tmp_path / "reads_folders.py"
    spy.write_text(
        textwrap.dedent(
            """
            import os
            here = os.path.dirname(os.path.abspath(__file__))
            while True:
                for name in sorted(os.listdir(here)) if os.path.isdir(here) else []:
                    try:
                        with open(os.path.join(here, name)) as f:
                            print(name, f.readline().strip())
                    except OSError:
                        pass
                if here == os.path.dirname(here):
                    break
                here = os.path.dirname(here)
            raise SystemExit("shown what it found")
            """
        )
    )
    out = tmp_path / "out"
    graded = grade_class(tmp_path / "class", out, spy)
    assert graded["reads_folders"]["verdict"] == "fail"
    worker = Isolated(tmp_path / "class" / "reads_folders.py", Limits())
    with pytest.raises(Exception):  # noqa: B017 - it raises SystemExit at import
        worker.start()
    assert worker._out is not None
    printed = worker._out.take()
    everything = printed + "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    for name in CLASSMATES:
        first = (ROOT / "tests" / "equivalents" / f"{name}.py").read_text().splitlines()[0]
        assert first not in everything
    assert "one_pass" not in printed and "while_true" not in printed


def test_box_uids_are_held_one_at_a_time() -> None:
    if os.geteuid() != 0:
        pytest.skip("box uids are lent only as root")
    first, second = uids.lease(), uids.lease()
    try:
        assert first.uid != second.uid
        assert uids.BASE <= first.uid < uids.BASE + uids.SPAN
    finally:
        first.release()
        second.release()
