"""Correct, but leaves a child behind: at import it double-forks a grandchild that calls
setsid() and sleeps, detached from everything that started it.

Expected: when the box ends, so does the grandchild (docs/isolation.md).
"""

import os
import time

from schedcheck.scheduler import Scheduler, Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print("detached child running", flush=True)
        time.sleep(600)
    os._exit(0)
