"""Drive SGLang's real scheduler through an engine workload, as its event loop does; copy
plain values out (docs/engines.md, "SGLang").

Each step: the requests arriving now and the aborts due go into the scheduler's inbox
(SGLang's wire encoding, as its tokenizer manager sends them); then one pass of the body of
its event loop, read in SGLang 0.5.23 (`Scheduler.event_loop_normal`,
`event_loop_overlap`): `ingest_requests()`, `get_next_batch_to_run()`, `run_batch()` (where
the simulated model computes the batch), and `process_batch_result()`, of this batch in the
normal loop, of the previous one in the overlap loop (which launches batch N+1 before it
processes batch N).

The simulated model reads what SGLang's model runner reads: the batch's mode, its requests
in order, their rows, where each computation starts and ends (`prefix_lens`, `extend_lens`
or `seq_lens`), the input ids and the KV slots written (`out_cache_loc`); it reads the
context through each request's row of `req_to_token`. Per step, the trace holds SGLang's
own view of each request computed (its tokens: the prompt, the output it holds and the
tokens in flight; where the step starts and how many positions; the KV pages its row
names) as `scheduled`, what the model computed on as `copies` (E8 compares the two), the
tokens sampled, and the pools after the batch was scheduled and after the result processed
(pools.py). Outputs are what the scheduler sent its detokenizer, token by token.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from schedcheck.engine.run import PlainDriver, Run, Stop
from schedcheck.engine.runner import Runner
from schedcheck.engine.sglang.build import Build
from schedcheck.engine.sglang.pools import PageMismatch, Reader
from schedcheck.engine.trace import (
    UNKNOWN,
    Copy,
    EngineFailure,
    EngineStep,
    EngineTrace,
    Scheduled,
)
from schedcheck.engine.traits import Traits
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload

__all__ = ["LOOPS", "RUNNER", "TRAITS", "run_sglang", "warm"]

LOOPS = ("overlap", "normal")  # its event loops, the release's default first

RUNNER = Runner(
    "sglang",
    "prefix_len",
    "count",
    "extend_len",
    False,
    "position",
    "SGLang's model runner (ForwardBatch from the ScheduleBatch: an extend computes "
    "prefix_lens[i] .. seq_lens[i]-1, a decode seq_lens[i]-1; KV slots through the "
    "request's req_to_token row, a page per block)",
)
TRAITS = Traits(
    RUNNER,
    hashes_name_prefixes=True,
    update_call="process_batch_result()",
    drafts_in_budget=False,
    turn_keeps_last=True,
    base_is_adapter=True,
)
"""SGLang's: a tree page's place names its whole prefix (the radix tree's path to it), and
the tree must agree with the pages and the rows (E2, E3); its token budget
(`chunked_prefill_size`) counts a decode as one token, whatever it verifies (E4); a
session's next turn continues from its last turn's whole output (`Session.create_req`)
(E7); the base model takes one of a batch's LoRA slots (`validate_lora_batch` counts the
None of a base request) (E25)."""


def run_sglang(
    build: Build,
    workload: EngineWorkload,
    loop: str,
    beat: Callable[[int, str], None] | None = None,
) -> EngineTrace:
    """Drive `workload` through a fresh Scheduler in `loop` ("overlap" or "normal"; the
    workload's own where it names one); `beat(step, call)` before each call."""
    run = Run(workload, TRAITS, beat)
    # a workload with drafts that names no loop runs in the one SGLang drafts in on a CPU
    default = "normal" if workload.drafts else loop
    return run.play(SglangDriver(build, run, workload.config.mode or default))


# Through the scheduler's paths before the box (SGLang imports some modules when a path is
# first taken): a prefix hit, chunked prefill, a stop token, an abort, a retraction (a pool
# of 9 pages too small for three decodes), in each loop and at page sizes 1 and 2; then
# speculative decoding's (EAGLE's allocation, verify and retraction with drafts: spec.py),
# in the normal loop, where SGLang runs it on a CPU.
WARM = tuple(
    EngineWorkload(
        EngineConfig(blocks, page, 3, 4),
        (
            EngineRequest("w1", (1, 2, 1, 2, 1), 4, True, 1),
            EngineRequest("w2", (1, 2, 1, 1), 4, False, 1, 0, (2,)),
            EngineRequest("w3", (1, 2), 3, False, 2, 0, (), 3),
        ),
        2,
    )
    for page, blocks in ((1, 14), (2, 9))
) + tuple(
    EngineWorkload(
        EngineConfig(18 // page + 1, page, 3, 12, mode="normal", conservativeness=0.3),
        tuple(EngineRequest(f"w{i}", (1, 2, 1, i), 8) for i in (1, 2, 3)),
        2,
        eos_per_16=0,
        drafts=2,
        draft_miss_per_8=3,
        drafter="hidden",
    )
    for page in (1, 2)
)


def warm(build: Build, loops: tuple[str, ...], pages: tuple[int, ...] = ()) -> None:
    """Run WARM in each of `loops` (at the page sizes `pages`, () every one): SGLang's lazy
    imports happen now, before a box is entered, and a release this driver does not fit is
    told now (RuntimeError)."""
    for loop in loops:
        for workload in WARM:
            if pages and workload.config.block_size not in pages:
                continue
            failure = run_sglang(build, workload, loop).failure
            if failure is not None:
                spec = " with speculative decoding" if workload.drafts else ""
                raise RuntimeError(
                    f"SGLang {build.version} cannot be driven by schedcheck in its "
                    f"{workload.config.mode or loop} loop{spec}: a warm-up run failed at "
                    f"step {failure.step}, {failure.call}: {failure.message}"
                )


def rid(name: str) -> str:
    """The request id SGLang is given: SGLang aborts every request whose id starts with the
    id aborted (`abort_request`), so no id may be a prefix of another (r1 of r10)."""
    return f"{name}."


class SglangDriver(PlainDriver):
    """One run of SGLang's scheduler, a step being one pass of its event loop's body."""

    undrivable: tuple[type[BaseException], ...] = ()
    source = ""
    idle_call = "is_fully_idle()"
    stuck_is_e5 = True

    def __init__(self, build: Build, run: Run, loop: str) -> None:
        if loop not in LOOPS:
            raise ValueError(f"SGLang has no {loop!r} event loop (its loops: {', '.join(LOOPS)})")
        if run.workload.drafts and loop != "normal":
            raise ValueError(
                f"a workload with drafts in SGLang's {loop} loop: on a CPU SGLang runs "
                "speculative decoding in its normal loop alone (its "
                "_disable_overlap_schedule_for_cpu), so the workload's mode must be normal"
            )
        self.build, self.run, self.workload = build, run, run.workload
        self.overlap = loop == "overlap"
        self.names: dict[str, str] = {rid(r.name): r.name for r in self.workload.requests}
        self.added: list[str] = []
        self.done: set[str] = set()  # told finished (an output with a finish reason, or aborted)
        self.said: dict[str, list[int]] = {}  # the output tokens sent, by request
        self.reqs: dict[str, Any] = {}  # SGLang's Req objects, by name, as first seen
        # tokens sampled in batches whose results are not processed yet, oldest first:
        # those SGLang appends (the last chunk of an extend, a decode), by request id
        self.flight: deque[dict[str, int]] = deque()
        self.seen: tuple[Scheduled, ...] = ()
        self.copies: tuple[Copy, ...] = ()
        self.sampled: tuple[int, ...] = ()
        self.is_prefill = False
        self.after_schedule: Any = None
        self.streamed: list[tuple[str, int]] = []  # sent to each client this step
        self.refused: list[str] = []  # ended this step by SGLang, unasked
        self.aborts = {r.name: r.abort for r in self.workload.requests if r.abort}
        # streaming sessions: each session's turns sent, the id of its turn in flight, and
        # what its client holds back until that turn ends (a chunk, or its close: None)
        self.sessions = {r.name: r for r in self.workload.requests if r.session}
        self.turns: dict[str, int] = {}
        self.live: dict[str, str] = {}
        self.waits: dict[str, deque[tuple[int, ...] | None]] = {}
        self.ending: set[str] = set()  # sessions aborted with a turn in flight: closed after
        self.closing: set[str] = set()  # sessions whose close is sent, not yet taken in

    def unreadable(self, error: Exception) -> str:
        return (
            f"SGLang {self.build.version}'s state could not be read as schedcheck reads it "
            f'({error!r}; docs/engines.md, "SGLang")'
        )

    # -- the run's calls

    def start(self) -> None:
        made = self.run.call(
            "Scheduler()",
            lambda: self.build.scheduler(
                self.workload.config,
                self.overlap,
                self.model,
                self.workload.drafts,
                self.verify,
                bool(self.sessions),
            ),
        )
        self.scheduler, self.channels = made
        self.reader = Reader(self.scheduler, self.names, frozenset(self.sessions))

    def add(self, request: EngineRequest) -> None:
        """A request; a session's client opens its streaming session first, then sends its
        prompt as the session's first turn."""
        if request.session:
            opened = self.build.open_session(request.name)
            self.run.call("send", lambda: self.build.send(self.channels, opened))
        self._send(request, rid(request.name))
        self.added.append(request.name)

    def _send(self, request: EngineRequest, sent: str, chunk: tuple[int, ...] = ()) -> None:
        priorities = self.workload.config.policy == "priority"
        message = self.run.call(
            "TokenizedGenerateReqInput()", lambda: self.build.request(request, priorities, chunk)
        )
        message.rid = sent
        self.names[sent] = request.name
        if request.session:
            self.live[request.name] = sent
        self.run.call("send", lambda: self.build.send(self.channels, message))

    def send_chunk(self, request: EngineRequest, chunk: tuple[int, ...]) -> None:
        """A session's next turn, as its client sends it: a request of the session whose
        input is the chunk, once the turn in flight has ended (a streaming session takes
        one turn at a time and refuses another, `Session.create_req`): held back till
        then."""
        if request.name in self.live:
            self.waits.setdefault(request.name, deque()).append(chunk)
            return
        turn = self.turns[request.name] = self.turns.get(request.name, 0) + 1
        self._send(request, f"{request.name}.{turn}.", chunk)

    def close_session(self, request: EngineRequest) -> None:
        """Its client closes the session (`/close_session`), once its turn in flight has
        ended; the session's KV is freed then, and the request is done."""
        if request.name in self.live:
            self.waits.setdefault(request.name, deque()).append(None)
            return
        closed = self.build.close_session(request.name)
        self.run.call("send", lambda: self.build.send(self.channels, closed))
        self.closing.add(request.name)  # done once the scheduler has taken the close in

    def abort(self, request: EngineRequest) -> None:
        """An AbortReq into the inbox, as the tokenizer manager sends one; a session's, of
        its turn in flight, after which its client closes it (between turns: closed now)."""
        if request.session:
            if request.name in self.done or request.name in self.closing:
                return
            self.waits.pop(request.name, None)
            if request.name not in self.live:
                self.close_session(request)
                return
            self.ending.add(request.name)
        sent = self.live.get(request.name, rid(request.name))
        self.run.call("send", lambda: self.build.send(self.channels, self.build.abort(sent)))

    def _turn_ended(self, name: str) -> None:
        """A session's turn ended: its client sends what it held back (its next chunk, or
        its close), or closes it where it aborted it."""
        self.live.pop(name, None)
        request = self.sessions[name]
        if name in self.ending:
            self.close_session(request)
            return
        held = self.waits.get(name)
        if held:
            said = held.popleft()
            if said is None:
                self.close_session(request)
            else:
                self.send_chunk(request, said)

    def reset(self) -> None:
        raise AssertionError("SGLang's adapter draws no prefix-cache resets")

    def idle(self) -> bool:
        """Nothing in the inbox and nothing the scheduler holds (is_fully_idle, and no batch
        of the last step left to merge)."""
        s = self.scheduler
        return self.run.read(
            "is_fully_idle()",
            lambda: (
                not self.channels.inbox.items
                and not s.waiting_queue
                and s.last_batch is None
                and bool(s.is_fully_idle())
            ),
        )

    def lost(self) -> list[str]:
        return self.unfinished()

    def unfinished(self) -> list[str]:
        return [n for n in self.added if n not in self.done]

    def outputs(self) -> dict[str, tuple[int, ...]]:
        return {n: tuple(self.said.get(n, ())) for n in self.added}

    # -- one step

    def step(self) -> None:
        """One pass of the event loop's body (0.5.23), each of SGLang's calls through
        Run.call; the simulated model records the step as it computes it."""
        run, s = self.run, self.scheduler
        self.seen, self.copies, self.sampled, self.is_prefill = (), (), (), False
        self.after_schedule = None
        self.streamed, self.refused = [], []
        if hasattr(s, "ingest_requests"):
            run.call("ingest_requests()", s.ingest_requests)
        else:  # 0.5.19: the loop's body receives and dispatches itself
            received = run.call("recv_requests()", s.request_receiver.recv_requests)
            run.call("process_input_requests()", lambda: s.process_input_requests(received))
        self.done |= self.closing  # the sessions closed, their KV freed
        self.closing.clear()
        plan = run.call(
            "get_next_batch_to_run()",
            lambda: s.get_next_batch_to_run(running_batch=s.running_batch, last_batch=s.last_batch),
        )
        s.running_batch = plan.running_batch
        batch = plan.batch_to_run
        if batch is None:  # the pools as scheduled (a batch's are read as it is computed),
            # before the overlap loop processes the last batch's result
            self.after_schedule = run.read("get_next_batch_to_run()", self.pool)
        s.cur_batch_for_debug = batch
        if not self.overlap:
            if batch:
                result = run.call("run_batch()", lambda: s.run_batch(batch))
                self.process(batch, result)
            else:
                s._sched_idled = True
                run.call("on_idle()", s.on_idle)
        else:
            apart = run.call(
                "is_disable_overlap_for_batch()",
                lambda: s.is_disable_overlap_for_batch(batch, last_batch=s.last_batch),
            )
            if apart:
                self.process_oldest()
            result = None
            if batch:
                result = run.call("run_batch()", lambda: s.run_batch(batch))
                run.call("_apply_war_barrier()", s._apply_war_barrier)
                s.result_queue.append((batch.copy(), result))
            else:
                s._sched_idled = True
            if s.last_batch:
                if not apart:
                    self.process_oldest()
            elif batch is None:
                run.call("on_idle()", s.on_idle)
            if s.is_generation:
                run.call(
                    "launch_batch_sample_if_needed()",
                    lambda: s.launch_batch_sample_if_needed(result, batch),
                )
        s.last_batch = batch
        self.collect()
        self.self_check()
        after = run.read("process_batch_result()", self.pool)
        run.steps.append(
            EngineStep(
                run.step,
                self.is_prefill,
                self.seen,
                self.copies,
                self.sampled,
                self.after_schedule or after,
                after,
                streamed=tuple(self.streamed),
                refused=tuple(self.refused),
            )
        )

    update_call = TRAITS.update_call

    def self_check(self) -> None:
        """The rows of requests (Reader.rows_problem), and SGLang's own pool check, where
        its loop makes it when asked
        (SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY): free + evictable + protected + each
        request's private slots = the pool. It asserts; a failed assert is E3, with its
        message (it is skipped, as SGLang skips it, while no batch ran last)."""
        s = self.scheduler
        rows = self.run.read("req_to_token_pool", lambda: self.reader.rows_problem(self.reqs))
        if rows is not None:
            raise Stop(EngineFailure("E3", self.run.step, self.update_call, rows))
        if s.last_batch is None:
            return
        try:
            self.run.call("self_check_during_busy()", s.invariant_checker.self_check_during_busy)
        except Stop as stop:
            if "AssertionError" not in stop.failure.message:
                raise
            raise Stop(replace(stop.failure, check="E3")) from None

    def process(self, batch: Any, result: Any) -> None:
        self.run.call(
            "process_batch_result()", lambda: self.scheduler.process_batch_result(batch, result)
        )
        if self.flight:
            self.flight.popleft()

    def process_oldest(self) -> None:
        """The overlap loop's pop_and_process: the oldest batch's result."""
        s = self.scheduler
        old, result = s.result_queue.popleft()
        self.process(old, result)

    def collect(self) -> None:
        """What the scheduler sent its detokenizer and tokenizer this step: each request's
        new output tokens, and whether it is finished (a finish reason, or an abort). An
        AbortReq for a request the workload has not aborted by now is SGLang's own refusal
        (`_abort_on_queued_limit`: the queue is full, or a request of a better priority
        took its place)."""
        for message in self.run.call("sock_recv", lambda: self.build.received(self.channels)):
            rids = getattr(message, "rids", None)
            if rids is None:  # an AbortReq: a request ended outside the output stream
                name = self.names.get(str(getattr(message, "rid", "")))
                if name is not None and name not in self.done:
                    if not 0 < self.aborts.get(name, 0) <= self.run.step:
                        self.refused.append(name)
                    self._ended(name, aborted=True)
                continue
            for i, r in enumerate(rids):
                name = self.names.get(str(r))
                if name is None:
                    continue
                ids = message.output_ids[i] if message.output_ids is not None else ()
                tokens = [int(t) for t in ids]
                self.said.setdefault(name, []).extend(tokens)
                if tokens:
                    self.streamed.append((name, len(tokens)))
                reason = message.finished_reasons[i]
                if reason is not None and name not in self.done:
                    aborted = isinstance(reason, dict) and reason.get("type") == "abort"
                    self._ended(name, aborted)

    def _ended(self, name: str, aborted: bool) -> None:
        """A request ended; a session's turn ended: its client goes on, or closes the session
        where the turn was aborted."""
        if name not in self.sessions:
            self.done.add(name)
            return
        if name in self.closing or name not in self.live:
            return  # its end said twice (an AbortReq and the finish): closed once
        if aborted:
            self.ending.add(name)
        self._turn_ended(name)

    # -- the simulated model

    def model(self, batch: Any) -> list[int]:
        """SGLang's forward_batch_generation: for each request of the batch, the positions
        it computes, on the inputs it gets, the KV slots it writes; the next token from the
        token function of its sequence so far. The step as seen goes into the trace."""
        read = self.run.read
        looked = read("run_batch()", lambda: self._look(batch))
        views, copies, sampled, kept = [], [], [], {}
        for name, req, start, inputs, written, table, row in looked:
            known = self.reader.tokens(req, self._in_flight(req))
            n = len(inputs)
            if written != row[start : start + n]:
                self._stop_e2(name, start, written, row)
            views.append(Scheduled(name, start, n, known, table))
            have = (*known[:start], *inputs, *known[start + n :])
            copies.append(Copy(have, inputs[-1] if inputs else None, start, n, table, len(known)))
            token = self.workload.next_token((*known[:start], *inputs))
            sampled.append(token)
            if start + n == len(known):
                kept[str(req.rid)] = token  # the last chunk, or a decode: SGLang appends it
        self.seen, self.copies, self.sampled = tuple(views), tuple(copies), tuple(sampled)
        self.is_prefill = bool(read("run_batch()", lambda: batch.forward_mode.is_extend()))
        self.flight.append(kept)
        self.after_schedule = read("run_batch()", self.pool)
        return sampled

    def verify(self, batch: Any, bonus: list[int]) -> list[tuple[int, ...]]:
        """The simulated worker's decode (spec.py): for each request of the batch, the
        drafts proposed after its tokens through its bonus (the token the worker carried
        from its last step, which must be the last it holds), padded with UNKNOWN where the
        proposer has fewer than the chain; one verify forward over the bonus and the
        drafts, at the positions from `seq_lens` on, its KV written through the request's
        row; the accepted run: the drafts the model agrees with, then its own token."""
        read, w = self.run.read, self.workload
        chain = w.drafts
        looked = read("run_batch()", lambda: self._look_verify(batch, chain + 1))
        if len(looked) != len(bonus):
            raise Stop(
                EngineFailure(
                    "E8",
                    self.run.step,
                    "run_batch()",
                    f"the batch verifies {len(looked)} requests, but its draft input "
                    f"(spec_info) carries {len(bonus)} bonus tokens",
                )
            )
        views, copies, sampled, runs = [], [], [], []
        for (name, req, start, table), last in zip(looked, bonus, strict=True):
            known = self.reader.tokens(req, self._in_flight(req))
            context = (*known[:start], last)
            drafts = w.propose(context, chain)
            drafts += (UNKNOWN,) * (chain - len(drafts))
            views.append(Scheduled(name, start, chain + 1, (*known, *drafts), table, chain))
            inputs = (last, *drafts)
            copies.append(
                Copy(
                    (*known[:start], *inputs),
                    drafts[-1],
                    start,
                    chain + 1,
                    table,
                    start + 1 + chain,
                )
            )
            run = w.verify(context, drafts)
            sampled.append(run[-1])
            runs.append(run)
        self.seen, self.copies, self.sampled = tuple(views), tuple(copies), tuple(sampled)
        self.is_prefill = False
        self.flight.append({})  # appended in process_batch_result, in the normal loop
        self.after_schedule = read("run_batch()", self.pool)
        return runs

    def pool(self) -> Any:
        return self.reader.pool(self.done, self.reqs, set(self.live))

    def _in_flight(self, req: Any) -> list[int]:
        """Its tokens in flight (by SGLang's request id: a session's turns apart)."""
        rid = str(req.rid)
        return [batch[rid] for batch in self.flight if rid in batch]

    def _look(
        self, batch: Any
    ) -> list[
        tuple[str, Any, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    ]:
        """Per request of the batch: its name, its Req, the first position computed, the
        input ids, the slots written, its page table and its row's slots up to the end."""
        extend = bool(batch.forward_mode.is_extend())
        ids = [int(x) for x in batch.input_ids.tolist()]
        locs = [int(x) for x in batch.out_cache_loc.tolist()]
        ends = [int(x) for x in batch.seq_lens.tolist()]
        rows = [int(x) for x in batch.req_pool_indices.tolist()]
        page = int(self.scheduler.page_size)
        table = self.scheduler.req_to_token_pool.req_to_token
        out, at = [], 0
        for i, req in enumerate(batch.reqs):
            name = self.names[str(req.rid)]
            self.reqs[name] = req  # a session's latest turn
            start = int(batch.prefix_lens[i]) if extend else ends[i] - 1
            n = ends[i] - start
            row = tuple(int(x) for x in table[rows[i], : ends[i]].tolist())
            pages = self._pages(name, row, page)
            out.append(
                (name, req, start, tuple(ids[at : at + n]), tuple(locs[at : at + n]), pages, row)
            )
            at += n
        return out

    def _look_verify(self, batch: Any, width: int) -> list[tuple[str, Any, int, tuple[int, ...]]]:
        """Per request of a verify batch: its name, its Req, the first position verified
        (`seq_lens`: its committed KV, its bonus token's position) and its page table, the
        row's slots up to what was allocated for it (`kv_allocated_len`). A verify that
        would write past those slots stops the run: E3, with the row's positions named."""
        ends = [int(x) for x in batch.seq_lens.tolist()]
        rows = [int(x) for x in batch.req_pool_indices.tolist()]
        page = int(self.scheduler.page_size)
        table = self.scheduler.req_to_token_pool.req_to_token
        out = []
        for i, req in enumerate(batch.reqs):
            name = self.names[str(req.rid)]
            self.reqs[name] = req
            allocated = int(req.kv.kv_allocated_len)
            if ends[i] + width > allocated:
                raise Stop(
                    EngineFailure(
                        "E3",
                        self.run.step,
                        "run_batch()",
                        f"{name} verifies positions {ends[i]}..{ends[i] + width - 1}, but "
                        f"its row was allocated slots for {allocated} positions only: the "
                        "verify writes KV into slots it does not hold",
                    )
                )
            row = tuple(int(x) for x in table[rows[i], :allocated].tolist())
            out.append((name, req, ends[i], self._pages(name, row, page)))
        return out

    def _pages(self, name: str, row: tuple[int, ...], page: int) -> tuple[int, ...]:
        """The pages `name`'s row lies in; a row whose slots do not follow its pages stops
        the run (E2)."""
        try:
            return self.reader.pages(row, page)
        except PageMismatch as e:
            raise Stop(EngineFailure("E2", self.run.step, "run_batch()", f"{name}: {e}")) from None

    def _stop_e2(
        self, name: str, start: int, written: tuple[int, ...], row: tuple[int, ...]
    ) -> None:
        raise Stop(
            EngineFailure(
                "E2",
                self.run.step,
                "run_batch()",
                f"{name} writes the KV of positions {start}.. into slots {list(written)} "
                f"(out_cache_loc), but its req_to_token row names {list(row[start:])} there: "
                "what it writes, no later read finds",
            )
        )
