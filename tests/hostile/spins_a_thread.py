"""Correct, but starts a thread at import that spins for ever, working behind the checker's
back and burning CPU no call is charged for.

Expected: a failure (the spec's scheduler is single-threaded), counted by the kernel.
"""

import threading

from schedcheck.scheduler import Scheduler, Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


def _spin() -> None:
    while True:
        pass


threading.Thread(target=_spin, daemon=True).start()
