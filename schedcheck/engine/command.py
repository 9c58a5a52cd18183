"""`schedcheck engine [--engine NAME] [PATH]`: check a real engine's scheduler, through the
adapter registered as NAME (engine/registry.py; nano-vllm's by default, `--engine vllm` for
vLLM's v1 scheduler). One path for every engine: its adapter sets it up and drives it, and
this core runs the search, judges the runs and reports (docs/engines.md).

Exit status as for `check`: 0 every check held on every workload tried, 1 a check failed
(the shrunk counterexample is printed and saved), 2 a usage error (no such engine, an
option its adapter does not take, not an engine where PATH points, an engine that cannot
be driven and what it lacks, a file that is not a saved workload), 3 schedcheck's own fault.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from schedcheck import faults
from schedcheck.engine import registry
from schedcheck.engine.adapter import PLAIN, Adapter, EngineSetup, Features, SetupError, wants
from schedcheck.engine.checks import POLICIES, active
from schedcheck.engine.export import export_test, issue_text
from schedcheck.engine.html import engine_page
from schedcheck.engine.isolated import IsolatedEngine
from schedcheck.engine.local import LocalEngine
from schedcheck.engine.search import Search, chunks_prefills, search_engine
from schedcheck.engine.strategies import labels
from schedcheck.engine.verdict import EngineVerdict, Runs, Undrivable, verify_engine
from schedcheck.engine.workload import EngineWorkload
from schedcheck.faults import CheckerError, SubmissionError
from schedcheck.sandbox.box import LEVELS
from schedcheck.sandbox.process import DEFAULT_CALL_TIMEOUT, Limits

__all__ = ["add_parser", "engine_command"]

# The command's options that only some engines take: each adapter says which of these it
# does (Adapter.options), and a run that gives another is a usage error naming it.
ENGINE_OPTIONS = {
    "package": "--package",
    "config": "--config",
    "runner": "--runner",
    "prefill": "--prefill",
    "async_scheduling": "--async",
    "modes": "--modes",
    "loop": "--loop",
}  # each option's name in the parsed arguments, and as the user spells it


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    engine = commands.add_parser(
        "engine", help="check a real engine's scheduler: nano-vllm's (default), vLLM's, ..."
    )
    engine.add_argument(
        "path",
        nargs="?",
        help="where the engine is: a nano-vllm checkout (the folder holding nanovllm/), a "
        "fork's, a wheel, or a site-packages folder (none with --package: the installed "
        "package); for vLLM a checkout, or none: the installed vLLM",
    )
    engine.add_argument(
        "--engine",
        metavar="NAME",
        help=f"which engine's adapter drives it: {', '.join(registry.names())} (default "
        f"{registry.DEFAULT}), or module:ATTRIBUTE naming an adapter of your own "
        '(docs/engines.md, "Another engine")',
    )
    engine.add_argument(  # the spelling up to 0.3: deprecated, dropped in the next version
        "--vllm",
        dest="deprecated_engine",
        action="store_const",
        const="vllm",
        help="deprecated: --engine vllm",
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
        metavar="NAME",
        help="nano-vllm: the model runner's position rules, by name (default: read off the "
        "engine's model_runner.py); vLLM: the model runner's protocol, v1 or v2 (default: "
        "the release's for a dense model)",
    )
    engine.add_argument(
        "--async",
        dest="async_scheduling",
        choices=("on", "off"),
        help="vLLM: async scheduling, its engine core overlapping steps (default: the release's)",
    )
    engine.add_argument(
        "--modes",
        choices=("default", "all"),
        help="vLLM: which modes the search draws from: the one the options name (default), "
        "or every combination of scheduling and runner protocol the release has (all); "
        "SGLang and nano-vllm: both loops (all)",
    )
    engine.add_argument(
        "--features",
        metavar="NAMES",
        help="what the workloads draw, comma-separated: spec (speculative decoding: drafts "
        "proposed, verified and rolled back; vLLM, SGLang), connector (a KV connector over a "
        "simulated external store: loads, saves, failed loads; vLLM), sessions "
        "(streaming-input sessions: continuation chunks under one request, or turns of one "
        "session; vLLM, SGLang), hybrid "
        "(hybrid models' KV cache groups; vLLM), policies, priority-preemption, "
        "priority-retraction, mixed, "
        "queue-limit, streams, pressure, namespaces, logprobs, adapters, embeds (the "
        "server's scheduling arguments, its clients' streaming, cache namespaces, prompt "
        "logprobs, LoRA adapters and prompts carrying embeddings, decode-pressure "
        "workloads; SGLang), or "
        "none (default: every one the engine's adapter drives, each in a share of the "
        "workloads)",
    )
    engine.add_argument(
        "--connector",
        metavar="NAMES",
        help="with --features connector, the KV connectors drawn, comma-separated: simulated "
        "(schedcheck's, over a simulated external store), offloading (the engine's own "
        "offloading connector to a tier of a few blocks) (default: each the engine has)",
    )
    engine.add_argument(
        "--layers",
        metavar="KINDS",
        help="with hybrid models drawn, the kinds of layer beside full attention, comma-"
        "separated: window (sliding-window attention), chunk (chunked local attention), mamba "
        "(a Mamba state) (default: each the engine lays out)",
    )
    engine.add_argument(
        "--load-failure",
        metavar="POLICIES",
        help="with a connector, the failed-load policies drawn, comma-separated: recompute, "
        "fail (default: each the engine has)",
    )
    engine.add_argument(
        "--loop",
        choices=("overlap", "normal", "own", "scheduler"),
        help="nano-vllm: its own LLMEngine.step() and model runner (own, the default where "
        "torch is installed) or schedcheck's loop over its Scheduler (scheduler); SGLang: its "
        "event loop (overlap or normal; default: the release's, overlap since 0.4)",
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
        "--export",
        metavar="OUT.py|OUT.md",
        help="on failure, write a pytest file that reproduces it with only the engine and "
        "pytest installed; OUT.md: the text of a report to file upstream, the test beside it "
        "(docs/findings.md)",
    )
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
        help="memory cap of the worker (default: the engine's adapter's)",
    )
    engine.add_argument(
        "--in-process",
        action="store_true",
        help="run the engine in this process (trusted code only)",
    )


def engine_command(args: argparse.Namespace) -> int:
    """One path for every engine: its adapter sets it up, the core runs and judges it."""
    name = args.engine
    if args.deprecated_engine:
        old = args.deprecated_engine
        print(
            f"schedcheck engine: --{old} is deprecated; use --engine {old} (the next version "
            f"drops --{old})",
            file=sys.stderr,
        )
        if name not in (None, old):
            print(f"schedcheck engine: --{old} and --engine {name} disagree", file=sys.stderr)
            return faults.USAGE
        name = old
    name = name or registry.DEFAULT
    try:
        adapter = registry.adapter(name)
        given = [o for o in ENGINE_OPTIONS if getattr(args, o)]  # None, or [] for --config
        foreign = [ENGINE_OPTIONS[o] for o in given if o not in adapter.options]
        if foreign:
            raise SetupError(
                f"{', '.join(foreign)}: not an option of {adapter.title}'s adapter "
                f"(--engine {name})"
            )
        setup = adapter.setup(args.path, args)
        checks = active(frozenset(args.off), frozenset(args.on) | adapter.policies_on)
        # a usage error before it starts
        narrowed(drawn(adapter.features, args.features, adapter.title), args)
    except (SetupError, ValueError) as e:
        print(f"schedcheck engine: {e}", file=sys.stderr)
        return faults.USAGE
    options = [
        *([] if name == registry.DEFAULT else ["--engine", name]),
        *setup.options,
        *(f"--off={c}" for c in args.off),
        *(f"--on={c}" for c in args.on),
    ]
    if args.prefill:
        options.append(f"--prefill={args.prefill}")
    shown = adapter.shown(setup)
    engine: IsolatedEngine | LocalEngine
    try:
        if args.in_process:
            engine = LocalEngine(adapter, setup)
        else:  # its code runs in its worker only, the import of its modules too
            memory = (args.memory_mb or adapter.memory_mb) << 20
            limits = Limits(call_timeout=args.call_timeout, memory=memory)
            engine = IsolatedEngine(adapter, setup, limits)
    except CheckerError:
        raise  # ours (the worker did not start, our driver failed): exit 3
    except SubmissionError as e:  # it did not load in its worker
        return adapter.not_loaded(shown, str(e))
    except Exception as e:  # its import raised here (--in-process): the engine's, not ours
        return adapter.not_loaded(shown, f"{type(e).__name__}: {e}")
    try:
        setup = adapter.settle(setup, engine.run)
    except BaseException:
        engine.stop()
        raise
    engine.use(setup)
    try:
        features = narrowed(
            drawn(setup.features(adapter.features), args.features, adapter.title), args
        )
    except ValueError as e:  # this release lacks what the options ask
        engine.stop()
        print(f"schedcheck engine: {e}", file=sys.stderr)
        return faults.USAGE
    if args.features:
        options.append(f"--features={args.features}")
    for option in ("connector", "load_failure"):
        if getattr(args, option, None):
            options.append(f"--{option.replace('_', '-')}={getattr(args, option)}")
    exporter = None
    if args.export:
        rerun = " ".join(shlex.quote(x) for x in [args.path or "", *options] if x)
        exporter = partial(export_to, adapter, setup, shown, args.export, rerun=rerun)
    print(f"engine: {shown}")
    for line in adapter.header(setup):
        print(line)
    if features.drafts:
        where = f" (modes {', '.join(features.draft_modes)})" if features.draft_modes else ""
        print(
            f"features: spec, up to {features.drafts} drafts a step{where}; drafters: "
            + ", ".join(
                kind + (f" (only {', '.join(modes)})" if modes else "")
                for kind, modes in features.drafters
            )
            + ("; draft lengths by batch size (drawn)" if features.draft_schedules else "")
        )
    print(f"checks: {' '.join(checks)}" + _switched(checks, adapter.policies_on))
    print(f"isolation: {engine.isolation} ({LEVELS[engine.isolation]})")
    try:
        if args.replay:
            return replay(
                engine,
                shown,
                args.replay,
                checks,
                features,
                setup.modes,
                setup.block_sizes,
                args.html,
                exporter,
            )
        smallest = features.block_sizes[0]
        chunked, how = adapter.prefill(lambda: chunks_prefills(engine, smallest), args.prefill)
        if how is not None:
            print(how)
        found = search_engine(engine, args.examples, checks, chunked, features, setup.modes)
    except Undrivable as e:
        print(f"schedcheck engine: {adapter.undrivable(setup, str(e))}", file=sys.stderr)
        return faults.USAGE
    finally:
        engine.stop()
    reached = labels(features, setup.modes, setup.reaches)
    return conclude(args, shown, options, found, reached, checks, exporter)


# what a server is told of scheduling, and its clients' requests (issue 52), each a Features
# flag: its name on the command line, the field, and in words
SCHEDULING = (
    ("policies", "policies", "scheduling policies beside fcfs and priority"),
    ("priority-preemption", "preempt_gap", "preemption for priority"),
    ("priority-retraction", "retract_by_priority", "retraction by priority"),
    ("mixed", "mixed", "mixed chunks as a choice"),
    ("queue-limit", "queue_limit", "queue limit"),
    ("streams", "streams", "clients streamed token by token"),
    ("pressure", "pressure", "decode-pressure workloads"),
    ("namespaces", "namespaces", "cache namespaces"),
    ("logprobs", "prompt_logprobs", "prompt logprobs"),
    ("adapters", "adapters", "LoRA adapters"),
    ("embeds", "embeds", "prompts carrying embeddings"),
)
FEATURES = ("spec", "connector", "sessions", "hybrid", *(name for name, _, _ in SCHEDULING))
"""What --features names: spec, speculative decoding (Features.drafts); connector, a KV
connector's transfers (Features.connectors); sessions, streaming-input sessions
(Features.sessions); hybrid, hybrid models' KV cache groups (Features.layers); and the
scheduling a server is told and its clients ask (SCHEDULING: Features.policies,
preempt_gap, retract_by_priority, mixed, queue_limit, streams, pressure, namespaces,
prompt_logprobs, adapters, embeds)."""


def drawn(features: Features, asked: str | None, title: str) -> Features:
    """The features a search draws: the engine's own, speculative decoding included where
    its adapter drives it (in a share of the workloads: strategies.engine_workloads), unless
    --features says otherwise (`none`: nothing beyond the engine's plain workloads; `spec`:
    speculative decoding, which the engine must drive). ValueError for a name that is none,
    or a feature the engine's adapter does not drive."""
    names = [n.strip() for n in (asked or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in (*FEATURES, "none")]
    if unknown:
        raise ValueError(
            f"--features {asked}: {unknown[0]!r} is no feature ({', '.join(FEATURES)}, or none)"
        )
    if "spec" in names and not features.drafts:
        raise ValueError(
            f"--features spec: schedcheck does not drive {title}'s speculative decoding"
        )
    if "connector" in names and not features.connectors:
        raise ValueError(
            f"--features connector: schedcheck drives no KV connector of {title}'s (or this "
            "release registers none by module path)"
        )
    if not wants("spec", asked):
        features = replace(features, drafts=0)
    if "sessions" in names and not features.sessions:
        raise ValueError(
            f"--features sessions: schedcheck drives no streaming-input sessions of {title}'s "
            "(or this release has none)"
        )
    if not wants("connector", asked):
        features = replace(features, connectors=(), load_failures=())
    if not wants("sessions", asked):
        features = replace(features, sessions=0)
    if "hybrid" in names and not features.layers:
        raise ValueError(
            f"--features hybrid: schedcheck drives no hybrid model of {title}'s (or this "
            "release has no hybrid KV cache manager it lays out)"
        )
    if not wants("hybrid", asked):
        features = replace(features, layers=())
    for name, field, words in SCHEDULING:
        if name in names and not getattr(features, field):
            raise ValueError(f"--features {name}: schedcheck draws no {words} for {title}")
        if not wants(name, asked):
            features = _without(features, field)
    return features


def narrowed(features: Features, args: argparse.Namespace) -> Features:
    """The connectors, failed-load policies and hybrid models' kinds of layer --connector,
    --load-failure and --layers keep (each one the features have; ValueError naming the
    option and the value otherwise)."""
    for option, field in (
        ("connector", "connectors"),
        ("load_failure", "load_failures"),
        ("layers", "layers"),
    ):
        asked = getattr(args, option, None)
        if not asked:
            continue
        names = [n.strip() for n in asked.split(",") if n.strip()]
        have = getattr(features, field)
        missing = [n for n in names if n not in have]
        if missing or not names:
            flag = "--" + option.replace("_", "-")
            raise ValueError(
                f"{flag} {asked}: {missing[0] if missing else 'nothing'!r} is not drawn here "
                f"(this run has: {', '.join(have) or f'none: {_drawn_by[field]}, where the '}"
                + ("" if have else "engine has one")
                + ")"
            )
        kept = tuple(n for n in have if n in names)
        if field == "connectors":
            features = replace(features, connectors=kept)
        elif field == "load_failures":
            features = replace(features, load_failures=kept)
        else:
            features = replace(features, layers=kept)
    return features


def _without(features: Features, field: str) -> Features:
    """`features` with one of SCHEDULING's fields off (policies: none; the others False)."""
    off: dict[str, Any] = {field: () if field == "policies" else False}
    return replace(features, **off)


_drawn_by = {
    "connectors": "--features connector",
    "load_failures": "--features connector",
    "layers": "--features hybrid",
}


def conclude(
    args: argparse.Namespace,
    shown: str,
    options: list[str],
    found: Search,
    labels: tuple[str, ...],
    checks: list[str],
    exporter: Callable[[EngineVerdict, str], None] | None = None,
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
    leave(verdict, str(saved), args.html, exporter)
    return faults.FAIL


def leave(
    verdict: EngineVerdict,
    saved: str,
    html: str | None,
    exporter: Callable[[EngineVerdict, str], None] | None,
) -> None:
    """What a failure leaves behind besides its report and saved workload: its page
    (--html), its test in the engine's idiom (--export)."""
    if html:
        Path(html).write_text(engine_page(verdict))
        print(f"the failing trace, drawn: {html}")
    if exporter is not None:
        exporter(verdict, saved)


def export_to(
    adapter: Adapter,
    setup: EngineSetup,
    shown: str,
    out: str,
    verdict: EngineVerdict,
    saved: str,
    rerun: str = "",
) -> None:
    """Write the failure as a test in the engine's own idiom (engine/export.py), or say why
    none is written: the verdict stands either way. OUT.md: the text of an upstream report
    instead (with the test beside it, OUT.py, where one is written)."""
    again = f"schedcheck engine {rerun} --replay {saved}"
    rendered = adapter.render(setup, verdict.trace)
    if out.endswith(".md"):
        test = out[: -len(".md")] + ".py"
        export_to(adapter, setup, shown, test, verdict, saved, rerun)
        written = None if isinstance(rendered, str) or not Path(test).exists() else test
        Path(out).write_text(issue_text(verdict, shown, again, written))
        print(f"the report to file upstream: {out}")
        return
    try:
        if isinstance(rendered, str):
            raise ValueError(rendered)
        text = export_test(verdict, rendered, shown, again)
    except ValueError as e:
        print(f"schedcheck engine: not exported: {e}", file=sys.stderr)
        return
    Path(out).write_text(text)
    print(f"exported as a test that needs only {rendered.engine} and pytest: {out}")


def unsupported(
    workload: EngineWorkload,
    features: Features,
    modes: tuple[str, ...],
    sizes: tuple[int, ...] = (),
) -> list[str]:
    """What a saved workload asks of the engine that its adapter does not have (none of its
    own workloads draws it): said, never silently left out."""
    has = {
        "aborts": features.aborts or not any(r.abort for r in workload.requests),
        "stop tokens": features.stops or not any(r.stop for r in workload.requests),
        "priorities": features.priorities
        or (workload.config.policy == "fcfs" and not any(r.priority for r in workload.requests)),
        "prefix-cache resets": features.resets or not workload.resets,
        "a max_model_len that caps requests": features.caps or not workload.config.max_model_len,
        "steps the device finishes early": features.timing or not workload.early,
        "aborts that land during a step": features.timing
        or not any(r.abort_in_step for r in workload.requests),
        "a schedule_conservativeness": features.conservativeness
        or workload.config.conservativeness == 1.0,
        "a request that ignores eos": features.ignore_eos
        or not any(r.ignore_eos for r in workload.requests),
        "stop tokens on a request that ignores eos": features.stops_when_ignoring_eos
        or not any(r.stop and r.ignore_eos for r in workload.requests),
        f"the {workload.config.policy} policy": workload.config.policy in ("fcfs", "priority")
        or workload.config.policy in features.policies,
        "preemption for priority": features.preempt_gap or workload.config.preempt_gap < 0,
        "retraction by priority": features.retract_by_priority
        or not workload.config.retract_by_priority,
        "mixed steps as a choice": features.mixed or not workload.config.mixed,
        "a queue limit": features.queue_limit or not workload.config.max_queued,
        "clients streamed token by token": features.streams
        or not any(r.stream for r in workload.requests),
        "cache namespaces": features.namespaces or not any(r.namespace for r in workload.requests),
        "prompt logprobs": features.prompt_logprobs
        or not any(r.logprobs_from >= 0 for r in workload.requests),
        "LoRA adapters": features.adapters or not workload.config.max_adapters,
        "prompts carrying embeddings": features.embeds
        or not any(r.embeds for r in workload.requests),
    }
    found = [
        f"{what}, which this engine's adapter does not drive" for what, ok in has.items() if not ok
    ]
    if sizes and workload.config.block_size not in sizes:
        found.append(
            f"block size {workload.config.block_size}, which this setup does not run with (it "
            f"runs with {', '.join(map(str, sizes))})"
        )
    if workload.drafts and not features.drafts:
        found.append("speculative decoding, which this run does not draw (--features spec)")
    if any(r.session for r in workload.requests) and not features.sessions:
        found.append(
            "streaming-input sessions, which this run does not draw (--features sessions, "
            "where the release has them)"
        )
    if workload.connector and workload.connector not in features.connectors:
        found.append(
            f"the {workload.connector} KV connector, which this run does not draw "
            "(--features connector, where the release has it)"
        )
    if (
        workload.connector
        and any(r.load_fails for r in workload.requests)
        and (workload.load_failure not in features.load_failures)
    ):
        found.append(
            f"failed loads under policy {workload.load_failure}, which this run does not draw"
        )
    if workload.draft_schedule and not (features.drafts and features.draft_schedules):
        found.append("a draft schedule by batch size, which this run does not draw")
    drafters = dict(features.drafters)
    if workload.drafts and features.drafts and workload.drafter not in drafters:
        found.append(
            f"a {workload.drafter} drafter, which this run does not draw (it draws "
            f"{', '.join(drafters) or 'none'})"
        )
    mode = workload.config.mode
    its_modes = drafters.get(workload.drafter) or features.draft_modes
    if workload.drafts and mode in its_modes:
        pass  # speculative decoding's own mode
    elif workload.drafts and mode and its_modes and mode in features.draft_modes:
        found.append(f"mode {mode!r} with a {workload.drafter} drafter, which this release refuses")
    elif workload.drafts and mode and its_modes:
        found.append(
            f"mode {mode!r} with drafts: this engine's speculative decoding runs in "
            f"{', '.join(its_modes)} alone"
        )
    elif mode and mode not in modes:
        found.append(f"mode {mode!r}, which this run does not have (it has {', '.join(modes)})")
    return found


def _switched(checks: list[str], on_for_it: frozenset[str]) -> str:
    """What the checks line adds: the policies this run has off that are on by default for
    the engine, and those it could switch on."""
    on = {c for c, by_default in POLICIES.items() if by_default} | on_for_it
    off = [c for c in POLICIES if c in on and c not in checks]
    available = [c for c in POLICIES if c not in on and c not in checks]
    words = [
        f"policy off: {' '.join(off)}" if off else "",
        f"policy available: {' '.join(available)} (--on)" if available else "",
    ]
    return "".join(f"; {w}" for w in words if w)


def replay(
    engine: Runs,
    root: str,
    files: list[str],
    checks: list[str],
    features: Features = PLAIN,
    modes: tuple[str, ...] = ("",),
    sizes: tuple[int, ...] = (),
    html: str | None = None,
    exporter: Callable[[EngineVerdict, str], None] | None = None,
) -> int:
    """Run each saved workload; the first that fails is the verdict (drawn into `html`,
    exported by `exporter`)."""
    try:
        loaded = [(f, EngineWorkload.from_json(Path(f).read_text())) for f in files]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"schedcheck engine: cannot read a saved workload: {e}", file=sys.stderr)
        return faults.USAGE
    for name, workload in loaded:
        problems = [
            *workload.problems(
                features.reserved,
                features.headroom,
                features.block_sizes[0],
                features.budget_in_blocks,
                features.state_budget,
            ),
            *unsupported(workload, features, modes, sizes),
        ]
        if problems:
            print(
                f"schedcheck engine: {name} is not valid input: {'; '.join(problems)}",
                file=sys.stderr,
            )
            return faults.USAGE
    for name, workload in loaded:
        verdict = verify_engine(engine, workload, checks)
        if not verdict.ok:
            print(f"FAIL {root}: on {name}\n\n{verdict.report()}")
            leave(verdict, name, html, exporter)
            return faults.FAIL
    print(f"PASS {root}: every check holds on {len(loaded)} saved workload(s)")
    if html:
        print(f"nothing drawn into {html}: no saved workload fails")
    return faults.PASS
