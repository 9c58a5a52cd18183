"""An engine's failing trace as one self-contained HTML page (no scripts, no external
resource), like `check --html`: the check and its likely bugs; the story of the run (one
row for the engine and one per request, one column per step: what happened to it (story.py:
arrivals, aborts and when they landed, resets, preemptions, finishes and why), the
positions computed, prefill or decode, and its counters); the counters the check read; the
KV pool after every step (each block free, used or shared with its ref_count and holders,
a reserved block named as such: vLLM's null block, SGLang's padding page); then the
workload, one line per request (its JSON folded), and the text report."""

from __future__ import annotations

from html import escape

from schedcheck.engine import story
from schedcheck.engine.checks import CATALOGUE
from schedcheck.engine.verdict import EngineVerdict, workload_lines
from schedcheck.verdict.html import CSS, DECODE, PREFILL

__all__ = ["engine_page"]

FREE, USED, SHARED, NULL = "#eeeeee", "#f2cf5b", "#f28e2b", "#b8b8b8"


def engine_page(verdict: EngineVerdict) -> str:
    violation, trace = verdict.violations[0], verdict.trace
    info = CATALOGUE[violation.check]
    steps = trace.steps[: violation.step or len(trace.steps)]
    names = [r.name for r in trace.workload.requests]
    happened: dict[tuple[int, str], list[str]] = {}
    for event in story.events(trace):
        words = event.kind + (f" ({event.detail})" if event.detail else "")
        happened.setdefault((event.step, event.name), []).append(words)
    head = "".join(f"<th>{s.step}</th>" for s in steps)

    def said(step: int, name: str) -> str:
        return "".join(
            f'<b class="event">{escape(e)}</b><br>' for e in happened.get((step, name), [])
        )

    engine_row = "".join(f"<td>{said(s.step, '')}</td>" for s in steps)
    rows = [f"<tr><th>engine</th>{engine_row}</tr>"]
    for name in names:
        cells = []
        for step in steps:
            text, style = said(step.step, name), ""
            seq = next((s for s in step.scheduled if s.name == name), None)
            if seq is not None:
                style = f' style="background:{PREFILL if step.is_prefill else DECODE};color:#fff"'
                span = f"{seq.num_cached}..{seq.num_cached + seq.num_scheduled - 1}"
                text += f"{span}<br>{escape(str(list(seq.block_table)))}"
            count = story.counters(step.after_postprocess or step.after_schedule).get(name)
            if count is not None and count.status != "FINISHED":
                text += f'<br><small class="counters">{escape(count.said())}</small>'
            cells.append(f"<td{style}>{text}</td>")
        rows.append(f"<tr><th>{escape(name)}</th>{''.join(cells)}</tr>")
    read = ""
    counted = story.counters_read(violation.seq_ids, steps)
    if counted is not None:
        items = "".join(f"<li>{escape(c.name)}: {escape(c.said())}</li>" for c in counted[1])
        read = f"<h2>Counters after step {counted[0]}</h2><ul>{items}</ul>"
    pools = []
    for step in steps:
        pool = step.after_postprocess or step.after_schedule
        holders: dict[int, list[str]] = {}
        for name, table in pool.tables.items():
            for b in table:
                holders.setdefault(b, []).append(name)
        cells = []
        for b, block in enumerate(pool.blocks):
            if b in pool.reserved:
                # vLLM's null block, SGLang's padding page: never handed out
                cells.append(f'<td style="background:{NULL}">{b}: reserved (null block)</td>')
                continue
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
            ("reserved: vLLM's null block, SGLang's padding page", NULL),
        )
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>schedcheck engine: {escape(violation.check)} at step {violation.step}</title>",
            f"<style>{CSS} td, th {{ border: 1px solid #ccc; padding: 2px 6px; font-size: 12px; "
            "text-align: center; vertical-align: top; }} table {{ border-collapse: collapse; }}"
            " .event {{ color: #a01010; }}</style></head><body>",
            f"<h1>{escape(violation.check)}: {escape(info.title)}</h1>",
            f'<p class="check" id="message">{escape(str(violation))}</p>',
            f"<p><b>Symptom:</b> {escape(info.symptom)}<br>"
            f"<b>Likely bug:</b> {escape('; or '.join(info.likely_bugs))}</p>",
            f'<p class="legend">{legend}</p>',
            "<h2>The run: events, positions computed, block table, counters after the step</h2>",
            f"<table><tr><th>step</th>{head}</tr>{''.join(rows)}</table>",
            read,
            "<h2>KV blocks after each step: ref_count, holders</h2>",
            f"<table>{''.join(pools)}</table>",
            "<h2>Workload</h2>",
            f"<pre>{escape(chr(10).join(workload_lines(trace.workload)))}</pre>",
            "<details><summary>The workload as JSON (replay it with --replay)</summary>",
            f"<pre>{escape(trace.workload.to_json())}</pre></details>",
            "<h2>Report</h2>",
            f"<pre>{escape(verdict.report())}</pre>",
            "</body></html>",
        ]
    )
