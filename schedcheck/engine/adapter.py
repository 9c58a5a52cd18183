"""What an engine's adapter provides: the one protocol every engine implements, and the
plain data it declares (docs/engines.md, "Another engine").

The core of `schedcheck engine` (the workloads, the run's skeleton, the checks E1-E12, the
search, the verdict, the command) names no engine: what differs between engines is what
an adapter declares here (its workload features, its traits, its policies on by default,
its memory and start-up needs) and the few things only it can do (read its setup from the
command line, build and drive its scheduler for one run). Adapters are found by name in
engine/registry.py, as pytest-xdist finds its schedulers and Hypothesis its providers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.traits import Traits

if TYPE_CHECKING:
    from schedcheck.engine.export import Rendered
from schedcheck.engine.workload import NO_HEADROOM, EngineWorkload, Headroom

__all__ = [
    "PLAIN",
    "Adapter",
    "EngineSetup",
    "Features",
    "Loaded",
    "SetupError",
    "wants",
]

Beat = Callable[[int, str], None]  # the worker's heartbeat: (step, call) before each call


class SetupError(ValueError):
    """The engine cannot be set up as given: a usage error (exit 2), never a verdict."""


@dataclass(frozen=True)
class Features:
    """Which workload features an engine has: what its workloads draw
    (engine/strategies.py). The defaults are the smallest engine's (nano-vllm's)."""

    priorities: bool = False  # the priority policy, with a priority per request
    stops: bool = False  # stop token ids besides eos
    aborts: bool = False  # requests aborted between steps
    max_tokens: int = 5  # the longest output a request asks for
    pool_slack: int = 6  # blocks drawn above the largest request's need (fewer: tighter)
    reserved: int = 0  # blocks the pool keeps out of play (vLLM's null block)
    resets: bool = False  # the prefix cache cleared between steps, requests running
    caps: bool = False  # a max_model_len below some requests' prompt and max_tokens
    # steps the device finishes before the engine core looks; aborts landing during a step
    timing: bool = False
    # the block (page) sizes drawn: nano-vllm never runs with 1 (its Config asserts a
    # multiple of 256, and `len(seq) % block_size == 1` never fires at 1); SGLang's default
    # page is 1
    block_sizes: tuple[int, int] = (2, 4)
    block_step: int = 1  # the sizes drawn are those of the range that are multiples of it
    headroom: Headroom = NO_HEADROOM  # what its intake asks of the pool beyond a request's KV
    # its token budget is a whole number of blocks (SGLang's launcher asserts
    # chunked_prefill_size divisible by page_size)
    budget_in_blocks: bool = False
    # a stop token ends a request that ignores eos (vLLM); SGLang's ignore_eos ignores its
    # stop tokens too (`_check_token_based_finish` returns first), so none are drawn there
    stops_when_ignoring_eos: bool = True
    conservativeness: bool = False  # SGLang's schedule_conservativeness, drawn below 1
    # requests that ignore eos (SamplingParams.ignore_eos): a fork's SamplingParams may
    # not have it (EngineSetup.lacks), and then no request asks for it
    ignore_eos: bool = True
    # speculative decoding (issue 49): the most draft tokens a step proposes per request
    # (0: none drawn), and the modes it is driven in (empty: every mode; a workload drawing
    # drafts runs in the first where its own is not one of them)
    drafts: int = 0
    draft_modes: tuple[str, ...] = ()
    # the kinds of drafter drawn (workload.DRAFTERS), each with the draft modes it runs in
    # (empty: every one of draft_modes)
    drafters: tuple[tuple[str, tuple[str, ...]], ...] = (("lookup", ()),)
    draft_schedules: bool = False  # dynamic draft lengths by batch size (workload.draft_schedule)
    # KV connectors (issue 50; workload.CONNECTORS) its workloads run with, and what it does
    # with a failed load (workload.LOAD_FAILURES); empty: none drawn
    connectors: tuple[str, ...] = ()
    load_failures: tuple[str, ...] = ()
    # streaming-input sessions (issue 50): requests whose client sends continuation chunks
    # under the same id (EngineRequest.chunks), at most this many in a workload (0: none)
    sessions: int = 0
    # hybrid models (issue 51; layers.KINDS): the kinds of layer beside full attention a
    # workload's model may have, a KV cache group each (empty: none drawn)
    layers: tuple[str, ...] = ()
    # a model with a state layer (layers.STATE_KINDS) is run with a token budget of a
    # block at least (vLLM 0.22 to 0.26's config asserts it in Mamba's align mode)
    state_budget: bool = False
    # (kind of layer, drafter) pairs the engine never runs with its hybrid KV cache
    # manager, and so never draws together (vLLM turns the manager off for chunked local
    # attention with a drafter on the target's hidden states)
    apart: tuple[tuple[str, str], ...] = ()
    # scheduling policies drawn beside fcfs and priority (workload.POLICIES: SGLang's lpm,
    # dfs-weight, lof), in a share of the workloads; empty: none
    policies: tuple[str, ...] = ()
    # under the priority policy, preemption of running requests for a waiting one of a
    # better priority (EngineConfig.preempt_gap)
    preempt_gap: bool = False
    # under the priority policy, retraction by priority as a choice
    # (EngineConfig.retract_by_priority)
    retract_by_priority: bool = False
    mixed: bool = False  # a prefill chunk beside decodes is a choice (EngineConfig.mixed)
    queue_limit: bool = False  # a limit on the waiting queue (EngineConfig.max_queued)
    streams: bool = False  # clients streamed token by token or not (EngineRequest.stream)
    # requests sent under cache namespaces of their own (EngineRequest.namespace), in a
    # share of the workloads
    namespaces: bool = False
    # requests whose clients ask their prompt's logprobs from a position on
    # (EngineRequest.logprobs_from), in a share of the workloads without drafts
    prompt_logprobs: bool = False
    # a server of LoRA adapters (EngineConfig.max_adapters), requests under one of two
    # adapters or the base model (EngineRequest.adapter), in a share of the workloads
    # without drafts
    adapters: bool = False
    # requests whose prompts carry embeddings of their own (EngineRequest.embeds), in a
    # share of the workloads without drafts
    embeds: bool = False
    # aborts aimed between two chunks of a prefill, in a share of the workloads (an engine
    # that parks a chunked request between steps: SGLang's chunked_req)
    chunk_aborts: bool = False
    # decode pressure, in a share of the workloads: pools that hold one request's whole
    # output but not every running one's, long outputs, eos rare, an admission that counts
    # a fraction of what running requests will still decode (schedule_conservativeness
    # below 1): an engine that admits so has to preempt as outputs grow (SGLang's
    # retraction)
    pressure: bool = False


PLAIN = Features()
"""The features of an engine that declares none beyond the smallest's."""


