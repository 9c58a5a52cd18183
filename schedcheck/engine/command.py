"""`schedcheck engine PATH`: check a nano-vllm checkout's scheduler (docs/engines.md);
`schedcheck engine --vllm [PATH]`: vLLM's v1 scheduler, installed or a checkout's.

Exit status as for `check`: 0 every check held on every workload tried, 1 a check failed
(the shrunk counterexample is printed and saved), 2 a usage error (not a nano-vllm
checkout, an engine that cannot be driven as nano-vllm's and what it lacks, a Config field
without a value, a file that is not a saved workload), 3 schedcheck's own fault.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from pathlib import Path

from schedcheck import faults
from schedcheck.engine.checks import POLICIES, VLLM_ON, active
from schedcheck.engine.html import engine_page
from schedcheck.engine.isolated import IsolatedEngine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.runner import NANO_VLLM, RUNNERS
from schedcheck.engine.search import Search, chunks_prefills, search_engine
from schedcheck.engine.setup import SetupError, read_setup
from schedcheck.engine.strategies import LABELS, VLLM_LABELS
from schedcheck.engine.verdict import Runs, Undrivable, verify_engine
from schedcheck.engine.vllm.engines import MEMORY_MB as VLLM_MEMORY_MB
from schedcheck.engine.vllm.engines import IsolatedVllm, LocalVllm
from schedcheck.engine.vllm.setup import vllm_setup
from schedcheck.engine.workload import EngineWorkload
from schedcheck.faults import CheckerError, SubmissionError
from schedcheck.sandbox.box import LEVELS
from schedcheck.sandbox.process import DEFAULT_CALL_TIMEOUT, DEFAULT_MEMORY_MB, Limits


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    engine = commands.add_parser(
        "engine", help="check a nano-vllm checkout's scheduler, or vLLM's (--vllm)"
    )
    engine.add_argument(
        "path",
        nargs="?",
        help="a nano-vllm checkout (the folder holding nanovllm/), a fork's, a "
        "wheel, or a site-packages folder; none with --package: the installed "
        "package",
    )
    engine.add_argument(
        "--vllm",
        action="store_true",
        help="check vLLM's v1 scheduler and KV cache manager: the installed vLLM, or the "
        'checkout at PATH (docs/engines.md, "vLLM")',
    )
    engine.add_argument(
        "--package",
        metavar="NAME",
        help="the engine's package, where it is not nanovllm (e.g. nanovllm_voxcpm)",
    )
    engine.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a field of the engine's Config, over the default read off its "
        "config.py (repeatable; e.g. enable_chunked_prefill=True)",
    )
    engine.add_argument(
        "--runner",
        choices=NANO_VLLM,
        help="the model runner's position rules (default: read off the engine's model_runner.py)",
    )
    engine.add_argument(
        "--prefill",
        choices=("chunked", "whole"),
        help="whether the engine splits a prompt over the budget across steps (default: probed)",
    )
    engine.add_argument(
        "--off",
        action="append",
        default=[],
        metavar="CHECK",
        help=f"switch a policy check off (policies: {', '.join(POLICIES)})",
    )
    engine.add_argument(
        "--on",
        action="append",
        default=[],
        metavar="CHECK",
        help="switch a policy check on (E9: at most max_num_seqs running, nano-vllm PR #271)",
    )
    engine.add_argument(
        "--examples", type=int, default=1000, help="workloads to try (default 1000)"
    )
    engine.add_argument(
        "--replay",
        nargs="+",
        metavar="FILE.json",
        help="re-run saved engine workloads instead of searching",
    )
    engine.add_argument(
        "--save-failures", metavar="DIR", help="write the shrunk counterexample here"
    )
    engine.add_argument("--html", metavar="OUT.html", help="on failure, draw the failing trace")
    engine.add_argument(
        "--call-timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="S",
        help=f"seconds for one call into the engine (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    engine.add_argument(
        "--memory-mb",
        type=int,
        metavar="MB",
        help=f"memory cap of the worker (default {DEFAULT_MEMORY_MB}; {VLLM_MEMORY_MB} with "
        "--vllm)",
    )
    engine.add_argument(
        "--in-process",
        action="store_true",
        help="run the engine in this process (trusted code only)",
    )


def engine_command(args: argparse.Namespace) -> int:
    if args.vllm:
        return vllm_command(args)
    try:
        setup = read_setup(args.path, args.package, args.config, args.runner)
        checks = active(frozenset(args.off), frozenset(args.on))
    except (SetupError, ValueError) as e:
        print(f"schedcheck engine: {e}", file=sys.stderr)
        return faults.USAGE
    options = [*setup.options, *(f"--off={c}" for c in args.off), *(f"--on={c}" for c in args.on)]
    if args.prefill:
        options.append(f"--prefill={args.prefill}")
    shown = f"{setup.root}/{setup.package}"
    engine: Runs
    if args.in_process:
        try:
            engine = LocalEngine(setup)
        except Exception as e:  # its import raised: the engine's fault, not ours
            return load_failure(shown, f"{type(e).__name__}: {e}")
    else:  # its code runs in its worker only, the import of its modules too
        limits = Limits(
            call_timeout=args.call_timeout, memory=(args.memory_mb or DEFAULT_MEMORY_MB) << 20
        )
        try:
            engine = IsolatedEngine(setup, limits)
        except SubmissionError as e:
            return load_failure(shown, str(e))
    print(f"engine: {shown}")
    print(
        f"config: {setup.config_from}"
        + (f"; no value: {', '.join(setup.unset)}" if setup.unset else "")
    )
    runner = RUNNERS[setup.runner]
    print(
        f"runner: {runner.name}, the model runner of {runner.source} ({setup.runner_from}): "
        f"{runner.describe()}"
    )
    try:
        if args.replay:
            print(f"checks: {' '.join(checks)}")
            print(f"isolation: {engine.isolation} ({LEVELS[engine.isolation]})")
            return replay(engine, shown, args.replay, checks)
        chunked = {"chunked": True, "whole": False}.get(args.prefill or "")
        how = "set with --prefill"
        if chunked is None:
            chunked, how = chunks_prefills(engine), "probed: a 6-token prompt, a 4-token budget"
        kind = "chunked" if chunked else "whole (each workload's budget holds its longest sequence)"
        print(f"prefill: {kind} ({how})")
        print(f"checks: {' '.join(checks)}" + _switched(checks))
        print(f"isolation: {engine.isolation} ({LEVELS[engine.isolation]})")
        found = search_engine(engine, args.examples, checks, chunked)
    except Undrivable as e:
        print(f"schedcheck engine: {shown} cannot be driven as nano-vllm's {e}", file=sys.stderr)
        return faults.USAGE
    finally:
        engine.stop()
    return conclude(args, shown, options, found, LABELS, checks)


def conclude(
    args: argparse.Namespace,
    shown: str,
    options: list[str],
    found: Search,
    labels: tuple[str, ...],
    checks: list[str],
) -> int:
    """Print what a search reached and its verdict; save and show the counterexample."""
    print(
        f"{found.examples} workloads in {found.seconds:.1f} s; reached: "
        + ", ".join(f"{label} ({found.reached[label]})" for label in labels)
    )
    missed = [label for label in labels if not found.reached[label]]
    if missed:
        print(f"never reached: {', '.join(missed)}")
    if found.failure is None:
        print(f"PASS {shown}: every check ({' '.join(checks)}) holds on every workload tried")
        return faults.PASS
    workload, verdict = found.failure
    folder = Path(args.save_failures or tempfile.mkdtemp(prefix="schedcheck-engine-"))
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{verdict.violations[0].check}.json"
    saved.write_text(workload.to_json())
    print(f"\nFAIL {shown}: {verdict.violations[0].check}\n\n{verdict.report()}\n")
    again = " ".join(shlex.quote(x) for x in [args.path or "", *options] if x)
    print(f"to re-run exactly this workload:\n  schedcheck engine {again} --replay {saved}")
    if args.html:
        Path(args.html).write_text(engine_page(verdict))
        print(f"the failing trace, drawn: {args.html}")
    return faults.FAIL


def vllm_command(args: argparse.Namespace) -> int:
    """`schedcheck engine --vllm [PATH]`: vLLM's scheduler, in its worker unless --in-process."""
    nano_only = [
        f"--{name.replace('_', '-')}"
        for name in ("package", "runner", "prefill")
        if getattr(args, name)
    ] + (["--config"] if args.config else [])
    try:
        if nano_only:
            raise SetupError(
                f"{', '.join(nano_only)}: nano-vllm's option(s), not vLLM's (its config is "
                "built from each workload)"
            )
        setup = vllm_setup(args.path)
        checks = active(frozenset(args.off), frozenset(args.on) | VLLM_ON)
    except (SetupError, ValueError) as e:
        print(f"schedcheck engine: {e}", file=sys.stderr)
        return faults.USAGE
    options = ["--vllm", *(f"--off={c}" for c in args.off)]
    shown = f"vLLM at {setup.root}"
    engine: Runs
    try:
        if args.in_process:
            engine = LocalVllm(setup)
        else:
            memory = (args.memory_mb or VLLM_MEMORY_MB) << 20
            engine = IsolatedVllm(setup, Limits(call_timeout=args.call_timeout, memory=memory))
    except CheckerError:
        raise  # ours (the worker did not start, our driver failed): exit 3, as every fault of ours
    except Exception as e:  # vLLM's: not installed whole, or a release this driver cannot drive
        print(
            f"schedcheck engine: vLLM at {setup.root} could not be imported and configured "
            f"here: {e}",
            file=sys.stderr,
        )
        return faults.USAGE
    print(f"engine: {shown}")
    print(f"config: {setup.config_from}")
    runner = RUNNERS[setup.runner]
    print(f"runner: {runner.source}: {runner.describe()}")
    print(f"checks: {' '.join(checks)}")
    print(f"isolation: {engine.isolation} ({LEVELS[engine.isolation]})")
    try:
        if args.replay:
            return replay(engine, shown, args.replay, checks, reserved=1)
        found = search_engine(engine, args.examples, checks, chunked=True, vllm=True)
    except Undrivable as e:
        print(f"schedcheck engine: {shown} cannot be driven: {e}", file=sys.stderr)
        return faults.USAGE
    finally:
        engine.stop()
    return conclude(args, shown, options, found, VLLM_LABELS, checks)


