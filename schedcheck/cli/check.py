"""`schedcheck check`: the contract, then the suite's stages, then one report.

A student reads the verdict at a glance: one line per stage with its result and count,
and on failure one report, the most informative failure of all (earliest step, smallest
workload), in schedcheck's own words; then which other properties also failed. pytest's
own output goes to a log file whose path is printed (`-v` shows it as it runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pytest

from schedcheck import faults
from schedcheck.cli.console import Console
from schedcheck.cli.modes import draw_saved, exhaustive, replay
from schedcheck.cli.stages import Outcome, Settings, run_stages
from schedcheck.drive.impl import open_impl
from schedcheck.faults import SubmissionError
from schedcheck.grading.grade import grade_one
from schedcheck.grading.gradescope import results
from schedcheck.grading.report import GroupState, Verdict
from schedcheck.invariants.catalogue import priority
from schedcheck.sandbox.box import LEVELS
from schedcheck.sandbox.process import Limits

DEFAULT_PATH = "mine/p07_scheduler.py"
# A graded group as a stage line of `check --gradescope`: the words `check`'s stages use.
STAGE_WORD = {GroupState.PASS: "ok", GroupState.FAIL: "FAIL", GroupState.NOT_RUN: "skipped"}


def check(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    path = Path(args.path)
    if not path.is_file():
        hint = " (the course layout puts it there)" if args.path == DEFAULT_PATH else ""
        print(f"schedcheck: no submission file at {path}{hint}", file=sys.stderr)
        return faults.USAGE
    limits = Limits(call_timeout=args.call_timeout, memory=args.memory_mb << 20)
    if args.gradescope:
        return gradescope(args, path, limits, console)
    try:
        impl = open_impl(path, args.in_process, limits)
    except SubmissionError as e:
        console.stage("contract", "FAIL")
        console.line(f"\nFAIL {path}: {e}")
        return faults.FAIL
    console.line(f"isolation: {impl.isolation} ({LEVELS[impl.isolation]})")
    try:
        if args.replay:
            return replay(impl, path, args.replay, args.html)
    finally:
        impl.stop()
    if args.exhaustive:
        return exhaustive(args, path, limits)
    console.stage("contract", "ok")
    return stages(args, path, console)


def gradescope(args: argparse.Namespace, path: Path, limits: Limits, console: Console) -> int:
    """Grade this one submission as `grade` does (derandomized: the same file gets the same
    score) and write Gradescope's results.json; print the groups as stage lines."""
    start = time.monotonic()
    entry = grade_one(str(path), limits, args.budget, args.sample)
    if entry.verdict is Verdict.ERROR:
        why = "; ".join(f.message for f in entry.failures)
        print(faults.internal_message(f"{why} (no {args.gradescope} written)"), file=sys.stderr)
        return faults.INTERNAL
    console.line(f"isolation: {'unknown' if entry.isolation is None else entry.isolation}")
    for group, state in entry.checks.items():
        console.stage(group, STAGE_WORD[state])
    written = results(entry, time.monotonic() - start)
    Path(args.gradescope).write_text(json.dumps(written, indent=1))
    console.line(f"\nscore {written['score']:g}/100; Gradescope results: {args.gradescope}")
    return faults.PASS if entry.verdict is Verdict.PASS else faults.FAIL


def stages(args: argparse.Namespace, path: Path, console: Console) -> int:
    failures = Path(args.save_failures or tempfile.mkdtemp(prefix="schedcheck-failures-"))
    settings = Settings(
        path,
        args.profile,
        str(args.workers),
        args.call_timeout,
        args.memory_mb,
        args.in_process,
        failures,
        args.verbose,
    )
    handle, name = tempfile.mkstemp(prefix="schedcheck-check-", suffix=".log")
    log_path = Path(name)
    with open(handle, "w") as log, tempfile.TemporaryDirectory(prefix="schedcheck-") as scratch:
        done = run_stages(settings, Path(scratch), log, console)
    # The one usage error the user's options can give the suite's session: a profile no one
    # registered (the plugin says so). Any other is in the options we gave it: ours (exit 3).
    said = [x for x in log_path.read_text(errors="replace").splitlines() if x.startswith("ERROR: ")]
    asked = [x.removeprefix("ERROR: ") for x in said if x.startswith("ERROR: --hypothesis-profile")]
    if done[0].code == pytest.ExitCode.USAGE_ERROR and asked:
        print(f"schedcheck check: {asked[0]} (--profile {args.profile})", file=sys.stderr)
        return faults.USAGE
    for result in done:
        why = "an earlier stage failed" if result.word == "skipped" else result.summary()
        console.stage(result.stage.name, result.word, why)
    code, failed = done[0].code, [o for r in done for o in r.failed]
    if code == 0 and not failed:
        console.line(f"\n{console.paint('PASS')} {path}: every check holds")
        console.line(f"full log: {log_path}")
        return faults.PASS
    ours = [o for o in failed if o.checks is None]
    if code != 1 or not failed or ours:
        what = (
            f"{len(ours)} test(s) failed for a reason of our own: "
            + ", ".join(o.name for o in ours)
            if ours
            else f"the suite's pytest session ended early (pytest exit status {code})"
        )
        console.line("")
        print(faults.internal_message(f"{what} (full log: {log_path})"), file=sys.stderr)
        return faults.INTERNAL
    report_failure(console, path, failed, failures, log_path)
    if args.html:
        draw_saved(args, path, failures)
    return faults.FAIL


def report_failure(
    console: Console, path: Path, failed: list[Outcome], failures: Path, log: Path
) -> None:
    """The most informative failure in full; the others by name and check."""
    best = min(failed, key=lambda o: (o.report is None, o.rank))
    console.line(f"\n{best.report or best.name}")
    others = [o for o in failed if o is not best]
    if others:
        named = ", ".join(f"{o.name} ({', '.join(o.checks or [])})" for o in others)
        plural = "property also failed" if len(others) == 1 else "properties also failed"
        console.line(f"\n{len(others)} other {plural}: {named}")
    checks = [c for o in [best, *others] for c in o.checks or []]
    ordered = sorted(set(checks), key=lambda c: (c != (best.checks or [""])[0], priority(c)))
    console.line(f"\n{console.paint('FAIL')} {path}: {', '.join(ordered)}")
    if any(failures.glob("*.json")):
        console.line(f"shrunk counterexamples: {failures}")
    console.line(f"full log: {log}")
