"""A KV connector's other end, simulated (issue 50): the external KV store it loads from and
saves to, and the connector's worker side, which the simulated model runner plays. It names
no engine: an engine's adapter implements its connector interface over `Store` (its
scheduler side) and hands `Worker` the loads and saves that side sent its workers.

The store holds the KV of every prefix of each token list in it: the workload's `stored`
(a prefill node's, an earlier server's), and each save once the worker reports it done. A
lookup's hit is the longest prefix of a request's prompt it holds, less the tokens already
computed locally; a synchronous load leaves the prompt's last token to compute (the engine
must sample from it: its own connectors do so), an asynchronous one may cover the whole
prompt (the engine recomputes the last token once the load is done, as disaggregated
prefill's decode side does). No load is offered that spares no computation (one whose
tokens past those computed are only the last, which the engine recomputes anyway): a
connector asked again after such a load would be asked forever (vLLM asks again whenever a
request has computed nothing, and a one-token prompt's whole-prompt load leaves it so;
NIXL's decode side offers its remote prefill once).

The worker does what each request's plan in the workload says (EngineRequest.load,
load_fails, save): a load ends in the step that schedules it or after drawn steps, some of
its blocks failing; a save ends after drawn steps. It keeps which KV slots hold garbage, a
failed load's or KV computed on one's, so that a request computing on them is known: the
simulated model samples a wrong token for it (a model reading garbage KV says garbage),
which the engine must discard (E7 reads the outputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from schedcheck.engine.trace import Transfer
from schedcheck.engine.workload import EngineRequest, EngineWorkload

__all__ = ["Jobs", "Report", "Store", "Worker", "garbage"]


class Store:
    """The external store's index, as the connector's scheduler side looks it up."""

    def __init__(self, stored: Iterable[Sequence[int]] = ()) -> None:
        self.held: list[tuple[int, ...]] = [tuple(p) for p in stored]

    def hit(self, prompt: Sequence[int], computed: int, asynchronous: bool) -> int:
        """The tokens past `computed` whose KV a load can bring for `prompt`: the longest
        prefix of it held, all of it for an asynchronous load, all but its last token for a
        synchronous one."""
        most = len(prompt) if asynchronous else len(prompt) - 1
        longest = max((_common(p, prompt) for p in self.held), default=0)
        if min(longest, len(prompt) - 1) <= computed:
            return 0  # a load that spares no computation (see the module's docstring)
        return max(0, min(longest, most) - computed)

    def add(self, tokens: Sequence[int]) -> None:
        """A save reported done: the store holds these tokens' KV from now on."""
        if tokens:
            self.held.append(tuple(tokens))


class Report(NamedTuple):
    """What the worker reports with a step's output: the requests whose asynchronous load
    and whose save ended, and the blocks whose load failed (a synchronous load's too); an
    offloading connector's worker, the jobs that ended."""

    loaded: tuple[str, ...]
    saved: tuple[str, ...]
    failed_blocks: tuple[int, ...]
    jobs: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.loaded or self.saved or self.failed_blocks or self.jobs)


