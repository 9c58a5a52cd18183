"""The check's other modes: `--replay` saved workloads, `--exhaustive` over a scope (every
reachable behaviour), and the HTML page of a failing trace (`--html`)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from schedcheck import faults
from schedcheck.drive.impl import Implementation, open_impl
from schedcheck.invariants.catalogue import priority
from schedcheck.model.regression import Regression
from schedcheck.model.workload import Workload
from schedcheck.sandbox.process import Limits
from schedcheck.search.exhaustive import check_exhaustive
from schedcheck.strategies.exhaustive import SCOPES
from schedcheck.verdict.html import page
from schedcheck.verdict.report import replay_hints
from schedcheck.verdict.verify import verify


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


def draw_saved(args: argparse.Namespace, path: Path, failures: Path) -> None:
    """Draw the saved counterexample of the most specific check that fired."""
    saved = sorted(failures.glob("*.json"), key=lambda p: priority(p.stem))
    if not saved:
        return
    limits = Limits(call_timeout=args.call_timeout, memory=args.memory_mb << 20)
    impl = open_impl(path, args.in_process, limits)
    try:
        draw(impl, Regression.from_json(saved[0].read_text()).workload, args.html)
    finally:
        impl.stop()


def exhaustive(args: argparse.Namespace, path: Path, limits: Limits) -> int:
    """Every behaviour reachable in a scope (docs/exhaustive.md): PASS, or the shortest
    failing path found, saved as a workload that `--replay` re-runs."""
    scope = SCOPES[args.scope]
    jobs = os.cpu_count() or 1 if args.workers == "auto" else int(args.workers)
    print(scope.describe(), flush=True)
    scan = check_exhaustive(str(path), scope, jobs, limits, args.in_process)
    print(
        f"{'explored' if scan.finished else 'stopped at the first failure after'} "
        f"{scan.states:,} distinct states of {len(scope.spaces())} configs, {scan.edges:,} "
        f"transitions (each a whole workload, every check), {scan.seconds:.1f} s on {jobs} "
        "worker(s)"
    )
    if scan.failure is None:
        assert scan.finished, "a scan stops early only at a failure"
        print(f"PASS {path}: every behaviour reachable in the scope satisfies every check")
        return faults.PASS
    workload, verdict = scan.failure
    first = verdict.violations[0]
    folder = Path(args.save_failures or tempfile.mkdtemp(prefix="schedcheck-failures-"))
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{first.check}.json"
    saved.write_text(Regression(workload, first.check, str(first)).to_json())
    print(f"FAIL {path}: the shortest failing path found\n\n{verdict.report()}\n")
    print(replay_hints(str(path), workload, saved))
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
