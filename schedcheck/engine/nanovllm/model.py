"""The simulated model a fork's own ModelRunner runs (docs/engines.md, "nano-vllm's own
step"): it stands in for the model's forward and its logits, reads the inputs the fork's
`prepare_*` computed (input_ids, positions, and the attention context the runner set:
cu_seqlens, slot_mapping, block_tables, context_lens), writes a simulated KV cache through
exactly those slots, reads it back through exactly those block tables, and predicts each
row's next token from what it read.

Rank 0's model judges what it is given against the scheduler's own sequences (each row is
the one holding its tokens at its positions, whose block table its slots follow):
- E1: a row computes positions that are not `start .. end-1` of its keys, or that lie past
  its sequence; a decode whose context length is not its position + 1;
- E2: a write outside the KV cache; a read (through the block table, where attention reads
  the paged cache: a prefill on a cached prefix, every decode) that finds anything but
  that position of that sequence's own prefix; a row no scheduled sequence holds;
a worker rank's model only records its inputs: equal to rank 0's for every forward, or the
copy it was sent (the fork's pickling, its shared memory) misled it (E8, decided after
the step). What a row computes is recorded as the trace's Scheduled, so the checks that
read a trace (E1-E4, E7, E9) read what the fork's runner really ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from schedcheck.engine.kv import Written, held, holds, show
from schedcheck.engine.trace import EngineFailure, Scheduled
from schedcheck.engine.workload import EngineWorkload

__all__ = ["Argmax", "Forwards", "Inputs", "ModelProblem", "SimModel"]


class ModelProblem(Exception):
    """Raised by the simulated model to end a forward it found wrong; the verdict is the one
    Forwards.problem holds, whatever the engine does with the exception."""


class Inputs(NamedTuple):
    """One forward's inputs as the runner prepared them, as plain values."""

    is_prefill: bool
    input_ids: tuple[int, ...]
    positions: tuple[int, ...]
    slot_mapping: tuple[int, ...]
    block_tables: tuple[tuple[int, ...], ...] | None
    cu_seqlens_q: tuple[int, ...]
    cu_seqlens_k: tuple[int, ...]
    context_lens: tuple[int, ...]
    # A batch of two parts, decode rows and prefill rows, the first `split` tokens the
    # `first` part's ("decode" or "prefill"; "" a batch of one kind): a context's
    # num_decode_tokens (decodes first) or num_prefill_tokens (prefills first); then
    # block_tables are the decode rows' and prefill_tables the prefill rows'.
    first: str = ""
    split: int = 0
    prefill_tables: tuple[tuple[int, ...], ...] | None = None

    def differs(self, other: Inputs) -> str | None:
        """The first field where `other` differs from these, in words."""
        for name, mine, theirs in zip(self._fields, self, other, strict=True):
            if mine != theirs:
                return f"{name} {_short(theirs)}, rank 0's {_short(mine)}"
        return None


def _short(value: object, most: int = 120) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _plain(value: Any) -> tuple[Any, ...]:
    """A tensor (or list) of ints, or of rows of ints, as tuples of Python ints."""
    if value is None:
        return ()
    if hasattr(value, "tolist"):  # a tensor: its tolist() gives Python ints already
        listed = value.tolist()
        if not isinstance(listed, list):
            return (listed,)
        return (
            tuple(map(tuple, listed)) if listed and isinstance(listed[0], list) else tuple(listed)
        )
    return tuple(
        tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else int(v) for v in value
    )


