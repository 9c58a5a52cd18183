"""Returns a dict subclass equal to everything, with a wrong schedule inside.

Expected: a contract failure (schedule() must return a plain dict), never a pass.
"""

from schedcheck.scheduler import Scheduler as _Reference
from schedcheck.scheduler import Sequence, SequenceStatus

__all__ = ["Scheduler", "Sequence", "SequenceStatus"]


class Always(dict):  # type: ignore[type-arg]
    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


class Scheduler(_Reference):
    def schedule(self) -> dict[str, int]:
        super().schedule()
        return Always({"nobody": 0})
