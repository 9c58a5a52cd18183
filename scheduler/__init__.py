"""The reference P07 scheduler: what is right (docs/spec.md, `schedcheck spec`).

This package is itself a submission: it defines exactly the contract's names.
"""

from schedcheck.scheduler.scheduler import Scheduler
from schedcheck.scheduler.sequence import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]
