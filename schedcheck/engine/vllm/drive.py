"""Drive vLLM's scheduler through an engine workload, as its engine core does; copy plain
values out.

Each step, as vLLM's engine core takes it in the run's mode (modes.py): add the requests
arriving now, abort those whose time has come (`finish_requests` with FINISHED_ABORTED, one
id per call), clear the prefix cache where the workload says (`reset_prefix_cache` with the
running requests preempted); then `EngineCore.step`: `schedule()`, the simulated model
runner computes it (runners.py: its own copy of each request, built from the
SchedulerOutputs alone, as a runner on another process has it), `update_from_output()`
with the tokens it sampled. In async mode `EngineCore.step_with_batch_queue` with a queue
of depth two: step N+1 is scheduled and computed before step N's update, whose tokens the
scheduler holds as placeholders until then (`num_output_placeholders`).

The trace holds, per step, the scheduler's own view of each scheduled request (its tokens,
those in flight included; where its computation starts; its block ids in the KV cache
manager) as `scheduled`, what the runner computed on as `copies` (E8 and E12 compare the
two), the tokens sampled, and the block pool after the schedule and after the update that
follows it. The checks run on the trace elsewhere.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple, TypeVar

from schedcheck.engine.run import Run, Stop
from schedcheck.engine.runner import Runner
from schedcheck.engine.store import Jobs, Report, Worker, garbage
from schedcheck.engine.trace import (
    PAUSED,
    UNKNOWN,
    Block,
    Copy,
    EngineFailure,
    EngineStep,
    EngineTrace,
    Pool,
    Progress,
    Scheduled,
    Transfer,
)
from schedcheck.engine.traits import Traits
from schedcheck.engine.vllm.build import Build, Hashes, NoSuchMode
from schedcheck.engine.vllm.modes import Mode
from schedcheck.engine.vllm.offloading import Watch
from schedcheck.engine.vllm.runners import PROTOCOLS, ShortOutput
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload

_T = TypeVar("_T")

RUNNER = Runner(
    "vllm",
    "num_computed_tokens",
    "count",
    "num_scheduled_tokens",
    False,
    "mixed",
    "vLLM's GPU model runner, v1 and v2 alike (positions num_computed_tokens + "
    "arange(num_scheduled_tokens), slots through the block table)",
)
TRAITS = Traits(RUNNER, hashes_name_prefixes=True, update_call="update_from_output()")
"""vLLM's: its v1 runner's rule; a block's hash names its whole prefix, and the prefix
cache's index must agree with the blocks (E2, E3)."""


class Core(NamedTuple):
    """What the release's engine core does that its scheduler does not say (modes.Release)."""

    looks_at_device: bool = False  # updates a batch at once where the device finished it
    eager_aborts: bool = False  # takes an abort landing during a step before its update
    # with speculative decoding in sync mode, its v2 runner tells the scheduler the draft
    # width of every request it holds drafts for (0.34), not only the last batch's
    every_draft: bool = False


PLAIN_CORE = Core()


def run_vllm(
    build: Build,
    workload: EngineWorkload,
    mode: Mode,
    core: Core = PLAIN_CORE,
    beat: Callable[[int, str], None] | None = None,
) -> EngineTrace:
    """Drive `workload` through a fresh vLLM Scheduler in `mode` (the workload's own where
    it names one), as the release's engine core does (`core`); `beat(step, call)` before
    each call."""
    if workload.config.mode:
        mode = Mode.parse(workload.config.mode)
    run = Run(workload, TRAITS, beat)
    return run.play(VllmDriver(build, run, mode, core))


# Runs through the scheduler's paths before the box, since vLLM imports some modules only
# when a path is first taken: under fcfs, a prefix hit, a whole-prompt hit, chunked
# prefill, a preemption, an abort and a stop token (read off observe(), checked once by
# hand); under priority, its waiting queue and the same requests, and a prefix-cache reset.
WARM = tuple(
    EngineWorkload(
        EngineConfig(5, 2, 2, 3, policy),
        (
            EngineRequest("w1", (1, 2, 1, 2, 1), 4, True, 1, 1),
            EngineRequest("w2", (1, 2, 1, 1), 4, False, 1, 0, (2,)),
            EngineRequest("w3", (1, 2), 3, False, 2, 0, (), 3),
        ),
        2,
        resets=(3,) if policy == "priority" else (),
    )
    for policy in ("fcfs", "priority")
)


