"""A finished job's pages go back to the free list with their reference counts left at one:
free and in use at once (E3)."""

from tests.engine_subjects.toy.engine import Engine as Correct
from tests.engine_subjects.toy.engine import Job


class Engine(Correct):
    def _finish(self, job: Job) -> None:
        pages = list(job.pages)
        super()._finish(job)
        for page in pages:
            self.refs[page] = 1
