"""The box (schedcheck/sandbox/box.py): a submission graded beside classmates cannot touch
them, the grader or the machine. Each hostile file is graded in one class with correct
equivalents, all at once, as root as CI runs. docs/isolation.md maps each threat to its test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from schedcheck.cli.main import main
from schedcheck.drive.isolated import Isolated
from schedcheck.sandbox import box, uids
from schedcheck.sandbox.process import Limits
from schedcheck.sandbox.worker import PRELOAD
from schedcheck.verdict.verify import verify
from tests.catalogue import inline_reference, standalone
from tests.helpers import ROOT
from tests.workloads import EXAMPLES

HOSTILE = ROOT / "tests" / "hostile"
CLASSMATES = ("one_pass", "while_true")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own needs root")
CORRECT = "from schedcheck.scheduler import Scheduler, Sequence, SequenceStatus\n"


def grade_class(
    folder: Path, out: Path, *hostile: Path, classmates: tuple[str, ...] = CLASSMATES
) -> dict[str, dict[str, object]]:
    """Grade the hostile files with correct classmates, all at once; entries by stem."""
    folder.mkdir(exist_ok=True)
    for path in hostile:
        shutil.copy(path, folder / path.name)
    for name in classmates:
        shutil.copy(ROOT / "tests" / "equivalents" / f"{name}.py", folder / f"{name}.py")
    jobs = str(len(hostile) + len(classmates))
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


@pytest.mark.heavy
@ROOT_ONLY
def test_killing_every_process_it_can_harms_no_classmate(tmp_path: Path) -> None:
    killer = standalone(HOSTILE / "kills_everyone.py")
    # one classmate graded beside it is enough to be harmed (two cost six seconds more)
    graded = grade_class(tmp_path / "class", tmp_path / "out", killer, classmates=CLASSMATES[:1])
    assert {name: e["verdict"] for name, e in graded.items()} == {
        "kills_everyone": "pass",
        CLASSMATES[0]: "pass",
    }
    assert all(e["isolation"] == "full" for e in graded.values())


@ROOT_ONLY
@pytest.mark.costly  # 12 s; the box's other promises run every time
def test_a_fork_bomb_fails_alone(tmp_path: Path) -> None:
    bomb = renamed(HOSTILE / "fork_bomb.py", tmp_path / "src", "fork_bomb_graded")
    graded = grade_class(tmp_path / "class", tmp_path / "out", bomb)
    assert graded["fork_bomb_graded"]["verdict"] == "fail"
    assert "the fork bomb was stopped" in json.dumps(graded["fork_bomb_graded"]["failures"])
    assert all(graded[name]["verdict"] == "pass" for name in CLASSMATES)
    assert processes_running("fork_bomb_graded.py") == []


def renamed(source: Path, folder: Path, name: str) -> Path:
    """A standalone copy of `source` named `name`.py: the name marks its processes (the
    tests run at once)."""
    folder.mkdir(exist_ok=True)
    copy = folder / f"{name}.py"
    copy.write_text(inline_reference(source.read_text()))
    return copy


def wait_for_the_child(worker: Isolated) -> str:
    """What the worker printed, once its detached grandchild said it runs (on a busy
    machine that can take a while after the import returned)."""
    assert worker._out is not None
    printed = ""
    deadline = time.monotonic() + 30
    while "detached child running" not in printed and time.monotonic() < deadline:
        printed += worker._out.take()
        time.sleep(0.05)
    return printed


@pytest.mark.heavy
@ROOT_ONLY
def test_a_detached_child_dies_with_its_box(tmp_path: Path) -> None:
    copy = renamed(HOSTILE / "detaches_a_child.py", tmp_path / "src", "detacher_graded")
    # alone: what its child could do to a classmate is the other tests' (kills_everyone)
    graded = grade_class(tmp_path / "class", tmp_path / "out", copy, classmates=())
    assert graded["detacher_graded"]["verdict"] == "pass"
    assert processes_running("detacher_graded.py") == []  # after grade returned
    copy = renamed(HOSTILE / "detaches_a_child.py", tmp_path / "src", "detacher_checked")
    assert (
        main(["check", str(copy), "--replay", str(ROOT / "schedcheck" / "suite" / "regressions")])
        == 0
    )
    assert processes_running("detacher_checked.py") == []  # after check returned
    worker = Isolated(copy, Limits())
    worker.start()
    assert "detached child running" in wait_for_the_child(worker)
    assert len(processes_running("detacher_checked.py")) == 4  # outer, init, worker, child
    worker.stop()
    assert processes_running("detacher_checked.py") == []  # after stop() returned


@ROOT_ONLY
def test_without_namespaces_the_uid_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `uid` level (a container without namespaces): nothing kills a detached child
    when the worker ends but the sweep of the box's uid."""
    monkeypatch.setenv("SCHEDCHECK_NO_NAMESPACES", "1")
    # named for this process: another run of this test at the same time has other processes
    name = f"detacher_uid_level_{os.getpid()}"
    copy = renamed(HOSTILE / "detaches_a_child.py", tmp_path, name)
    worker = Isolated(copy, Limits())
    try:
        worker.start()
        assert worker.isolation == "uid"
        assert "detached child running" in wait_for_the_child(worker)
        assert len(processes_running(f"{name}.py")) == 2  # the worker and its child
    finally:
        worker.stop()
    left = processes_running(f"{name}.py")
    for pid in left:  # a failing run leaves nothing behind for the next
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == []


