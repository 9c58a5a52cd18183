"""`schedcheck engine PATH`: check a nano-vllm checkout's scheduler (docs/engines.md).

Exit status as for `check`: 0 every check held on every workload tried, 1 a check failed
(the shrunk counterexample is printed and saved), 2 a usage error (not a nano-vllm
checkout, a file that is not a saved workload), 3 schedcheck's own fault.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from harness import faults
from harness.engine.html import engine_page
from harness.engine.isolated import IsolatedEngine
from harness.engine.loader import missing_files
from harness.engine.local import LocalEngine
from harness.engine.search import search_engine
from harness.engine.verdict import Runs, verify_engine
from harness.faults import SubmissionError
from harness.sandbox.isolation import Limits
from invariants.engine.workload import EngineWorkload
from schedcheck.modes import ISOLATION
from strategies.engine import LABELS


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    engine = commands.add_parser("engine", help="check a nano-vllm checkout's scheduler")
    engine.add_argument("path", help="a nano-vllm checkout (the folder holding nanovllm/)")
    engine.add_argument("--examples", type=int, default=1000,
                        help="workloads to try (default 1000)")  # fmt: skip
    engine.add_argument("--replay", nargs="+", metavar="FILE.json",
                        help="re-run saved engine workloads instead of searching")  # fmt: skip
    engine.add_argument(
        "--save-failures", metavar="DIR", help="write the shrunk counterexample here"
    )
    engine.add_argument("--html", metavar="OUT.html", help="on failure, draw the failing trace")
    engine.add_argument(
        "--call-timeout",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds for one call into the engine (default 2)",
    )
    engine.add_argument(
        "--memory-mb",
        type=int,
        default=1024,
        metavar="MB",
        help="memory cap of the worker (default 1024)",
    )
    engine.add_argument("--in-process", action="store_true",
                        help="run the engine in this process (trusted code only)")  # fmt: skip


def engine_command(args: argparse.Namespace) -> int:
    root = Path(args.path)
    missing = missing_files(root)
    if missing:
        print(f"schedcheck engine: {root} is not a nano-vllm checkout (no "
              f"{', '.join(missing)})", file=sys.stderr)  # fmt: skip
        return faults.USAGE
    engine: Runs
    if args.in_process:
        try:
            engine = LocalEngine(root)
        except Exception as e:  # its import raised: the engine's fault, not ours
            return load_failure(root, f"{type(e).__name__}: {e}")
    else:  # its code runs in its worker only, the import of its modules too
        limits = Limits(call_timeout=args.call_timeout, memory=args.memory_mb << 20)
        try:
            engine = IsolatedEngine(root, limits)
        except SubmissionError as e:
            return load_failure(root, str(e))
    print(f"engine: {root.resolve()} ({engine.generation()} prefill generation)")
    print(f"isolation: {engine.isolation} ({ISOLATION[engine.isolation]})")
    try:
        if args.replay:
            return replay(engine, root, args.replay)
        found = search_engine(engine, args.examples)
    finally:
        engine.stop()
    print(f"{found.examples} workloads in {found.seconds:.1f} s; reached: " + ", ".join(
        f"{label} ({found.reached[label]})" for label in LABELS))  # fmt: skip
    missed = [label for label in LABELS if not found.reached[label]]
    if missed:
        print(f"never reached: {', '.join(missed)}")
    if found.failure is None:
        print(f"PASS {root}: every check (E1-E8) holds on every workload tried")
        return faults.PASS
    workload, verdict = found.failure
    folder = Path(args.save_failures or tempfile.mkdtemp(prefix="schedcheck-engine-"))
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{verdict.violations[0].check}.json"
    saved.write_text(workload.to_json())
    print(f"\nFAIL {root}: {verdict.violations[0].check}\n\n{verdict.report()}\n")
    print(f"to re-run exactly this workload:\n  schedcheck engine {root} --replay {saved}")
    if args.html:
        Path(args.html).write_text(engine_page(verdict))
        print(f"the failing trace, drawn: {args.html}")
    return faults.FAIL


def load_failure(root: Path, message: str) -> int:
    """The engine did not load in its worker: a package it imports that is not installed
    is the user's setup (exit 2), anything else the engine's own failure (E6, exit 1)."""
    missing = re.search(r"No module named '([\w.]+)'", message)
    if missing and not missing.group(1).startswith("nanovllm"):
        print(
            f"schedcheck engine: {root} imports {missing.group(1)}, which is not installed "
            "here; install it (nano-vllm's xxhash and numpy come with schedcheck's extra: "
            "python -m pip install '/path/to/schedcheck[nanovllm]')",
            file=sys.stderr,
        )
        return faults.USAGE
    print(f"FAIL {root}: E6: the engine raised while it was loaded: {message}")
    return faults.FAIL


def replay(engine: Runs, root: Path, files: list[str]) -> int:
    try:
        loaded = [(f, EngineWorkload.from_json(Path(f).read_text())) for f in files]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"schedcheck engine: cannot read a saved workload: {e}", file=sys.stderr)
        return faults.USAGE
    for name, workload in loaded:
        if workload.problems():
            print(f"schedcheck engine: {name} is not valid input: "
                  f"{'; '.join(workload.problems())}", file=sys.stderr)  # fmt: skip
            return faults.USAGE
    for name, workload in loaded:
        verdict = verify_engine(engine, workload)
        if not verdict.ok:
            print(f"FAIL {root}: on {name}\n\n{verdict.report()}")
            return faults.FAIL
    print(f"PASS {root}: every check holds on {len(loaded)} saved workload(s)")
    return faults.PASS
