"""Run one workload on one implementation, step by step, and copy out a plain-data trace.

Per step: add the arrivals in order, `schedule()`, snapshot, `update()`, snapshot (and, if
the workload asks, `update()` again, snapshot). The driver keeps the implementation's
objects only to read them: every value it records is type-checked and copied into str,
int and tuples at once, so nothing recorded can change later or lie about equality.
Anything that breaks the contract ends the run with a `Failure` (check C1): whatever a call
into the implementation raises, or reading one of its attributes. An exception anywhere
else is the driver's own fault and propagates (schedcheck/faults.py: never a verdict).
"""

from __future__ import annotations

import enum
import functools
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any, TypeVar, cast

from schedcheck.faults import CheckerError, Failure
from schedcheck.invariants.liveness import liveness_bound
from schedcheck.model.trace import Sample, SeqState, State, Step, Trace, Update, counters
from schedcheck.model.workload import Request, Script, Workload

_T = TypeVar("_T")
_V = TypeVar("_V")

STATUS_NAMES = frozenset({"WAITING", "RUNNING", "FINISHED"})


class ContractError(Exception):
    """The implementation broke the submission contract; the message says how."""


def show(value: object, limit: int = 80) -> str:
    """A short repr that survives objects whose repr is broken or huge."""
    try:
        text = repr(value)
    except Exception:  # its __repr__ is the implementation's code
        text = f"<{type(value).__name__} with a broken repr>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unshared(value: _V) -> _V:
    """An equal value that is not the same object as `value` wherever CPython allows it
    (every str longer than one character, every int outside the small-int cache -5..256):
    what the implementation is handed, so that code comparing two of them with `is` (an eos
    sampled by `sample_fn` and the `eos_token_id` it was given, two seq_ids) fails here as
    it would in an engine, where they come from different places (issue 38)."""
    if isinstance(value, int) and type(value) is int:
        return cast(_V, (value + 1) - 1)  # a new int object
    if isinstance(value, str) and type(value) is str and len(value) > 1:
        return cast(_V, value[:1] + value[1:])  # a new str object
    return value


def plain_int(value: object, what: str) -> int:
    if type(value) is not int:
        raise ContractError(f"{what} must be an int, got {type(value).__name__} {show(value)}")
    return value


class Recorder:
    """The `sample_fn` the implementation gets: the token model, plus a log of its calls (I3)."""

    def __init__(self, workload: Workload, ids_by_obj: dict[int, str]) -> None:
        self.model = workload.model
        self.eos = workload.config.eos_token_id
        self.ids_by_obj = ids_by_obj
        self.samples: list[Sample] = []
        self.error: ContractError | None = None  # kept even if the caller swallows it
        self.internal: BaseException | None = None  # our own fault, kept the same way

    def __call__(self, seq: Any) -> int:
        try:
            seq_id = self.ids_by_obj.get(id(seq))
            if seq_id is None:
                raise ContractError(
                    f"sample_fn was called with {show(seq)}, which is not one of the "
                    "sequences added to the scheduler"
                )
            output = read_output(seq, seq_id)
            computed = read(seq, "num_computed", seq_id)
            if type(computed) is not int:  # the message only for a value that fails
                plain_int(computed, f"{seq_id}.num_computed")
            tokens = read(seq, "num_tokens", seq_id)
            if type(tokens) is not int:
                plain_int(tokens, f"{seq_id}.num_tokens")
        except ContractError as e:
            self.error = self.error or e
            raise
        try:
            self.samples.append(Sample(seq_id, computed, tokens))
            return unshared(self.model.next_token(seq_id, output, self.eos))
        except Exception as e:  # the token model is ours: never the submission's fault
            self.internal = self.internal or e
            raise

    def take(self) -> tuple[Sample, ...]:
        samples, self.samples = tuple(self.samples), []
        if self.error is not None:
            raise self.error
        return samples


def read(obj: Any, name: str, owner: str) -> Any:
    """`obj.name`, where reading it runs the implementation's code (a property, a
    __getattr__): what it raises is its failure to keep the contract, not ours."""
    try:
        return getattr(obj, name)
    except (Exception, SystemExit) as e:
        raise ContractError(f"reading {owner}.{name} {describe(e, None)}") from None


def read_output(seq: Any, seq_id: str) -> tuple[int, ...]:
    return copy_output(read(seq, "output", seq_id), seq_id)


