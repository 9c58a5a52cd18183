"""A submission worker whose own code fails on every run: a fault of schedcheck's, for
tests/sandbox/test_tampering.py to show that the parent's referee keeps it ours (exit 3)."""

from __future__ import annotations

import os
import sys
from typing import Any

from schedcheck.drive import worker


def _broken(self: worker.SchedulerWorker, request: dict[str, Any]) -> None:
    raise RuntimeError("injected: the worker's own code failed")


worker.SchedulerWorker.op_run = _broken  # type: ignore[method-assign]

if __name__ == "__main__":
    try:
        worker.main(sys.argv[1:])
    finally:
        os._exit(0)
