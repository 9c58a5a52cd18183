"""An engine failure a person can follow (issue 55): the events of a run and the counters a
check reads, in the text report and on the page, read off recorded traces of vLLM's async
scheduling and of SGLang (tests/engine_subjects/*/trace.json) and of traces changed to fail;
the page looked at in headless Chromium where it is installed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from schedcheck.engine import story
from schedcheck.engine.checks import check_engine
from schedcheck.engine.html import engine_page
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import EngineVerdict
from schedcheck.engine.workload import EngineWorkload

SUBJECTS = Path(__file__).parent.parent / "engine_subjects"
REQUIRE = "SCHEDCHECK_REQUIRE_BROWSER"


def recorded(name: str) -> EngineTrace:
    return EngineTrace.from_dict(json.loads((SUBJECTS / name).read_text()))


def said(trace: EngineTrace) -> list[tuple[int, str]]:
    return [(e.step, story.said(e)) for e in story.events(trace)]


def test_a_recorded_run_tells_arrivals_preemptions_and_why_each_finished() -> None:
    sglang = said(recorded("sglang/trace.json"))
    assert (8, "r2 preempted") in sglang
    assert {(1, "r1 arrives"), (9, "r1 finishes (max_tokens)")} <= set(sglang)
    vllm = said(recorded("vllm/async_trace.json"))
    assert (5, "r2 finishes (eos)") in vllm and (2, "r2 arrives") in vllm


def _with_pool(trace: EngineTrace, step: int, **changes: object) -> EngineTrace:
    """`trace` with the pool after `step`'s update changed."""
    steps = list(trace.steps)
    s = steps[step - 1]
    assert s.after_postprocess is not None
    steps[step - 1] = dataclasses.replace(
        s, after_postprocess=s.after_postprocess._replace(**changes)
    )
    return dataclasses.replace(trace, steps=tuple(steps))


def e11_after_a_reset() -> EngineTrace:
    """vLLM's async trace made to fail as issue 55's did on 0.21: the prefix cache cleared
    at the start of step 2, r1's token then discarded, so that after step 3 it counts a
    placeholder with nothing in flight (E11)."""
    trace = recorded("vllm/async_trace.json")
    w = dataclasses.replace(trace.workload, resets=(2,))
    trace = dataclasses.replace(trace, workload=w)
    pool = trace.steps[2].after_postprocess
    assert pool is not None
    progress = tuple(p._replace(in_flight=0) if p.name == "r1" else p for p in pool.progress)
    return _with_pool(trace, 3, progress=progress)


def test_tokens_in_flight_land_or_are_dropped_named_by_the_step_that_sampled_them() -> None:
    trace = recorded("vllm/async_trace.json")
    events = said(trace)
    assert (3, "r1 tokens landed (sampled at step 2)") in events
    assert (5, "r2 tokens landed (sampled at step 4, 5)") in events  # it finished: both
    steps = list(trace.steps)
    pool = steps[2].after_schedule
    dropped = tuple(p._replace(in_flight=0) if p.name == "r1" else p for p in pool.progress)
    steps[2] = dataclasses.replace(steps[2], after_schedule=pool._replace(progress=dropped))
    changed = said(dataclasses.replace(trace, steps=tuple(steps)))
    assert (3, "r1 tokens in flight dropped (sampled at step 2)") in changed
    assert not any("landed" in e or "dropped" in e for _, e in said(recorded("sglang/trace.json")))


def test_a_reset_an_abort_during_a_step_and_an_early_batch_are_events() -> None:
    trace = recorded("vllm/trace.json")
    requests = list(trace.workload.requests)
    requests[3] = dataclasses.replace(requests[3], abort=2, abort_in_step=True)
    w = dataclasses.replace(trace.workload, requests=tuple(requests), resets=(3,), early=(2,))
    events = said(dataclasses.replace(trace, workload=w))
    assert (3, "prefix cache cleared (at the start of the step, requests running)") in events
    assert (3, "r3 preempted (by the reset)") in events
    assert (2, "r4 aborted (during the step)") in events
    assert (2, "device early (the batch done before the engine core looked)") in events
    assert not any(e == (5, "r4 finishes (max_tokens)") for e in events)  # its abort is told


