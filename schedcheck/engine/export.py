"""A failure as a test in the engine's own idiom (issue 48): one pytest file that reproduces
it with only the engine and pytest installed, no schedcheck and no simulated model at run
time.

The adapter writes what only it knows, in its engine's own calls (`Rendered`: its imports,
building its scheduler, adding, aborting a request, clearing its prefix cache, taking a
step, reading its pool, its state, its outputs and whether it is done); the core writes the
rest from the failing trace: the scenario in words, the workload's config, its requests and
the steps they arrive and are aborted at, the model's tokens as a literal table (each prefix
the run computed, and each prefix a correct engine would compute, to the token it gets),
the loop, and the one property that broke (properties.py), asserted where the check reads
it with the check's words. A check whose property cannot be said without schedcheck's
simulated runner (the KV reads of E2, a worker's copy of E8, ...) is not exported, nor one
whose stated property would not fire where the check did: the command says why.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from schedcheck.engine import story
from schedcheck.engine.checks import CATALOGUE
from schedcheck.engine.properties import (
    SOURCES,
    STATE_READ,
    plain_pool,
    plain_state,
    problem,
)
from schedcheck.engine.run import bound
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.verdict import EngineVerdict, workload_lines
from schedcheck.engine.workload import EngineWorkload

__all__ = [
    "EXPORTED",
    "Rendered",
    "export_test",
    "fires",
    "issue_text",
    "model_table",
    "module_constants",
    "names_literal",
]

# The checks an exported test asserts, each a property of the engine's own state: the pool
# adds up (E3); every request finishes (E5); the engine raises nothing (E6, the step itself);
# each output is the request's output alone (E7); and where the adapter reads its
# scheduler's state (`Rendered.state_body`), the positions scheduled (E1), the tokens in
# flight (E11), no running request left out of a step with room (E13) and a drafter's lookahead
# slots in the block table (E17); where the adapter reads what the engine sent each client
# and what it holds, nothing sent after an abort (E21), and where it reads the requests it
# refused and those it ran, a refusal only of one that never ran (E20).
EXPORTED = ("E1", "E2", "E3", "E5", "E6", "E7", "E8", "E11", "E13", "E17", "E20", "E21")


@dataclass(frozen=True)
class Rendered:
    """What an adapter writes of an exported test, as Python source in its engine's calls.
    Each `*_body` is the body of the function the core declares around it (4 spaces); the
    module's constants (NEXT, BLOCK_SIZE, NUM_BLOCKS, MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS,
    MAX_MODEL_LEN, POLICY) are the core's, there for the bodies to read."""

    engine: str  # what to install: "nano-vllm (its checkout on sys.path)", "vllm==0.33.0"
    imports: str  # the engine's import lines
    build_body: str  # def build(): the engine built for the workload's config
    # def add(engine, name, prompt, max_tokens, ignore_eos, priority=0, stop=()): the request
    add_body: str
    # def step(engine, requests, n, seen): step n, tokens from NEXT; seen(call) after each
    # call whose state the checks read ("schedule()", the update's), where state_body is given
    step_body: str
    pool_body: str  # def pool(engine, requests): {"blocks", "free", "used", "cached", "tables"}
    done_body: str  # def done(engine, requests): nothing left to run, as the engine says
    outputs_body: str  # def outputs(engine, requests): {name: [tokens]} of finished requests
    replaced: tuple[str, ...] = ()  # what the test builds other than the engine does, in words
    decorators: tuple[str, ...] = ()  # the test's markers in the engine's own suite
    helpers: str = ""  # module-level source the bodies use
    # def state(engine, requests): properties.plain_state's dict, read at seen(call) ("":
    # E1, E11, E13 and E17 are not exported for this engine)
    state_body: str = ""
    abort_body: str = ""  # def abort(engine, requests, name, during): "" where none is drawn
    reset_body: str = ""  # def reset(engine, requests): its prefix cache cleared, running
    # requests preempted ("" where none is drawn)
    # def unfinished(engine, requests): the names of requests not finished, read off each
    # request ("": done() says, which an engine that lost a request gets wrong)
    unfinished_body: str = ""
    title: str = ""  # the engine as the test's first line names it ("": the command's words)
    # its calls drive speculative decoding: the drafts of DRAFTS, verified by verify() (a
    # workload with drafts is not exported where they do not)
    spec: bool = False
    # def send(engine, requests, name, chunk): a session's client sends its next chunk of
    # input (tokens), or closes it (None) ("": no session is exported for this engine)
    send_body: str = ""
    # the KV connectors (workload.CONNECTORS) its test drives: the engine's own, its worker
    # played as the run played it
    connectors: tuple[str, ...] = ()
    # its state (state_body) carries "copies": each scheduled request as a worker receives
    # it (E8 is exported only then)
    copies: bool = False
    # def failed(engine, requests): the names of the requests the engine failed for a failed
    # KV load (its policy "fail"); "" where it fails none (a workload that may is not exported)
    failed_body: str = ""
    # its build lays out a hybrid model's KV cache groups (workload.layers) as the engine
    # does (E2, E3 and E8 of such a run are not exported: the test's state keeps one group)
    layers: bool = False
    # def sent(engine, requests): {name: [tokens sent to its client so far]}; def
    # held(engine, requests): {name: the output tokens the engine holds for it now} ("":
    # E21 is not exported for this engine)
    sent_body: str = ""
    held_body: str = ""
    # def refused(engine, requests): the names of the requests the engine ended unasked;
    # def ran(engine, requests): the names of those a step has run ("": E20 is not exported)
    refused_body: str = ""
    ran_body: str = ""


