"""A failing trace as one self-contained HTML page: inline SVG and CSS, no scripts.

Above the picture: the check's message, the spec's symptom and the likely bug. The
picture: one row per sequence, one column per step; each cell shows the tokens computed
that step (prefill chunks and decodes in different colours), preemption and finish
marked; where the reference scheduled differently, its choice in a thin row beneath.
Then KV blocks in use and tokens scheduled per step, against their ceilings. Below: the
workload and the text trace.
"""

from __future__ import annotations

from html import escape

from schedcheck.drive.driver import run
from schedcheck.drive.impl import Implementation
from schedcheck.drive.loader import load_impl
from schedcheck.invariants.catalogue import CATALOGUE
from schedcheck.invariants.evidence import Evidence
from schedcheck.invariants.violation import Violation
from schedcheck.model.trace import Trace
from schedcheck.model.workload import Workload
from schedcheck.verdict.report import describe_workload, explain, trace_table
from schedcheck.verdict.verify import verify

PREFILL, DECODE, PREEMPT, FINISH, REFERENCE = "#4c78a8", "#59a14f", "#e15759", "#222", "#bab0ac"
CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.check { background: #fde8e8; border-left: 4px solid #e15759; padding: 8px 12px; }
pre { background: #f6f6f6; padding: 8px; white-space: pre-wrap; font-size: 12px; }
.chart { margin: 4px 0 12px; }
.legend span { display: inline-block; margin-right: 16px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: middle; }
svg text { font: 11px system-ui, sans-serif; }
"""


def render(violation: Violation, trace: Trace, reference: Trace | None = None) -> str:
    """The whole page for `violation` on `trace` (with the reference's trace, if any)."""
    info = CATALOGUE[violation.check]
    table = trace_table(trace, violation.step, violation.call, violation.seq_ids)
    legend = "".join(
        f'<span><i style="background:{color}"></i>{escape(name)}</span>'
        for name, color in (
            ("prefill chunk", PREFILL),
            ("decode", DECODE),
            ("preempted", PREEMPT),
            ("finished", FINISH),
            ("reference, where it differs", REFERENCE),
        )
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>schedcheck: {escape(violation.check)} at step {violation.step}</title>",
            f"<style>{CSS}</style></head><body>",
            f"<h1>{escape(violation.check)}: {escape(info.title)}</h1>",
            f'<p class="check" id="message">{escape(str(violation))}</p>',
            f"<p><b>Spec's symptom:</b> {escape(info.symptom)}<br>"
            f"<b>Likely bug:</b> {escape('; '.join(info.likely_bugs))}</p>",
            *_drawn(trace, violation, reference, legend),
            "<h2>Workload</h2>",
            f"<pre>{escape(describe_workload(trace.workload))}</pre>",
            "<h2>Trace</h2>",
            f"<pre>{escape(explain(violation))}\n\n{escape(table)}</pre>",
            "</body></html>",
        ]
    )


# A run longer than this (a marathon: tens of thousands of steps) is not drawn step by step:
# its page would weigh megabytes and show nothing a person can read; the trace below shows
# the steps before the failure.
DRAWN_STEPS = 2_000


def _drawn(trace: Trace, violation: Violation, reference: Trace | None, legend: str) -> list[str]:
    if len(trace.steps) > DRAWN_STEPS:
        return [
            "<h2>Timeline</h2>",
            f"<p>The run has {len(trace.steps):,} steps: it is not drawn step by step. The "
            "trace below shows the steps before the failure; the saved workload replays it "
            "whole.</p>",
        ]
    return [
        "<h2>Timeline</h2>",
        f'<p class="legend">{legend}</p>',
        timeline(trace, violation, reference),
        "<h2>KV blocks and tokens per step</h2>",
        charts(trace, violation),
    ]


def page(impl: Implementation, workload: Workload) -> str | None:
    """The page of the first failure of `workload` on `impl`; None if every check holds."""
    verdict = verify(impl, workload)
    if verdict.ok:
        return None
    return render(verdict.violations[0], verdict.trace, run(load_impl(), workload))


def _width(steps: int) -> int:
    return max(8, min(36, 1100 // max(steps, 1)))


def timeline(trace: Trace, violation: Violation, reference: Trace | None) -> str:
    ev = Evidence(trace)
    seqs = [r.seq_id for r in trace.workload.requests]
    steps = len(trace.steps)
    w, h, left, top = _width(steps), 22, 60, 20
    height = top + h * len(seqs) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + w * steps + 10}" '
        f'height="{height}" role="img" aria-label="timeline">'
    ]
    fail_x = left + w * (violation.step - 1)
    if 1 <= violation.step <= steps:
        out.append(
            f'<rect id="failing-step" x="{fail_x}" y="0" width="{w}" height="{height}" '
            'fill="#ffd54f" opacity="0.45"><title>failing step</title></rect>'
        )
    for number in range(1, steps + 1):
        if steps <= 40 or number % 10 == 0 or number == 1:
            out.append(
                f'<text x="{left + w * (number - 1) + w / 2}" y="12" '
                f'text-anchor="middle">{number}</text>'
            )
    theirs = {s.number: dict(s.schedule) for s in reference.steps} if reference else {}
    for t in ev.transitions:
        x = left + w * (t.step - 1)
        if t.is_schedule:
            for row, seq_id in enumerate(seqs):
                y = top + h * row
                n = t.schedule.get(seq_id)
                want = theirs.get(t.step, {}).get(seq_id) if reference else n
                if n is not None:
                    was = t.before.seqs.get(seq_id)
                    # A decode computes the one token sampled last step; a one-token
                    # prompt computed for the first time is still a prefill.
                    decode = (
                        was is not None
                        and was.output != ()
                        and was.num_tokens - was.num_computed == 1
                    )
                    color = DECODE if decode and seq_id not in t.preempted else PREFILL
                    out.append(
                        f'<rect x="{x + 1}" y="{y + 2}" width="{w - 2}" height="{h - 8}" '
                        f'fill="{color}"><title>{escape(seq_id)} step {t.step}: '
                        f"n = {n}</title></rect>"
                    )
                    if w >= 16:
                        out.append(
                            f'<text x="{x + w / 2}" y="{y + 14}" fill="#fff" '
                            f'text-anchor="middle">{n}</text>'
                        )
                if want != n:
                    label = "-" if want is None else str(want)
                    out.append(
                        f'<rect x="{x + 1}" y="{y + h - 6}" width="{w - 2}" height="4" '
                        f'fill="{REFERENCE}"><title>reference: n = {label}</title>'
                        "</rect>"
                    )
                if seq_id in t.preempted:
                    out.append(
                        f'<rect x="{x + 1}" y="{y + 2}" width="{w - 2}" height="{h - 8}" '
                        f'fill="none" stroke="{PREEMPT}" stroke-width="2">'
                        f"<title>{escape(seq_id)} preempted at step {t.step}</title>"
                        "</rect>"
                    )
        for seq_id in t.finished:
            y = top + h * seqs.index(seq_id)
            tip = f"<title>{escape(seq_id)} finished at step {t.step}</title>"
            out.append(
                f'<circle cx="{x + w - 3}" cy="{y + 4}" r="3" fill="{FINISH}">{tip}</circle>'
            )
    for row, seq_id in enumerate(seqs):
        out.append(f'<text x="4" y="{top + h * row + 14}">{escape(seq_id)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def charts(trace: Trace, violation: Violation) -> str:
    config = trace.workload.config
    series = [
        ("KV blocks in use", [s.scheduled.blocks_used for s in trace.steps], config.num_blocks),
        (
            "tokens scheduled",
            [sum(n for _, n in s.schedule) for s in trace.steps],
            config.max_num_batched_tokens,
        ),
    ]
    return "\n".join(
        _bars(name, values, ceiling, violation.step) for name, values, ceiling in series
    )


def _bars(name: str, values: list[int], ceiling: int, failing: int) -> str:
    steps = len(values)
    w, height, left = _width(steps), 80, 60
    top_value = max([ceiling, *values, 1])
    scale = (height - 12) / top_value
    out = [
        f'<div class="chart">{escape(name)}, per step (dashed: the ceiling)<br>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + w * steps + 70}" '
        f'height="{height}" role="img" aria-label="{escape(name)}">',
    ]
    for i, value in enumerate(values, start=1):
        x, bar = left + w * (i - 1), value * scale
        color = PREEMPT if value > ceiling else "#f28e2b" if i == failing else "#76b7b2"
        out.append(
            f'<rect x="{x + 1}" y="{height - 4 - bar}" width="{w - 2}" height="{bar}" '
            f'fill="{color}"><title>step {i}: {value}</title></rect>'
        )
    y = height - 4 - ceiling * scale
    out.append(
        f'<line x1="{left}" x2="{left + w * steps}" y1="{y}" y2="{y}" stroke="#e15759" '
        f'stroke-dasharray="4 2"><title>ceiling {ceiling}</title></line>'
    )
    out.append(f'<text x="{left + w * steps + 4}" y="{y + 4}">max {ceiling}</text>')
    out.append(f'<text x="4" y="{height - 4}">0</text>')
    out.append("</svg></div>")
    return "\n".join(out)