def copy_output(output: object, seq_id: str) -> tuple[int, ...]:
    if type(output) is not list:
        raise ContractError(
            f"{seq_id}.output must be a list, got {type(output).__name__} {show(output)}"
        )
    copied = tuple(output)
    if not _INT_ONLY.issuperset(map(type, copied)):  # one pass in C: this is the hot path
        for token in copied:
            plain_int(token, f"every token in {seq_id}.output")
    return copied


_INT_ONLY = frozenset({int})
# A SeqState from its five fields, built in C (a NamedTuple's own __new__ is Python code).
_seq_state = functools.partial(tuple.__new__, SeqState)


class Driver:
    """One scheduler instance of one implementation, fed one workload."""

    def __init__(self, impl: ModuleType, workload: Workload) -> None:
        self.impl = impl
        self.workload = workload
        self.seqs: dict[str, Any] = {}  # the implementation's Sequence objects, by id
        self.ids_by_obj: dict[int, str] = {}  # id(object) -> seq_id; seqs keeps them alive
        self.status_names: dict[int, tuple[object, str]] = {}  # id(member) -> member, name
        self.recorder = Recorder(workload, self.ids_by_obj)
        config = workload.config
        arguments: dict[str, Any] = {
            "num_blocks": unshared(config.num_blocks),
            "block_size": unshared(config.block_size),
            "max_num_seqs": unshared(config.max_num_seqs),
            "max_num_batched_tokens": unshared(config.max_num_batched_tokens),
            "sample_fn": self.recorder,
            "eos_token_id": unshared(config.eos_token_id),
        }
        for name in workload.omitted():  # at the contract's default: a caller may leave it out
            del arguments[name]
        self.sched = self.call(impl.Scheduler, **arguments)

    def call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """`function(*args, **kwargs)`, a call into the implementation: whatever it raises is
        its failure (C1), a ContractError; an exception anywhere else in the driver is ours.
        """
        try:
            result = function(*args, **kwargs)
        except ContractError:
            raise  # the recorder's, passed on through the implementation's code
        except (Exception, SystemExit) as e:
            self._internal()
            raise ContractError(describe(e, self.impl)) from None
        if self.recorder.internal is not None:  # (_internal's test, inlined: the hot path)
            self._internal()
        return result

    def _internal(self) -> None:
        internal, self.recorder.internal = self.recorder.internal, None
        if internal is not None:
            raise CheckerError(f"the token model failed inside sample_fn: {internal!r}")

    def new_sequence(self, seq_id: str, prompt_len: int, max_tokens: int) -> Any:
        seq = self.call(
            self.impl.Sequence,
            seq_id=unshared(seq_id),
            prompt_len=unshared(prompt_len),
            max_tokens=unshared(max_tokens),
        )
        self.seqs[seq_id] = seq
        self.ids_by_obj[id(seq)] = seq_id
        return seq

    def add(self, seq: Any) -> None:
        self.call(read(self.sched, "add", "Scheduler"), seq)

    def schedule(self) -> tuple[tuple[str, int], ...]:
        returned = self.call(read(self.sched, "schedule", "Scheduler"))
        if type(returned) is not dict:
            raise ContractError(
                f"schedule() must return a dict, got {type(returned).__name__} {show(returned)}"
            )
        pairs = tuple(dict.items(returned))
        for key, n in pairs:
            if type(key) is not str:
                raise ContractError(f"schedule() returned a key {show(key)} that is not a str")
            if type(n) is not int:  # the message only for a value that fails
                plain_int(n, f"schedule()[{key!r}]")
        # An engine owns what schedule() returned and may consume it: update() must work
        # from a record of its own (bug table: update() does not know what was scheduled).
        dict.clear(returned)
        return pairs

    def update(self, whole: bool = True) -> Update:
        returned = self.call(read(self.sched, "update", "Scheduler"))
        if type(returned) is not list:
            raise ContractError(
                f"update() must return a list, got {type(returned).__name__} {show(returned)}"
            )
        finished = self._ids(returned, "the list update() returned")
        return Update(finished, self.recorder.take(), self.snapshot(whole))

    def _ids(self, queue: list[Any] | deque[Any], what: str) -> tuple[str, ...]:
        # The built-in iterators: a subclass could not be here, but be explicit about it.
        items = list(list.__iter__(queue) if type(queue) is list else deque.__iter__(queue))
        ids = tuple(map(self.ids_by_obj.get, map(id, items)))  # in C: the hot path
        if None in ids:
            seq = items[ids.index(None)]
            raise ContractError(
                f"{what} holds {show(seq)}, which is not one of the sequences added"
            )
        return cast(tuple[str, ...], ids)

    def snapshot(self, whole: bool = True) -> State:
        """The scheduler's state, copied; not `whole`: its counters alone (a long run's
        steps between samples: Workload.sample_every)."""
        sched = self.sched
        if not whole:
            return counters(
                plain_int(read(sched, "blocks_used", "Scheduler"), "Scheduler.blocks_used"),
                plain_int(read(sched, "num_preemptions", "Scheduler"), "Scheduler.num_preemptions"),
            )
        queues = []
        for name in ("waiting", "running", "finished"):
            queue = read(sched, name, "Scheduler")
            if type(queue) not in (list, deque):
                raise ContractError(
                    f"Scheduler.{name} must be a list or a deque, got {type(queue).__name__}"
                )
            queues.append(self._ids(queue, _QUEUES[name]))
        # Every sequence, at every call: the run's hot path, so the reads and checks are
        # inlined here (what `read`, `plain_int`, `_status` and `copy_output` do, in their
        # order, each called only where a value fails its check, for the message).
        seqs = {}
        names = self.status_names
        for seq_id, seq in self.seqs.items():
            field = "status"
            try:
                status = seq.status
                field = "num_computed"
                computed = seq.num_computed
                field = "num_tokens"
                tokens = seq.num_tokens
                field = "num_blocks"
                blocks = seq.num_blocks
                field = "output"
                output = seq.output
            except (Exception, SystemExit) as e:
                raise ContractError(f"reading {seq_id}.{field} {describe(e, None)}") from None
            if type(computed) is not int or type(tokens) is not int or type(blocks) is not int:
                for value, what in (
                    (computed, "num_computed"),
                    (tokens, "num_tokens"),
                    (blocks, "num_blocks"),
                ):
                    plain_int(value, f"{seq_id}.{what}")
            known = names.get(id(status))
            if known is not None and known[0] is status:
                named = known[1]
            else:
                named = self._status(seq_id, status)
            copied = tuple(output) if type(output) is list else None
            if copied is None or not _INT_ONLY.issuperset(map(type, copied)):
                copied = copy_output(output, seq_id)  # raises, saying what is wrong
            seqs[seq_id] = _seq_state((named, computed, tokens, blocks, copied))
        return State(
            seqs=seqs,
            waiting=queues[0],
            running=queues[1],
            finished=queues[2],
            blocks_used=plain_int(read(sched, "blocks_used", "Scheduler"), "Scheduler.blocks_used"),
            num_preemptions=plain_int(
                read(sched, "num_preemptions", "Scheduler"), "Scheduler.num_preemptions"
            ),
        )

    def _status(self, seq_id: str, status: object) -> str:
        """The member's name; read once per member (members are singletons, kept alive in
        the cache, so that their ids stay theirs)."""
        known = self.status_names.get(id(status))
        if known is not None and known[0] is status:
            return known[1]
        name = read(status, "name", f"{seq_id}.status") if isinstance(status, enum.Enum) else None
        if type(name) is not str or name not in STATUS_NAMES:
            raise ContractError(
                f"{seq_id}.status must be a SequenceStatus member named WAITING, RUNNING or "
                f"FINISHED, got {show(status)}"
            )
        self.status_names[id(status)] = (status, name)
        return name


