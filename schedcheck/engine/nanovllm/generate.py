"""A fork's `LLMEngine.generate()` as the loop that steps it (docs/engines.md, "nano-vllm's
own step"): generate() sets up what its step reads (some forks' per-run state) and calls
whatever step method it calls; schedcheck must still add requests at their steps.

So generate() runs on a thread of its own, started with no prompt, and parks each time its
loop asks `self.is_finished()`: there the run's skeleton takes over (adds the requests
arriving now, asks the engine's own is_finished(), checks the bound) and lets it take one
iteration of its loop (`advance`), or end (`close`: is_finished() answers True). Exactly
one of the two threads runs at any time, so nothing of the engine is read while it runs.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["GenerateLoop", "calls_is_finished"]


class Returned(Exception):
    """generate() returned, or raised, before the run was over."""


_LOOPS: dict[type, bool] = {}


def calls_is_finished(engine: Any) -> bool:
    """Whether the engine's generate() loops on `self.is_finished()` (read off its source,
    once per engine class)."""
    kind = type(engine)
    if kind not in _LOOPS:
        _LOOPS[kind] = _reads_is_finished(kind)
    return _LOOPS[kind]


def _reads_is_finished(kind: type) -> bool:
    generate = getattr(kind, "generate", None)
    try:
        source = inspect.getsource(generate) if generate is not None else ""
    except (OSError, TypeError):
        return False
    return "self.is_finished()" in source


class GenerateLoop:
    """generate() on its thread, parked at each of its loop's is_finished() calls; the two
    threads hand the turn to each other through two semaphores."""

    def __init__(self, engine: Any, make_params: Callable[[], Any]) -> None:
        self.engine = engine
        self.finished: Callable[[], bool] = engine.is_finished  # the engine's own
        self.to_engine = threading.Semaphore(0)
        self.to_driver = threading.Semaphore(0)
        self.ending = False
        self.done = False
        self.error: BaseException | None = None
        engine.is_finished = self._park
        self.thread = threading.Thread(
            target=self._generate, args=(make_params,), name="engine generate()", daemon=True
        )

    def start(self) -> bool:
        """Start generate() and wait for its first park; False if it never parked (its loop
        does not ask is_finished(), or it returned or raised before)."""
        self.thread.start()
        self.to_driver.acquire()
        return not self.done

    def _park(self) -> bool:
        self.to_driver.release()
        self.to_engine.acquire()
        return self.ending

    def _generate(self, make_params: Callable[[], Any]) -> None:
        generate = self.engine.generate
        kwargs: dict[str, Any] = {}
        try:
            names = inspect.signature(generate).parameters
        except (TypeError, ValueError):
            names = {}  # type: ignore[assignment]
        if "use_tqdm" in names:
            kwargs["use_tqdm"] = False
        try:
            generate([], make_params(), **kwargs)
        except BaseException as e:  # the engine's: told to the driver's thread
            self.error = e
        finally:
            self.done = True
            self.to_driver.release()

    def advance(self) -> None:
        """One iteration of generate()'s loop, up to its next is_finished()."""
        if self.done:
            raise self._ended()
        self.to_engine.release()
        self.to_driver.acquire()
        if self.done:
            raise self._ended()

    def _ended(self) -> BaseException:
        if self.error is not None:
            return self.error
        return Returned("its generate() returned with requests unfinished")

    def close(self, timeout: float = 5.0) -> None:
        """Let generate() see is_finished() answer True and return."""
        if self.done or not self.thread.is_alive():
            return
        self.ending = True
        self.to_engine.release()
        self.thread.join(timeout)
