"""The `schedcheck` command line.

    schedcheck check [PATH]      fuzz a submission in isolation; exit 0 pass, 1 fail, 2 usage,
                                 3 schedcheck itself failed (not a verdict)
    schedcheck grade PATH... --out DIR    grade a class: per check group, pass or fail
    schedcheck fuzz [PATH] --minutes N    a long campaign; counterexamples kept as regressions

`check` first checks the contract (one message for every missing or ill-typed name), then
runs the suite's submission-facing tests with `pytest -n auto` in the `grade` profile, the
submission in worker processes of its own. `--replay FILE.json...` re-runs saved workloads
(or folders of them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import faults
from harness.faults import SubmissionError
from harness.grading import gradebook
from harness.grading.grade import SAMPLE_SIZE, discover, grade_many, shard
from harness.pytest_plugin import OUTCOMES
from harness.sandbox.impl import Implementation, open_impl
from harness.sandbox.isolation import PROJECT, Limits
from harness.search.exhaustive import check_exhaustive
from harness.search.fuzz import campaign
from harness.verdict.html import page
from harness.verdict.verify import verify
from invariants.regression import Regression
from invariants.violation import PRIORITY
from invariants.workload import Workload
from strategies.exhaustive import SCOPES

DEFAULT_PATH = "mine/p07_scheduler.py"
ISOLATION = {  # what each level is, in a line (docs/isolation.md has the table)
    "full": "a uid of its own, its own PID, mount and network namespaces",
    "uid": "a uid of its own, no namespaces on this machine",
    "process": "a process of your own user: not root, so no uid of its own",
    "none": "in this very process (--in-process: trusted code only)",
}
# First the spec's worked examples: fixed workloads, no shrinking, so a submission that
# hangs or crashes on anything is reported in seconds. Then the random search, and only
# when it found nothing, the stateful test (its counterexamples take longest to shrink).
PHASES = (
    ("tests/test_seed_examples.py",),
    ("tests/test_properties.py",),
    ("tests/test_state_machine.py",),
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="schedcheck", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    check = commands.add_parser("check", help="fuzz a submission against the P07 spec")
    check.add_argument("path", nargs="?", default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    check.add_argument("--replay", nargs="+", metavar="FILE.json",
                       help="re-run saved workloads (files, or folders of *.json)")  # fmt: skip
    check.add_argument("--save-failures", metavar="DIR", help="write shrunk counterexamples here")
    check.add_argument("--html", metavar="OUT.html", help="on failure, draw the failing trace")
    check.add_argument(
        "--call-timeout", type=float, default=2.0, metavar="S",
        help="seconds for one schedule()/update() (default 2)",
    )  # fmt: skip
    check.add_argument(
        "--memory-mb", type=int, default=1024, metavar="MB",
        help="memory cap of the worker (default 1024)",
    )  # fmt: skip
    check.add_argument(
        "--in-process", action="store_true",
        help="run the submission in this process (trusted code only)",
    )  # fmt: skip
    check.add_argument("--profile", default="grade", help="Hypothesis profile (default grade)")
    check.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers")
    check.add_argument("--exhaustive", action="store_true",
                       help="every workload of a scope instead of a random search")  # fmt: skip
    check.add_argument("--scope", default="small", choices=sorted(SCOPES),
                       help="the scope of --exhaustive (default small)")  # fmt: skip

    fuzz_ = commands.add_parser("fuzz", help="a long campaign: search until the time is up")
    fuzz_.add_argument("path", nargs="?", default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    fuzz_.add_argument("--minutes", type=float, required=True, help="how long to search")
    fuzz_.add_argument("--out", default="fuzz-failures", metavar="DIR",
                       help="where counterexamples go (default fuzz-failures)")  # fmt: skip
    fuzz_.add_argument("--call-timeout", type=float, default=2.0, metavar="S")

    grade = commands.add_parser("grade", help="grade a class: report.json, junit.xml, summary.md")
    grade.add_argument("paths", nargs="*", help="submission files, or folders holding them")
    grade.add_argument("--out", required=True, metavar="DIR", help="where the reports go")
    grade.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                       help="submissions graded at once (default: every core)")  # fmt: skip
    grade.add_argument("--shard", metavar="K/N", help="grade the K-th of N shares of the paths")
    grade.add_argument("--merge", nargs="+", metavar="OUT", help="merge the reports of shards")
    grade.add_argument("--budget", type=float, default=300.0, metavar="S",
                       help="seconds of grading per submission (default 300)")  # fmt: skip
    grade.add_argument("--call-timeout", type=float, default=2.0, metavar="S")
    grade.add_argument("--sample", type=int, default=SAMPLE_SIZE, metavar="N",
                       help=f"random workloads per submission (default {SAMPLE_SIZE})")  # fmt: skip
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedcheck` console script; returns the exit status:
    0 pass, 1 a check failed, 2 usage, 3 schedcheck itself failed (harness/faults.py)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # argparse: 0 for --help, 2 for a usage error
        return int(e.code or 0)
    try:
        if args.command == "grade":
            return grade(args)
        if args.command == "fuzz":
            return fuzz_campaign(args)
        return check(args)
    except Exception as e:  # ours, whatever it is: never a verdict on the submission
        detail = "".join(traceback.format_exception(e)[-6:]).rstrip()
        print(faults.internal_message(f"{e!r}\n{detail}"), file=sys.stderr)
        return faults.INTERNAL


def fuzz_campaign(args: argparse.Namespace) -> int:
    """Exit 0 when no failure was found, 1 when some were (and saved)."""
    path = Path(args.path)
    if not path.is_file():
        print(f"schedcheck: no submission file at {path}", file=sys.stderr)
        return faults.USAGE
    try:
        found = campaign(path, args.minutes * 60, Path(args.out), Limits(args.call_timeout))
    except SubmissionError as e:
        print(f"FAIL {path}: {e}")
        return faults.FAIL
    return faults.FAIL if found else faults.PASS


def grade(args: argparse.Namespace) -> int:
    """Exit 0 when grading completed, whatever the verdicts."""
    out = Path(args.out)
    try:
        if args.merge:
            report = gradebook.merge([Path(p) for p in args.merge], out)
        else:
            paths = discover(args.paths)
            if args.shard:
                paths = shard(paths, args.shard)
            limits = Limits(call_timeout=args.call_timeout)
            results = grade_many(paths, args.jobs, limits, args.budget, args.sample)
            report = gradebook.write(results, out)
    except (OSError, ValueError) as e:
        print(f"schedcheck grade: {e}", file=sys.stderr)
        return faults.USAGE
    verdicts = [entry["verdict"] for entry in report["submissions"]]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("pass", "fail", "error"))
    print(f"graded {len(verdicts)} submissions ({counts}); reports in {out}")
    return 0


def check(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.is_file():
        hint = " (the course layout puts it there)" if args.path == DEFAULT_PATH else ""
        print(f"schedcheck: no submission file at {path}{hint}", file=sys.stderr)
        return faults.USAGE
    limits = Limits(call_timeout=args.call_timeout, memory=args.memory_mb << 20)
    try:
        impl = open_impl(path, args.in_process, limits)
    except SubmissionError as e:
        print(f"FAIL {path}: {e}")
        return faults.FAIL
    print(f"isolation: {impl.isolation} ({ISOLATION[impl.isolation]})", flush=True)
    try:
        if args.replay:
            return replay(impl, path, args.replay, args.html)
    finally:
        impl.stop()
    if args.exhaustive:
        return exhaustive(args, path, limits)
    return fuzz(args, path)


def draw_first_saved(args: argparse.Namespace, path: Path, failures: Path) -> None:
    """Draw the saved counterexample of the most specific check that fired."""
    saved = sorted(failures.glob("*.json"), key=lambda p: PRIORITY.index(p.stem)
                   if p.stem in PRIORITY else len(PRIORITY))  # fmt: skip
    if not saved:
        return
    limits = Limits(call_timeout=args.call_timeout, memory=args.memory_mb << 20)
    impl = open_impl(path, args.in_process, limits)
    try:
        draw(impl, Regression.from_json(saved[0].read_text()).workload, args.html)
    finally:
        impl.stop()


def exhaustive(args: argparse.Namespace, path: Path, limits: Limits) -> int:
    scope = SCOPES[args.scope]
    jobs = os.cpu_count() or 1 if args.workers == "auto" else int(args.workers)
    print(scope.describe(), flush=True)
    scan = check_exhaustive(str(path), scope.name, jobs, limits, args.in_process)
    print(f"{scan.count} workloads")
    if scan.failure is None:
        print(f"PASS {path}: no divergence from the reference on any of them")
        return faults.PASS
    workload, verdict = scan.failure
    print(f"FAIL {path}: the smallest failing workload found\n\n{verdict.report()}")
    if args.html:
        impl = open_impl(path, args.in_process, limits)
        try:
            draw(impl, workload, args.html)
        finally:
            impl.stop()
    return faults.FAIL


def draw(impl: Implementation, workload: Workload, out: str) -> None:
    """Write the HTML page of the first failure of `workload` on `impl` into `out`."""
    html = page(impl, workload)
    if html is not None:
        Path(out).write_text(html)
        print(f"the failing trace, drawn: {out}")


def saved_workloads(targets: list[str]) -> list[tuple[Path, Workload]]:
    """The workloads of the files named, and of every *.json in the folders named: all read
    and found feasible before anything runs, or a ValueError naming the file."""
    files: list[Path] = []
    for target in map(Path, targets):
        files += sorted(target.glob("*.json")) if target.is_dir() else [target]
    if not files:
        raise ValueError(f"no saved workload (*.json) in {' '.join(targets)}")
    loaded = []
    for saved in files:
        try:
            workload = Regression.from_json(saved.read_text()).workload
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise ValueError(f"cannot read a workload from {saved}: {e}") from None
        if workload.infeasible():
            names = ", ".join(r.seq_id for r in workload.infeasible())
            raise ValueError(
                f"{saved} is not a feasible workload ({names} can never finish: more KV "
                "blocks than num_blocks); a submission is only checked on feasible input"
            )
        loaded.append((saved, workload))
    return loaded


def replay(impl: Implementation, path: Path, targets: list[str], html: str | None = None) -> int:
    """Re-run saved workloads (files, or folders of them); FAIL on the first that fails."""
    try:
        loaded = saved_workloads(targets)
    except ValueError as e:
        print(f"schedcheck: {e}", file=sys.stderr)
        return faults.USAGE
    for saved, workload in loaded:
        verdict = verify(impl, workload)
        if not verdict.ok:
            print(f"FAIL {path}: on {saved}\n\n{verdict.report()}")
            if html:
                draw(impl, workload, html)
            return faults.FAIL
    where = loaded[0][0] if len(loaded) == 1 else f"{len(loaded)} saved workloads"
    print(f"PASS {path}: every check holds on {where}")
    return faults.PASS


def fuzz(args: argparse.Namespace, path: Path) -> int:
    """Run the suite's submission-facing tests in phases; decide whose fault a failure is
    from what the plugin logged (harness/pytest_plugin.py), never from pytest's text."""
    failures = args.save_failures or tempfile.mkdtemp(prefix="schedcheck-failures-")
    with tempfile.TemporaryDirectory(prefix="schedcheck-outcomes-") as scratch:
        outcomes = Path(scratch) / "outcomes.jsonl"
        env = {
            **os.environ,
            "SCHEDCHECK_SAVE_FAILURES": str(Path(failures).resolve()),
            OUTCOMES: str(outcomes),
        }
        for number, tests in enumerate(PHASES):
            # Phase 1 stops at its first failure; under xdist -x would end as "interrupted".
            workers = ["-n", "0", "-x"] if number == 0 else ["-n", str(args.workers)]
            command = [
                sys.executable, "-m", "pytest", *workers, "-q", "--no-header",
                "-p", "no:cacheprovider", "--tb=short", f"--rootdir={PROJECT}",
                f"--hypothesis-profile={args.profile}", "--impl", str(path.resolve()),
                f"--call-timeout={args.call_timeout}", f"--memory-mb={args.memory_mb}",
                *(["--in-process"] if args.in_process else []),
                *(str(PROJECT / test) for test in tests),
            ]  # fmt: skip
            done = subprocess.run(command, cwd=PROJECT, env=env)
            if done.returncode == 0:
                continue
            logged = _read_outcomes(outcomes)
            ours = [line for line in logged if line["checks"] is None]
            if done.returncode != 1 or ours or not logged:
                what = (
                    f"{len(ours)} test(s) failed for a reason of our own: "
                    + ", ".join(line["test"] for line in ours)
                    if ours
                    else f"the test run ended with pytest exit status {done.returncode}"
                )
                print(faults.internal_message(what), file=sys.stderr)
                return faults.INTERNAL
            checks = sorted({c for line in logged for c in line["checks"]})
            print(f"FAIL {path}: {', '.join(checks)} (see above); shrunk counterexamples "
                  f"are in {failures}")  # fmt: skip
            if args.html:
                draw_first_saved(args, path, Path(failures))
            return faults.FAIL
    print(f"PASS {path}: every check holds")
    return faults.PASS


def _read_outcomes(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