def test_a_request_computed_again_from_below_without_a_wait_was_preempted_and_resumed() -> None:
    """A reset (or any preemption) whose victim schedule() admits again at once shows no
    waiting status in between: its computation starting below where it had reached does."""
    trace = recorded("vllm/async_trace.json")
    steps = list(trace.steps)
    again = steps[2].scheduled[0]._replace(num_cached=0, num_scheduled=6)
    steps[2] = dataclasses.replace(steps[2], scheduled=(again, *steps[2].scheduled[1:]))
    w = dataclasses.replace(trace.workload, resets=(3,))
    events = said(dataclasses.replace(trace, workload=w, steps=tuple(steps)))
    assert (3, "r1 preempted (by the reset, resumed in the same step)") in events
    assert not any("preempted" in e for _, e in said(trace))  # chunks and decodes are not
    # without a reset the story says what the trace shows, not why: a preemption resumed at
    # once and a count rolled back (VLLM-07's) look alike
    plain = said(dataclasses.replace(trace, steps=tuple(steps)))
    again = [e for n, e in plain if n == 3 and "again" in e]
    assert again and again[0].startswith("r1 computed again from below (position 0, it had")
    assert not any("preempted" in e and n == 3 for n, e in plain if "again" not in e)


def test_drafts_rejected_and_computed_again_are_no_preemption() -> None:
    """A step after rejected drafts starts below where the last one ended (vLLM rolls the
    rejected drafts back): that is no preemption. On vLLM 0.34.0's recorded runs with drafts
    (sync-v2 and async-v2) r1's drafts are rejected at step 3; only r2 is preempted, at
    step 5. (The story said r1 was preempted and resumed at step 4.)"""
    for name in ("vllm/spec_trace.json", "vllm/spec_async_trace.json"):
        preempted = [(n, e) for n, e in said(recorded(name)) if "preempted" in e]
        assert preempted == [(5, "r2 preempted")], (name, preempted)


def test_each_finish_has_the_reason_its_outputs_show() -> None:
    w = recorded("vllm/trace.json").workload
    r = dataclasses.replace(w.requests[0], max_tokens=3, stop=(2,))
    assert story.finish_reason(r, (1, 0), w) == "eos"
    assert (
        story.finish_reason(dataclasses.replace(r, ignore_eos=True), (1, 0, 1), w) == "max_tokens"
    )
    assert story.finish_reason(r, (1, 2), w) == "stop token"
    capped = dataclasses.replace(
        w, config=dataclasses.replace(w.config, max_model_len=len(r.prompt) + 1)
    )
    assert story.finish_reason(r, (1,), capped) == "length cap: max_model_len"


def test_counters_are_the_pool_s_and_the_progress_where_steps_overlap() -> None:
    trace = recorded("vllm/async_trace.json")
    pool = trace.steps[2].after_schedule
    r1 = story.counters(pool)["r1"]
    assert (r1.status, r1.computed, r1.placeholders, r1.in_flight) == ("RUNNING", 6, 2, 2)
    assert r1.said().endswith("6 computed, 2 placeholders, 2 in flight")
    plain = story.counters(recorded("sglang/trace.json").steps[0].after_schedule)["r1"]
    assert plain.computed is None and "placeholders" not in plain.said()


def failing(trace: EngineTrace) -> EngineVerdict:
    verdict = EngineVerdict(trace, check_engine(trace))
    assert not verdict.ok
    return verdict


def test_the_report_tells_each_step_s_events_and_the_counters_the_check_read() -> None:
    verdict = failing(e11_after_a_reset())
    assert verdict.violations[0].check == "E11", verdict.report()
    text = verdict.report()
    assert "| step | events | phase |" in text
    cleared = "prefix cache cleared (at the start of the step, requests running)"
    assert f"| 2 | {cleared}; r2 arrives |" in text, text
    assert (
        "counters after step 3:\n  r1: running, " in text and "1 placeholders, 0 in flight" in text
    )
    assert "  requests:\n    r1 prompt [1, 2, 1, 2, 1] max_tokens 4 (step 1)\n    r2 " in text