def drafting(drafter: str, mode: str = "", base: EngineWorkload = WARM[0]) -> EngineWorkload:
    """`base` (one of WARM) drafting with `drafter`, in `mode` where one is named: room for
    its drafter's lookahead slots and a budget no release refuses for a drafter's input
    rows (a refusal of it says the drafter is not run in the mode, never the budget). The
    warm-up's drafting runs and the trial runs of Vllm.settle."""
    return replace(
        base,
        config=replace(base.config, num_blocks=12, max_num_batched_tokens=8, mode=mode),
        drafts=2,
        draft_miss_per_8=4,
        drafter=drafter,
    )


def connected(
    connector: str, base: EngineWorkload = WARM[0], failing: bool = True
) -> EngineWorkload:
    """`base` (one of WARM) with a KV connector: a store holding its first prompt's prefix,
    one request loading synchronously, one asynchronously with a block failing (where the
    release has a policy for a failed load: `failing`), one saved after two steps. The
    warm-up's connector runs: vLLM imports the connector (and its transfer code) when a
    Scheduler builds it, which in the box it could not (0.11 and 0.12 refused the failing
    block's warm-up, so never imported it, until 2026-12-05). No request is aborted: an
    abort is drawn by the search, where the engine's failure on it is a verdict with its
    workload (0.26.0's offloading connector dies on an abort of a request never scheduled,
    VLLM-22, which failed the warm-up and so the whole setup until 2026-12-05)."""
    w1, w2, w3 = base.requests
    w3 = replace(w3, abort=0, abort_in_step=False)
    if connector == "offloading":  # vLLM's own: its tier starts empty, it decides the loads
        return replace(
            base,
            config=replace(base.config, num_blocks=12),
            requests=(replace(w1, save=2), replace(w2, load=1), w3),
            connector=connector,
            offload_blocks=8,
        )
    return replace(
        base,
        config=replace(base.config, num_blocks=12),
        requests=(
            replace(w1, save=2),
            replace(w2, load=1, load_fails=(0,) if failing else ()),
            replace(w3, load=0),
        ),
        connector=connector,
        stored=(w1.prompt,),
    )


def in_session(base: EngineWorkload = WARM[0]) -> EngineWorkload:
    """`base` (one of WARM) with its first request a streaming-input session: a chunk sent
    while its turn runs, another after it stopped, closed after."""
    w1, *rest = base.requests
    session = replace(w1, chunks=((2, (1,)), (9, (2, 1))), close=11)
    need = session.peak_blocks(base.config.block_size) + 1
    config = replace(base.config, num_blocks=max(base.config.num_blocks, need))
    return replace(base, config=config, requests=(session, *rest))


def warm(
    build: Build, modes: list[Mode], connectors: tuple[str, ...] = (), sessions: bool = False
) -> None:
    """Run WARM through `build` in each of `modes`, and in each mode that drives drafts
    with each drafter the release has (its speculative decoding: SpeculativeConfig imports
    its method's module when built, and a draft model's config is read from disk now):
    vLLM's lazy imports happen now (before a box is entered), and a release whose API this
    driver does not fit is told now, as a usage error, not as a verdict on the first
    workload (RuntimeError naming what failed). A drafter the release refuses in a mode
    (its config's own refusal: Build.async_refusals) is no failure: it is not drawn there;
    nor is a drafting run that a check fails without an exception (a stuck scheduler, a
    count gone wrong): that is a verdict the search reports with a workload of its own, not
    a driver that does not fit (0.25.0 and 0.26.0 got stuck on VLLM-06 in async-v1 here,
    and were told "cannot be driven")."""
    build.prepare_drafters()
    drafts = [drafting(drafter, base=w) for drafter in build.drafters for w in WARM]
    transfers = [connected(c, failing=build.has_failure_policy()) for c in connectors]
    chunked = [in_session()] if sessions else []
    for mode in modes:
        for workload in (*WARM, *drafts, *transfers, *chunked):
            failure = run_vllm(build, workload, mode).failure
            features = workload.drafts or workload.connector or chunked
            if failure is None or (features and failure.check != "E6"):
                continue
            raise RuntimeError(
                f"vLLM {build.version} cannot be driven by schedcheck in mode {mode.name}: "
                f"a warm-up run failed at step {failure.step}, {failure.call}: "
                f"{failure.message}"
            )


