"""Finds the worker's heartbeat page and keeps writing "a new call began" from a thread
while schedule() sleeps forever, so that no call ever looks late. Expected: a failure in
a few seconds, not a checker that waits forever."""

import gc
import threading
import time

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        board = next(o for o in gc.get_objects() if type(o).__name__ == "Board")

        def forge() -> None:
            while True:
                board.write(1, "schedule()", time.monotonic(), 0.0)
                time.sleep(0.05)

        threading.Thread(target=forge, daemon=True).start()
        time.sleep(10**6)
        return {}
