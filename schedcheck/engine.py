"""`schedcheck engine PATH`: check a nano-vllm checkout's scheduler (docs/engines.md).

Exit status as for `check`: 0 every check held on every workload tried, 1 a check failed
(the shrunk counterexample is printed and saved), 2 a usage error (not a nano-vllm
checkout, a file that is not a saved workload), 3 schedcheck's own fault.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness import faults
from harness.engine.drive import generation
from harness.engine.loader import missing_files
from harness.engine.local import LocalEngine
from harness.engine.search import search_engine
from harness.engine.verdict import verify_engine
from invariants.engine.workload import EngineWorkload
from strategies.engine import LABELS


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    engine = commands.add_parser("engine", help="check a nano-vllm checkout's scheduler")
    engine.add_argument("path", help="a nano-vllm checkout (the folder holding nanovllm/)")
    engine.add_argument("--examples", type=int, default=1000,
                        help="workloads to try (default 1000)")  # fmt: skip
    engine.add_argument("--replay", nargs="+", metavar="FILE.json",
                        help="re-run saved engine workloads instead of searching")  # fmt: skip
    engine.add_argument("--save-failures", metavar="DIR",
                        help="write the shrunk counterexample here")  # fmt: skip


def engine_command(args: argparse.Namespace) -> int:
    root = Path(args.path)
    missing = missing_files(root)
    if missing:
        print(f"schedcheck engine: {root} is not a nano-vllm checkout (no "
              f"{', '.join(missing)})", file=sys.stderr)  # fmt: skip
        return faults.USAGE
    engine = LocalEngine(root)
    print(f"engine: {root.resolve()} ({generation(engine.engine)} prefill generation)")
    print(f"isolation: {engine.isolation} (the engine runs in this process)")
    if args.replay:
        return replay(engine, args.replay)
    found = search_engine(engine, args.examples)
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
    return faults.FAIL


def replay(engine: LocalEngine, files: list[str]) -> int:
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
            print(f"FAIL {engine.engine.root}: on {name}\n\n{verdict.report()}")
            return faults.FAIL
    print(f"PASS {engine.engine.root}: every check holds on {len(loaded)} saved workload(s)")
    return faults.PASS
