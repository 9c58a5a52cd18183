"""A failure as a test in the engine's own idiom (issue 48): one pytest file that reproduces
it with only the engine and pytest installed, no schedcheck and no simulated model at run
time.

The adapter writes what only it knows, in its engine's own calls (`Rendered`: its imports,
building its scheduler, adding a request, taking a step, reading its pool, its outputs and
whether it is done); the core writes the rest from the failing trace: the scenario in words,
the requests and their arrival steps, the model's tokens as a literal table (each prefix
the run computed, and each prefix a correct engine would compute, to the token it gets),
the loop, and the one property that broke, asserted after every step with the check's
words. A check whose property cannot be said without schedcheck's simulated runner (the
positions and KV reads of E1 and E2, a worker's copy of E8, ...) is not exported: the
command says which (`EXPORTED` names those that are).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from schedcheck.engine import story
from schedcheck.engine.checks import CATALOGUE
from schedcheck.engine.run import bound
from schedcheck.engine.trace import EngineTrace, Pool
from schedcheck.engine.verdict import EngineVerdict, workload_lines
from schedcheck.engine.workload import EngineWorkload

__all__ = [
    "EXPORTED",
    "POOL_PROBLEM",
    "Rendered",
    "export_test",
    "issue_text",
    "model_table",
    "plain_pool",
    "pool_problem",
]

# The checks an exported test asserts, each a property of the engine's own state: the pool
# adds up (E3); every request finishes (E5); the engine raises nothing (E6, the step itself);
# each output is the request's output alone (E7).
EXPORTED = ("E3", "E5", "E6", "E7")


@dataclass(frozen=True)
class Rendered:
    """What an adapter writes of an exported test, as Python source in its engine's calls.
    Each `*_body` is the body of the function the core declares around it (4 spaces)."""

    engine: str  # what to install: "nano-vllm (its checkout on sys.path)", "vllm==0.33.0"
    imports: str  # the engine's import lines
    build_body: str  # def build(): the engine built for the workload's config
    add_body: str  # def add(engine, name, prompt, max_tokens, ignore_eos): its request
    step_body: str  # def step(engine, requests): one step, tokens from NEXT; the names run
    pool_body: str  # def pool(engine, requests): {"blocks", "free", "used", "cached", "tables"}
    done_body: str  # def done(engine, requests): nothing left to run
    outputs_body: str  # def outputs(engine, requests): {name: [tokens]} of finished requests
    replaced: tuple[str, ...] = ()  # what the test builds other than the engine does, in words
    decorators: tuple[str, ...] = ()  # the test's markers in the engine's own suite
    helpers: str = ""  # module-level source the bodies use


POOL_PROBLEM = '''def pool_problem(pool):
    """What is wrong with the block pool (None: nothing): every block free, cached or used,
    once; a used block's ref_count the number of block tables holding it."""
    free, used, cached = pool["free"], pool["used"], pool.get("cached", [])
    for name, blocks in (("free list", free), ("cache", cached)):
        twice = sorted(b for b in set(blocks) if blocks.count(b) > 1)
        if twice:
            return f"block {twice[0]} is in the {name} twice"
    for one, x, two, y in ((free, "free", used, "used"), (cached, "cached", used, "used"),
                           (free, "free", cached, "cached")):
        both = sorted(set(one) & set(two))
        if both:
            return f"block {both[0]} is both {x} and {y}"
    every = set(range(len(pool["blocks"]))) - set(pool.get("reserved", []))
    seen = set(free) | set(used) | set(cached)
    if seen != every:
        return f"block {sorted(every ^ seen)[0]} is neither free, cached nor used"
    holders = {}
    for name, table in pool["tables"].items():
        for b in table:
            holders.setdefault(b, []).append(name)
    for b in sorted(every):
        refs, held = pool["blocks"][b], holders.get(b, [])
        if refs != len(held):
            return f"block {b} has ref_count {refs}, but {len(held)} block table(s) hold it"
        if (refs > 0) != (b in used):
            return f"block {b} has ref_count {refs} but is {'used' if b in used else 'not used'}"
    return None
