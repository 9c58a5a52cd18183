"""Tensor parallelism played in one process, through the fork's own code (docs/engines.md,
"nano-vllm's own step").

nano-vllm's engine spawns a process per worker rank (`mp.get_context("spawn").Process(
target=ModelRunner, args=(config, rank, event))`); rank 0's `call()` pickles the method and
its arguments into shared memory (`write_shm`) and sets each worker's event; a worker's
`loop()` reads them (`read_shm`) and runs the same method on its copies. Here:

- a worker is the fork's ModelRunner built from a pickled and unpickled copy of its
  arguments, as spawn builds it, in a process state of its own (ProcessState: the class
  attributes and module globals a fresh interpreter would hold, which rank 0's process may
  have changed since import, as nano-vllm's `Sequence.block_size`);
- its event's `set()` runs the worker's own `loop()` there and then, in the caller's thread:
  the loop reads the message through the fork's own `read_shm` from a buffer of the size the
  fork asked for (an overflow raises as it would), runs it, and comes back to `wait()`,
  which parks it (Park, a BaseException the fork's `except Exception` does not catch) until
  the next `set()`;
- `torch.distributed` is a stand-in that knows the rank it is called from.
A worker that raises ends the run with E8 after rank 0's step, unless rank 0 raised too
(then the engine's own failure, E6, is the verdict: rank 0 runs the same code on the
originals); a worker's inputs are compared with rank 0's after each step (model.Forwards).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import os
import pickle
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from schedcheck.drive.driver import describe

__all__ = ["Park", "ProcessState", "Ranks"]

PLAIN = (int, float, str, bytes, bool, type(None))


class Park(BaseException):
    """A worker waits for its next message: back to the rank that signalled it."""


class ProcessState:
    """The plain values (and itertools counters) a fork's modules and classes hold at
    import: what a freshly spawned process starts from."""

    def __init__(self, modules: list[types.ModuleType]) -> None:
        owners: list[Any] = []
        for module in modules:
            owners.append(module)
            owners += [
                v
                for v in vars(module).values()
                if isinstance(v, type)
                and v.__module__ == module.__name__
                and not issubclass(v, enum.Enum)  # its members are constants, not state
            ]
        self.keys = [
            (owner, attr)
            for owner in owners
            for attr, value in list(vars(owner).items())
            if not attr.startswith("__") and _kept(value) and attr not in _fields(owner)
        ]
        self.pristine = self.capture()

    def scaled(self, default: int, size: int) -> list[Any]:
        """The import-time state with the block size the workloads use for the fork's
        default (`*block_size*` attributes holding `default`, as nano-vllm's
        `Sequence.block_size = 256` does): a workload's small blocks stand for the default
        ones, in every process."""
        sized = set(self.sized(default))
        return [
            size if attr in sized and value == default else value
            for (_, attr), value in zip(self.keys, self.pristine, strict=True)
        ]

    def sized(self, default: int) -> list[str]:
        """The attributes that hold the default block size at import."""
        return [
            attr
            for (_, attr), value in zip(self.keys, self.pristine, strict=True)
            if "block_size" in attr.lower() and value == default and not isinstance(value, bool)
        ]

    def capture(self) -> list[Any]:
        return [_frozen(getattr(owner, attr, None)) for owner, attr in self.keys]

    def differences(self, mine: list[Any], theirs: list[Any]) -> list[str]:
        """`owner.attr = theirs (mine)` where two processes' states differ."""
        return [
            f"{getattr(owner, '__name__', '?')}.{attr} = {b!r} (rank 0: {a!r})"
            for (owner, attr), a, b in zip(self.keys, mine, theirs, strict=True)
            if a != b and not (isinstance(a, tuple) and isinstance(b, tuple))  # counters
        ]

    def apply(self, values: list[Any]) -> None:
        for (owner, attr), value in zip(self.keys, values, strict=True):
            setattr(owner, attr, _thawed(value))


def _fields(owner: Any) -> set[str]:
    """A dataclass's fields: their class attributes are defaults, not a process's state."""
    if isinstance(owner, type) and dataclasses.is_dataclass(owner):
        return {f.name for f in dataclasses.fields(owner)}
    return set()


def _kept(value: object) -> bool:
    return isinstance(value, (*PLAIN, itertools.count))


def _frozen(value: Any) -> Any:
    if isinstance(value, itertools.count):
        return ("count", int(repr(value)[6:-1].split(",")[0]))  # count(7) -> 7: its next
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "count":
        return itertools.count(value[1])
    return value