def model_table(
    workload: EngineWorkload, computed: list[tuple[int, ...]]
) -> dict[tuple[int, ...], int]:
    """The simulated model as a literal: the token each prefix gets, for every prefix the
    run computed and every prefix of each request's own output (what a correct engine
    computes)."""
    prefixes = set(computed)
    for r in workload.requests:
        for context, out in workload.histories(r):  # a session's: each turn's
            tokens = (*context, *out)
            for k in range(len(context), len(tokens)):
                prefixes.add(tokens[:k])
                # with drafts, the positions verified after each (speculative decoding)
                drafts = workload.propose(tokens[:k])
                prefixes.update((*tokens[:k], *drafts[:i]) for i in range(1, len(drafts) + 1))
    return {p: workload.next_token(p) for p in sorted(prefixes, key=_shortest)}


def draft_table(trace: EngineTrace) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The simulated proposer as a literal (speculative decoding): the drafts proposed after
    each sequence the run proposed for (a request's tokens after a step's update) and each
    a correct engine proposes for (every prefix of each request's own output)."""
    w = trace.workload
    seen: set[tuple[int, ...]] = set()
    for step in trace.steps:
        after = step.after_postprocess
        if after is not None:
            seen.update(
                tuple(after.tokens[s.name]) for s in step.scheduled if s.name in after.tokens
            )
    for r in w.requests:
        for context, out in w.histories(r):  # a session's: each turn's
            tokens = (*context, *out)
            seen.update(tokens[:k] for k in range(len(context) + 1, len(tokens) + 1))
    return {p: w.propose(p) for p in sorted(seen, key=_shortest)}


def _shortest(prefix: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    return len(prefix), prefix


VERIFY = '''def verify(tokens, drafts):
    """Greedy verification, as the model verifies drafts: the drafts it agrees with (NEXT),
    up to the first it does not, then one token of its own."""
    chain, out = list(tokens), []
    for draft in drafts:
        out.append(NEXT[tuple(chain)])
        if out[-1] != draft:
            return out
        chain.append(draft)
    out.append(NEXT[tuple(chain)])
    return out
'''


def _literal(name: str, entries: list[str]) -> str:
    """`NAME = {...}` on one line, or an entry a line where that is too long to read."""
    one = f"{name} = {{{', '.join(entries)}}}"
    if len(one) <= 88:
        return one
    return f"{name} = {{\n" + "".join(f"    {e},\n" for e in entries) + "}"


def _indent(body: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in body.strip("\n").splitlines())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60]


def fires(check: str, trace: EngineTrace, at: int, constants: dict[str, Any]) -> bool:
    """Whether the check's property as the test states it (properties.py) finds the trace
    wrong at step `at`, read where the test reads it."""
    steps = list(trace.steps)
    here = [k for k, s in enumerate(steps) if s.step == at]
    if check == "E3":
        # the test reads the pool after each step, as the step leaves it
        pools = [steps[k].after_postprocess for k in here]
        return any(problem(SOURCES[check], plain_pool(p)) for p in pools if p is not None)
    if check in ("E1", "E8", "E17"):
        runner = trace.traits.runner
        states = [plain_state(steps[k], steps[k].after_schedule, runner) for k in here]
        return any(problem(SOURCES[check], s, **constants) for s in states)
    if check == "E2":
        # the KV the test keeps from the first step on: the property fires first at `at`
        kv: dict[tuple[int, int], tuple[int, ...]] = {}
        for s in steps:
            state = plain_state(s, s.after_schedule)
            if s.schedules and problem(SOURCES[check], state, kv, **constants):
                return s.step == at
        return False
    if check == "E11":
        states = [
            plain_state(None, p)
            for k in here
            for p in (steps[k].after_schedule, steps[k].after_postprocess)
            if p is not None
        ]
        return any(problem(SOURCES[check], s) for s in states)
    if check == "E13":
        for k in here:
            if k == 0 or not steps[k].schedules:
                continue
            last = steps[k - 1].after_postprocess or steps[k - 1].after_schedule
            before, now = plain_state(None, last), plain_state(steps[k], steps[k].after_schedule)
            if problem(SOURCES[check], before, now, **constants):
                return True
        return False
    return True  # E5, E6, E7, E20, E21: the test asserts the check itself


def _exportable(verdict: EngineVerdict, rendered: Rendered, constants: dict[str, Any]) -> None:
    """ValueError saying why the failure is not exported as a test."""
    violation, trace = verdict.violations[0], verdict.trace
    check, w = violation.check, trace.workload
    if check not in EXPORTED:
        raise ValueError(
            f"{check} is not exported: its property reads what schedcheck's simulated runner "
            f"computed (exported: {', '.join(EXPORTED)})"
        )
    if check in STATE_READ and not rendered.state_body:
        raise ValueError(f"{check} is not exported for this engine: its test reads no state")
    if check == "E8" and not rendered.copies:
        raise ValueError(
            "E8 is not exported for this engine: what its workers receive is schedcheck's "
            "simulated runner's, which its test does not play (its replay runs it: --replay)"
        )
    if check == "E21" and not (rendered.sent_body and rendered.held_body):
        raise ValueError("E21 is not exported for this engine: its test reads no output sent")
    if check == "E20" and not (rendered.refused_body and rendered.ran_body):
        raise ValueError("E20 is not exported for this engine: its test reads no refusal")
    if any(r.abort for r in w.requests) and not rendered.abort_body:
        raise ValueError("the workload aborts a request, which this engine's test cannot")
    if w.drafts and not rendered.spec:
        raise ValueError("the workload drafts tokens, which this engine's test does not drive")
    if w.resets and not rendered.reset_body:
        raise ValueError("the workload clears the prefix cache, which this engine's test cannot")
    if any(r.session for r in w.requests) and not rendered.send_body:
        raise ValueError("the workload streams input to a session, which this engine's test cannot")
    if check == "E7" and _failing(w) and not rendered.failed_body:
        raise ValueError(
            "the engine may fail a request whose KV load fails, which this engine's test "
            "cannot tell (its replay runs it: --replay)"
        )
    if w.layers and not rendered.layers:
        raise ValueError(
            "the workload's model is hybrid (its layers' KV cache groups), which this "
            "engine's test does not build (its replay runs it: --replay)"
        )
    if w.layers and check in ("E2", "E3", "E8"):
        raise ValueError(
            f"{check} of a hybrid model's run reads every KV cache group's blocks, which the "
            "exported test's state keeps of full attention's group only (its replay runs "
            "it: --replay)"
        )
    if w.connector and check == "E2":
        raise ValueError(
            "E2 of a run with a KV connector reads KV that came through the connector, which "
            "the exported test's KV does not follow (its replay runs it: --replay)"
        )
    if w.connector and w.connector not in rendered.connectors:
        raise ValueError(
            f"the workload runs the {w.connector} KV connector, which this engine's test does "
            "not drive (its replay runs it: --replay)"
        )
    if not fires(check, trace, violation.step, constants):
        name = SOURCES[check].split("(", 1)[0].removeprefix("def ")
        raise ValueError(
            f"{check} here is not what the exported test's {name} reads (it states the "
            f"check's main property: {CATALOGUE[check].title})"
        )


def _failing(w: EngineWorkload) -> bool:
    """Whether the engine may fail a request for a failed KV load (check_e7 lets it)."""
    return w.load_failure == "fail" and any(r.load_fails for r in w.requests)


def module_constants(trace: EngineTrace) -> dict[str, Any]:
    """The workload's config as the test's module constants, and what its property reads."""
    w = trace.workload
    c = w.config
    return {
        "BLOCK_SIZE": c.block_size,
        "NUM_BLOCKS": c.num_blocks,
        "MAX_NUM_SEQS": c.max_num_seqs,
        "MAX_NUM_BATCHED_TOKENS": c.max_num_batched_tokens,
        "MAX_MODEL_LEN": w.max_model_len(),
        "POLICY": c.policy,
        "PROMPTS": {r.name: len(r.prompt) for r in w.requests},
        "MOST": {r.name: w.most(r) for r in w.requests},
        "DRAFT_INPUTS": trace.traits.draft_inputs,
        "TOKEN_BUDGET": trace.traits.token_budget or c.max_num_batched_tokens,
        "LOOKAHEAD": w.lookahead,
        "WORKER_FIELDS": [f for f in trace.traits.runner.fields if f],
    }


def _requests(w: EngineWorkload) -> list[str]:
    """ARRIVALS, ABORTS and LANDING: when each request is added and aborted."""
    full = any(r.priority or r.stop for r in w.requests)  # priorities and stops written out
    arrivals: dict[int, list[str]] = {}
    aborts: dict[int, list[str]] = {}
    for r in w.requests:
        extra = f", {r.priority}, {list(r.stop)!r}" if full else ""
        arrivals.setdefault(r.arrival, []).append(
            f"({r.name!r}, {list(r.prompt)!r}, {r.max_tokens}, {r.ignore_eos}{extra})"
        )
        if r.abort:
            aborts.setdefault(r.abort, []).append(repr(r.name))
    lines = [_literal("ARRIVALS", [f"{n}: [{', '.join(a)}]" for n, a in sorted(arrivals.items())])]
    sent = _sent(w)
    if sent:
        lines.append(
            "# what each session's client sends as the step starts: its next chunk of input, "
            "or None: it is done"
        )
        lines.append(_literal("SENT", [f"{n}: [{', '.join(a)}]" for n, a in sorted(sent.items())]))
    if aborts:
        lines.append(
            _literal("ABORTS", [f"{n}: [{', '.join(a)}]" for n, a in sorted(aborts.items())])
        )
        landing = {r.name for r in w.requests if r.abort and r.abort_in_step}
        landed = names_literal(landing)
        lines.append(f"LANDING = {landed}  # aborts that land while their step runs")
    return lines


def _sent(w: EngineWorkload) -> dict[int, list[str]]:
    """Each step's chunks and closes, in the order the run sends them
    (EngineRequest.sends)."""
    sent: dict[int, list[str]] = {}
    for r in w.requests:
        for step, chunk in r.sends():
            said = "None" if chunk is None else repr(list(chunk))
            sent.setdefault(step, []).append(f"({r.name!r}, {said})")
    return sent


def names_literal(names: Iterable[str]) -> str:
    """A set of names as a literal, in order (a set's own repr differs between runs)."""
    ordered = sorted(set(names))
    return "{" + ", ".join(map(repr, ordered)) + "}" if ordered else "set()"


KV_KEPT = "(block, slot) -> the tokens whose last one's KV it holds, as the model left it"


def _loop(
    check: str, aborts: bool, resets: bool, unfinished: bool, sent: bool, failing: bool = False
) -> list[str]:
    """The test's loop: arrivals, aborts and resets at their steps, then the step; the
    property where it reads (`failing`: E7 lets a request the engine failed for a failed
    load stop short, as check_e7 does)."""
    lines = ["    engine, requests = build(), {}"]
    if check == "E21":
        lines.append("    kept = {}  # name -> the output tokens it held when its abort was sent")
    if check == "E20":
        lines.append("    before, told = set(), set()  # requests run before the step; refused")
    watch = "None"
    if check in STATE_READ:
        watch = "seen"
        found = {
            "E1": 'schedule_problem(now) if call == "schedule()" else None',
            "E2": 'kv_problem(now, kv) if call == "schedule()" else None',
            "E8": 'copy_problem(now) if call == "schedule()" else None',
            "E11": "flight_problem(now)",
            "E13": 'wasted_problem(before, now) if before and call == "schedule()" else None',
            "E17": 'lookahead_problem(now) if call == "schedule()" else None',
        }[check]
        lines += [
            "    states, before = [], None  # the states read; the last one of the step before",
            *([f"    kv = {{}}  # {KV_KEPT}"] if check == "E2" else []),
            "",
            "    def seen(call):",
            '        """After a call the property reads: the scheduler\'s state, checked."""',
            "        now = state(engine, requests)",
            f"        found = {found}",
            "        states.append(now)",
            '        assert found is None, f"step {n}, after {call}: {found}"',
            "",
        ]
    lines += [
        "    for n in range(1, STEPS + 1):",
        "        for request in ARRIVALS.get(n, []):",
        "            requests[request[0]] = add(engine, *request)",
    ]
    if sent:
        lines += [
            "        for name, chunk in SENT.get(n, []):",
            "            send(engine, requests, name, chunk)",
        ]
    if check == "E21":
        lines += [
            "        for name in ABORTS.get(n, []):  # what it holds as its abort is sent",
            "            kept.setdefault(name, held(engine, requests).get(name, 0))",
        ]
    if aborts:
        lines += [
            "        for name in ABORTS.get(n, []):",
            "            if name in requests:",
            "                abort(engine, requests, name, name in LANDING)",
        ]
    if resets:
        lines += ["        if n in RESETS:", "            reset(engine, requests)"]
    lines += [
        "        if done(engine, requests):",
        "            if n >= LAST:",
        "                break",
        "            continue  # nothing to run until the next arrival",
        "        signal.signal(signal.SIGALRM, hung)",
        "        signal.alarm(STEP_SECONDS)",
        "        try:",
        f"            step(engine, requests, n, {watch})"
        + ("  # E6: it raises nothing" if check == "E6" else ""),
        "        finally:",
        "            signal.alarm(0)",
    ]
    if check == "E3":
        lines += [
            "        problem = pool_problem(pool(engine, requests))",
            '        assert problem is None, f"after step {n}: {problem}"',
        ]
    if check == "E21":
        lines += [
            "        said = sent(engine, requests)",
            "        for name, most in kept.items():",
            "            got = len(said.get(name, []))",
            "            assert got <= most, (",
            '                f"step {n}: {name} was sent {got} output tokens, but held {most} "',
            '                "when its abort was sent"',
            "            )",
        ]
    if check == "E20":
        lines += [
            "        for name in refused(engine, requests) - told:",
            "            assert name not in before, (",
            '                f"step {n}: {name} was refused by the engine after it ran (a "',
            '                "limit meant for new arrivals)"',
            "            )",
            "            told.add(name)",
            "        before |= ran(engine, requests)",
        ]
    if check == "E13":
        lines.append("        before = states[-1] if states else before")
    if check in ("E5", "E7") and unfinished:
        lines += [
            "    left = unfinished(engine, requests)",
            '    assert not left, f"{left} not finished after step {n} (the engine says '
            'it is done: {done(engine, requests)})"',
        ]
    elif check in ("E5", "E7"):
        lines.append(
            '    assert done(engine, requests), f"requests unfinished after {STEPS} steps"'
        )
    if check == "E7":
        lines += [
            "    got = outputs(engine, requests)",
            *(["    errored = failed(engine, requests)  # for a failed load"] if failing else []),
            "    for name, alone in ALONE.items():",
            "        mine = got.get(name)",
            "        stopped = name in ABORTED" + (" or name in errored" if failing else ""),
            "        cut = stopped and mine is not None and mine == alone[: len(mine)]",
            '        assert mine == alone or cut, f"{name} produced {mine}, alone {alone}"',
        ]
    return lines


def export_test(verdict: EngineVerdict, rendered: Rendered, shown: str, command: str) -> str:
    """The pytest file reproducing `verdict`'s failure (its first violation), with
    `rendered` the adapter's part; `shown` names the engine, `command` re-runs schedcheck.
    ValueError where the failure is not exported (why, in words)."""
    violation, trace = verdict.violations[0], verdict.trace
    check, w = violation.check, trace.workload
    constants = module_constants(trace)
    _exportable(verdict, rendered, constants)
    info = CATALOGUE[check]
    computed = [
        s.token_ids[: s.num_cached + s.num_scheduled - s.drafts + i]
        for st in trace.steps
        for s in st.scheduled
        for i in range(s.drafts + 1)  # with drafts: each position verified
    ]
    table = model_table(w, computed)
    aborts = any(r.abort for r in w.requests)
    failing = check == "E7" and _failing(w)
    events = [f"#   step {e.step}: {story.said(e)}" for e in story.events(trace)][:40]
    events = ["# what happened:", *events] if events else []
    scenario = "\n".join(f"# {line}" for line in workload_lines(w))
    message = str(violation).replace('"""', "'''")
    intro = (
        "Found by schedcheck (`schedcheck engine`), exported as a test that needs only the "
        f"engine and pytest: {rendered.engine}. Run: python -m pytest THIS_FILE."
    )
    model = (
        "The requests arrive at the steps written below and run through the engine's own "
        "scheduler; the model is simulated: each step's tokens are read from NEXT, the token "
        "schedcheck's model gave each prefix (a correct engine computes only prefixes listed)."
    )
    # those one property reads are written beside it (E13's, E17's)
    own = ("PROMPTS", "MOST", "DRAFT_INPUTS", "TOKEN_BUDGET", "LOOKAHEAD", "WORKER_FIELDS")
    config = [f"{n} = {v!r}" for n, v in constants.items() if n not in own]
    lines = [
        '"""'
        + textwrap.fill(
            f"{rendered.title or shown}: {check} ({info.title}) at step {violation.step}.", 89
        ),
        "",
        textwrap.fill(intro, 92),
        "",
        textwrap.fill(f"What schedcheck saw: {message}", 92),
        "",
        textwrap.fill(model, 92),
        *(textwrap.fill(f"Replaced: {r}", 92) for r in rendered.replaced),
        "",
        f"Re-run in schedcheck: {command}",
        '"""',
        "",
        "# The run, as schedcheck saw it:",
        scenario,
        *events,
        "",
        *([] if "import signal\n" in rendered.imports else ["import signal"]),
        rendered.imports.strip(),
        "",
        *config,
        _literal("NEXT", [f"{p!r}: {t}" for p, t in table.items()]),
        *_requests(w),
    ]
    if w.drafts:
        proposed = draft_table(trace)
        lines.append(f"SPEC = {w.drafts}  # num_speculative_tokens: the drafts proposed a step")
        lines.append("# the drafts the proposer makes after each sequence")
        lines.append(_literal("DRAFTS", [f"{p!r}: {list(d)!r}" for p, d in proposed.items()]))
    if w.resets:
        lines.append(
            f"RESETS = {list(w.resets)!r}  # the prefix cache cleared as these steps start"
        )
    last = max(r.arrival for r in w.requests)
    sessions = any(r.session for r in w.requests)
    if sessions:  # a session's client sends after it arrived
        last = max(last, *(r.closed_at for r in w.requests if r.session))
    lines += [
        f"LAST = {last}  # the last arrival"
        + (" or send" if sessions else "")
        + ": after it, a step with nothing to run ends the test",
        f"STEPS = {bound(w)}  # every request finishes within these (a generous bound)",
        "STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)",
    ]
    if check == "E13":
        lines.append(_literal("PROMPTS", [f"{n!r}: {k}" for n, k in constants["PROMPTS"].items()]))
        lines.append("# the most tokens each may produce (max_tokens, or less under MAX_MODEL_LEN)")
        lines.append(_literal("MOST", [f"{n!r}: {k}" for n, k in constants["MOST"].items()]))
        lines.append(
            f"DRAFT_INPUTS = {constants['DRAFT_INPUTS']}  # a drafter's input rows per request "
            "in the budget (max_num_new_slots_for_drafting)"
        )
        lines.append(
            f"TOKEN_BUDGET = {constants['TOKEN_BUDGET']}  # what the scheduler schedules "
            "within (max_num_scheduled_tokens)"
        )
    if check == "E8":
        lines.append(
            f"WORKER_FIELDS = {constants['WORKER_FIELDS']!r}  # where its runner's prefill "
            "starts, and its span"
        )
    if check == "E17":
        lines.append(
            f"LOOKAHEAD = {constants['LOOKAHEAD']}  # the KV slots past a step its drafter "
            "writes (num_lookahead_tokens)"
        )
    if check == "E7":
        expected = {r.name: list(w.alone(r)) for r in w.requests}
        lines.append(f"ALONE = {expected!r}  # each request's output run alone")
        aborted = sorted(r.name for r in w.requests if r.abort)
        stopped = names_literal(aborted)
        lines.append(f"ABORTED = {stopped}  # their output is right where it is a prefix")
    if rendered.helpers.strip():
        lines += ["", "", rendered.helpers.strip()]
    if w.drafts:
        lines += ["", "", VERIFY.strip()]
    functions = [
        ("build()", rendered.build_body),
        (
            "add(engine, name, prompt, max_tokens, ignore_eos, priority=0, stop=())",
            rendered.add_body,
        ),
        *([("send(engine, requests, name, chunk)", rendered.send_body)] if sessions else []),
        *([("abort(engine, requests, name, during)", rendered.abort_body)] if aborts else []),
        *([("reset(engine, requests)", rendered.reset_body)] if w.resets else []),
        ("step(engine, requests, n, seen)", rendered.step_body),
        ("done(engine, requests)", rendered.done_body),
        *(
            [("unfinished(engine, requests)", rendered.unfinished_body)]
            if check in ("E5", "E7") and rendered.unfinished_body
            else []
        ),
        *([("pool(engine, requests)", rendered.pool_body)] if check == "E3" else []),
        *([("state(engine, requests)", rendered.state_body)] if check in STATE_READ else []),
        *([("outputs(engine, requests)", rendered.outputs_body)] if check == "E7" else []),
        *([("failed(engine, requests)", rendered.failed_body)] if failing else []),
        *(
            [
                ("sent(engine, requests)", rendered.sent_body),
                ("held(engine, requests)", rendered.held_body),
            ]
            if check == "E21"
            else []
        ),
        *(
            [
                ("refused(engine, requests)", rendered.refused_body),
                ("ran(engine, requests)", rendered.ran_body),
            ]
            if check == "E20"
            else []
        ),
    ]
    for head, body in functions:
        lines += ["", "", f"def {head}:\n{_indent(body)}"]
    if check in SOURCES:
        lines += ["", "", SOURCES[check].strip()]
    lines += [
        "",
        "",
        "class Hung(Exception):",
        '    """A call into the engine that did not return."""',
        "",
        "",
        "def hung(signum, frame):",
        '    raise Hung(f"a step did not return within {STEP_SECONDS} s")',
        "",
        "",
        *rendered.decorators,
        f"def test_{_slug(info.title)}():",
        f'    """{info.title[0].upper()}{info.title[1:]} (schedcheck\'s {check})."""',
        *_loop(check, aborts, bool(w.resets), bool(rendered.unfinished_body), sessions, failing),
    ]
    return "\n".join(lines) + "\n"


def issue_text(verdict: EngineVerdict, shown: str, command: str, test: str | None) -> str:
    """A report to file with the engine's maintainers (docs/findings.md, "Ready to file"):
    what was run, what was expected and what happened, the scenario, and the exported test;
    where in the engine's code is left for the person who reads it there to fill in."""
    violation, trace = verdict.violations[0], verdict.trace
    info = CATALOGUE[violation.check]
    events = [f"- step {e.step}: {story.said(e)}" for e in story.events(trace)][:40]
    return "\n".join(
        [
            f"# {info.title[0].upper()}{info.title[1:]}: {violation.message}",
            "",
            "## Environment",
            "",
            f"- engine: {shown}",
            "- found by schedcheck (`schedcheck engine`), on a CPU, with a simulated model: each "
            "step's tokens come from a fixed function of the sequence so far",
            "",
            "## Expected",
            "",
            f"{info.title[0].upper()}{info.title[1:]} (schedcheck's {violation.check}).",
            "",
            "## Actual",
            "",
            str(violation),
            "",
            f"Symptom: {info.symptom}.",
            "",
            "## Scenario",
            "",
            "```",
            *workload_lines(trace.workload),
            "```",
            "",
            *events,
            "",
            "## To reproduce",
            "",
            (
                f"The test `{test}` reproduces it with only the engine and pytest "
                "(run it from the engine's checkout)."
                if test
                else "No test was exported for this check; schedcheck re-runs it:"
            ),
            "",
            f"    {command}",
            "",
            "## Where in the code",
            "",
            "Not read yet: fill in the file and line before filing (a finding is believed only "
            "once read in the engine's code).",
            "",
        ]
    )
