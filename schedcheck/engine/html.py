"""An engine's failing trace as one self-contained HTML page (no scripts), like `check
--html`: the check and its likely bugs; a timeline (one row per request, one column per
step: the positions computed, prefill or decode); the KV pool after every step (each
block free or used, with its ref_count and holders); then the workload and the text
report."""

from __future__ import annotations

from html import escape

from schedcheck.engine.checks import CATALOGUE
from schedcheck.engine.verdict import EngineVerdict
from schedcheck.verdict.html import CSS, DECODE, PREFILL

FREE, USED, SHARED = "#eeeeee", "#f2cf5b", "#f28e2b"


def engine_page(verdict: EngineVerdict) -> str:
    violation, trace = verdict.violations[0], verdict.trace
    info = CATALOGUE[violation.check]
    steps = trace.steps[: violation.step or len(trace.steps)]
    names = [r.name for r in trace.workload.requests]
    head = "".join(f"<th>{s.step}</th>" for s in steps)
    rows = []
    for name in names:
        cells = []
        for step in steps:
            seq = next((s for s in step.scheduled if s.name == name), None)
            if seq is None:
                cells.append("<td></td>")
                continue
            color = PREFILL if step.is_prefill else DECODE
            span = f"{seq.num_cached}..{seq.num_cached + seq.num_scheduled - 1}"
            cells.append(
                f'<td style="background:{color};color:#fff">{span}<br>'
                f"{escape(str(list(seq.block_table)))}</td>"
            )
        rows.append(f"<tr><th>{escape(name)}</th>{''.join(cells)}</tr>")
    pools = []
    for step in steps:
        pool = step.after_postprocess or step.after_schedule
        holders: dict[int, list[str]] = {}
        for name, table in pool.tables.items():
            for b in table:
                holders.setdefault(b, []).append(name)
        cells = []
        for b, block in enumerate(pool.blocks):
            color = FREE if b in pool.free else SHARED if block.ref_count > 1 else USED
            who = ", ".join(holders.get(b, [])) or "-"
            cells.append(
                f'<td style="background:{color}">{b}: rc {block.ref_count}<br>{escape(who)}</td>'
            )
        pools.append(f"<tr><th>{step.step}</th>{''.join(cells)}</tr>")
    legend = "".join(
        f'<span><i style="background:{c}"></i>{escape(n)}</span>'
        for n, c in (
            ("prefill", PREFILL),
            ("decode", DECODE),
            ("free block", FREE),
            ("used block", USED),
            ("shared block", SHARED),
        )
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>schedcheck engine: {escape(violation.check)} at step {violation.step}</title>",
            f"<style>{CSS} td, th {{ border: 1px solid #ccc; padding: 2px 6px; font-size: 12px; "
            "text-align: center; }} table {{ border-collapse: collapse; }}</style></head><body>",
            f"<h1>{escape(violation.check)}: {escape(info.title)}</h1>",
            f'<p class="check" id="message">{escape(str(violation))}</p>',
            f"<p><b>Symptom:</b> {escape(info.symptom)}<br>"
            f"<b>Likely bug:</b> {escape('; or '.join(info.likely_bugs))}</p>",
            f'<p class="legend">{legend}</p>',
            "<h2>Timeline: positions computed, block table</h2>",
            f"<table><tr><th>step</th>{head}</tr>{''.join(rows)}</table>",
            "<h2>KV blocks after each step: ref_count, holders</h2>",
            f"<table>{''.join(pools)}</table>",
            "<h2>Workload (replay with --replay)</h2>",
            f"<pre>{escape(trace.workload.to_json())}</pre>",
            "<h2>Report</h2>",
            f"<pre>{escape(verdict.report())}</pre>",
            "</body></html>",
        ]
    )
