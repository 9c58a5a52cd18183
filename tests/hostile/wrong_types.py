"""Returns a list of pairs from schedule(). Expected: a contract failure naming the type."""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        return list(super().schedule().items())  # type: ignore[return-value]
