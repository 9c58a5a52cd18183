"""The contract check: every missing or ill-typed name of a submission, in one list.

Runs before any workload, so a student sees "Sequence has no num_blocks" once, instead of
a traceback from deep inside a test. The contract is docs/contract.md (`schedcheck contract`).
"""

from __future__ import annotations

import enum
import inspect
from collections import deque
from types import ModuleType
from typing import Any

from schedcheck.drive.driver import show

SEQUENCE_ARGS = ("seq_id", "prompt_len", "max_tokens")
SCHEDULER_ARGS = (
    "num_blocks",
    "block_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "sample_fn",
    "eos_token_id",
)
DEFAULTS: dict[str, dict[str, object]] = {"Scheduler": {"eos_token_id": None}}


def contract_problems(module: ModuleType) -> list[str]:
    """Everything in `module` that breaks the contract; [] when it keeps it."""
    problems: list[str] = []
    status = getattr(module, "SequenceStatus", None)
    if not (isinstance(status, type) and issubclass(status, enum.Enum)):
        problems.append(f"SequenceStatus must be an enum.Enum class, got {show(status)}")
    else:
        missing = [m for m in ("WAITING", "RUNNING", "FINISHED") if m not in status.__members__]
        if missing:
            problems.append(f"SequenceStatus has no member named {', '.join(missing)}")
    problems += _sequence_problems(module)
    problems += _scheduler_problems(module)
    return problems


def _class(module: ModuleType, name: str, args: tuple[str, ...]) -> tuple[Any, list[str]]:
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        return None, [f"{name} must be a class, got {show(cls)}"]
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return cls, []
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [a for a in args if a not in params and not takes_kwargs]
    if missing:
        return None, [f"{name}(...) must accept the keyword arguments {', '.join(missing)}"]
    # A caller may leave out an argument the contract gives a default (the driver does).
    wrong = [
        f"{name}(...)'s {arg} must default to {default!r}, as the contract says (a caller may "
        f"leave it out), but {_default(params[arg])}"
        for arg, default in DEFAULTS.get(name, {}).items()
        if arg in params and params[arg].default is not default
    ]
    return cls, wrong


def _default(param: inspect.Parameter) -> str:
    if param.default is param.empty:
        return "it has no default"
    return f"its default is {show(param.default)}"


def _sequence_problems(module: ModuleType) -> list[str]:
    cls, problems = _class(module, "Sequence", SEQUENCE_ARGS)
    if cls is None:
        return problems
    try:
        seq = cls(seq_id="a1", prompt_len=5, max_tokens=2)
    except Exception as e:
        return [f"Sequence(seq_id='a1', prompt_len=5, max_tokens=2) raised {e!r}"]
    expected = {
        "seq_id": "a1",
        "prompt_len": 5,
        "max_tokens": 2,
        "output": [],
        "num_computed": 0,
        "num_blocks": 0,
        "num_tokens": 5,
    }
    for field, want in expected.items():
        problems += _field(seq, "a new Sequence", field, want)
    status = getattr(seq, "status", None)
    if getattr(status, "name", None) != "WAITING":
        problems.append(
            f"a new Sequence's status must be SequenceStatus.WAITING, got {show(status)}"
        )
    return problems


def _scheduler_problems(module: ModuleType) -> list[str]:
    cls, problems = _class(module, "Scheduler", SCHEDULER_ARGS)
    if cls is None:
        return problems
    for method in ("add", "schedule", "update"):
        if not callable(getattr(cls, method, None)):
            problems.append(f"Scheduler has no method {method}()")
    config = {"num_blocks": 4, "block_size": 2, "max_num_seqs": 3, "max_num_batched_tokens": 8}
    try:
        sched = cls(**config, sample_fn=lambda seq: 0, eos_token_id=None)
    except Exception as e:
        return [*problems, f"Scheduler(num_blocks=4, block_size=2, ...) raised {e!r}"]
    for field, want in {**config, "blocks_used": 0, "num_preemptions": 0}.items():
        problems += _field(sched, "a new Scheduler", field, want)
    for field, kinds in (("waiting", (deque, list)), ("running", (list,)), ("finished", (list,))):
        value = getattr(sched, field, None)
        if type(value) not in kinds or len(value) != 0:  # type: ignore[arg-type]
            kind = " or ".join(k.__name__ for k in kinds)
            problems.append(f"a new Scheduler's {field} must be an empty {kind}, got {show(value)}")
    return problems


def _field(obj: object, what: str, field: str, want: object) -> list[str]:
    try:
        got = getattr(obj, field)
    except AttributeError:
        return [f"{what} has no attribute {field}"]
    except Exception as e:
        return [f"reading {field} of {what} raised {e!r}"]
    if type(got) is not type(want) or got != want:
        return [f"{what}'s {field} must be {want!r}, got {show(got)}"]
    return []