class Batch(NamedTuple):
    """A step scheduled and computed, its update still to come (async mode: in flight)."""

    out: Any  # the SchedulerOutput
    order: list[str]
    sampled: dict[str, tuple[int, ...]]  # the tokens the runner kept, by request
    dropped: set[str]  # requests whose output vLLM drops (preempted by a prefix-cache reset)
    # the drafts the runner rejected, by request: positions the scheduler counts as computed
    # (and, async, in flight) until the update rolls them back
    rejected: dict[str, int]
    report: Report | None = None  # what its connector's worker reports with its output


class VllmDriver:
    """One run of vLLM's scheduler, its steps as its engine core takes them in the run's
    mode: one step at a time (sync: `EngineCore.step`), or with a batch queue of depth two
    (async: `EngineCore.step_with_batch_queue`)."""

    undrivable: tuple[type[BaseException], ...] = (NoSuchMode,)
    source = ""
    idle_call = "get_num_unfinished_requests()"
    # an empty step that changed nothing, with nothing left to arrive, is stuck for good
    stuck_is_e5 = True

    def __init__(self, build: Build, run: Run, mode: Mode, core: Core) -> None:
        self.build, self.run, self.workload, self.mode = build, run, run.workload, mode
        self.core = core
        self.landing: list[str] = []  # aborts landing during this step (the aborts_queue)
        self.again: list[str] = []  # the same aborts, from the input queue, after it
        self.requests: dict[str, Any] = {}  # name -> vLLM's Request, finished ones kept
        self.runner = PROTOCOLS[mode.protocol](mode.overlapped)
        self.depth = 2 if mode.overlapped else 1  # the engine core's batch queue
        self.queue: deque[Batch] = deque()  # oldest on the right, as vLLM's
        self.hashes: Hashes  # the hash function of the Scheduler built for this run
        # a KV connector's worker side (the simulated store's), where the workload has one;
        # its scheduler side is vLLM's connector object (`connector`)
        # (an offloading connector's moves KV in jobs)
        worker = Jobs if run.workload.connector == "offloading" else Worker
        self.worker = worker(run.workload) if run.workload.connector else None
        self.connector: Any = None
        self.delivered = False  # the last update gave the scheduler transfers that ended
        # each session's output as its client was streamed it, every turn's in turn
        self.sessions: dict[str, list[int]] = {
            r.name: [] for r in run.workload.requests if r.session
        }

    def unreadable(self, error: Exception) -> str:
        """This release keeps its state elsewhere than we read it (exit 2, naming what)."""
        return (
            f"vLLM {self.build.version}'s state could not be read as schedcheck reads it "
            f'({error!r}; docs/engines.md, "vLLM")'
        )

    def start(self) -> None:
        made = self.run.call("Scheduler()", lambda: self.build.scheduler(self.workload, self.mode))
        self.scheduler, self.hashes = made
        # a drafter's input rows per request in the step's budget, as its config says (0.34:
        # max_num_new_slots_for_drafting; none before): E13's room
        spec = getattr(self.scheduler.vllm_config, "speculative_config", None)
        if spec is not None:
            rows = int(getattr(spec, "max_num_new_slots_for_drafting", 0) or 0)
            # where the release takes a drafter's rows off the whole budget instead (0.2x's
            # max_num_scheduled_tokens), the budget it schedules within
            budget = int(getattr(self.scheduler, "max_num_scheduled_tokens", 0) or 0)
            configured = self.workload.config.max_num_batched_tokens
            reduced = 0 < budget < configured
            self.run.traits = replace(
                self.run.traits,
                draft_inputs=0 if reduced else rows,  # else per request scheduled (0.34)
                token_budget=budget if reduced else 0,
            )
        # what the engine core asks before it schedules (has_unfinished_requests before the
        # interface had has_requests)
        self.has_requests = getattr(
            self.scheduler, "has_requests", self.scheduler.has_unfinished_requests
        )
        if self.worker is not None:
            self.connector = self.run.read(
                "Scheduler()",
                lambda: _connector(
                    self.scheduler.get_kv_connector(), self.scheduler, self.workload
                ),
            )

    def idle(self) -> bool:
        """Whether the engine core would step no more: with a connector, while the
        scheduler has requests (finished ones whose blocks wait for a save too:
        has_requests), else while it counts unfinished ones."""
        if self.worker is not None:
            return not self.run.call("has_requests()", self.has_requests) and not self.queue
        count = self.scheduler.get_num_unfinished_requests
        return not self.run.call("get_num_unfinished_requests()", count) and not self.queue

    def transferring(self) -> bool:
        """A transfer still runs, or the worker's report of one's end is on its way to the
        scheduler, or was just given it, or the connector answered a lookup "not yet" this
        step (each changes what it schedules next, not the pool)."""
        if self.worker is None:
            return False
        told = any(b.report for b in self.queue)
        last = self.run.steps[-1].transfers if self.run.steps else ()
        waited = any(t.kind == "lookup" for t in last)
        return self.worker.busy or told or self.delivered or waited

    def lost(self) -> list[str]:
        return self.unfinished()

    def unfinished(self) -> list[str]:
        return [n for n, r in self.requests.items() if not r.is_finished()]

    def add(self, request: EngineRequest) -> None:
        call = self.run.call
        arrival = self.run.step + len(self.requests) / 1000  # arrival_time: order of adding
        made = call("Request()", lambda: self.build.request(self.scheduler, request, arrival))
        self.requests[request.name] = made
        call("add_request()", lambda: self.scheduler.add_request(made))

    def abort(self, request: EngineRequest) -> None:
        """finish_requests with FINISHED_ABORTED, one id per call, as the engine core does
        between steps; one that lands during the step, where the core takes aborts eagerly,
        just before the step's update (and again from its input queue after it: vLLM puts
        an abort on both queues, finish_requests being idempotent)."""
        if request.abort_in_step and self.core.eager_aborts:
            self.landing.append(request.name)
            return
        self.finish([request.name])

    def send_chunk(self, request: EngineRequest, chunk: tuple[int, ...]) -> None:
        """A session's next chunk, as the engine core hands it over between steps: another
        resumable Request of the same id, its prompt the chunk (applied at once to a paused
        session, queued behind a turn still running)."""
        arrival = self.run.step + len(self.requests) / 1000
        made = self.run.call(
            "Request()", lambda: self.build.request(self.scheduler, request, arrival, chunk)
        )
        self.run.call("add_request()", lambda: self.scheduler.add_request(made))

    def close_session(self, request: EngineRequest) -> None:
        """A session's client is done: a Request of the same id that is not resumable (its
        prompt never read: AsyncLLM sends `[0]`), which ends a paused session at once and a
        running one after its turn."""
        arrival = self.run.step + len(self.requests) / 1000
        made = self.run.call(
            "Request()",
            lambda: self.build.request(self.scheduler, request, arrival, (0,), resumable=False),
        )
        self.run.call("add_request()", lambda: self.scheduler.add_request(made))

    def finish(self, names: list[str]) -> None:
        for name in names:
            self.run.call("finish_requests()", partial(self.finished, name))

    def finished(self, name: str) -> None:
        self.scheduler.finish_requests(name, self.build.aborted())

    def reset(self) -> None:
        """reset_prefix_cache(reset_running_requests=True), as the engine core calls it
        between steps (pause_generation, the clear-cache endpoint): the running requests
        are preempted, and vLLM drops what they have in flight (`drop_stale_output`). A
        release before that argument clears the cache only where no request holds a block.

        The engine core runs it as a utility call, which answers the client with whatever
        it raises and goes on (`_invoke_utility_method`): a release that refuses to clear a
        cache while blocks are held by requests not running (a KV transfer's, a session's
        between turns: its RuntimeError, having preempted the running requests) has refused,
        not crashed."""

        def running() -> set[str]:
            return {str(r.request_id) for r in self.scheduler.running}

        before = self.run.read("reset_prefix_cache()", running)
        cleared = self.run.call("reset_prefix_cache()", self.refusable_reset)
        preempted = before - self.run.read("reset_prefix_cache()", running)
        if cleared or (cleared is None and preempted):
            for batch in self.queue:
                batch.dropped.update(before if cleared else preempted)

    def refusable_reset(self) -> bool | None:
        """The reset, as the engine core's utility call makes it: None where it raised an
        Exception (its failure goes to the client)."""
        try:
            return self.build.reset(self.scheduler)
        except Exception:  # reported to the client; the engine core goes on
            return None

    def step(self) -> None:
        """One call of the engine core's step: schedule (where it has requests) and compute;
        then update from the oldest batch, unless the queue has room for another and the
        core holds it (`holds`; vLLM's `step_with_batch_queue`; depth one: `step`)."""
        run = self.run
        self.finish(self.again)
        self.again = []
        scheduled = False
        if self.depth == 1 or run.call("has_requests()", self.has_requests):
            out = run.call("schedule()", self.scheduler.schedule)
            self.queue.appendleft(self.compute(out))
            scheduled = True
            total = run.read("schedule()", lambda: int(out.total_num_scheduled_tokens))
            if len(self.queue) < self.depth and self.holds(total):
                done = run.steps[-1]
                run.steps[-1] = replace(done, after_postprocess=done.after_schedule)
                # no update this step: an abort that landed is taken from the input queue,
                # before the next step
                self.again, self.landing = self.landing, []
                return
        if not scheduled:  # the queue drains: a step that only updates
            before = run.read("update_from_output()", self.pool)
            run.steps.append(EngineStep(run.step, False, (), (), (), before, None, False))
        self.update(self.queue.pop())

    def holds(self, total: int) -> bool:
        """Whether the engine core, its queue not full, returns without an update: while
        there is more to schedule (0.33); or, where it looks at the device (0.11 to 0.2x),
        while the batch it holds ran tokens and is not done yet (the workload's `early`
        steps are those the device finished first)."""
        if self.core.looks_at_device:
            return total > 0 and self.run.step not in self.workload.early
        return total > 0 or self.run.call("has_requests()", self.has_requests)

    def compute(self, out: Any) -> Batch:
        """The runner takes the SchedulerOutput and computes the step; the step as seen goes
        into the trace."""
        run, read = self.run, self.run.read
        read("schedule()", self.mark_stale)
        order = self.model_runner(lambda: self.runner.receive(out))
        views = read("schedule()", lambda: tuple(self.view(n, out) for n in order))
        seen = {v.name: v.token_ids for v in views}
        worker = self.worker
        if worker is not None:  # the transfers this step's metadata starts (a sync load ends)
            started, flush, sync = read("schedule()", lambda: self.started(out))
            worker.begin(run.step, started, flush, sync)
        told = self.told("schedule")
        tainted: list[str] = []

        def sample(name: str, copy: Copy, drafts: int) -> tuple[int, ...]:
            """The model attends to the KV cache for the positions before the step (the
            request's own tokens, where E2 holds) and computes on the runner's inputs; with
            drafts, it verifies them (EngineWorkload.verify)."""
            start, end = copy.num_cached or 0, (copy.num_cached or 0) + (copy.num_scheduled or 0)
            inputs = (*seen[name][:start], *(copy.token_ids or ())[start:end])
            if worker is not None and worker.computes(copy.block_table or (), start, end - start):
                tainted.append(name)  # it read garbage a failed load left: it says garbage
                right = self.workload.next_token(inputs[: len(inputs) - drafts])
                return (garbage(right, self.workload.vocab),)
            if drafts:
                return self.workload.verify(inputs[:-drafts], inputs[-drafts:])
            return (self.workload.next_token(inputs),)

        done = self.model_runner(lambda: self.runner.execute(order, out, sample))
        kept = {n: t for n, t, k in zip(order, done.sampled, done.kept, strict=True) if k}
        drafts = {v.name: v.drafts for v in views}
        report = None if worker is None else worker.report(run.step)
        rejected = {n: drafts[n] + 1 - len(t) for n, t in kept.items()}
        batch = Batch(out, order, kept, set(), rejected, report)
        if self.workload.drafts and self.runner.keeps_drafts:  # its proposer, after the step
            width = self.step_drafts(out)
            for name in order:
                held = self.runner.held(name)
                proposal = self.workload.propose(held, width) if name in kept else None
                self.runner.propose(name, proposal, width)
        # the scheduler's state after schedule() (the runner touched none of it), this
        # batch's tokens in flight with the others'
        before = read("schedule()", lambda: self.pool(batch))
        is_prefill = any(v.num_cached + v.num_scheduled < len(v.token_ids) for v in views)
        last = tuple(tokens[-1] for tokens in done.sampled)  # the model's own token of each
        transfers = (*told, *(worker.drain() if worker is not None else ()))
        run.steps.append(
            EngineStep(
                run.step,
                is_prefill,
                views,
                done.copies,
                last,
                before,
                None,
                transfers=transfers,
                tainted=tuple(tainted),
            )
        )
        return batch

    def started(self, out: Any) -> tuple[list[Transfer], set[int], set[int]]:
        """What the step's connector metadata starts, the jobs it flushes and the loads
        among them to finish before the forward pass (an offloading connector's)."""
        if isinstance(self.connector, Watch):
            return self.connector.jobs(out)
        return list(out.kv_connector_metadata.transfers), set(), set()

    def told(self, at: str) -> tuple[Transfer, ...]:
        """What vLLM told the connector since it was last asked, as happening `at` that
        call (the aborts before a step's schedule() with it)."""
        if self.connector is None:
            return ()
        events, self.connector.events = self.connector.events, []
        return tuple(e._replace(at=at) for e in events)

    def update(self, batch: Batch) -> None:
        run = self.run
        if self.landing:  # _process_aborts_queue, before update_from_output
            landing, self.landing = self.landing, []
            finish = self.scheduler.finish_requests
            status = self.build.aborted()
            run.call("finish_requests()", lambda: finish(landing, status))
            self.again = landing
        output = run.read(
            "update_from_output()",
            lambda: self.build.runner_output(batch.order, batch.sampled, batch.report),
        )
        update = self.scheduler.update_from_output
        made = run.call("update_from_output()", lambda: update(batch.out, output))
        self.delivered = bool(batch.report)
        run.read("update_from_output()", lambda: self.streamed(made))
        run.read("update_from_output()", self.mark_stale)
        stats = run.read("update_from_output()", lambda: self.build.draft_stats(made))
        if self.workload.drafts and not self.mode.overlapped:
            self.propose(batch)  # async: the worker keeps its drafts; the scheduler pads
        after = run.read("update_from_output()", self.pool)
        last = run.steps[-1]
        transfers = (*last.transfers, *self.told("update"))
        run.steps[-1] = replace(
            last, after_postprocess=after, draft_stats=stats, transfers=transfers
        )

    def propose(self, batch: Batch) -> None:
        """The engine core's `post_step` (sync scheduling): the worker's drafts for each
        request of the step, proposed from the tokens it holds (none after a prefill chunk,
        which the scheduler would drop), handed to update_draft_token_ids()."""
        if not batch.order:
            return  # no model ran: nothing proposed
        held, width = self.runner.held, self.step_drafts(batch.out)
        if self.runner.keeps_drafts:  # only their width, as placeholders (v2 runner)
            every = self.core.every_draft
            widths = self.runner.drafting() if every else dict.fromkeys(batch.order, width)
            proposed = {n: (UNKNOWN,) * w for n, w in widths.items()}
        else:
            proposed = {
                n: self.workload.propose(held(n), width) if n in batch.sampled else ()
                for n in batch.order
            }
        drafts = self.run.read("update_draft_token_ids()", lambda: self.build.drafts(proposed))
        self.run.call(
            "update_draft_token_ids()", lambda: self.scheduler.update_draft_token_ids(drafts)
        )

    def step_drafts(self, out: Any) -> int:
        """The drafts its proposer makes after the step `out` scheduled: the count the
        scheduler asks for (0.33 on: `num_spec_tokens_to_schedule`, by the batch size where
        the workload has a draft schedule), else num_speculative_tokens."""
        asked = getattr(out, "num_spec_tokens_to_schedule", None)
        return self.workload.drafts if asked is None else int(asked)

    def model_runner(self, work: Callable[[], _T]) -> _T:
        """The simulated runner's work: where the SchedulerOutput lacks what vLLM's runner
        reads, vLLM's runner raises, and the engine crashes (E6)."""
        try:
            return work()
        except ShortOutput as e:
            raise Stop(EngineFailure("E6", self.run.step, "model runner", str(e))) from None

    def view(self, name: str, out: Any) -> Scheduled:
        """The scheduler's own view: the request's tokens, those it knows and those in
        flight (sampled in a step not yet updated, async mode), the position its
        computation starts at (num_computed_tokens, which schedule() has advanced by the
        step's count, less that count), its block ids in the KV cache manager."""
        request, n = self.requests[name], int(out.num_scheduled_tokens[name])
        full, *others = self.tables(name)
        landing = [b for b in reversed(self.queue) if name in b.sampled and name not in b.dropped]
        flight = [token for b in landing for token in b.sampled[name]]
        # drafts in flight that the runner rejected: async scheduling counts them computed
        # until the update rolls them back, and the runner starts before them (its own count)
        rejected = sum(b.rejected[name] for b in landing)
        drafts = [int(t) for t in out.scheduled_spec_decode_tokens.get(name, ())]
        return Scheduled(
            name,
            int(request.num_computed_tokens) - n - rejected,
            n,
            (*(int(t) for t in request.all_token_ids), *flight, *drafts),
            full,
            len(drafts),
            tuple(others),
        )

    def tables(self, name: str) -> list[tuple[int, ...]]:
        """The request's block tables in the KV cache manager: full attention's, then a
        hybrid model's other layers' groups in the workload's order (hybrid.py)."""
        ids = self.scheduler.kv_cache_manager.get_block_ids(name)
        return [tuple(int(b) for b in ids[g]) for g in self.scheduler.schedcheck_groups]

    def in_flight(self, name: str, extra: Batch | None = None) -> int:
        """The positions `name` has in flight: tokens sampled in batches not yet updated,
        which vLLM does not drop, and the drafts they rejected (counted until the update)."""
        batches = [*self.queue, *([extra] if extra is not None else [])]
        return sum(
            len(b.sampled[name]) + b.rejected[name]
            for b in batches
            if name in b.sampled and name not in b.dropped
        )

    def pool(self, extra: Batch | None = None) -> Pool:
        manager = self.scheduler.kv_cache_manager
        pool = manager.block_pool
        blocks = tuple(Block(int(b.ref_cnt), *self.hashes.read(b.block_hash)) for b in pool.blocks)
        reserved = (int(pool.null_block.block_id),)
        index: list[tuple[int, int]] = []
        for key, number in self._index(pool.cached_block_hash_to_block):
            index.append((self.hashes.read(key)[0], number))
        live = self.scheduler.requests
        return Pool(
            blocks,
            tuple(int(b.block_id) for b in pool.free_block_queue.get_all_free_blocks()),
            tuple(
                sorted(
                    int(b.block_id)
                    for b in pool.blocks
                    if b.ref_cnt > 0 and b.block_id not in reserved
                )
            ),
            {n: self.tables(n)[0] if n in live else () for n in self.requests},
            {n: tuple(r.all_token_ids) for n, r in self.requests.items()},
            {n: _status(r) for n, r in self.requests.items()},
            (),
            reserved,
            tuple(sorted(index)),
            tuple(str(r.request_id) for r in self.scheduler.running),
            tuple(str(r.request_id) for r in self._waiting()),
            tuple(
                Progress(
                    n,
                    int(r.num_computed_tokens),
                    int(getattr(r, "num_output_placeholders", 0)),
                    self.in_flight(n, extra),
                )
                for n, r in self.requests.items()
                if not r.is_finished()
            ),
            tuple(
                int(b.block_id)
                for _, blocks in getattr(self.scheduler, "deferred_frees", ())
                for b in blocks
            ),
            tuple(str(r.request_id) for r in getattr(self.scheduler, "skipped_waiting", ()) or ()),
            {n: tuple(self.tables(n)[1:]) for n in self.requests if n in live}
            if self.workload.layers
            else {},
        )

    @staticmethod
    def _index(cache: Any) -> list[tuple[Any, int]]:
        """The prefix cache's entries, (hash key, block id): up to 0.33 its `_cache` maps a
        key to a block, or to a dict of the blocks cached under it; 0.34 to a block id, the
        ids of a key cached by several blocks kept apart in `_dup_ids`."""
        entries: list[tuple[Any, int]] = []
        several = getattr(cache, "_dup_ids", {})
        for key, held in cache._cache.items():
            if isinstance(held, int):
                ids = list(several[key]) if key in several else [held]
            elif hasattr(held, "block_id"):
                ids = [held.block_id]
            else:
                ids = [block.block_id for block in held.values()]
            entries.extend((key, int(b)) for b in ids)
        return entries

    def _waiting(self) -> list[Any]:
        """The waiting requests. 0.20 to 0.30 keep those it skipped (waiting for a grammar,
        remote KV, a LoRA slot) in a second queue, skipped_waiting, taken first under fcfs;
        0.11 and 0.33 have one queue."""
        skipped = getattr(self.scheduler, "skipped_waiting", None)
        return [*(skipped or ()), *self.scheduler.waiting]

    def mark_stale(self) -> None:
        """The requests whose output in flight vLLM will drop when it lands (0.31 on:
        `drop_stale_output` with `num_stale_output_tokens` left, set where a session's turn
        stops while its next step is in flight, and where a preemption must not hand off
        freed blocks, `requires_kv_delivery`): their tokens in the batches in flight are
        none of theirs."""
        for name, request in self.requests.items():
            if getattr(request, "drop_stale_output", False) and getattr(
                request, "num_stale_output_tokens", 0
            ):
                for batch in self.queue:
                    batch.dropped.add(name)

    def streamed(self, made: Any) -> None:
        """What each session's client was streamed by this update (its EngineCoreOutputs'
        `new_token_ids`): a session's Request holds its last turn's output only."""
        for outputs in (made or {}).values():
            for output in getattr(outputs, "outputs", ()):
                name = str(output.request_id)
                if name in self.sessions:
                    self.sessions[name].extend(int(t) for t in output.new_token_ids)

    def outputs(self) -> dict[str, tuple[int, ...]]:
        def read() -> dict[str, tuple[int, ...]]:
            return {
                n: tuple(self.sessions[n])
                if n in self.sessions
                else tuple(int(t) for t in r.output_token_ids)
                for n, r in self.requests.items()
            }

        return self.run.read("end of run", read)


def _connector(connector: Any, scheduler: Any, workload: EngineWorkload) -> Any:
    """vLLM's scheduler-side connector: ours, or its own offloading one watched (a release
    that built another is no run). (Imported here: the module imports vLLM, which the
    checking process may lack.)"""
    if workload.connector == "offloading":
        if type(connector).__name__ != "OffloadingConnector":
            raise TypeError(f"the scheduler's connector is {type(connector).__name__}")
        return Watch(connector, scheduler, workload)
    from schedcheck.engine.vllm.connector import SchedcheckConnector

    if not isinstance(connector, SchedcheckConnector):
        raise TypeError(f"the scheduler's connector is {type(connector).__name__}, not ours")
    return connector


def _status(request: Any) -> str:
    if request.is_finished():
        return "FINISHED"
    if request.status.name == "WAITING_FOR_STREAMING_REQ":
        return PAUSED
    return "RUNNING" if request.status.name == "RUNNING" else "WAITING"


__all__ = ["RUNNER", "TRAITS", "Hashes", "run_vllm", "warm"]
