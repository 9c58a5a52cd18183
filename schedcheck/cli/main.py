"""The `schedcheck` command line.

    schedcheck check [PATH]      check a submission in isolation; exit 0 pass, 1 fail,
                                 2 usage, 3 schedcheck itself failed (not a verdict)
    schedcheck grade PATH... --out DIR    grade a class: per check group, pass or fail
    schedcheck fuzz [PATH] --minutes N    a long campaign; counterexamples kept as regressions
    schedcheck engine CHECKOUT   check a nano-vllm checkout's scheduler (docs/engines.md)
    schedcheck engine --engine vllm   check vLLM's v1 scheduler, installed or a checkout's
    schedcheck spec | contract   print the behaviour checked, or the API a submission keeps

`check` first checks the contract (one message for every missing or ill-typed name), then
runs the suite's stages (schedcheck/cli/stages.py), the submission in worker processes of its
own; `--replay FILE.json...` re-runs saved workloads (or folders of them) instead, and
`--exhaustive` every behaviour reachable in a scope.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from schedcheck import faults, layout
from schedcheck.cli.check import DEFAULT_PATH, check
from schedcheck.engine.command import add_parser, engine_command
from schedcheck.faults import SubmissionError
from schedcheck.grading import gradebook
from schedcheck.grading.grade import SAMPLE_SIZE, discover, grade_many, shard
from schedcheck.grading.report import Verdict
from schedcheck.sandbox.process import DEFAULT_CALL_TIMEOUT, DEFAULT_MEMORY_MB, Limits
from schedcheck.search.fuzz import campaign
from schedcheck.strategies.exhaustive import SCOPES

DOCS = {"spec": "spec.md", "contract": "contract.md"}
BROKEN_PIPE = 141  # what a shell reports for a process SIGPIPE ended: no verdict


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="schedcheck", description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"schedcheck {version('schedcheck')}")
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    check = commands.add_parser("check", help="fuzz a submission against the P07 spec")
    check.add_argument("path", nargs="?", default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    check.add_argument(
        "--replay",
        nargs="+",
        metavar="FILE.json",
        help="re-run saved workloads (files, or folders of *.json)",
    )
    check.add_argument("--save-failures", metavar="DIR", help="write shrunk counterexamples here")
    check.add_argument("--html", metavar="OUT.html", help="on failure, draw the failing trace")
    check.add_argument(
        "--call-timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="S",
        help=f"seconds for one schedule()/update() (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    check.add_argument(
        "--memory-mb",
        type=int,
        default=DEFAULT_MEMORY_MB,
        metavar="MB",
        help=f"memory cap of the worker (default {DEFAULT_MEMORY_MB})",
    )
    check.add_argument(
        "--in-process",
        action="store_true",
        help="run the submission in this process (trusted code only)",
    )
    check.add_argument(
        "--profile",
        default="grade",
        help="Hypothesis profile: grade (default), ci, dev or fuzz, short for schedcheck-grade "
        "and so on; or a profile of your own",
    )
    check.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers")
    check.add_argument(
        "--exhaustive",
        action="store_true",
        help="every behaviour reachable in a scope, not random search",
    )
    check.add_argument(
        "--scope",
        default="small",
        choices=sorted(SCOPES),
        help="the scope of --exhaustive (default small)",
    )
    check.add_argument(
        "--gradescope",
        metavar="RESULTS.json",
        help="grade it as `grade` does: Gradescope's results.json",
    )
    check.add_argument(
        "--budget",
        type=float,
        default=300.0,
        metavar="S",
        help="with --gradescope: seconds the submission may use: its CPU time and its hung "
        "calls' timeouts, not wall time (default 300)",
    )
    check.add_argument(
        "--sample",
        type=int,
        default=SAMPLE_SIZE,
        metavar="N",
        help=f"with --gradescope: examples a property of check's search (default {SAMPLE_SIZE}: "
        "check's own)",
    )
    check.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show pytest's output as it runs (always in the log)",
    )

    fuzz_ = commands.add_parser("fuzz", help="a long campaign: search until the time is up")
    fuzz_.add_argument("path", nargs="?", default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    fuzz_.add_argument("--minutes", type=float, required=True, help="how long to search")
    fuzz_.add_argument(
        "--out",
        default="fuzz-failures",
        metavar="DIR",
        help="where counterexamples go (default fuzz-failures)",
    )
    fuzz_.add_argument("--call-timeout", type=float, default=DEFAULT_CALL_TIMEOUT, metavar="S")

    grade = commands.add_parser("grade", help="grade a class: report.json, junit.xml, summary.md")
    grade.add_argument("paths", nargs="*", help="submission files, or folders holding them")
    grade.add_argument("--out", required=True, metavar="DIR", help="where the reports go")
    grade.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="submissions graded at once (default: every core)",
    )
    grade.add_argument("--shard", metavar="K/N", help="grade the K-th of N shares of the paths")
    grade.add_argument("--merge", nargs="+", metavar="OUT", help="merge the reports of shards")
    grade.add_argument(
        "--budget",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds each submission may use: its CPU time and its hung calls' timeouts, not "
        "wall time (default 300)",
    )
    grade.add_argument("--call-timeout", type=float, default=DEFAULT_CALL_TIMEOUT, metavar="S")
    grade.add_argument(
        "--sample",
        type=int,
        default=SAMPLE_SIZE,
        metavar="N",
        help=f"examples a property of check's search, whose every run grade makes (default "
        f"{SAMPLE_SIZE}: check's own, so grade fails what check fails)",
    )
    add_parser(commands)
    for name in DOCS:
        commands.add_parser(name, help=f"print docs/{DOCS[name]} (also in a checkout)")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedcheck` console script; returns the exit status:
    0 pass, 1 a check failed, 2 usage, 3 schedcheck itself failed (schedcheck/faults.py)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # argparse: 0 for --help, 2 for a usage error
        return int(e.code or 0)
    try:
        if args.command == "grade":
            return grade(args)
        if args.command == "fuzz":
            return fuzz_campaign(args)
        if args.command == "engine":
            return engine_command(args)
        if args.command in DOCS:
            return show(DOCS[args.command])
        return check(args)
    except BrokenPipeError:  # `schedcheck check | head`: the reader left; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
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


def show(name: str) -> int:
    """Print one of the docs a user needs: the checkout's docs/, or the copy a wheel holds."""
    print((layout.DOCS / name).read_text(), end="")
    return faults.PASS


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
    verdicts = [entry.verdict for entry in report.submissions]
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in Verdict)  # pass, fail, error
    print(f"graded {len(verdicts)} submissions ({counts}); reports in {out}")
    return 0