def _box(source: str, folder: Path, name: str) -> Isolated:
    path = folder / f"{name}.py"
    path.write_text(inline_reference(textwrap.dedent(source) + CORRECT))
    worker = Isolated(path, Limits())
    worker.start()
    return worker


def test_every_worker_hashes_strings_alike(tmp_path: Path) -> None:
    """PYTHONHASHSEED is fixed in a worker: a set of seq_ids iterates in the same order in
    the worker that replays a run as in the one that found it (issue 47)."""
    said = []
    for name in ("first", "second"):
        worker = _box('print("order", list({"a1", "a2", "b7", "x0"}))\n', tmp_path, name)
        try:
            assert worker._out is not None
            said.append(next(x for x in worker._out.take().splitlines() if x.startswith("order")))
        finally:
            worker.stop()
    assert said[0] == said[1]
    seeded = subprocess.run(
        [sys.executable, "-c", 'print("order", list({"a1", "a2", "b7", "x0"}))'],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert said[0] == seeded.stdout.strip()


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
@pytest.mark.costly  # 12 s; the box's other promises run every time
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


@ROOT_ONLY
def test_the_graders_files_are_out_of_view(tmp_path: Path) -> None:
    """Neither the checkout (the reference, the course's solution) nor the submission's
    own folder, nor any home: only an empty /tmp, and an /etc/hosts naming localhost."""
    reference = ROOT / "scheduler" / "scheduler.py"
    worker = _box(
        f"""
        import os
        for path in ({str(reference)!r}, {str(tmp_path)!r}, "/root", "/home", "/etc/passwd"):
            print(path, "seen" if os.path.exists(path) else "hidden")
        print("root holds", sorted(os.listdir("/")), "and /tmp", os.listdir("/tmp"))
        print("/etc holds", os.listdir("/etc"), repr(open("/etc/hosts").read()))
        """,
        tmp_path,
        "looks_around",
    )
    try:
        assert worker._out is not None
        printed = worker._out.take()
    finally:
        worker.stop()
    assert "seen" not in printed and printed.count("hidden") == 5, printed
    assert "root holds ['etc', 'tmp'] and /tmp []" in printed, printed
    assert "/etc holds ['hosts'] '127.0.0.1 localhost\\n::1 localhost\\n'" in printed, printed


@ROOT_ONLY
def test_without_root_the_box_is_a_process_and_says_so(tmp_path: Path) -> None:
    """A student's laptop: not root. The level is `process` (limits only), never a box
    it does not have; the CPU limit is set all the same."""
    lease = uids.lease()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.setuid(lease.uid)  # now an ordinary user
            level = box.enter(None, str(tmp_path), box.BoxLimits(cpu=77))
            cpu = resource.getrlimit(resource.RLIMIT_CPU)[0]
            os.write(write, f"{level} {cpu} {os.getuid()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    said = os.read(read, 100).decode()
    os.close(read)
    lease.release()
    assert said == f"process 77 {lease.uid}"


def test_the_contract_lists_what_a_submission_may_import() -> None:
    """docs/contract.md names exactly the modules the worker loads for a submission."""
    text = (ROOT / "docs" / "contract.md").read_text()
    section = text.split("## What a submission may use", 1)[1].split("(and what those", 1)[0]
    assert set(re.findall(r"`([a-z_.]+)`", section)) == set(PRELOAD)
