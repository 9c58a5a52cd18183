"""vLLM's own offloading connector (issue 50; connector "offloading"): the scheduler side is
vLLM's `OffloadingConnector` with its CPU tier (`CPUOffloadingSpec`, sized to the workload's
`offload_blocks`), so what it stores, finds and evicts is vLLM's code; its worker side,
which needs a GPU, is played by the simulated runner at the level of jobs
(`store.Jobs`): each `TransferJob` of a step's `OffloadingConnectorMetadata` (a load from
the tier's blocks into the request's, a store the other way; `jobs_to_flush`, the jobs the
worker finishes before the step's forward pass because their blocks were handed on) starts
a Transfer; the worker reports the jobs that ended as vLLM's worker does
(`OffloadingWorkerMetadata.completed_jobs`, one count a job with one worker) and the
requests whose asynchronous loads are done (`finished_recving`).

Read in 0.34.0's `distributed/kv_transfer/kv_connector/v1/offloading/{common,scheduler,
worker}.py`: the job protocol (0.21 on) and its CPU manager run on a CPU; only the worker
needs a GPU. The connector object is vLLM's, watched, not replaced: its `request_finished`
and its lookups are recorded as they return (`Watch`), for E19.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from schedcheck.engine.store import Report
from schedcheck.engine.trace import Transfer
from schedcheck.engine.workload import EngineWorkload

__all__ = ["Watch", "block_table", "offloading_config", "worker_output"]

# The tier's blocks are chunks of one engine block each (`blocks_per_chunk` 1, vLLM's
# default): a job moves engine blocks and tier blocks one for one.
ALIGNMENT_MOST = 1 << 16  # a chunk's bytes, padded, are at most this (CPUOffloadingSpec's)


def offloading_config(workload: EngineWorkload, KVTransferConfig: Any, chunk_bytes: int) -> Any:
    """The KVTransferConfig of vLLM's OffloadingConnector with a CPU tier of the workload's
    `offload_blocks` chunks (`cpu_bytes_to_use`: that many chunks of `chunk_bytes`, each
    padded as the spec pads it; `Watch` checks the count the manager got)."""
    fields = {f.name for f in dataclasses.fields(KVTransferConfig)}
    policy = (
        {"kv_load_failure_policy": workload.load_failure}
        if "kv_load_failure_policy" in fields
        else {}
    )
    return KVTransferConfig(
        kv_connector="OffloadingConnector",
        kv_role="kv_both",
        kv_connector_extra_config={
            "cpu_bytes_to_use": workload.offload_blocks * chunk_bytes,
            "block_size": workload.config.block_size,
        },
        **policy,
    )


class Watch:
    """vLLM's offloading connector, its calls recorded as Transfer events (`events`, the
    driver drains them into the trace) and its jobs read off each step's metadata."""

    def __init__(self, connector: Any, scheduler: Any, workload: EngineWorkload) -> None:
        self.connector, self.scheduler = connector, scheduler
        self.block_size = workload.config.block_size
        self.events: list[Transfer] = []
        # each finished request's tokens, as it finished: its last store jobs come after
        # the scheduler has let the request go
        self.finished: dict[str, list[int]] = {}
        lookup = connector.get_num_new_matched_tokens
        # the scheduler tells it through one or the other (0.2x on: the second where the
        # connector supports several KV cache groups)
        for method in ("request_finished", "request_finished_all_groups"):
            if hasattr(connector, method):
                setattr(connector, method, self._told(getattr(connector, method)))

        def get_num_new_matched_tokens(request: Any, num_computed_tokens: int) -> Any:
            said = lookup(request, num_computed_tokens)
            if said[0] is None:  # "not yet": it will be asked again
                self.events.append(Transfer(str(request.request_id), "lookup", "wait", (), 0, ()))
            return said

        connector.get_num_new_matched_tokens = get_num_new_matched_tokens

    def _told(self, finished: Any) -> Any:
        def request_finished(request: Any, block_ids: Any) -> Any:
            said = finished(request, block_ids)
            name = str(request.request_id)
            computed = int(request.num_computed_tokens)
            tokens = tuple(int(t) for t in request.all_token_ids[:computed])
            self.finished[name] = [int(t) for t in request.all_token_ids]
            self.events.append(
                Transfer(name, "finished", "start", block_table(block_ids), 0, tokens)
            )
            return said

        return request_finished

    def jobs(self, out: Any) -> tuple[list[Transfer], set[int], set[int]]:
        """A step's metadata: the jobs it starts, as Transfers (their requests' tokens read
        now); the jobs to flush; the synchronous loads among those it starts."""
        meta = out.kv_connector_metadata
        started: list[Transfer] = []
        sync: set[int] = set()
        for kind, jobs in (("load", meta.load_jobs), ("save", meta.store_jobs)):
            for job_id, job in jobs.items():
                # (src_spec, dst_spec): fields from 0.25, a `transfer_spec` pair before
                src, dst = (
                    (job.src_spec, job.dst_spec)
                    if hasattr(job, "src_spec")
                    else tuple(job.transfer_spec)
                )
                gpu, tier = (dst, src) if kind == "load" else (src, dst)
                started.append(self._transfer(int(job_id), kind, str(job.req_id), gpu, tier))
                if kind == "load" and getattr(job, "sync", False):
                    sync.add(int(job_id))
        self.events.extend(started)
        return started, {int(j) for j in meta.jobs_to_flush or ()}, sync

    def _transfer(self, job: int, kind: str, name: str, gpu: Any, tier: Any) -> Transfer:
        blocks = [int(b) for b in gpu.block_ids]
        remote = tuple(int(b) for b in tier.block_ids)
        if len(remote) != len(blocks) or len(getattr(gpu, "group_sizes", None) or (1,)) != 1:
            raise RuntimeError(
                f"offloading job {job} moves engine blocks {blocks} and tier blocks "
                f"{list(remote)}: schedcheck plays one group, a block for a block"
            )
        first = int((getattr(gpu, "block_indices", None) or (0,))[0])
        request = self.scheduler.requests.get(name)
        if request is not None and not request.is_finished():
            known = [int(t) for t in request.all_token_ids]
        elif name in self.finished:
            known = self.finished[name]
        else:
            raise RuntimeError(f"offloading job {job} is of {name}, a request it never had")
        end = (first + len(blocks)) * self.block_size
        if kind == "save" and request is not None and not request.is_finished():
            end = min(end, int(request.num_computed_tokens))  # (its tokens after the step)
        tokens = tuple(known[: min(end, len(known))])
        table = (-1,) * first + tuple(blocks)
        return Transfer(
            name,
            kind,
            "start",
            table,
            first * self.block_size,
            tokens,
            job=job,
            remote=remote,
            held=kind == "load",
        )


def worker_output(report: Report, KVConnectorOutput: Any, OffloadingWorkerMetadata: Any) -> Any:
    """The worker's KVConnectorOutput: the jobs done, one count each (one worker), and the
    requests whose asynchronous loads are done."""
    meta = OffloadingWorkerMetadata(completed_jobs={j: 1 for j in report.jobs})
    return KVConnectorOutput(
        finished_recving=set(report.loaded) or None,
        kv_connector_worker_meta=meta if report.jobs else None,
    )


def block_table(block_ids: Any) -> tuple[int, ...]:
    """The block ids of the first (only) KV cache group, as vLLM hands a connector them: a
    list of ints, or one list per group."""
    ids = list(block_ids)
    if ids and not isinstance(ids[0], int):
        ids = list(ids[0])
    return tuple(int(b) for b in ids)
