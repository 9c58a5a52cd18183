"""Steps held on the heartbeat page (issue 56): a run's steps go to the parent a batch at a
time, and none is lost to a hang or a death.

A message a step costs both processes more than the step's own data (the parent wakes,
polls, reads and parses each). So the worker writes each step it completes (its wire,
model/wire.py, as JSON) to the heartbeat page's free part (sandbox/beat.py uses its first
bytes; the page is shared memory, which outlives a worker that dies or hangs) and sends
them as one message only when the page is full, or with the run's end. A step too large
for the page goes at once, alone. When a call hangs or the worker dies, the parent copies
the page before it stops the worker (drive/isolated.py) and reads back the steps held
there: it has every step the worker completed, as when each step was a message.

The page is laid out `HEAD` (the index in the run of the first step held, how many bytes
they take, and a check of both) then those steps' JSON, comma-separated. The worker writes
the steps' bytes before the head, and only between calls into the submission. What the
page holds is the worker's word, like a message: read with every check a message gets.
"""

from __future__ import annotations

import struct

from schedcheck.sandbox.beat import SIZE

HELD_AT = 256  # the page's first bytes are the heartbeat's (beat.py: 64 of them)
HEAD = struct.Struct("<III")  # first step's index, bytes held, check
CHECK = 0x5C4ED11E
ROOM = SIZE - HELD_AT - HEAD.size  # bytes of steps the page holds


def head(first: int, held: int) -> tuple[int, int, int]:
    return first, held, first ^ held ^ CHECK


def steps_held(region: bytes, received: int) -> bytes | None:
    """The JSON list of the steps a copy of the page's part from HELD_AT holds, where they
    follow the `received` steps the parent has (else None: none held, or a page that
    says nothing consistent)."""
    if len(region) < HEAD.size:
        return None
    first, held, check = HEAD.unpack_from(region)
    if check != first ^ held ^ CHECK or not 0 < held <= ROOM or first != received:
        return None
    return b"[" + region[HEAD.size : HEAD.size + held] + b"]"