_QUEUES = {name: f"Scheduler.{name}" for name in ("waiting", "running", "finished")}

OnCall = Callable[[int, str], None]


class _Calls:
    """The calls of one run: which one is under way (where a failure is charged), each
    told to `on_call` before it is made; and the steps so far."""

    driver: Driver  # set once Scheduler() returned

    def __init__(
        self, on_call: OnCall | None, of: str = "", workload: Workload | None = None
    ) -> None:
        self.where: tuple[int, str] = (0, "Scheduler()" + of)
        self.on_call = on_call
        self.of = of  # which scheduler, where two are alive at once: " of scheduler B"
        self.steps: list[Step] = []
        # a long run's sampling (Workload.sample_every) and the requests finished so far
        self.every = workload.sample_every if workload is not None else 0
        self.total = len(workload.requests) if workload is not None else 0
        self.done = 0

    def whole(self, number: int) -> bool:
        """Whether step `number`'s states are copied whole (else its counters alone)."""
        return not self.every or number % self.every == 0

    def all_done(self) -> bool:
        """A long run's end: every request finished, by update()'s own word."""
        return self.done >= self.total

    def enter(self, number: int, call: str) -> None:
        self.where = (number, call + self.of)
        if self.on_call is not None:
            self.on_call(number, call + self.of)

    def add(self, number: int, request: Request) -> None:
        self.enter(number, "Sequence()")
        seq = self.driver.new_sequence(request.seq_id, request.prompt_len, request.max_tokens)
        self.enter(number, "add()")
        self.driver.add(seq)

    def step(self, arrivals: tuple[str, ...]) -> Step:
        """schedule(), then update(); a step whose update() fails is kept (the checks see
        what schedule() returned)."""
        self.schedule(arrivals)
        return self.update()

    def schedule(self, arrivals: tuple[str, ...]) -> None:
        """A step's first half: schedule()."""
        number = len(self.steps) + 1
        self.enter(number, "schedule()")
        scheduled = self.driver.schedule()
        state = self.driver.snapshot(self.whole(number))
        self.steps.append(Step(number, arrivals, scheduled, state, None))

    def _update(self) -> Update:
        number = len(self.steps)
        update = self.driver.update(self.whole(number))
        self.done += len(update.finished)
        if self.every and self.all_done() and not self.whole(number):
            update = replace(update, after=self.driver.snapshot())  # the end, whole
        return update

    def update(self) -> Step:
        """A step's second half: update()."""
        self.enter(len(self.steps), "update()")
        s = self.steps[-1]  # built anew, not dataclasses.replace: a long run's hot path
        self.steps[-1] = Step(s.number, s.arrivals, s.schedule, s.scheduled, self._update())
        return self.steps[-1]

    def again(self) -> Step:
        """update() once more, with no schedule() since the last one."""
        self.enter(len(self.steps), "update() again")
        self.steps[-1] = replace(self.steps[-1], again=self._update())
        return self.steps[-1]


