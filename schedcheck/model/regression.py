"""A regression: a minimal failing workload worth keeping, with the bug it caught.

Files of `schedcheck/suite/regressions/` and of `schedcheck check --save-failures DIR` hold
one each, as JSON: {"check": "I4", "note": "...", "workload": {...}}. A bare workload reads too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from schedcheck.model.workload import Workload


@dataclass(frozen=True)
class Regression:
    workload: Workload
    check: str = ""  # the check that fired first when it was saved
    note: str = ""  # the bug it caught, in words

    def to_json(self) -> str:
        return json.dumps(
            {
                "check": self.check,
                "note": self.note,
                "workload": json.loads(self.workload.to_json()),
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Regression:
        data = json.loads(text)
        if "workload" not in data:
            return cls(Workload.from_dict(data))
        return cls(Workload.from_dict(data["workload"]), str(data["check"]), str(data["note"]))


def load_corpus(directory: Path) -> list[Regression]:
    """Every regression in `directory`, in file-name order."""
    return [Regression.from_json(p.read_text()) for p in sorted(directory.glob("*.json"))]
