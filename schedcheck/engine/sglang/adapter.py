"""SGLang's real scheduler, radix cache and KV pools as an engine (docs/engines.md,
"SGLang"): its own `Scheduler` built on the CPU for a model of no weights (build.py),
warmed up and stepped through its event loop's body with the simulated model (drive.py),
its pools copied out into the trace the core checks read (pools.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from schedcheck import faults
from schedcheck.engine.adapter import EngineSetup, Features
from schedcheck.engine.export import Rendered
from schedcheck.engine.run import bound
from schedcheck.engine.sglang.build import Build
from schedcheck.engine.sglang.config import ADAPTER_POLICIES, sglang_setup
from schedcheck.engine.sglang.drive import RUNNER, TRAITS, run_sglang, warm
from schedcheck.engine.trace import EngineTrace
from schedcheck.engine.traits import Traits
from schedcheck.engine.worker import LoadError
from schedcheck.engine.workload import EngineWorkload, Headroom

__all__ = ["ADAPTER", "Sglang"]

SETUP_FILE = "sglang-setup.json"  # its worker's PATH: where to import SGLang from


class _Built:
    """SGLang imported, patched and warmed up, in the process that drives it."""

    def __init__(self, build: Build) -> None:
        self.build = build

    def run(
        self, workload: EngineWorkload, setup: EngineSetup, beat: Callable[[int, str], None] | None
    ) -> EngineTrace:
        """In the workload's loop, or where it names none the setup's first."""
        return run_sglang(self.build, workload, setup.modes[0], beat)


def built(root: str, loops: tuple[str, ...], pages: tuple[int, ...] = ()) -> Build:
    """SGLang from `root` imported and warmed up in each of `loops` (at the page sizes
    `pages`, () every one): its lazy imports happen now, and a release this driver cannot
    drive is told now (RuntimeError)."""
    if root not in sys.path:
        sys.path.insert(0, root)
    build = Build()
    warm(build, loops, pages)
    return build


class Sglang:
    name = "sglang"
    title = "SGLang"
    # its stop tokens and aborts; decodes long enough to outgrow what admission reserved
    # (retraction); pages of 1 to 4 slots,
    # page 0 its padding page; its intake's rule on what a request asks of the pool
    features = Features(
        stops=True,
        aborts=True,
        max_tokens=16,
        pool_slack=3,
        reserved=1,
        block_sizes=(1, 4),
        headroom=Headroom(pages=1, tokens=1, prompt=7),
        budget_in_blocks=True,
        stops_when_ignoring_eos=False,
        conservativeness=True,
        # its server's scheduling arguments (`--schedule-policy`, priority scheduling and
        # its preemption threshold, `--enable-mixed-chunk`, `--max-queued-requests`) and
        # its clients' `stream`; workloads shaped for its retraction
        priorities=True,
        policies=ADAPTER_POLICIES,
        preempt_gap=True,
        retract_by_priority=True,
        mixed=True,
        queue_limit=True,
        streams=True,
        pressure=True,
        # requests under cache namespaces (`extra_key`)
        namespaces=True,
        # clients that ask their prompt's logprobs (`return_logprob`, `logprob_start_len`)
        prompt_logprobs=True,
        # aborts aimed at a request parked between two chunks of its prefill
        chunk_aborts=True,
        # LoRA adapters (`--enable-lora`, `--max-loras-per-batch`; a request's `lora_id`)
        adapters=True,
        # prompts carrying embeddings of their own (`positional_embed_overrides`: the tree
        # neither matches nor keeps such a request's KV)
        embeds=True,
        # streaming sessions (`--enable-streaming-session`, `/open_session` with streaming):
        # a session's turns are requests of it, its KV held in its slot between them
        sessions=2,
        # EAGLE, a chain of up to 3 drafts a step (spec.py), in the normal loop: SGLang
        # turns the overlap loop off for speculative decoding on a CPU
        # (`_disable_overlap_schedule_for_cpu`)
        drafts=3,
        draft_modes=("normal",),
        drafters=(("hidden", ()),),
    )
    # its retraction's victims and requeue; its preemption for priority
    policies_on = frozenset({"E14", "E22"})
    options = frozenset({"loop", "modes"})
    memory_mb = 8192  # torch and SGLang map gigabytes of address space before a step is run
    start_timeout = 300.0  # to import SGLang (about 10 s) and warm it up
    worker = "schedcheck.engine.sglang.worker"
    preload: tuple[str, ...] = ()

    def setup(self, path: str | None, args: argparse.Namespace) -> EngineSetup:
        return sglang_setup(path, args)

    def traits(self, setup: EngineSetup) -> Traits:
        return TRAITS

    def shown(self, setup: EngineSetup) -> str:
        return f"SGLang at {setup.root}"

    def header(self, setup: EngineSetup) -> list[str]:
        """Which loops this run checks, and whether each is the release's default."""
        default = "overlap" if setup.config["overlap_default"] else "normal"
        said = [
            f"{loop} ({'release default' if loop == default else 'chosen'})" for loop in setup.modes
        ]
        lines = [f"loop: {', '.join(said)}"]
        if setup.block_sizes:
            lines.append(
                "pages: of 1 slot only (this release's paged allocator runs its triton "
                "kernels whatever the device: no CPU path)"
            )
        if len(setup.modes) > 1:
            lines.append(f"modes: {', '.join(setup.modes)} (drawn per workload)")
        return [
            *lines,
            f"config: {setup.config_from}",
            f"positions: {RUNNER.source}",
        ]

    def box(self, setup: EngineSetup, scratch: Path) -> Path:
        path = scratch / SETUP_FILE
        path.write_text(
            json.dumps(
                {"root": setup.root, "modes": list(setup.modes), "pages": list(setup.block_sizes)}
            )
        )
        return path

    def calls(self, workload: EngineWorkload) -> int:
        """Scheduler(); a request's message and its send, an abort's send; per step at most
        ten calls (the loop's body and reading what it sent), up to the bound."""
        return 1 + 3 * len(workload.requests) + (bound(workload) + 2) * 10

    def before_box(self, path: str) -> Build | LoadError:
        """Everything SGLang reads from disk (its modules, their lazy imports, the model's
        config) is read now, before the box."""
        try:
            read = json.loads(Path(path).read_text())
            return built(read["root"], tuple(read["modes"]), tuple(read.get("pages", ())))
        except (Exception, SystemExit) as e:  # SGLang's import or our warm-up on it: not ours
            return LoadError(f"{type(e).__name__}: {e}")

    def in_box(self, path: str, read: Build) -> _Built:
        return _Built(read)

    def load(self, setup: EngineSetup) -> _Built:
        return _Built(built(setup.root, setup.modes, setup.block_sizes))

    def prefill(self, probe: Callable[[], bool], asked: str | None) -> tuple[bool, str | None]:
        return True, None  # chunked prefill is on in every config it is built with

    def not_loaded(self, shown: str, message: str) -> int:
        """Not installed whole, or a release this driver cannot drive: the user's to fix."""
        print(
            f"schedcheck engine: {shown} could not be imported and built here: {message}",
            file=sys.stderr,
        )
        return faults.USAGE

    def undrivable(self, setup: EngineSetup, why: str) -> str:
        return f"{self.shown(setup)} cannot be driven: {why}"

    def render(self, setup: EngineSetup, trace: EngineTrace) -> Rendered | str:
        """Its real Scheduler built and stepped as here, in the test (sglang/export.py)."""
        from schedcheck.engine.sglang.export import render

        return render(setup, trace)

    def settle(
        self, setup: EngineSetup, run: Callable[[EngineWorkload], EngineTrace]
    ) -> EngineSetup:
        return setup  # its setup is decided from its release and the command line alone


ADAPTER = Sglang()
