"""What a trial run shows about a fork before the search (docs/engines.md, "nano-vllm's own
step"): the block sizes it can be built with, and whether its own step can be built at all.

The setup is read off the checkout's text (config.py); some of what decides whether a
workload can run is only seen by running it. Each trial is one small workload (a 3-token
prompt, 2 tokens out) run in the fork's worker:

- **Block sizes.** The workloads draw blocks of 2 to 4 tokens (standing for nano-vllm's
  256, which its Config asserts a multiple of; build.py shows the Config 256). A fork whose
  own code refuses a size (a BlockManager asserting `block_size % page == 0`) is run with
  the sizes it accepts: those of 2 to 4 it accepts, or else the smallest size it accepts
  (up to 256) and its double.
- **The loop.** Where its own step cannot be built at any size for a reason of
  schedcheck's stand-ins or of the CPU (an attribute the simulated model lacks, an NPU
  build of torch, a package its engine imports but the scheduler does not), or refuses a
  request in a pool that holds it (an intake stricter than the search's workloads), and
  the user did not ask for `--loop own`, schedcheck's loop drives its Scheduler instead,
  and the report's `loop:` line says so and why; never where that loop cannot build the
  fork's objects (BUILT_BY_THE_LOOP). Where neither can be driven, the setup stays, and the
  search's first run says why (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from schedcheck.engine.adapter import EngineSetup
from schedcheck.engine.trace import UNDRIVABLE, EngineTrace
from schedcheck.engine.workload import EngineConfig, EngineRequest, EngineWorkload

__all__ = ["BEYOND", "settle", "trial"]

# the block sizes tried after the drawn ones, where a fork accepts none of them
BEYOND = (*range(5, 17), 32, 64, 128, 256)

Run = Callable[[EngineWorkload], EngineTrace]
SPARE = 2  # blocks over the request's need in a trial of block sizes


def trial(block_size: int, mode: str, spare: int = SPARE) -> EngineWorkload:
    """The smallest workload that builds the engine and steps it to the end, in a pool of
    `spare` blocks more than its request holds (none: the search's tightest)."""
    request = EngineRequest("r1", (1, 2, 1), 2)
    config = EngineConfig(request.peak_blocks(block_size) + spare, block_size, 1, 8, mode=mode)
    return EngineWorkload(config, (request,), 2)


# schedcheck's loop builds a fork's objects as nano-vllm's are built (Scheduler(config) with
# a Config of its fields, SamplingParams(...), Sequence(prompt, params)): where one of these
# raises in a trial, the fork builds them otherwise (a Scheduler of other arguments, a
# Sequence that needs what only its LLMEngine sets up), and that loop cannot stand in for
# its own step. Elsewhere the run is a verdict, for a fallback as for any run.
BUILT_BY_THE_LOOP = frozenset({"Scheduler()", "SamplingParams()", "Sequence()"})


def _refusal(run: Run, block_size: int, mode: str, spare: int = SPARE) -> str | None:
    """Why `mode` cannot drive the engine at `block_size` (None: it can; a verdict either
    way is a run it drives)."""
    failure = run(trial(block_size, mode, spare)).failure
    if failure is None:
        return None
    if failure.check == UNDRIVABLE:
        return failure.message
    if mode == "scheduler" and failure.call in BUILT_BY_THE_LOOP:
        return (
            f"its {failure.call} raised as schedcheck's loop builds it (nano-vllm's way), "
            f"so the fork builds it otherwise: {failure.message}"
        )
    return None


def accepted(
    run: Run, mode: str, drawn: tuple[int, int]
) -> tuple[tuple[int, ...], tuple[int, str]]:
    """The block sizes `mode` can drive it at: those of `drawn` (a range) it accepts, or
    else the smallest beyond them and its double where accepted; and the first refusal
    (a size and why)."""
    low, high = drawn
    why = {b: _refusal(run, b, mode) for b in range(low, high + 1)}
    first = next(((b, w) for b, w in why.items() if w is not None), (low, ""))
    sizes = tuple(b for b, w in why.items() if w is None)
    if sizes:
        return sizes, first
    for size in BEYOND:
        if size > high and _refusal(run, size, mode) is None:
            double = 2 * size if _refusal(run, 2 * size, mode) is None else size
            return tuple(sorted({size, double})), first
    return (), first


def _sizes(sizes: tuple[int, ...], refused: tuple[int, str]) -> str:
    size, why = refused
    return f"block sizes: {', '.join(map(str, sizes))}, those it accepts (at {size}: {why})"


def settle(
    setup: EngineSetup, run: Run, drawn: tuple[int, int], fallback: bool | str
) -> EngineSetup:
    """`setup` as trial runs show it can be run (see the module's docstring); `fallback`:
    whether schedcheck's loop may stand in for its own step (False where --loop own was
    asked; why not, in words, where that loop refuses the engine)."""
    if setup.modes[0] != "own":
        return setup
    sizes, refused = accepted(run, "own", drawn)
    full = tuple(range(drawn[0], drawn[1] + 1))
    # a pool that holds the request and no more, which the search draws: an intake that
    # asks for more (shunwendongan's add_request()) refuses valid input at every size
    tight = _refusal(run, sizes[0], "own", spare=0) if sizes else None
    if sizes and tight is None:
        if sizes == full:
            return setup
        return replace(setup, block_sizes=sizes, settled=(*setup.settled, _sizes(sizes, refused)))
    if tight is not None:
        refused = (sizes[0], tight)
    if fallback is False:
        return setup
    if isinstance(fallback, str):
        return replace(setup, settled=(*setup.settled, f"nor schedcheck's loop: {fallback}"))
    others, other_refused = accepted(run, "scheduler", drawn)
    if not others:
        said = f"nor schedcheck's loop: {other_refused[1]}"
        return replace(setup, settled=(*setup.settled, said))
    modes = tuple(m for m in setup.modes if m != "own") or ("scheduler",)
    said = f"not its own step, which cannot be built here: {refused[1]}"
    if others != full:
        said += f"; {_sizes(others, other_refused)}"
    return replace(
        setup,
        modes=modes,
        block_sizes=() if others == full else others,
        settled=(*setup.settled, said),
    )