def inputs(context: Any, input_ids: Any, positions: Any) -> Inputs:
    """Copy a forward's inputs out of the runner's context (nano-vllm's utils/context.py
    fields, read by name; a field a fork lacks reads as empty)."""
    tables = getattr(context, "block_tables", None)
    prefill_tables = getattr(context, "prefill_block_tables", None)
    cu_q = getattr(context, "cu_seqlens_q", None)
    # a fork whose context has no is_prefill runs every batch as varlen rows (vLLM v1's
    # style): a prefill's shape, where cu_seqlens are set
    prefill = getattr(context, "is_prefill", cu_q is not None)
    first, split = "", 0
    for kind, name in (("decode", "num_decode_tokens"), ("prefill", "num_prefill_tokens")):
        if getattr(context, name, None) is not None:
            first, split = kind, int(getattr(context, name))
    if first == "prefill":  # its decode rows read through decode_block_tables
        tables = getattr(context, "decode_block_tables", None)
    if first:
        prefill = cu_q is not None
    return Inputs(
        bool(prefill),
        _plain(input_ids),
        _plain(positions),
        _plain(getattr(context, "slot_mapping", None)),
        None if tables is None else _plain(tables),
        _plain(cu_q),
        _plain(getattr(context, "cu_seqlens_k", None)),
        _plain(getattr(context, "context_lens", None)),
        first,
        split,
        None if prefill_tables is None else _plain(prefill_tables),
    )