def _switched(checks: list[str]) -> str:
    off = [c for c, on in POLICIES.items() if on and c not in checks]
    available = [c for c, on in POLICIES.items() if not on and c not in checks]
    words = [
        f"policy off: {' '.join(off)}" if off else "",
        f"policy available: {' '.join(available)} (--on)" if available else "",
    ]
    return "".join(f"; {w}" for w in words if w)


def load_failure(root: str, message: str) -> int:
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


def replay(engine: Runs, root: str, files: list[str], checks: list[str], reserved: int = 0) -> int:
    try:
        loaded = [(f, EngineWorkload.from_json(Path(f).read_text())) for f in files]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"schedcheck engine: cannot read a saved workload: {e}", file=sys.stderr)
        return faults.USAGE
    for name, workload in loaded:
        if workload.problems(reserved):
            print(
                f"schedcheck engine: {name} is not valid input: "
                f"{'; '.join(workload.problems(reserved))}",
                file=sys.stderr,
            )
            return faults.USAGE
    for name, workload in loaded:
        verdict = verify_engine(engine, workload, checks)
        if not verdict.ok:
            print(f"FAIL {root}: on {name}\n\n{verdict.report()}")
            return faults.FAIL
    print(f"PASS {root}: every check holds on {len(loaded)} saved workload(s)")
    return faults.PASS
