"""A failure in words a student reads: the check, the spec's symptom, the workload, the trace.

The trace table follows the spec's own tables: per sequence
`num_computed/num_tokens/num_blocks` and the output, then blocks_used, waiting, finished.
"""

from __future__ import annotations

from pathlib import Path

from schedcheck.invariants.catalogue import CATALOGUE
from schedcheck.invariants.oracles import LISTED
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import State, Trace, show_schedule
from schedcheck.model.workload import Workload

STATUS_MARK = {"WAITING": "W", "RUNNING": "R", "FINISHED": "F"}
MAX_ROWS_OF_STEPS = 12
MAX_SEQ_COLUMNS = 8


def explain(violation: Violation) -> str:
    """The check's message, what the spec says of it, and the likely bug."""
    info = CATALOGUE[violation.check]
    bugs = "; ".join(info.likely_bugs)
    return (
        f"{violation}\n"
        f"  rule ({info.id}): {info.title}\n"
        f"  spec's symptom: {info.symptom}\n"
        f"  likely bug: {bugs}"
    )


def _listed(items: list[str]) -> str:
    """A long run's requests or keys (a marathon has thousands) as the first LISTED of them
    and how many more, as a long queue is told (oracles.LISTED); the saved workload holds
    every one."""
    more = len(items) - LISTED
    return ", ".join(items[:LISTED]) + (
        f", ... and {more} more (every one in the saved workload)" if more > 0 else ""
    )


def describe_workload(workload: Workload) -> str:
    c, m = workload.config, workload.model
    keys = [f"{name!r}: {key}" for name, key in m.keys]
    lines = [
        f"  config: num_blocks={c.num_blocks} block_size={c.block_size} "
        f"max_num_seqs={c.max_num_seqs} max_num_batched_tokens={c.max_num_batched_tokens} "
        f"eos_token_id={c.eos_token_id}",
        "  requests: "
        + _listed(
            [
                f"{r.seq_id} (prompt {r.prompt_len}, max {r.max_tokens}, step {r.arrival})"
                for r in workload.requests
            ]
        ),
        (
            "  token model: the spec's examples' (100 * i + len(output) for a<i>)"
            if m.spec
            else f"  token model: seed={m.seed} vocab_size={m.vocab_size} "
            f"eos_per_mille={m.eos_per_mille} eos_at={list(m.eos_at)}"
            + (f" keys={{{_listed(keys)}}}" if any(k for _, k in m.keys) else "")
        )
        + (
            f"; the whole state compared every {workload.sample_every} steps and at the end "
            "(the counters at every call)"
            if workload.sample_every
            else ""
        )
        + ("; update() is called twice per step" if workload.reupdate else "")
        + "".join(f"; Scheduler() is called without {name}" for name in workload.omitted()),
    ]
    return "\n".join(lines)


def trace_table(
    trace: Trace, until_step: int, until_call: str = "", focus: tuple[str, ...] = ()
) -> str:
    """The trace's calls up to `until_call` of `until_step`, one row per call, as markdown.
    Its sequence columns: `focus`, then, where there are more sequences than columns, those
    the rows shown schedule (a long run's last steps are about its latest requests, not its
    first), then the rest in arrival order."""
    rows = []
    shown = [s for s in trace.steps if s.number <= until_step]
    if len(shown) > MAX_ROWS_OF_STEPS:
        rows.append([f"({len(shown) - MAX_ROWS_OF_STEPS} earlier steps not shown)"])
        shown = shown[-MAX_ROWS_OF_STEPS:]
    arrived = [r.seq_id for r in trace.workload.requests]
    active: list[str] = []
    if len(arrived) > MAX_SEQ_COLUMNS:  # fewer are all shown, in arrival order
        active = [seq_id for step in shown for seq_id, _ in step.schedule]
    order = list(dict.fromkeys([*focus, *active, *arrived]))
    columns = order[:MAX_SEQ_COLUMNS]
    header = ["step", "call", "returned", *columns, "blocks_used", "waiting", "finished"]
    for step in shown:
        rows.append(
            _row(
                step.number,
                "schedule()",
                show_schedule(dict(step.schedule)),
                step.scheduled,
                columns,
            )
        )
        for call, update in (("update()", step.update), ("update() again", step.again)):
            if step.number == until_step and rows[-1][1] == until_call:
                break
            if update is not None:
                rows.append(
                    _row(step.number, call, str(list(update.finished)), update.after, columns)
                )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if len(order) > len(columns):
        lines.append(f"({len(order) - len(columns)} more sequences not shown)")
    return "\n".join(lines)


def _row(number: int, call: str, returned: str, state: State, columns: list[str]) -> list[str]:
    cells = [str(number), call, returned]
    for seq_id in columns:
        s = state.seqs.get(seq_id)
        cells.append(
            "-"
            if s is None
            else f"{STATUS_MARK.get(s.status, '?')} {s.num_computed}/{s.num_tokens}/{s.num_blocks} "
            f"{list(s.output)}"
        )
    cells += [str(state.blocks_used), str(list(state.waiting)), str(list(state.finished))]
    return cells


def failure_report(violation: Violation, trace: Trace, output: str = "") -> str:
    """Everything a student needs to see what broke, from this text alone."""
    printed = ["what the submission printed:\n" + _indent(output)] if output.strip() else []
    return "\n\n".join(
        [
            explain(violation),
            "workload:\n" + describe_workload(trace.workload),
            "trace (cells: status num_computed/num_tokens/num_blocks output; "
            "W waiting, R running, F finished):\n"
            + trace_table(trace, violation.step, violation.call, violation.seq_ids),
            *printed,
        ]
    )


def pair_report(which: int, report: str, other: Workload) -> str:
    """A failure of one of two schedulers alive at once (issue 47): which one, and the other
    one's workload, above its own report."""
    me, them = ("A", "B") if which == 0 else ("B", "A")
    built = "built first" if which == 0 else "built after A"
    return "\n\n".join(
        [
            f"two schedulers alive at once: this is scheduler {me} ({built}), their calls "
            "interleaved step by step (A's schedule(), B's schedule(), A's update(), B's "
            f"update()); a run of it alone passes where only the other one explains it. "
            f"Scheduler {them}'s workload:\n" + describe_workload(other),
            report,
        ]
    )


def pair_hints(path: str, first: Workload, second: Workload) -> str:
    """How to re-run this very pair: a test to paste into a test file."""
    test = f"""\
def test_p07_two_schedulers():
    from schedcheck import Workload, open_impl, verify_pair

    first = Workload.from_json({first.to_json(indent=None)!r})
    second = Workload.from_json({second.to_json(indent=None)!r})
    for verdict in verify_pair(open_impl({path!r}), first, second, ("C1", "R1")):
        assert verdict.ok, verdict.report()"""
    return "to re-run exactly these two, paste this test into a test file:\n" + _indent(test)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.rstrip().splitlines())


def replay_hints(path: str, workload: Workload, saved: Path | None) -> str:
    """How to re-run this very workload: a command, and a test to paste into a test file."""
    if saved is not None:
        lines = ["to re-run exactly this workload:", f"  schedcheck check {path} --replay {saved}"]
        lines.append("or paste this test into a test file:")
    else:
        lines = ["to re-run exactly this workload, paste this test into a test file:"]
    test = f"""\
def test_p07_regression():
    from schedcheck import Workload, open_impl, verify

    workload = Workload.from_json({workload.to_json(indent=None)!r})
    verdict = verify(open_impl({path!r}), workload)
    assert verdict.ok, verdict.report()"""
    lines.append(_indent(test))
    return "\n".join(lines)
