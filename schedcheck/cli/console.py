"""What `schedcheck check` prints, pytest's way: plain text, colour only on a terminal
(never with NO_COLOR set, nor TERM=dumb), and a live progress line only on a terminal."""

from __future__ import annotations

import os
import sys
from typing import TextIO

_COLOURS = {"ok": "32", "PASS": "32", "FAIL": "31", "ERROR": "31", "skipped": "33"}
WIDTH = 16  # the stage names' column


class Console:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.colour = (
            self.live and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        )
        self._progress = False

    def paint(self, word: str) -> str:
        code = _COLOURS.get(word)
        return f"\x1b[{code}m{word}\x1b[0m" if self.colour and code else word

    def line(self, text: str = "") -> None:
        self.clear()
        print(text, file=self.stream, flush=True)

    def stage(self, name: str, result: str, detail: str = "") -> None:
        """One stage's line: `properties       FAIL  3 of 8 failed, ...`."""
        pad = " " * (8 - len(result))
        self.line(f"{name:<{WIDTH}} {self.paint(result)}{pad}{detail}".rstrip())

    def progress(self, text: str) -> None:
        """Overwrite the live line (a terminal only; elsewhere nothing is printed)."""
        if self.live:
            self.stream.write(f"\r\x1b[K{text}")
            self.stream.flush()
            self._progress = True

    def clear(self) -> None:
        if self._progress:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._progress = False