class Forwards:
    """One run's forwards: the sequences added so far, the simulated KV cache
    (rank 0's), the rows each step computed, each rank's inputs, the first problem."""

    def __init__(self, workload: EngineWorkload, names: dict[int, str]) -> None:
        self.workload, self.names = workload, names
        config = workload.config
        self.block_size, self.slots = config.block_size, config.block_size * config.num_blocks
        self.kv: dict[int, Written] = {}
        self.known: Callable[[], list[Any]] = list  # every sequence added so far
        self.rows: list[Scheduled] = []  # what this step's forwards computed
        self.prefill = False  # whether any forward of this step was a prefill
        self.inputs: dict[int, list[Inputs]] = {}  # by rank, this step's
        self.problem: EngineFailure | None = None
        self.internal: Exception | None = None  # the simulated model's own failure
        self.step = 0
        self.checking = False  # off while the engine is built (its warm-up forward)
        self.first: Callable[[], None] | None = None  # called at a step's first forward
        self.seen = False  # whether this step had a forward on rank 0 yet

    def begin(self, step: int) -> None:
        self.step, self.rows, self.prefill = step, [], False
        self.seen = False
        self.inputs = {rank: [] for rank in self.inputs}

    @contextmanager
    def ours(self) -> Iterator[None]:
        """The simulated model's own code: an exception of its (not a problem it found) is
        schedcheck's fault, kept in `internal` for the driver to raise where the engine's
        faults are not judged, whatever the engine does with it."""
        try:
            yield
        except ModelProblem:
            raise
        except Exception as e:
            if self.internal is None:
                self.internal = e
            raise ModelProblem(f"schedcheck's simulated model failed: {e!r}") from None

    def fail(self, check: str, message: str) -> None:
        """Note the first problem and end the forward (the exception is the engine's to
        pass on; the verdict is decided from `problem` whatever it does)."""
        if self.problem is None:
            self.problem = EngineFailure(check, self.step, "model runner", message)
        raise ModelProblem(message)

    def forward(self, got: Inputs) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Rank 0's forward: check it, write every row's KV, then read each row's, record its
        rows; each row's sequence (its tokens) and the positions it computed."""
        rows = _rows(got)
        if rows is None:
            self.fail(
                "E2",
                f"the runner's inputs do not split into rows: {len(got.input_ids)} tokens, "
                f"{len(got.positions)} positions, {len(got.slot_mapping)} slots, "
                f"cu_seqlens_q {list(got.cu_seqlens_q)}",
            )
        used: set[int] = set()
        tokens = []
        reads: list[tuple[str, tuple[int, ...], int, tuple[int, ...] | None]] = []
        self.prefill = self.prefill or got.is_prefill
        for r, (start, positions, ids, slots, keys, table) in enumerate(rows or ()):
            if not positions:
                self.fail(
                    "E1",
                    f"{self._named(keys, table)} is in the runner's batch with no position to "
                    f"compute (row {r}: {keys} keys, no query)",
                )
            seq = self._match(r, got.is_prefill, positions, ids, slots, table, used)
            name = self.names[id(seq)]
            truth = tuple(int(t) for t in seq.token_ids)
            table_now = tuple(int(b) for b in seq.block_table)
            self.rows.append(Scheduled(name, positions[0], len(positions), truth, table_now))
            if keys > len(truth) or positions != tuple(range(start, keys)):
                first, last = positions[0], positions[-1]
                self.fail(
                    "E1",
                    f"{name} is computed at positions {first}..{last} with attention over "
                    f"{keys} keys, a sequence of {len(truth)} tokens: attention takes the "
                    f"queries for the last {len(positions)} keys (positions {start}..{keys - 1})",
                )
            self._write(name, truth, positions, slots)
            reads.append((name, truth, keys, table))
            tokens.append((truth, positions))
        # attention reads after the whole batch's KV is stored (nano-vllm's Attention runs
        # store_kvcache on every row's slots, then flash-attention): a row may read what a
        # later row of the same forward writes
        for name, truth, keys, table in reads:
            if table is not None:
                self._read(name, truth, keys, table)
        return tokens

    def _named(self, keys: int, table: tuple[int, ...] | None) -> str:
        """The name of the sequence of `keys` tokens this block table is the start of."""
        for seq in self.known():
            bt = list(seq.block_table)
            if len(seq.token_ids) == keys and (table is None or list(table[: len(bt)]) == bt):
                return self.names.get(id(seq), "a sequence")
        return "a sequence"

    def _match(
        self,
        r: int,
        prefill: bool,
        positions: tuple[int, ...],
        ids: tuple[int, ...],
        slots: tuple[int, ...],
        table: tuple[int, ...] | None,
        used: set[int],
    ) -> Any:
        """The sequence row `r` computes: one added and not yet matched, holding these
        tokens at these positions, whose own block table these slots and this table follow
        (two alike but for their blocks are told apart by them)."""
        fits = []
        for seq in self.known():
            tokens = seq.token_ids
            if id(seq) in used or id(seq) not in self.names:
                continue
            if (not prefill and len(tokens) != positions[-1] + 1) or any(
                p >= len(tokens) or tokens[p] != t for p, t in zip(positions, ids, strict=True)
            ):
                continue
            fits.append(seq)
        if not fits:
            self._unmatched(r, prefill, positions, ids, table, used)
        bs = self.block_size
        chosen = next(
            (
                seq
                for seq in fits
                if all(
                    s == -1 or _slot(seq.block_table, p, bs) == s
                    for p, s in zip(positions, slots, strict=True)
                )
                and (table is None or list(table[: len(seq.block_table)]) == list(seq.block_table))
            ),
            fits[0],
        )
        used.add(id(chosen))
        return chosen

    def _unmatched(
        self,
        r: int,
        prefill: bool,
        positions: tuple[int, ...],
        ids: tuple[int, ...],
        table: tuple[int, ...] | None,
        used: set[int],
    ) -> None:
        """A row no sequence holds: where a sequence holds its tokens at positions all off
        by one amount (a decode: its last token), the row is that sequence's at the wrong
        positions, E1 where they run past its end (nano-vllm before f5b4840, PR #67:
        a decode at position len(seq)); otherwise E2."""
        where = f"the runner computes positions {list(positions)} on tokens {list(ids)} "
        where += f"(row {r} of its batch)"
        for seq in self.known():
            tokens = [int(t) for t in seq.token_ids]
            if id(seq) in used or id(seq) not in self.names:
                continue
            if table is not None and list(table[: len(seq.block_table)]) != list(seq.block_table):
                continue
            offset = positions[-1] - (len(tokens) - 1)  # a decode row is the last token
            for shift in [offset] if not prefill else range(-len(tokens), len(tokens) + 1):
                at = [p - shift for p in positions]
                pairs = zip(at, ids, strict=True)
                if shift and all(0 <= q < len(tokens) and tokens[q] == t for q, t in pairs):
                    name = self.names[id(seq)]
                    past = positions[-1] >= len(tokens)
                    self.fail(
                        "E1" if past else "E2",
                        f"{where}: {name} holds these tokens at positions {at}, a sequence of "
                        f"{len(tokens)} tokens"
                        + (f": position {positions[-1]} is past its end" if past else ""),
                    )
        self.fail("E2", f"{where}, which no sequence holds there")

    def _write(
        self, name: str, truth: tuple[int, ...], positions: tuple[int, ...], slots: tuple[int, ...]
    ) -> None:
        for p, s in zip(positions, slots, strict=True):
            if s == -1:
                continue  # nano-vllm's store kernel skips a -1 slot
            if not 0 <= s < self.slots:
                self.fail(
                    "E2",
                    f"{name}'s position {p} is written to slot {s}, outside the KV cache "
                    f"(slots 0..{self.slots - 1})",
                )
            self.kv[s] = (p, truth[: p + 1], name, self.step)

    def _read(self, name: str, truth: tuple[int, ...], keys: int, table: tuple[int, ...]) -> None:
        bs = self.block_size
        for q in range(keys):
            block = table[q // bs] if q // bs < len(table) else -1
            slot = block * bs + q % bs if block >= 0 else None
            found = self.kv.get(slot) if slot is not None else None
            if holds(found, q, truth[: q + 1]):
                continue
            where = "outside its block table" if slot is None else f"slot {slot}"
            self.fail(
                "E2",
                f"{name} attends to position {q} at {where}, which holds {held(found)}, not "
                f"position {q} of its own {show(truth[: q + 1])}",
            )

    def compare(self) -> tuple[int, str] | None:
        """After a step: the first worker rank whose forwards' inputs differ from rank 0's,
        and how."""
        mine = self.inputs.get(0, [])
        for rank in sorted(self.inputs):
            theirs = self.inputs[rank]
            if rank == 0:
                continue
            if len(theirs) != len(mine):
                return (
                    rank,
                    f"rank {rank} ran {len(theirs)} forwards in this step, rank 0 {len(mine)}",
                )
            for k, (a, b) in enumerate(zip(mine, theirs, strict=True)):
                said = a.differs(b)
                if said is not None:
                    return rank, f"rank {rank}'s forward {k + 1} of this step computed on {said}"
        return None


def _slot(table: Sequence[int], p: int, bs: int) -> int | None:
    index = p // bs
    return int(table[index]) * bs + p % bs if index < len(table) else None


Row = tuple[
    int, tuple[int, ...], tuple[int, ...], tuple[int, ...], int, tuple[int, ...] | None
]  # start, positions, input ids, slots, keys, block table (None: attention reads no cache)


def _rows(got: Inputs) -> list[Row] | None:
    """The forward's rows, in batch order: a prefill's by cu_seqlens (a row's queries are
    the last of its keys), a decode's one token each, or both in a batch of two parts;
    None where the inputs do not split so."""
    n = len(got.input_ids)
    if len(got.positions) != n or len(got.slot_mapping) != n:
        return None
    tokens = list(zip(got.input_ids, got.positions, got.slot_mapping, strict=True))
    if not got.first:
        if got.is_prefill:
            return _prefill_rows(tokens, got.cu_seqlens_q, got.cu_seqlens_k, got.block_tables)
        return _decode_rows(tokens, got.context_lens, got.block_tables)
    if not 0 <= got.split <= n:
        return None
    head, tail = tokens[: got.split], tokens[got.split :]
    decodes, prefills = (head, tail) if got.first == "decode" else (tail, head)
    # beside decode rows a prefill row reads through prefill_tables (none: no cached
    # prefix); alone, where the context has none, through block_tables (a runner that
    # mixes the two kinds only sometimes, as Beatrice0377/my-nano-vllm's)
    tables = got.prefill_tables
    if not decodes and tables is None:
        tables = got.block_tables
    d = _decode_rows(decodes, got.context_lens, got.block_tables) if decodes else []
    p = _prefill_rows(prefills, got.cu_seqlens_q, got.cu_seqlens_k, tables) if prefills else []
    if d is None or p is None:
        return None
    return d + p if got.first == "decode" else p + d


Token = tuple[int, int, int]  # input id, position, slot


def _decode_rows(
    tokens: list[Token], lens: tuple[int, ...], tables: tuple[tuple[int, ...], ...] | None
) -> list[Row] | None:
    n = len(tokens)
    if len(lens) != n or tables is None or len(tables) != n:
        return None
    return [(p, (p,), (t,), (s,), lens[r], tables[r]) for r, (t, p, s) in enumerate(tokens)]


def _prefill_rows(
    tokens: list[Token],
    cq: tuple[int, ...],
    ck: tuple[int, ...],
    tables: tuple[tuple[int, ...], ...] | None,
) -> list[Row] | None:
    n = len(tokens)
    if len(cq) != len(ck) or len(cq) < 2 or cq[0] != 0 or cq[-1] != n:
        return None
    if tables is not None and len(tables) != len(cq) - 1:
        return None
    rows: list[Row] = []
    for i in range(len(cq) - 1):
        a, b, keys = cq[i], cq[i + 1], ck[i + 1] - ck[i]
        if b < a or keys < b - a:
            return None
        ids, positions, slots = (
            (tuple(x) for x in zip(*tokens[a:b], strict=True)) if b > a else ((), (), ())
        )
        rows.append(
            (keys - (b - a), positions, ids, slots, keys, None if tables is None else tables[i])
        )
    return rows


class SimModel:
    """Stands in for a fork's `*ForCausalLM` on one rank: `model(input_ids, positions)` and
    `model.compute_logits(hidden)`, reading the runner's context through `context()`."""

    def __init__(self, forwards: Forwards, rank: int, context: Callable[[], Any]) -> None:
        self.forwards, self.rank, self.context = forwards, rank, context
        self.pending: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __call__(self, input_ids: Any, positions: Any, *args: object, **kwargs: object) -> Any:
        import torch

        f = self.forwards
        with f.ours():
            got = inputs(self.context(), input_ids, positions)
            self.pending = []
            if f.checking:
                f.inputs.setdefault(self.rank, []).append(got)
                if self.rank == 0:
                    if not f.seen and f.first is not None:
                        f.first()
                    f.seen = True
                    self.pending = f.forward(got)
            return torch.zeros(len(got.input_ids), 1)

    def to(self, *args: object, **kwargs: object) -> SimModel:
        """`model.cuda()`, `.to(device)`, `.half()`: a module's own moves (`.eval()` below), which
        a fork's runner may make on the model it built."""
        return self

    cuda = half = float = bfloat16 = requires_grad_ = to

    def compute_logits(self, hidden: Any) -> Any:
        """One-hot logits on each row's next token, for the rows nano-vllm's LM head keeps:
        a prefill's last position per sequence (every position where the context asks for
        full logits, as brightmoonflame's does), only the sequences the context's
        `seq_need_compute_logits` names where it names any (vLLM v1-style forks), the
        batch's tokens its `logits_indices` names where it has them (a fork mixing decodes
        and chunks in one batch)."""
        with self.forwards.ours():
            return self._logits(hidden)

    def _logits(self, hidden: Any) -> Any:
        import torch

        context = self.context()
        every = bool(getattr(context, "is_prefill", False)) and bool(
            getattr(context, "full_logits", False)
        )
        nexts = self.forwards.workload.next_token
        if every:
            tokens = [nexts(truth[: p + 1]) for truth, ps in self.pending for p in ps]
        else:
            tokens = [nexts(truth[: ps[-1] + 1]) for truth, ps in self.pending]
        need = _plain(getattr(context, "seq_need_compute_logits", None))
        if need and not every:
            tokens = [tokens[i] for i in need if 0 <= i < len(tokens)]
        chosen = getattr(context, "logits_indices", None)  # token indices in the batch
        if chosen is not None and not every:
            each = [nexts(truth[: p + 1]) for truth, ps in self.pending for p in ps]
            tokens = [each[i] for i in _plain(chosen) if 0 <= i < len(each)]
        if not self.forwards.checking:
            tokens = [0] * len(hidden)  # a warm-up forward: any logits
        logits = torch.zeros(len(tokens), self.forwards.workload.vocab + 1)
        for r, token in enumerate(tokens):
            logits[r, token] = 1.0
        return logits

    def parameters(self) -> Any:
        return iter(())

    def modules(self) -> Any:
        return iter(())

    def eval(self) -> SimModel:
        return self


class Argmax:
    """Stands in for a fork's Sampler: the token the simulated model's logits name (a
    fork's own greedy `logits.argmax` gives the same)."""

    def __call__(self, logits: Any, *args: object, **kwargs: object) -> Any:
        return logits.argmax(dim=-1)
