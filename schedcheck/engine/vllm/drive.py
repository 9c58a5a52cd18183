"""Drive vLLM's v1 Scheduler through an engine workload; copy plain values out.

Each step, as vLLM's engine core and its v1 GPU model runner do it: add the requests
arriving now, abort those whose time has come (`finish_requests` with FINISHED_ABORTED, one
id per call), `schedule()`; then play the model runner from the SchedulerOutput alone
(its own copy of each request's tokens and block table, built from the new and cached
request data, which is all a runner on another process receives), compute positions
`num_computed_tokens .. + num_scheduled_tokens - 1` of each scheduled request, sample one
token for each request whose last position was computed (a chunk short of the end is
discarded, as the runner does), and `update_from_output()` with that ModelRunnerOutput.

The trace holds, per step, the scheduler's own view of each scheduled request (its tokens,
where its computation starts, its block ids in the KV cache manager) as `scheduled`, and
the runner's copy built from the SchedulerOutput as `copies` (E8 compares the two), and
the block pool after both calls. The checks run on the trace elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedcheck.engine.run import Run
from schedcheck.engine.runner import Runner
from schedcheck.engine.trace import (
    Block,
    Copy,
    EngineStep,
    EngineTrace,
    Pool,
    Scheduled,
)
from schedcheck.engine.traits import Traits
from schedcheck.engine.vllm.build import Build, Hashes
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload

RUNNER = Runner(
    "vllm",
    "num_computed_tokens",
    "count",
    "num_scheduled_tokens",
    False,
    "mixed",
    "vLLM v1's GPUModelRunner (_prepare_inputs: positions num_computed_tokens + "
    "arange(num_scheduled_tokens), slots through the block table)",
)
TRAITS = Traits(RUNNER, hashes_name_prefixes=True, update_call="update_from_output()")
"""vLLM's: its v1 runner's rule; a block's hash names its whole prefix, and the prefix
cache's index must agree with the blocks (E2, E3)."""


def run_vllm(
    build: Build, workload: EngineWorkload, beat: Callable[[int, str], None] | None = None
) -> EngineTrace:
    """Drive `workload` through a fresh vLLM Scheduler; `beat(step, call)` before each call."""
    run = Run(workload, TRAITS, beat)
    return run.play(VllmDriver(build, run))


# Runs through the scheduler's paths before the box, since vLLM imports some modules only
# when a path is first taken: under fcfs, a prefix hit, a whole-prompt hit, chunked
# prefill, a preemption, an abort and a stop token (read off observe(), checked once by
# hand); under priority, its waiting queue and the same requests.
WARM = tuple(
    EngineWorkload(
        EngineConfig(5, 2, 2, 3, policy),
        (
            EngineRequest("w1", (1, 2, 1, 2, 1), 4, True, 1, 1),
            EngineRequest("w2", (1, 2, 1, 1), 4, False, 1, 0, (2,)),
            EngineRequest("w3", (1, 2), 3, False, 2, 0, (), 3),
        ),
        2,
    )
    for policy in ("fcfs", "priority")
)


def warm(build: Build) -> None:
    """Run WARM through `build`: vLLM's lazy imports happen now (before a box is entered),
    and a release whose API this driver does not fit is told now, as a usage error, not
    as a verdict on the first workload (RuntimeError naming what failed)."""
    for workload in WARM:
        failure = run_vllm(build, workload).failure
        if failure is not None:
            raise RuntimeError(
                f"vLLM {build.version} cannot be driven by schedcheck: a warm-up run failed "
                f"at step {failure.step}, {failure.call}: {failure.message}"
            )


