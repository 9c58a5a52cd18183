"""A small paged-KV engine of its own design, neither nano-vllm's API nor vLLM's: jobs by id,
pages of KV, a plan per step and a commit of what the model sampled. FCFS, chunked
prefill under a token budget, recompute preemption of the newest running job when pages
run out. It exists to show that an engine of a third shape is driven through the registry
with no change to schedcheck's core (tests/engine/test_another_engine.py); its adapter is
adapter.py beside it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Slice:
    """What one job computes this step: positions start .. start + count - 1, through pages."""

    rid: str
    start: int
    count: int
    pages: tuple[int, ...]


@dataclass
class Job:
    rid: str
    tokens: list[int]
    max_new: int
    stop_on_eos: bool
    output: list[int] = field(default_factory=list)
    done: int = 0  # positions whose KV is computed
    planned: int = 0  # positions it computes this step
    pages: list[int] = field(default_factory=list)
    state: str = "waiting"  # waiting, running, done


class Engine:
    def __init__(self, pages: int, page_size: int, max_jobs: int, budget: int, eos: int) -> None:
        self.page_size, self.max_jobs, self.budget, self.eos = page_size, max_jobs, budget, eos
        self.refs = [0] * pages
        self.free = list(range(pages))
        self.jobs: dict[str, Job] = {}
        self.waiting: list[Job] = []
        self.running: list[Job] = []

    def submit(self, rid: str, prompt: list[int], max_new: int, stop_on_eos: bool) -> None:
        job = Job(rid, list(prompt), max_new, stop_on_eos)
        self.jobs[rid] = job
        self.waiting.append(job)

    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def plan(self) -> list[Slice]:
        budget, slices = self.budget, []
        for job in list(self.running):
            if budget == 0 or job not in self.running:
                break
            count = min(len(job.tokens) - job.done, budget)
            while not self._fits(job, job.done + count):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is job:
                    break
            if job not in self.running:
                break
            self._grow(job, job.done + count)
            slices.append(self._planned(job, count))
            budget -= count
        while self.waiting and budget > 0 and len(self.running) < self.max_jobs:
            job = self.waiting[0]
            count = min(len(job.tokens) - job.done, budget)
            if not self._fits(job, job.done + count):
                break
            self.waiting.pop(0)
            self.running.append(job)
            job.state = "running"
            self._grow(job, job.done + count)
            slices.append(self._planned(job, count))
            budget -= count
        return slices

    def commit(self, sampled: dict[str, int]) -> None:
        """The step ran: each planned job computed its positions; a job whose every token is
        computed got one sampled token."""
        for job in list(self.running):
            job.done, job.planned = job.done + job.planned, 0
            if job.rid not in sampled:
                continue
            token = sampled[job.rid]
            job.tokens.append(token)
            job.output.append(token)
            if (token == self.eos and job.stop_on_eos) or len(job.output) >= job.max_new:
                self._finish(job)

    def _planned(self, job: Job, count: int) -> Slice:
        job.planned = count
        return Slice(job.rid, job.done, count, tuple(job.pages))

    def _pages_for(self, positions: int) -> int:
        return -(-positions // self.page_size)

    def _fits(self, job: Job, positions: int) -> bool:
        return self._pages_for(positions) - len(job.pages) <= len(self.free)

    def _grow(self, job: Job, positions: int) -> None:
        while len(job.pages) < self._pages_for(positions):
            page = self.free.pop(0)
            self.refs[page] = 1
            job.pages.append(page)

    def _release(self, job: Job) -> None:
        for page in job.pages:
            self.refs[page] = 0
            self.free.append(page)
        job.pages = []

    def _preempt(self, job: Job) -> None:
        """Recompute: its KV dropped, it waits at the head of the queue."""
        self._release(job)
        job.done = job.planned = 0
        job.state = "waiting"
        self.running.remove(job)
        self.waiting.insert(0, job)

    def _finish(self, job: Job) -> None:
        self._release(job)
        job.state = "done"
        self.running.remove(job)
