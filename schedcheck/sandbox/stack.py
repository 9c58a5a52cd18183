"""Where a hung call was (issue 54): the worker's own stack, which the parent asks for before
it kills a worker whose call did not return.

The worker registers Python's faulthandler for SIGNAL before the code under test loads;
faulthandler writes the main thread's stack to the worker's output (stderr, which the
parent drains) from C, so it answers in a loop that never yields, and the worker goes on.
The parent reads the dumps out of the output: the frames in the code under test, for
the report, and the functions a few dumps share, to tell one hang from another. It is
the worker's word: code that replaces the handler only loses the line in its own report,
and a short wait (process.py, Sandbox.hang_at); a hang is decided by the clock.
"""

from __future__ import annotations

import faulthandler
import linecache
import re
import signal
from typing import NamedTuple

__all__ = [
    "HEADER",
    "SIGNAL",
    "Frame",
    "complete",
    "describe",
    "install",
    "loop",
    "ours",
    "parse",
    "strip",
]

SIGNAL = signal.SIGUSR1
HEADER = "Stack (most recent call first):"
_FRAME = re.compile(r'^  File "(.*)", line (\d+) in (.*)$')


class Frame(NamedTuple):
    """One line of a dump: the file, the line number, the function."""

    path: str
    line: int
    function: str


def install() -> None:
    """The worker's side: dump the main thread's stack on SIGNAL, and go on."""
    faulthandler.register(SIGNAL, all_threads=False, chain=False)


def parse(text: str) -> list[Frame]:
    """The frames of the last dump in `text`, innermost first ([] if there is none)."""
    at = text.rfind(HEADER)
    if at < 0:
        return []
    frames = []
    for line in text[at + len(HEADER) :].splitlines()[1:]:
        found = _FRAME.match(line)
        if found is None:
            break
        frames.append(Frame(found[1], int(found[2]), found[3]))
    return frames


def complete(text: str) -> bool:
    """Whether the last dump in `text` has landed whole: it reached the worker's outermost
    frame (its `<module>`, under runpy's `_run_module_as_main`), or faulthandler's "  ..."
    where it cut a deep stack short. faulthandler writes a frame at a time: a worker
    descheduled in the middle of its dump (a loaded machine) leaves a dump without its
    outer frames for a while, and two such samples share no outermost function."""
    at = text.rfind(HEADER)
    if at < 0:
        return False
    for line in text[at + len(HEADER) :].splitlines()[1:]:
        if line == "  ...":
            return True
        found = _FRAME.match(line)
        if found is None:
            return False
        if found[3] in ("<module>", "_run_module_as_main"):
            return True
    return False


def strip(text: str) -> str:
    """`text` without the dumps in it: what the code under test printed."""
    while (at := text.find(HEADER)) >= 0:
        rest = text[at + len(HEADER) :].split("\n")
        end = 1
        while end < len(rest) and _FRAME.match(rest[end]):
            end += 1
        text = text[:at] + "\n".join(rest[end:])
    return text


def ours(frames: list[Frame], copy: str) -> list[Frame]:
    """The frames in the code under test (its box copy `copy`: a file, or a folder)."""
    folder = copy.rstrip("/") + "/"
    return [f for f in frames if f.path == copy or f.path.startswith(folder)]


def loop(samples: list[list[Frame]]) -> tuple[str, ...]:
    """The functions every sample of a hung call has in common, outermost first: what a
    loop that never ends keeps on its stack, whichever helper it is in at each sample. A
    key to compare two hangs by (empty where no sample is in the code under test)."""
    stacks = [[f.function for f in reversed(frames)] for frames in samples]
    if not stacks or not all(stacks):
        return ()
    common: list[str] = []
    for names in zip(*stacks, strict=False):
        if len(set(names)) > 1:
            break
        common.append(names[0])
    return tuple(common)


def describe(frames: list[Frame], copy: str, original: str) -> str:
    """The frames in the code under test (`frames`, innermost first, from `ours`) as the
    report says them, each with its line of `original` (what `copy` is a copy of): "; it
    was executing line 143 of p07_scheduler.py, in _blocks_for: `...`, called from
    _try_grow (line 150: `...`)"; "" where there is none."""
    if not frames:
        return ""
    shown = []
    for frame in frames[:4]:
        file = original + frame.path[len(copy) :] if frame.path != copy else original
        source = linecache.getline(file, frame.line).strip()
        shown.append((frame, file.rsplit("/", 1)[-1], f": `{source}`" if source else ""))
    first, name, quoted = shown[0]
    said = f"; it was executing line {first.line} of {name}, in {first.function}{quoted}"
    callers = [f"{frame.function} (line {frame.line}{quoted})" for frame, _, quoted in shown[1:]]
    return said + (", called from " + ", from ".join(callers) if callers else "")
