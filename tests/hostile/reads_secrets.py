"""Reads the checker's environment, where secrets live (SCHEDCHECK_REDIS_URL can hold a
Redis password), and shows what it found in its output and its error.

Expected: a failure that names nothing of the checker's environment but what a worker
is given (PATH, locale, PYTHONPATH).
"""

import os

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        print(dict(os.environ))
        raise RuntimeError(f"stolen: {os.environ.get('SCHEDCHECK_REDIS_URL')}")