def _traced(
    impl: ModuleType, workload: Workload, on_call: OnCall | None, body: Callable[[_Calls], None]
) -> Trace:
    """The trace of Scheduler() and then `body`'s calls into `impl`; a contract broken or
    the memory cap hit (wherever it struck: the cap is the implementation's) ends it as
    the failure of the call under way (C1)."""
    calls = _Calls(on_call, workload=workload)
    try:
        calls.enter(0, "Scheduler()")
        calls.driver = Driver(impl, workload)
        body(calls)
    except (ContractError, MemoryError) as e:
        message = str(e) if isinstance(e, ContractError) else describe(e, impl)
        return Trace(workload, tuple(calls.steps), Failure(*calls.where, message))
    return Trace(workload, tuple(calls.steps))


def run(
    impl: ModuleType,
    workload: Workload,
    max_steps: int | None = None,
    on_call: OnCall | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Trace:
    """Drive `impl` through `workload` until every request finished, or the liveness bound.

    `on_call(step, call)` is told before every call into the implementation, `on_step`
    after every complete step: an isolated worker streams both to its parent.
    """
    bound = liveness_bound(workload) if max_steps is None else max_steps
    arrivals = workload.arrivals()
    max_tokens = workload.max_tokens()

    def body(calls: _Calls) -> None:
        steps = calls.steps
        for number in range(1, bound + 1):
            if calls.every:  # a long run: its end told by update()'s lists, not the state
                if number > workload.last_arrival() and calls.all_done():
                    break
            elif _done(steps, workload, number, max_tokens):
                break
            arrived = arrivals.get(number, [])
            for request in arrived:
                calls.add(number, request)
            step = calls.step(tuple(r.seq_id for r in arrived))
            if workload.reupdate:
                step = calls.again()
            if on_step is not None:
                on_step(step)

    return _traced(impl, workload, on_call, body)


def run_pair(
    impl: ModuleType,
    first: Workload,
    second: Workload,
    on_call: OnCall | None = None,
    on_step: Callable[[int, Step], None] | None = None,
) -> tuple[Trace, Trace]:
    """Two schedulers of `impl` alive at once (issue 47), A of `first` and B of `second`:
    A built whole, then B; then step by step A's schedule(), B's schedule(), A's update(),
    B's update() (each one's arrivals added before its schedule()), each until its own
    requests finished or its liveness bound. Each trace is what that scheduler did, as a
    run of it alone would record it; `on_step(which, step)` is told of each step (0: A).

    A contract broken ends both: the trace of the scheduler it broke in carries the
    failure, the other stops where it was (no failure: no check judges it then)."""
    runs = (
        (_Calls(on_call, " of scheduler A"), first),
        (_Calls(on_call, " of scheduler B"), second),
    )
    bounds = [liveness_bound(w) for _, w in runs]
    arrivals = {id(w): w.arrivals() for _, w in runs}
    max_tokens = {id(w): w.max_tokens() for _, w in runs}
    current = runs[0][0]
    try:
        for calls, workload in runs:
            current = calls
            calls.enter(0, "Scheduler()")
            calls.driver = Driver(impl, workload)
        for number in range(1, max(bounds) + 1):
            going = [
                (c, w)
                for (c, w), bound in zip(runs, bounds, strict=True)
                if number <= bound and not _done(c.steps, w, number, max_tokens[id(w)])
            ]
            if not going:
                break
            for calls, workload in going:
                current = calls
                arrived = arrivals[id(workload)].get(number, [])
                for request in arrived:
                    calls.add(number, request)
                calls.schedule(tuple(r.seq_id for r in arrived))
            for calls, workload in going:
                current = calls
                calls.update()
                if workload.reupdate:
                    calls.again()
            for calls, _ in going:
                if on_step is not None:
                    on_step(0 if calls is runs[0][0] else 1, calls.steps[-1])
    except (ContractError, MemoryError) as e:
        message = str(e) if isinstance(e, ContractError) else describe(e, impl)
        return tuple(  # type: ignore[return-value]
            Trace(w, tuple(c.steps), Failure(*c.where, message) if c is current else None)
            for c, w in runs
        )
    return Trace(first, tuple(runs[0][0].steps)), Trace(second, tuple(runs[1][0].steps))


def _done(steps: list[Step], workload: Workload, number: int, max_tokens: dict[str, int]) -> bool:
    """Whether a run is over before step `number`: every request finished (none to come),
    or an output overran its max_tokens (it failed already: each step more only grows it)."""
    if not steps:
        return False
    if number > workload.last_arrival() and _all_finished(steps[-1]):
        return True
    return steps[-1].last().overrun(max_tokens)


def play(
    impl: ModuleType,
    workload: Workload,
    script: Script,
    on_call: OnCall | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Trace:
    """Drive `impl` by `script`; the trace of what it returned, or how a call failed.

    `on_step` is told of each step once it is complete (when the next one begins: an
    ["again"] may still change it); the steps after the last one told are in the trace."""
    requests = {r.seq_id: r for r in workload.requests}
    max_tokens = workload.max_tokens()

    def body(calls: _Calls) -> None:
        steps = calls.steps

        def step() -> None:
            if steps and on_step is not None:
                on_step(steps[-1])
            number = len(steps) + 1
            calls.step(tuple(r.seq_id for r in workload.requests if r.arrival == number))

        def finished() -> bool:
            pending = any(r.arrival > len(steps) for r in workload.requests)
            if steps and steps[-1].last().overrun(max_tokens):
                return True  # it failed already, as in run()
            return bool(steps) and not pending and _all_finished(steps[-1])

        for op, *args in script:
            if op == "add":
                request = requests[args[0]]
                calls.add(request.arrival, request)
            elif op == "step":
                step()
            elif op == "again":
                calls.again()
            elif op == "finish":
                for _ in range(liveness_bound(workload)):
                    if finished():
                        break
                    step()
            else:
                raise ValueError(f"script: no such operation {op!r}")

    return _traced(impl, workload, on_call, body)


def _all_finished(step: Step) -> bool:
    """Decided on the copied snapshot, never on the implementation's live objects."""
    return all(s.status == "FINISHED" for s in step.last().seqs.values())


def describe(error: BaseException, impl: ModuleType | None, root: str | None = None) -> str:
    """What the implementation raised, and where in its own file (or, with `root`, in its
    own files below that folder: an engine's checkout)."""
    try:
        detail = str(error)[:300]
    except Exception:
        detail = "<its message is broken>"
    text = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    if isinstance(error, MemoryError):
        text += " (it ran out of the memory it may use)"
    where = getattr(impl, "__file__", None)
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if f.filename == where or (root is not None and f.filename.startswith(root + "/"))
    ]
    if frames:
        f = frames[-1]
        name = f.filename[len(root) + 1 :] if root else f.filename.rsplit("/", 1)[-1]
        text += f" (at line {f.lineno} of {name}, in {f.name}: {f.line})"
    return f"raised {text}"
