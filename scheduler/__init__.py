"""The reference P07 scheduler: what is right (`../shared/spec/p07-scheduler.md`).

This package is itself a submission: it defines exactly the contract's names.
"""

from scheduler.scheduler import Scheduler
from scheduler.sequence import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]