def page(verdict: EngineVerdict) -> str:
    html = engine_page(verdict)
    assert not re.search(r"(src|href)\s*=|url\(|@import|https?://", html), "an external resource"
    return html


def test_the_page_shows_events_counters_the_null_block_and_the_workload_a_line_each() -> None:
    html = page(failing(e11_after_a_reset()))
    for shown in (
        "prefix cache cleared",
        "r2</th>",
        "arrives",
        "1 placeholders, 0 in flight",
        "0: reserved (null block)",
        "<h2>Counters after step 3</h2>",
        "    r2 prompt [1, 2, 1, 1] max_tokens 5 (step 2)",
        "<details><summary>The workload as JSON",
    ):
        assert shown in unescape(html), shown
    assert "0: rc 0" not in html  # the null block is not drawn as a used block


def _sglang_failing() -> EngineTrace:
    """SGLang's recorded run with a block freed twice after r2's preemption (E3)."""
    trace = recorded("sglang/trace.json")
    pool = trace.steps[7].after_postprocess
    assert pool is not None
    held = next(b for b in pool.used)
    return _with_pool(trace, 8, free=(*pool.free, held))


def test_the_sglang_page_tells_its_preemption() -> None:
    verdict = failing(_sglang_failing())
    html = unescape(page(verdict))
    assert "r2</th>" in html and "preempted" in html and "arrives" in html


def _visible_text(html: str, tmp_path: Path) -> str:
    """The page's visible text (`innerText`: nothing folded or hidden) as headless Chromium
    renders it: a script appended to a copy of the page (the page itself has none) writes
    it into the DOM, which --dump-dom prints."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get(REQUIRE):
            pytest.fail(f"chromium is not installed; {REQUIRE} is set, so this test must run")
        pytest.skip("chromium is not installed (.ci/run installs Debian's)")
    probe = "<script>document.body.setAttribute('data-text', document.body.innerText)</script>"
    path = tmp_path / "page.html"
    path.write_text(html.replace("</body>", probe + "</body>"))
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'data-text="([^"]*)"', done.stdout)
    assert found is not None, done.stderr[-2000:]
    return unescape(found.group(1))


@pytest.mark.browser
@pytest.mark.parametrize("which", ["vllm-async", "sglang"])
def test_in_a_real_browser_the_story_is_visible_text(tmp_path: Path, which: str) -> None:
    trace = e11_after_a_reset() if which == "vllm-async" else _sglang_failing()
    text = _visible_text(page(failing(trace)), tmp_path)
    if which == "vllm-async":
        for shown in (
            "prefix cache cleared",
            "in flight",
            "placeholders",
            "null block",
        ):
            assert shown in text, shown
    else:
        assert "preempted" in text and "rc 2" in text  # r2's preemption, a shared block
    assert "arrives" in text and "Counters after step" in text
    assert '"requests"' not in text  # the JSON stays folded


def test_a_replay_draws_its_failure_and_says_when_nothing_fails(tmp_path: Path) -> None:
    """--replay ... --html draws the page of a saved workload that fails, and says so when
    none does (it wrote nothing and said nothing)."""
    from schedcheck import faults
    from schedcheck.engine.adapter import PLAIN
    from schedcheck.engine.command import replay
    from schedcheck.engine.verdict import Runs

    trace = e11_after_a_reset()

    class Recorded:
        isolation = "none"
        traits = trace.traits

        def run(self, workload: EngineWorkload) -> EngineTrace:
            return trace

        def stop(self) -> None:
            pass

    saved = tmp_path / "E11.json"
    saved.write_text(trace.workload.to_json())
    out = tmp_path / "e11.html"
    engine: Runs = Recorded()
    modes = (trace.workload.config.mode,)
    features = dataclasses.replace(PLAIN, resets=True)
    args = (engine, "vllm", [str(saved)])
    assert replay(*args, ["E11"], features, modes, html=str(out)) == faults.FAIL
    assert "<h1>E11" in out.read_text()
    quiet = tmp_path / "none.html"
    assert replay(*args, ["E1"], features, modes, html=str(quiet)) == faults.PASS
    assert not quiet.exists()