class Ranks:
    """One engine's ranks: rank 0 is the caller's; each worker is served when signalled."""

    def __init__(self, state: ProcessState, source: str) -> None:
        self.state, self.source = state, source
        _EVENTS.clear()  # one engine at a time in a process: the last one's events go
        self.current = 0
        self.world = 1
        self.workers: dict[int, Any] = {}  # rank -> its ModelRunner
        self.states: dict[int, list[Any]] = {}  # a worker's process state while away
        self.buffers: dict[str, bytearray] = {}
        self.events: dict[int, int] = {}  # id(event) -> the worker rank that waits on it
        self.running: int | None = None  # the worker whose loop runs now
        self.pending: list[tuple[int, Any, tuple[Any, ...]]] = []  # spawned, not yet built
        self.fresh = state.pristine  # what a new process holds (ProcessState.scaled)
        # the first worker that raised: its rank, what it raised in words, the exception
        self.raised: tuple[int, str, Exception] | None = None

    @contextmanager
    def as_rank(self, rank: int) -> Iterator[None]:
        """Run the block as `rank`'s process: its own class attributes and globals."""
        if rank == self.current:
            yield
            return
        away, before = self.state.capture(), self.current
        self.state.apply(self.states.get(rank, self.fresh))
        self.current = rank
        try:
            yield
        finally:
            self.states[rank] = self.state.capture()
            self.state.apply(away)
            self.current = before

    def differences(self, rank: int) -> list[str]:
        """What a worker's process holds otherwise than rank 0's (plain values only)."""
        if rank not in self.states:
            return []
        return self.state.differences(self.state.capture(), self.states[rank])

    def spawn(self, target: Any, args: tuple[Any, ...]) -> None:
        """Start a worker as spawn does: its arguments pickled, its target built from the
        copy in a fresh process state. A real worker waits in its first collective (nano-vllm:
        `dist.barrier()`, after which it attaches the shared memory rank 0 created): it is
        built when rank 0 reaches one (or at its first message), and its __init__ ends in
        its loop, parked."""
        copy = pickle.loads(pickle.dumps(args))
        rank = next(a for a in copy if isinstance(a, int) and not isinstance(a, bool))
        for a in copy:
            if isinstance(a, Event):
                self.events[id(a)] = rank
        self.pending.append((rank, target, copy))

    def start_pending(self) -> None:
        """Build the workers spawned and not yet built (rank 0 reached a collective)."""
        while self.pending:
            rank, target, copy = self.pending.pop(0)
            self.states[rank] = list(self.fresh)
            with self.as_rank(rank):
                target(*copy)

    def built(self, runner: Any, rank: int) -> None:
        if rank > 0:
            self.workers[rank] = runner

    def serve(self, event: Event) -> None:
        """A worker's event was set: run its loop until it waits again."""
        self.start_pending()
        rank = self.events.get(id(event))
        runner = self.workers.get(rank) if rank is not None else None
        if rank is None or runner is None or self.running is not None:
            return  # its __init__ is still running (it reads in its loop), or nested
        self.running = rank
        try:
            with self.as_rank(rank):
                runner.loop()
        except Park:
            pass
        except Exception as e:  # the fork's code on its copy: rank 0 runs on regardless
            if self.raised is None:
                self.raised = rank, describe(e, None, self.source), e
        finally:
            self.running = None

    # What the fork's modules get in place of multiprocessing, shared memory, distributed:

    def context(self, method: str = "spawn") -> Context:
        return Context(self)

    def shared_memory(
        self, name: str | None = None, create: bool = False, size: int = 0
    ) -> SharedMemory:
        return SharedMemory(self, name or "schedcheck", create, size)


class Event:
    """A worker's multiprocessing Event: `set()` serves it, `wait()` parks it when unset."""

    def __init__(self, ranks: Ranks) -> None:
        self.ranks, self.flag = ranks, False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_event, (id(self),))  # a spawned copy is the same event

    def set(self) -> None:
        self.flag = True
        self.ranks.serve(self)

    def wait(self, timeout: float | None = None) -> bool:
        if not self.flag:
            raise Park
        return True

    def clear(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag


_EVENTS: dict[int, Event] = {}


def _event(key: int) -> Event:
    return _EVENTS[key]


class Process:
    def __init__(
        self, ranks: Ranks, target: Any, args: tuple[Any, ...] = (), **kwargs: Any
    ) -> None:
        self.ranks, self.target, self.args = ranks, target, args
        self.pid, self.exitcode, self.daemon = os.getpid(), None, kwargs.get("daemon", False)

    def start(self) -> None:
        self.ranks.spawn(self.target, self.args)

    def join(self, timeout: float | None = None) -> None:
        pass

    def is_alive(self) -> bool:
        return False


class Context:
    """`mp.get_context("spawn")`: its Event and Process."""

    def __init__(self, ranks: Ranks) -> None:
        self.ranks = ranks

    def Event(self) -> Event:
        event = Event(self.ranks)
        _EVENTS[id(event)] = event
        return event

    def Process(self, target: Any = None, args: tuple[Any, ...] = (), **kw: Any) -> Process:
        return Process(self.ranks, target, args, **kw)


class SharedMemory:
    """A named buffer of the size asked for, shared by the ranks of one engine."""

    def __init__(self, ranks: Ranks, name: str, create: bool, size: int) -> None:
        if create:
            ranks.buffers[name] = bytearray(size)
        elif name not in ranks.buffers:
            raise FileNotFoundError(f"no shared memory named {name!r}")
        self.name, self.size = name, len(ranks.buffers[name])
        self.buf = memoryview(ranks.buffers[name])

    def close(self) -> None:
        pass

    def unlink(self) -> None:
        pass


class Distributed:
    """`torch.distributed` for ranks played in one process: collectives are no-ops (the
    simulated model has nothing to reduce), a rank and world size are the caller's."""

    def __init__(self, ranks: Callable[[], Ranks]) -> None:
        self._ranks = ranks

    def get_rank(self, *args: object, **kwargs: object) -> int:
        return self._ranks().current

    def get_world_size(self, *args: object, **kwargs: object) -> int:
        return self._ranks().world

    def barrier(self, *args: object, **kwargs: object) -> None:
        ranks = self._ranks()
        if ranks.current == 0:
            ranks.start_pending()

    def is_initialized(self) -> bool:
        return True

    # `dist.group.WORLD`, the default process group a fork may name
    group = types.SimpleNamespace(WORLD=None)

    def is_available(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None