@dataclass(frozen=True)
class EngineSetup:
    """Everything decided about an engine before it runs, as plain data (sent to its worker
    with every run, printed in the report). The adapter decides what each field means."""

    root: str  # the folder holding the engine's package
    package: str  # the package's name
    runner: str  # which model runner's rules, in the adapter's own names
    runner_from: str  # how it was decided, in words
    config: dict[str, Any] = field(default_factory=dict)  # config fields with a value
    unset: tuple[str, ...] = ()  # config fields with none (read: a usage error naming it)
    config_from: str = ""
    options: tuple[str, ...] = ()  # the command-line options that reproduce this setup
    # the modes its workloads draw from (EngineConfig.mode), the first the default; ("",)
    # for an engine of one mode
    modes: tuple[str, ...] = ("",)
    # what its runs can reach beyond what its features say (engine/strategies.py's labels,
    # such as a preemption with a step in flight, where a mode overlaps steps)
    reaches: tuple[str, ...] = ()
    # the block sizes this setup runs with, where fewer than its adapter's features say
    # (SGLang before 0.5.22: pages of 1, its paged allocator having no CPU path); () all
    block_sizes: tuple[int, ...] = ()
    # features of its adapter's (Features' flags, by name) this engine does not have: a
    # fork's SamplingParams without ignore_eos
    lacks: tuple[str, ...] = ()
    # what trial runs showed before the search (Adapter.settle), in the adapter's words:
    # its header prints them
    settled: tuple[str, ...] = ()
    # the modes its speculative decoding is driven in, where not every mode it has (vLLM:
    # its sync modes, so far): Features.draft_modes
    draft_modes: tuple[str, ...] = ()
    # the kinds of drafter its release runs, each with the draft modes it runs in (empty:
    # all), as trial runs showed (Adapter.settle); () for its adapter's: Features.drafters
    drafters: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the KV connectors and load-failure policies this release runs with (Features'
    # connectors and load_failures, narrowed to these; () none)
    connectors: tuple[str, ...] = ()
    load_failures: tuple[str, ...] = ()
    sessions: bool = False  # it has streaming-input sessions (Features.sessions, narrowed)
    layers: tuple[str, ...] = ()  # the kinds of layer its hybrid models have (Features.layers)
    state_budget: bool = False  # Features.state_budget: its state layers ask a block of budget
    # the scheduling policies of its adapter's (Features.policies) this release has not
    lacks_policies: tuple[str, ...] = ()

    def features(self, features: Features) -> Features:
        """Its adapter's features, narrowed to what this setup runs with."""
        if self.block_sizes:
            low, high = min(self.block_sizes), max(self.block_sizes)
            step = 1
            if len(self.block_sizes) > 1 and tuple(sorted(self.block_sizes)) != tuple(
                range(low, high + 1)
            ):
                step = low  # a size and its multiples (a fork's own assert: settle.py)
                if tuple(sorted(self.block_sizes)) != tuple(range(low, high + 1, step)):
                    raise ValueError(f"block sizes {self.block_sizes}: not a range or multiples")
            features = replace(features, block_sizes=(low, high), block_step=step)
        if self.draft_modes:
            features = replace(features, draft_modes=self.draft_modes)
        if self.drafters:
            features = replace(features, drafters=self.drafters)
        features = replace(
            features,
            connectors=tuple(c for c in features.connectors if c in self.connectors),
            load_failures=tuple(p for p in features.load_failures if p in self.load_failures),
            sessions=features.sessions if self.sessions else 0,
            layers=tuple(k for k in features.layers if k in self.layers),
            state_budget=self.state_budget,
            policies=tuple(p for p in features.policies if p not in self.lacks_policies),
        )
        lacked: dict[str, Any] = dict.fromkeys(self.lacks, False)
        return replace(features, **lacked)

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "package": self.package,
            "runner": self.runner,
            "runner_from": self.runner_from,
            "config": self.config,
            "unset": list(self.unset),
            "config_from": self.config_from,
            "options": list(self.options),
            "modes": list(self.modes),
            "reaches": list(self.reaches),
            "block_sizes": list(self.block_sizes),
            "lacks": list(self.lacks),
            "settled": list(self.settled),
            "draft_modes": list(self.draft_modes),
            "drafters": [[kind, list(modes)] for kind, modes in self.drafters],
            "connectors": list(self.connectors),
            "load_failures": list(self.load_failures),
            "sessions": self.sessions,
            "layers": list(self.layers),
            "state_budget": self.state_budget,
            "lacks_policies": list(self.lacks_policies),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineSetup:
        return cls(
            str(data["root"]),
            str(data["package"]),
            str(data["runner"]),
            str(data["runner_from"]),
            dict(data["config"]),
            tuple(map(str, data["unset"])),
            str(data["config_from"]),
            tuple(map(str, data["options"])),
            tuple(map(str, data.get("modes", ("",)))),
            tuple(map(str, data.get("reaches", ()))),
            tuple(map(int, data.get("block_sizes", ()))),
            tuple(map(str, data.get("lacks", ()))),
            tuple(map(str, data.get("settled", ()))),
            tuple(map(str, data.get("draft_modes", ()))),
            tuple((str(kind), tuple(map(str, modes))) for kind, modes in data.get("drafters", ())),
            tuple(map(str, data.get("connectors", ()))),
            tuple(map(str, data.get("load_failures", ()))),
            bool(data.get("sessions", False)),
            tuple(map(str, data.get("layers", ()))),
            bool(data.get("state_budget", False)),
            tuple(map(str, data.get("lacks_policies", ()))),
        )

    @property
    def folder(self) -> Path:
        return Path(self.root) / self.package


class Loaded(Protocol):
    """An engine loaded in the process that drives it (this one, or its worker)."""

    def run(self, workload: EngineWorkload, setup: EngineSetup, beat: Beat | None) -> EngineTrace:
        """Drive `workload` through a fresh scheduler: the run's trace, plain values only."""
        ...


class Adapter(Protocol):
    """One engine's account of its API. Everything the core does with an engine goes
    through these members; none of them is called with an engine's name."""

    name: str  # the registry's name: `schedcheck engine --engine NAME`
    title: str  # how messages name the engine ("nano-vllm", "vLLM")
    features: Features
    policies_on: frozenset[str]  # policy checks on by default for it (engine/checks.py)
    options: frozenset[str]  # the engine-specific options of the command it takes
    memory_mb: int  # its worker's memory cap, unless --memory-mb says otherwise
    start_timeout: float  # seconds its worker may take to load it
    worker: str  # the module its worker runs (`python -m WORKER`), one line: serve(ADAPTER)
    preload: tuple[str, ...]  # modules its worker imports before the box (none after it)

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        """What to check, from the command line (SetupError: a usage error, exit 2)."""
        ...

    def traits(self, setup: EngineSetup) -> Traits: ...

    def header(self, setup: EngineSetup) -> list[str]:
        """The report's lines on what was read of it (config, runner), after `engine:`."""
        ...

    def shown(self, setup: EngineSetup) -> str:
        """How the report names this engine (its folder, its release)."""
        ...

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        """What its worker's box holds a copy of (its PATH): the engine's folder, or a file
        written into `scratch` (a folder of the run's, removed when it stops)."""
        ...

    def calls(self, workload: EngineWorkload) -> int:
        """How many calls into the engine one run of `workload` makes at most (a worker
        that goes on past them is stopped)."""
        ...

    def before_box(self, path: str) -> Any:
        """In its worker, before the box: what must be read from disk (`path`: the box's
        copy of box()). Returns engine/worker.py's LoadError where the engine's own code
        failed; an exception raised here is ours."""
        ...

    def in_box(self, path: str, read: Any) -> Loaded:
        """In its worker, inside the box: the engine loaded, its own code running there."""
        ...

    def load(self, setup: EngineSetup) -> Loaded:
        """The engine loaded in this process (--in-process: trusted code only)."""
        ...

    def prefill(self, probe: Callable[[], bool], asked: str | None) -> tuple[bool, str | None]:
        """Whether it chunks prefills, and the report's line saying how that was decided
        (None: no line). `probe` runs the core's probe; `asked` is --prefill."""
        ...

    def not_loaded(self, shown: str, message: str) -> int:
        """The exit status (and the message printed) when it does not load: its own failure
        (E6, exit 1) or the user's setup (exit 2)."""
        ...

    def undrivable(self, setup: EngineSetup, why: str) -> str:
        """The usage error's words when a run finds it cannot be driven."""
        ...

    def render(self, setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
        """Its part of a test that reproduces `trace`'s failure with only the engine and
        pytest (engine/export.py: its imports, building it, adding a request, a step, its
        pool, its outputs), or why it writes none."""
        ...

    def settle(
        self, setup: EngineSetup, run: Callable[[EngineWorkload], EngineTrace]
    ) -> EngineSetup:
        """`setup` as trial runs (`run`, in its worker) show it can be run, once it is loaded:
        what its text could not tell (nano-vllm: the block sizes a fork accepts, its own
        step given up for schedcheck's loop where it cannot be built); its header says
        what changed (EngineSetup.settled)."""
        ...


def wants(feature: str, asked: str | None) -> bool:
    """Whether --features `asked` draws `feature`: by default (no --features) every one the
    engine drives; with --features, those it names."""
    names = [n.strip() for n in (asked or "").split(",") if n.strip()]
    return not names or feature in names