class Worker:
    """The connector's worker side for one run (in the runner's process: it sees only what
    the scheduler side sent, and the workload's plans, which are the environment's)."""

    def __init__(self, workload: EngineWorkload) -> None:
        self.block_size = workload.config.block_size
        self.plans: dict[str, EngineRequest] = {r.name: r for r in workload.requests}
        self.pending: list[tuple[int, Transfer]] = []  # (the step it ends in, its start)
        self.garbage: set[int] = set()  # KV slots that hold garbage
        self.events: list[Transfer] = []  # this step's, for the trace
        self.ended: list[Transfer] = []  # since the last report

    def begin(
        self,
        step: int,
        started: Sequence[Transfer],
        flush: Iterable[int] = (),
        sync: Iterable[int] = (),
    ) -> None:
        """The transfers the scheduler side started, as its step's metadata carries them: a
        synchronous load ends now, before the step computes; the others after their
        request's drawn steps (1: reported with this step's output). (`flush` and `sync`
        are an offloading connector's job ids: `Jobs`.)"""
        for t in started:  # (the scheduler side recorded their starts)
            plan = self.plans[t.name]
            after = plan.load if t.kind == "load" else plan.save
            if t.kind == "load" and not after:
                self._end(t)
            else:
                self.pending.append((step + max(after, 1) - 1, t))

    def computes(self, table: Sequence[int], first: int, count: int) -> bool:
        """A step computes positions `first .. first + count - 1` of a request through
        `table`: whether it reads garbage KV (at a position before `first`), whose KV it
        writes then is garbage too; else its KV is good from now on. (A step's requests
        never write what another of them reads: each writes blocks of its own.)"""
        bad = any(self._slot(table, p) in self.garbage for p in range(first))
        slots = {s for p in range(first, first + count) if (s := self._slot(table, p)) is not None}
        if bad:
            self.garbage |= slots
        else:
            self.garbage -= slots
        return bad

    def report(self, step: int) -> Report:
        """End the transfers due by `step` (after it computed), as its output reports them."""
        due = [t for at, t in self.pending if at <= step]
        self.pending = [(at, t) for at, t in self.pending if at > step]
        for t in due:
            self._end(t)
        ended, self.ended = self.ended, []  # a synchronous load's too
        return Report(
            tuple(t.name for t in ended if t.kind == "load" and self.plans[t.name].load),
            tuple(t.name for t in ended if t.kind == "save"),
            tuple(b for t in ended for b in t.failed),
        )

    def drain(self) -> list[Transfer]:
        """This step's events, for its trace."""
        events, self.events = self.events, []
        return events

    @property
    def busy(self) -> bool:
        """Whether a transfer is still to end (an empty step is no stuck engine then)."""
        return bool(self.pending)

    def _end(self, t: Transfer) -> Transfer:
        failed: tuple[int, ...] = ()
        if t.kind == "load":
            failed = self._failing(t)
            for p in t.moved:  # what it loaded is good KV now, a failed block garbage
                slot = self._slot(t.table, p)
                if slot is None:
                    continue
                if t.table[p // self.block_size] in failed:
                    self.garbage.add(slot)
                else:
                    self.garbage.discard(slot)
        end = t._replace(phase="end", at="update", failed=failed)
        self.events.append(end)
        self.ended.append(end)
        return end

    def _failing(self, t: Transfer) -> tuple[int, ...]:
        """The block ids of `t`'s blocks its request's plan fails (counted from its first)."""
        if not t.moved:
            return ()
        first = t.first // self.block_size
        blocks = t.table[first : (len(t.tokens) - 1) // self.block_size + 1]
        return tuple(b for i, b in enumerate(blocks) if i in self.plans[t.name].load_fails)

    def _slot(self, table: Sequence[int], p: int) -> int | None:
        index = p // self.block_size
        return table[index] * self.block_size + p % self.block_size if index < len(table) else None


class Jobs(Worker):
    """The worker side of an engine's own offloading connector (connector "offloading"),
    which moves KV in jobs between the engine's blocks and its offload tier's. A job ends at
    the start of a step, before its forward pass: a synchronous load in the step that
    started it; a job the engine flushes (it handed the job's blocks on) in the step whose
    metadata says so; any other its request's drawn steps after it started (`load` for a
    load, `save` for a store, at least 1). The step's output reports the jobs that ended,
    and the requests whose asynchronous loads all did."""

    def __init__(self, workload: EngineWorkload) -> None:
        super().__init__(workload)
        self.synchronous: set[int] = set()  # the loads that end before their first step

    def begin(
        self,
        step: int,
        started: Sequence[Transfer],
        flush: Iterable[int] = (),
        sync: Iterable[int] = (),
    ) -> None:
        """The step's metadata: the jobs it starts (`sync`: the loads among them to finish
        before the forward pass), and those to flush before it."""
        flushed = set(flush)
        self.synchronous |= set(sync)
        due = [t for at, t in self.pending if at <= step or t.job in flushed]
        self.pending = [(at, t) for at, t in self.pending if at > step and t.job not in flushed]
        for t in due:
            self._end(t)
        for t in started:  # (one flushed as it starts: a finished request's blocks the
            # same step handed on, stored before the forward pass writes them)
            if (t.kind == "load" and t.job in self.synchronous) or t.job in flushed:
                self._end(t)
                continue
            plan = self.plans[t.name]
            self.pending.append((step + max(plan.load if t.kind == "load" else plan.save, 1), t))

    def report(self, step: int) -> Report:
        """The jobs that ended this step (at its start)."""
        ended, self.ended = self.ended, []
        loading = {t.name for _, t in self.pending if t.kind == "load"}
        loaded = {
            t.name
            for t in ended
            if t.kind == "load" and t.job not in self.synchronous and t.name not in loading
        }
        return Report(tuple(sorted(loaded)), (), (), tuple(t.job for t in ended))

    def _end(self, t: Transfer) -> Transfer:
        end = t._replace(phase="end", at="forward")
        self.events.append(end)
        self.ended.append(end)
        return end


def garbage(token: int, vocab: int) -> int:
    """A token the model would not have given: what it says after reading garbage KV."""
    if token != 1:
        return 1
    return 2 if vocab > 1 else 0


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
