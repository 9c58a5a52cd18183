"""SGLang's speculative decoding, its worker simulated (docs/engines.md, "SGLang"; read in
SGLang 0.5.23, docs/notes/sglang-speculative-decoding.md).

SGLang runs EAGLE through one worker, `EAGLEWorkerV2`, that the scheduler calls in place of
its model worker: a prefill runs the target and hands the draft head its hidden states; a
decode drafts a chain, verifies it in one target forward and returns the accepted run. What
the scheduler does around it is SGLang's own and runs for real here:

- `prepare_for_decode` -> `eagle_prepare_for_decode`: the KV slots of each request's
  verify and its drafts, reserved ahead (`get_alloc_reserve_per_decode`), written into its
  row of `req_to_token` (`alloc_for_spec_decode`), evicting from the tree where the pool is
  short;
- its decode memory check and retraction, sized for drafts;
- `run_batch`'s speculative branch: the batch's `seq_lens` advanced by the worker's
  `new_seq_lens`, its `spec_info` (`EagleDraftInput`, SGLang's own, filtered and merged with
  the batch) carried to the next step;
- `_resolve_spec_v2_tokens`: each request's accepted run appended, `kv_committed_len`
  advanced by it; a request finished on a token inside the run keeps what it committed
  only up to its stop (`owned_kv_len`) when its KV goes into the tree.

The worker here (`SimSpecWorker`, an `EAGLEWorkerV2` whose GPU half is replaced) does what
the issue's simulated drafter does for every engine: it proposes the workload's drafts
(`EngineWorkload.propose`) for a chain of `speculative_num_steps` (topk 1, the smallest
EAGLE shape a CPU takes), padded where the proposer has fewer, and verifies them greedily
(`EngineWorkload.verify`): the longest prefix the model agrees with, then the model's own
token. The driver computes and records the verify step (drive.py). A chain is what a CPU
runs: a tree (topk over 1) needs paged attention kernels SGLang has on GPUs alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Verify", "install", "spec_args"]

# the driver's verify: the batch, each request's bonus token -> each request's accepted run
Verify = Callable[[Any, list[int]], list[tuple[int, ...]]]


def spec_args(drafts: int) -> dict[str, Any]:
    """The server arguments of EAGLE with a chain of `drafts` drafts (0: none): steps
    `drafts`, topk 1, `drafts + 1` tokens verified a step; the torch attention backend,
    whose page bookkeeping (`get_last_loc_torch`) has a CPU path."""
    if not drafts:
        return {}
    return {
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": drafts,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": drafts + 1,
        "attention_backend": "torch_native",
    }


def install(module: Any, verify: Callable[[], Verify]) -> None:
    """Bind SGLang's speculative path to the simulated worker: the scheduler's
    `maybe_init_draft_worker` makes a `SimSpecWorker`, whose verify is `verify()` (the
    live run's), and the one CPU kernel of the scheduler's own draft allocation that is an
    sgl_kernel placeholder gets its torch twin."""
    import torch
    from sglang.srt.managers.utils import GenerationBatchResult
    from sglang.srt.mem_cache import allocation
    from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
    from sglang.srt.speculative.eagle_info import EagleDraftInput
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    def assign_req_to_token_pool_cpu(
        rows: Any, req_to_token: Any, starts: Any, ends: Any, slots: Any, width: int
    ) -> None:
        """sgl_kernel's `assign_req_to_token_pool_cpu`: row i's positions start..end-1
        take the next end - start slots of `slots`, in order."""
        at = 0
        for row, start, end in zip(rows.tolist(), starts.tolist(), ends.tolist(), strict=True):
            req_to_token[row, start:end] = slots[at : at + end - start]
            at += end - start

    allocation.assign_req_to_token_pool_cpu = assign_req_to_token_pool_cpu

    def draft_input(bonus: Any) -> Any:
        """What the next step drafts from: each request's last token (its bonus), and the
        draft head's top-k tensors SGLang's filter and merge slice (a chain: topk 1)."""
        n = len(bonus)
        return EagleDraftInput(
            bonus_tokens=bonus.to(torch.int32),
            topk_p=torch.ones((n, 1), dtype=torch.float32),
            topk_index=torch.zeros((n, 1), dtype=torch.int64),
            hidden_states=None,
        )

    class SimSpecWorker(EAGLEWorkerV2):  # type: ignore[misc]
        """EAGLEWorkerV2 with its models simulated: the scheduler's calls and the result's
        fields as SGLang's (`forward_batch_generation`, eagle_worker_v2.py; the result as
        `run_eagle_verify` returns it, eagle_worker_common.py)."""

        def __init__(self, target_worker: Any, steps: int) -> None:
            BaseSpecWorker.__init__(self)
            self._target_worker = target_worker
            self._draft_worker = None  # no draft model: the drafts are the workload's
            self.topk, self.speculative_num_steps = 1, steps
            self.speculative_num_draft_tokens = steps + 1
            self.device = "cpu"
            self.adaptive_controller = None
            self.enable_dp_spec_prefill_coordination = False

        def _draft_model_runners(self) -> tuple[Any, ...]:
            return ()  # no draft model runs

        def forward_batch_generation(self, batch: Any, **_: Any) -> Any:
            if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                out = self._target_worker.forward_batch_generation(batch)
                out.new_seq_lens = batch.seq_lens  # spec v2: seq_lens before the step's token
                out.next_draft_input = draft_input(out.next_token_ids)
                return out
            bonus = [int(t) for t in batch.spec_info.bonus_tokens.tolist()]
            runs = verify()(batch, bonus)
            width = self.speculative_num_draft_tokens
            ids = torch.zeros(len(runs) * width, dtype=torch.int64)
            for i, run in enumerate(runs):
                ids[i * width : i * width + len(run)] = torch.tensor(run, dtype=torch.int64)
            accepted = torch.tensor([len(r) for r in runs], dtype=torch.int32)
            return GenerationBatchResult(
                logits_output=None,
                next_token_ids=ids,
                can_run_cuda_graph=False,
                speculative_num_draft_tokens=width,
                accept_lens=accepted,
                new_seq_lens=batch.seq_lens + accepted.to(batch.seq_lens.dtype),
                next_draft_input=draft_input(torch.tensor([r[-1] for r in runs])),
            )

    def maybe_init_draft_worker(self: Any) -> None:
        if self.spec_algorithm.is_none():
            self.draft_worker, self.external_corpus_manager = None, None
            return
        from sglang.srt.runtime_context import get_spec

        self.draft_worker = SimSpecWorker(self.tp_worker, get_spec().speculative_num_steps)
        self.external_corpus_manager = None

    module.Scheduler.maybe_init_draft_worker = maybe_init_draft_worker
