"""The grading report as types: a verdict, a state per check group, failures, entries.

`grade_one` builds an `Entry` per submission; gradebook.py writes them as report.json (and
reads them back to merge shards), gradescope.py turns one into Gradescope's results.json.
The JSON is the schema of docs/grading.md, and `from_dict(to_dict())` is the identity on
both sides: a report read back and written again is the same file, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from schedcheck.model.workload import Script, Workload


class Verdict(Enum):
    """A submission's verdict. `ERROR` is ours, not the submission's (docs/grading.md)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"


class GroupState(Enum):
    """What grading says of one check group of one submission."""

    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Failure:
    """One thing that failed: a check that fired, with the workload it fired on (shrunk),
    or, with no workload, a note: the contract, a search that found nothing, or ours.

    `check` is a check's name (C1, F1, ...), or "" for a note of the grader's own. `steps`
    is the length of the failing trace on `workload` (0 when there is none); `script`, the
    calls of a stateful run (check's stateful stage), None for a driver run; `other`, the
    second scheduler's workload where two were alive at once (`workload`'s built first;
    the message says which broke).
    """

    check: str
    message: str
    workload: Workload | None = None
    steps: int = 0
    script: Script | None = None
    other: Workload | None = None

    @property
    def requests(self) -> int:
        """How many requests the counterexample has (0 with no workload)."""
        return 0 if self.workload is None else len(self.workload.requests)

    def to_dict(self) -> dict[str, Any]:
        """report.json's form: `requests` and `steps` only along with a workload."""
        data: dict[str, Any] = {"check": self.check, "message": self.message, "workload": None}
        if self.workload is not None:
            # Through JSON, not asdict(): lists where the workload has tuples, so the dict
            # equals the one read back from the file.
            data["workload"] = json.loads(self.workload.to_json())
            data["requests"] = self.requests
            data["steps"] = self.steps
        if self.script is not None:
            data["script"] = [list(call) for call in self.script]
        if self.other is not None:
            data["other"] = json.loads(self.other.to_json())
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        workload, script, other = data.get("workload"), data.get("script"), data.get("other")
        return cls(
            check=str(data["check"]),
            message=str(data["message"]),
            workload=None if workload is None else Workload.from_dict(workload),
            steps=int(data.get("steps", 0)),
            script=None if script is None else [[str(x) for x in call] for call in script],
            other=None if other is None else Workload.from_dict(other),
        )


@dataclass(frozen=True)
class Sample:
    """What a submission's verdict rests on: how many of check's runs were judged (`runs`
    of `of`: fewer where a contract failure or the budget stopped grading), and how many
    of those that ran to their end reached each hard part (strategies/coverage.py)."""

    runs: int
    of: int
    reached: tuple[tuple[str, int], ...]  # (label, runs), by label

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "of": self.of, "reached": dict(self.reached)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sample:
        reached = tuple(sorted((str(k), int(v)) for k, v in data["reached"].items()))
        return cls(int(data["runs"]), int(data["of"]), reached)


@dataclass(frozen=True)
class Entry:
    """The report entry of one submission.

    `checks` has every group, in GROUPS order, unless grading broke before it began (then
    it is empty). `isolation` is the level the worker ran at, None when no worker ever
    said (report.json then has no such key). `page` is the HTML page of the first
    counterexample, relative to the report's folder, once gradebook wrote it out of
    `page_html`, which only travels from the grader to gradebook (never in report.json).
    `sample` is what the verdict rests on, None where no run was judged.
    """

    path: str
    verdict: Verdict
    checks: Mapping[str, GroupState]
    failures: tuple[Failure, ...]
    isolation: str | None = None
    page: str | None = None
    page_html: str | None = field(default=None, repr=False)
    sample: Sample | None = None

    def to_dict(self) -> dict[str, Any]:
        """report.json's form of the entry (docs/grading.md)."""
        data: dict[str, Any] = {
            "path": self.path,
            "verdict": self.verdict.value,
            "checks": {group: state.value for group, state in self.checks.items()},
            "failures": [failure.to_dict() for failure in self.failures],
        }
        if self.isolation is not None:
            data["isolation"] = self.isolation
        if self.page is not None:
            data["page"] = self.page
        if self.sample is not None:
            data["sample"] = self.sample.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        isolation, page, sample = data.get("isolation"), data.get("page"), data.get("sample")
        return cls(
            path=str(data["path"]),
            verdict=Verdict(data["verdict"]),
            checks={str(group): GroupState(state) for group, state in data["checks"].items()},
            failures=tuple(Failure.from_dict(f) for f in data["failures"]),
            isolation=None if isolation is None else str(isolation),
            page=None if page is None else str(page),
            sample=None if sample is None else Sample.from_dict(sample),
        )


@dataclass(frozen=True)
class Report:
    """A graded class: report.json. `submissions` in path order."""

    submissions: tuple[Entry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"submissions": [entry.to_dict() for entry in self.submissions]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        return cls(tuple(Entry.from_dict(entry) for entry in data["submissions"]))