class VllmDriver:
    """One run of vLLM's scheduler, its steps as its engine core takes them."""

    undrivable: tuple[type[BaseException], ...] = ()
    source = ""
    idle_call = "get_num_unfinished_requests()"
    # an empty step that changed nothing, with nothing left to arrive, is stuck for good
    stuck_is_e5 = True

    def __init__(self, build: Build, run: Run) -> None:
        self.build, self.run, self.workload = build, run, run.workload
        self.requests: dict[str, Any] = {}  # name -> vLLM's Request, finished ones kept
        self.tables: dict[str, list[int]] = {}  # the runner's block table per request
        self.tokens: dict[str, list[int]] = {}  # the runner's tokens per request
        self.starts: dict[str, int] = {}  # where the runner was told this step starts
        self.hashes: Hashes  # the hash function of the Scheduler built for this run

    def unreadable(self, error: Exception) -> str:
        """This release keeps its state elsewhere than we read it (exit 2, naming what)."""
        return (
            f"vLLM {self.build.version}'s state could not be read as schedcheck reads it "
            f'({error!r}; docs/engines.md, "vLLM")'
        )

    def start(self) -> None:
        made = self.run.call("Scheduler()", lambda: self.build.scheduler(self.workload))
        self.scheduler, self.hashes = made

    def idle(self) -> bool:
        count = self.scheduler.get_num_unfinished_requests
        return not self.run.call("get_num_unfinished_requests()", count)

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
        """finish_requests with FINISHED_ABORTED, one id per call, as the engine core does."""
        status, name = self.build.aborted(), request.name
        self.run.call("finish_requests()", lambda: self.scheduler.finish_requests(name, status))

    def step(self) -> None:
        run, read = self.run, self.run.read
        out = run.call("schedule()", self.scheduler.schedule)
        order = read("schedule()", lambda: self.runner_update(out))
        views = read("schedule()", lambda: tuple(self.view(n, out) for n in order))
        copies = tuple(self.copy(name, out) for name in order)
        before = read("schedule()", self.pool)
        # one per scheduled request, from the runner's copy (a copy short of tokens or a
        # start is E8's to report; the sample stays aligned with the requests)
        sampled = tuple(
            self.workload.next_token(
                (c.token_ids or ())[: (c.num_cached or 0) + (c.num_scheduled or 0)]
            )
            for c in copies
        )
        is_prefill = any(v.num_cached + v.num_scheduled < len(v.token_ids) for v in views)
        run.steps.append(EngineStep(run.step, is_prefill, views, copies, sampled, before, None))
        # the runner keeps the token of each request whose every token is now computed
        done = [
            i
            for i, c in enumerate(copies)
            if (c.num_cached or 0) + (c.num_scheduled or 0) >= len(c.token_ids or ())
        ]
        for i in done:
            self.tokens[order[i]].append(sampled[i])
        output = read(
            "update_from_output()",
            lambda: self.build.runner_output(order, {order[i]: sampled[i] for i in done}),
        )
        run.call("update_from_output()", lambda: self.scheduler.update_from_output(out, output))
        after = read("update_from_output()", self.pool)
        run.steps[-1] = EngineStep(run.step, is_prefill, views, copies, sampled, before, after)

    def runner_update(self, out: Any) -> list[str]:
        """What the v1 model runner does with a SchedulerOutput before it computes: forget
        finished requests, take new ones (prompt, block ids), and for cached ones append
        the new block ids (replace them for a resumed request; take all_token_ids where
        sent). The scheduled requests' names, in the order of num_scheduled_tokens."""
        for name in out.finished_req_ids:
            self.tables.pop(name, None)
            self.tokens.pop(name, None)
        for new in out.scheduled_new_reqs:
            self.tables[new.req_id] = list(new.block_ids[0])
            # prefill_token_ids (not in 0.11): the prompt and the outputs of a resumed request
            prompt = getattr(new, "prefill_token_ids", None) or new.prompt_token_ids
            self.tokens[new.req_id] = list(prompt)
            self.starts[new.req_id] = new.num_computed_tokens
        cached = out.scheduled_cached_reqs
        for i, name in enumerate(cached.req_ids):
            blocks = cached.new_block_ids[i]
            if name in cached.resumed_req_ids:
                self.tables[name] = list(blocks[0]) if blocks is not None else []
            elif blocks is not None:
                self.tables.setdefault(name, []).extend(blocks[0])
            if name in cached.all_token_ids:
                self.tokens[name] = list(cached.all_token_ids[name])
            self.starts[name] = cached.num_computed_tokens[i]
        return [str(name) for name in out.num_scheduled_tokens]

    def view(self, name: str, out: Any) -> Scheduled:
        """The scheduler's own view: the request's tokens, the position its computation
        starts at (num_computed_tokens, which schedule() has advanced by the step's count),
        its block ids in the KV cache manager."""
        request, n = self.requests[name], int(out.num_scheduled_tokens[name])
        table = self.scheduler.kv_cache_manager.get_block_ids(name)[0]
        return Scheduled(
            name,
            int(request.num_computed_tokens) - n,
            n,
            tuple(request.all_token_ids),
            tuple(int(b) for b in table),
        )

    def copy(self, name: str, out: Any) -> Copy:
        """The runner's copy, built from the SchedulerOutputs it was sent."""
        tokens = self.tokens.get(name)
        start = self.starts.get(name)
        return Copy(
            None if tokens is None else tuple(tokens),
            None if not tokens else tokens[-1],
            start,
            int(out.num_scheduled_tokens[name]),
            tuple(self.tables.get(name, ())),
            None if tokens is None else len(tokens),
        )

    def pool(self) -> Pool:
        manager = self.scheduler.kv_cache_manager
        pool = manager.block_pool
        blocks = tuple(Block(int(b.ref_cnt), *self.hashes.read(b.block_hash)) for b in pool.blocks)
        reserved = (int(pool.null_block.block_id),)
        index: list[tuple[int, int]] = []
        for key, held in pool.cached_block_hash_to_block._cache.items():
            number = self.hashes.read(key)[0]
            for block in [held] if hasattr(held, "block_id") else held.values():
                index.append((number, int(block.block_id)))
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
            {
                n: tuple(int(b) for b in manager.get_block_ids(n)[0]) if n in live else ()
                for n in self.requests
            },
            {n: tuple(r.all_token_ids) for n, r in self.requests.items()},
            {n: _status(r) for n, r in self.requests.items()},
            (),
            reserved,
            tuple(sorted(index)),
            tuple(str(r.request_id) for r in self.scheduler.running),
            tuple(str(r.request_id) for r in self._waiting()),
        )

    def _waiting(self) -> list[Any]:
        """The waiting requests. 0.20 to 0.30 keep those it skipped (waiting for a grammar,
        remote KV, a LoRA slot) in a second queue, skipped_waiting, taken first under fcfs;
        0.11 and 0.33 have one queue."""
        skipped = getattr(self.scheduler, "skipped_waiting", None)
        return [*(skipped or ()), *self.scheduler.waiting]

    def outputs(self) -> dict[str, tuple[int, ...]]:
        return self.run.read(
            "end of run",
            lambda: {
                n: tuple(int(t) for t in r.output_token_ids) for n, r in self.requests.items()
            },
        )


def _status(request: Any) -> str:
    if request.is_finished():
        return "FINISHED"
    return "RUNNING" if request.status.name == "RUNNING" else "WAITING"


__all__ = ["RUNNER", "TRAITS", "Hashes", "run_vllm", "warm"]
