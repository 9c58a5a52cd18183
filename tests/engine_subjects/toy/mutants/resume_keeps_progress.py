"""A preempted job keeps what it had computed, though its pages are gone: resumed on fresh
pages it starts where it was and attends to positions no page of its holds (E2)."""

from tests.engine_subjects.toy.engine import Engine as Correct
from tests.engine_subjects.toy.engine import Job


class Engine(Correct):
    def _preempt(self, job: Job) -> None:
        done = job.done
        super()._preempt(job)
        job.done = done