'''


def model_table(
    workload: EngineWorkload, computed: list[tuple[int, ...]]
) -> dict[tuple[int, ...], int]:
    """The simulated model as a literal: the token each prefix gets, for every prefix the
    run computed and every prefix of each request's own output (what a correct engine
    computes)."""
    prefixes = set(computed)
    for r in workload.requests:
        tokens = (*r.prompt, *workload.alone(r))
        prefixes.update(tokens[:k] for k in range(len(r.prompt), len(tokens)))
    return {p: workload.next_token(p) for p in sorted(prefixes, key=lambda p: (len(p), p))}


def plain_pool(pool: Pool) -> dict[str, Any]:
    """A pool as the exported test's `pool()` gives it."""
    return {
        "blocks": [b.ref_count for b in pool.blocks],
        "free": list(pool.free),
        "used": list(pool.used),
        "cached": list(pool.cached),
        "reserved": list(pool.reserved),
        "tables": {n: list(t) for n, t in pool.tables.items()},
    }


def pool_problem(pool: dict[str, Any]) -> str | None:
    """The exported test's own `pool_problem` (POOL_PROBLEM), run here: what it finds."""
    namespace: dict[str, Any] = {}
    exec(POOL_PROBLEM, namespace)  # our own source, the test's copy of it
    found = namespace["pool_problem"](pool)
    return None if found is None else str(found)


def _covered(trace: EngineTrace, step: int) -> None:
    """E3 is exported where the test's pool_problem (the pool's structure: E3 less the
    prefix check of blocks shared under a hash) finds the failing step's pool wrong."""
    at = [s for s in trace.steps if s.step == step]
    pools = [p for s in at for p in (s.after_schedule, s.after_postprocess) if p is not None]
    if not any(pool_problem(plain_pool(p)) for p in pools):
        raise ValueError(
            "E3 here is a block shared by sequences of different prefixes, which the exported "
            "test's pool_problem does not read (it checks the pool's structure)"
        )


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


def export_test(verdict: EngineVerdict, rendered: Rendered, shown: str, command: str) -> str:
    """The pytest file reproducing `verdict`'s failure (its first violation), with
    `rendered` the adapter's part; `shown` names the engine, `command` re-runs schedcheck."""
    violation, trace = verdict.violations[0], verdict.trace
    check, w = violation.check, trace.workload
    if check not in EXPORTED:
        raise ValueError(
            f"{check} is not exported: its property reads what schedcheck's simulated runner "
            f"computed (exported: {', '.join(EXPORTED)})"
        )
    if check == "E3":
        _covered(trace, violation.step)
    info = CATALOGUE[check]
    computed = [
        s.token_ids[: s.num_cached + s.num_scheduled] for st in trace.steps for s in st.scheduled
    ]
    table = model_table(w, computed)
    arrivals: dict[int, list[str]] = {}
    for r in w.requests:
        arrivals.setdefault(r.arrival, []).append(
            f"({r.name!r}, {list(r.prompt)!r}, {r.max_tokens}, {r.ignore_eos})"
        )
    events = [f"#   step {e.step}: {story.said(e)}" for e in story.events(trace)][:40]
    events = ["# what happened:", *events] if events else []
    scenario = "\n".join(f"# {line}" for line in workload_lines(w))
    message = str(violation).replace('"""', "'''")
    steps = bound(w)
    intro = (
        "Found by schedcheck (`schedcheck engine`), exported as a test that needs only the "
        f"engine and pytest: {rendered.engine}. Run: python -m pytest THIS_FILE."
    )
    model = (
        "The requests arrive at the steps written below and run through the engine's own "
        "scheduler; the model is simulated: each step's tokens are read from NEXT, the token "
        "schedcheck's model gave each prefix (a correct engine computes only prefixes listed)."
    )
    lines = [
        f'"""{shown}: {check} ({info.title}) at step {violation.step}.',
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
        "import signal",
        rendered.imports.strip(),
        "",
        _literal("NEXT", [f"{p!r}: {t}" for p, t in table.items()]),
        _literal("ARRIVALS", [f"{n}: [{', '.join(a)}]" for n, a in sorted(arrivals.items())]),
        f"STEPS = {steps}  # every request finishes within these (a generous bound)",
        "STEP_SECONDS = 10  # a step that takes longer hangs (schedcheck's E6)",
    ]
    if check == "E7":
        expected = {r.name: list(w.alone(r)) for r in w.requests}
        lines.append(f"ALONE = {expected!r}  # each request's output run alone")
    if rendered.helpers.strip():
        lines += ["", "", rendered.helpers.strip()]
    lines += [
        "",
        "",
        f"def build():\n{_indent(rendered.build_body)}",
        "",
        "",
        f"def add(engine, name, prompt, max_tokens, ignore_eos):\n{_indent(rendered.add_body)}",
        "",
        "",
        f"def step(engine, requests):\n{_indent(rendered.step_body)}",
        "",
        "",
        f"def done(engine, requests):\n{_indent(rendered.done_body)}",
        "",
        "",
    ]
    if check == "E3":
        lines += [
            f"def pool(engine, requests):\n{_indent(rendered.pool_body)}",
            "",
            "",
            POOL_PROBLEM.strip(),
            "",
            "",
        ]
    if check == "E7":
        lines += [f"def outputs(engine, requests):\n{_indent(rendered.outputs_body)}", "", ""]
    last = max(arrivals)
    lines += [
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
        "    engine, requests = build(), {}",
        "    for n in range(1, STEPS + 1):",
        "        for name, prompt, max_tokens, ignore_eos in ARRIVALS.get(n, []):",
        "            requests[name] = add(engine, name, prompt, max_tokens, ignore_eos)",
        f"        if n > {last} and done(engine, requests):",
        "            break",
        "        signal.signal(signal.SIGALRM, hung)",
        "        signal.alarm(STEP_SECONDS)",
        "        try:",
        "            step(engine, requests)"
        + ("  # E6: it raises nothing" if check == "E6" else ""),
        "        finally:",
        "            signal.alarm(0)",
    ]
    if check == "E3":
        lines += [
            "        problem = pool_problem(pool(engine, requests))",
            '        assert problem is None, f"after step {n}: {problem}"',
        ]
    if check in ("E5", "E7"):
        lines.append(
            '    assert done(engine, requests), f"requests unfinished after {STEPS} steps"'
        )
    if check == "E7":
        lines += [
            "    got = outputs(engine, requests)",
            "    for name, alone in ALONE.items():",
            "        assert got.get(name) == alone, (",
            '            f"{name} produced {got.get(name)}, alone {alone}"',
            "        )",
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
