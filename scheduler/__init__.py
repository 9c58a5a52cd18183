"""The reference P07 scheduler: what is right (docs/spec.md, `schedcheck spec`).

This package is itself a submission: it defines exactly the contract's names.
"""

from scheduler.scheduler import Scheduler
from scheduler.sequence import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]
