"""Whose fault a failed run is: the submission's (a verdict) or schedcheck's (never a verdict).

A false FAIL, a student who did the work told it is wrong, is the worst bug a grader can
have. So only two things are verdicts: a check that fired on a trace (`CheckFailed`), and
a submission that cannot be driven at all (`SubmissionError`: it does not load, or breaks
the contract). Everything else that goes wrong, a Hypothesis health check, a pytest usage
error, an exception in our own code, a worker we could not start, is ours: `CheckerError`,
exit status 3 of `schedcheck check`, verdict `error` of `schedcheck grade`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# `schedcheck check`'s exit statuses (README, docs/grading.md).
PASS, FAIL, USAGE, INTERNAL = 0, 1, 2, 3


@dataclass(frozen=True)
class Failure:
    """How a run stopped on the code under test: the call that broke the contract, hung,
    died or was forged (check C1), at which step."""

    step: int
    call: str  # "Sequence()", "Scheduler()", "add()", "schedule()", "update()", ...
    message: str
    hung: bool = False  # the call did not return in time (the parent's word, never the worker's)

    @classmethod
    def from_worker(cls, data: dict[str, object]) -> Failure:
        """A failure a worker reported: its step, call and message, and nothing else (that
        a call hung is for the parent to say). TypeError or KeyError on anything else."""
        step, call, message = data["step"], data["call"], data["message"]
        if type(step) is not int or type(call) is not str or type(message) is not str:
            raise TypeError(f"not a failure: {data!r}")
        return cls(step, call, message)


class SubmissionError(Exception):
    """The submission cannot be driven at all: it does not load, or breaks the contract."""


class SubmissionFailure(Exception):
    """One call of a session failed (C1); `failure` says which and how."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"step {failure.step}, {failure.call}: {failure.message}")
        self.failure = failure


class CheckerError(Exception):
    """schedcheck itself failed: not a verdict on the submission."""


class WorkerError(CheckerError):
    """A worker process could not be started, before the submission was even read."""


class CheckFailed(AssertionError):
    """A check fired on the implementation under test; `check` is its id (C1, I1, ...).

    An AssertionError, so pytest shows it as a test failure; the only failure that
    `schedcheck check` turns into a FAIL.
    """

    def __init__(self, check: str, report: str, rank: tuple[int, ...] = (1 << 30,)) -> None:
        super().__init__(report)
        self.check = check
        self.rank = rank  # smaller is more informative (rank() below)


def best(error: BaseException) -> CheckFailed | None:
    """The most informative CheckFailed inside `error` (an exception group may hold
    several), or None if it holds none."""
    found = [leaf for leaf in leaves(error) if isinstance(leaf, CheckFailed)]
    return min(found, key=lambda leaf: leaf.rank, default=None)


def leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside `error`: itself, or every member of an exception group
    (Hypothesis raises one for several distinct bugs, or for a flaky failure)."""
    members = getattr(error, "exceptions", None)
    if isinstance(members, tuple) and members:
        for member in members:
            yield from leaves(member)
    else:
        yield error


def verdict_checks(error: BaseException) -> list[str] | None:
    """The ids of the checks that failed, when `error` is a verdict on the submission
    (every leaf a CheckFailed); None when any part of it is our own fault."""
    checks = []
    for leaf in leaves(error):
        if not isinstance(leaf, CheckFailed):
            return None
        checks.append(leaf.check)
    return checks


def internal_message(what: str) -> str:
    """The one paragraph a student reads when the fault is ours."""
    return (
        f"schedcheck itself failed: {what}\n"
        "This is not a verdict on your submission; please report it to the people who run "
        "schedcheck for you (or the schedcheck maintainers), with this output."
    )
