"""E2, the simulated KV cache: each slot holds the KV of one (position, whole prefix).

A step first writes the KV of every position it computes into the slot its sequence's
block table names (`block_table[p // block_size] * block_size + p % block_size`; a decode
writes into the table's last block where the runner does so, as nano-vllm's does), then
every scheduled sequence attends to positions 0 .. end-1 through its block table: each
read must find exactly what that position of that sequence's own prefix wrote. Reading
another sequence's KV, or a block's stale KV after it was reused, is the silent bug: the
model computes on the wrong context and nothing crashes.

Where a block's hash names a prefix (vLLM's prefix cache), the KV is checked where it is
promised too: after every step's update, each block the prefix cache indexes holds, in
every slot, the KV of that prefix's position, since any later request with that prefix
may be handed the block and read it without computing it.

A hybrid model's other layers (layers.py) write and read through their own groups' block
tables in the same slots: a window or a chunk the KV of each position, a Mamba layer one
state a block, the state of a whole prefix, read where a step starts and written where it
ends (layers.state_index).

A draft position holds the draft the runner computed there: the scheduler's own where it
sent the drafts, the runner's where the scheduler sent placeholders for drafts the worker
keeps (vLLM's v2 runner): those are what the step wrote, and what it attends to.
"""

from __future__ import annotations

from collections.abc import Iterator

from schedcheck.engine.layers import Layer, state_index
from schedcheck.engine.trace import EngineTrace, Pool, Scheduled, Transfer, computed_on
from schedcheck.engine.traits import Traits
from schedcheck.invariants.violation import Violation

__all__ = [
    "Written",
    "check_e2",
    "held",
    "holds",
    "moved_slots",
    "show",
    "slot_of",
    "span",
    "table_slot",
]

Written = tuple[int, tuple[int, ...], str, int]  # position, prefix, by whom, at which step


def check_e2(trace: EngineTrace) -> Iterator[Violation]:
    slots: dict[int, Written] = {}
    bs = trace.workload.config.block_size
    runner = trace.traits.runner
    store: Store = {  # the external store's KV (a KV connector's), by prefix
        s[: p + 1]: (p, s[: p + 1], "the external store, from the start", 0)
        for s in trace.workload.stored
        for p in range(len(s))
    }
    tier: dict[int, Written] = {}  # an offload tier's KV, by its own slot (Transfer.remote)
    # a hybrid model's (issue 51): the KV cache group whose layer wrote each slot, where it
    # is not the full-attention group (0); one pool, so a block one group freed may hold
    # another group's KV next
    groups = _Groups(trace.workload.hybrid(), slots, bs)
    for step in trace.steps:
        ended = [t for t in step.transfers if t.phase == "end"]
        # before the step computes: the loads the worker finished, and every job that ended
        # at the step's start (an offloading job, in the order they ended)
        for t in ended:
            if t.remote:
                (_load_job if t.kind == "load" else _store_job)(t, slots, tier, bs, step.step)
            elif t.kind == "load":
                _load(t, slots, store, bs, step.step)
            if t.kind == "load":  # full attention's KV now (a connector loads no other)
                for p in t.moved:
                    groups.full_wrote(table_slot(t.table, p, bs))
        # nano-vllm's decode writes into the table's last block, whatever p says
        last = runner.decode == "last-block" and not step.is_prefill
        copies = (*step.copies, *[None] * len(step.scheduled))  # a failed step has fewer
        computed = [computed_on(seq, copies[i]) for i, seq in enumerate(step.scheduled)]
        # a state layer reads the state its step starts from before any is written
        wrong_state = {
            seq.name: v
            for seq, tokens in zip(step.scheduled, computed, strict=True)
            if (v := groups.read_state(seq, tokens, step.step)) is not None
        }
        for seq, tokens in zip(step.scheduled, computed, strict=True):
            start, end = span(seq)
            for p in range(start, min(end, len(tokens))):
                slot = _last_slot(seq, p, bs) if last else slot_of(seq, p, bs)
                if slot is None:
                    continue
                slots[slot] = (
                    (GARBAGE, (), f"{seq.name}, computed on garbage KV", step.step)
                    if seq.name in step.tainted
                    else (p, tokens[: p + 1], seq.name, step.step)
                )
                groups.full_wrote(slot)
            groups.write(seq, tokens, step.step)
        for seq, tokens in zip(step.scheduled, computed, strict=True):
            if seq.name in step.tainted:
                continue  # it read a failed load's garbage: what it said is E7's to judge
            found_wrong = wrong_state.get(seq.name) or groups.read(seq, tokens, step.step)
            if found_wrong is not None:
                yield found_wrong
                continue
            _, end = span(seq)
            for q in range(min(end, len(tokens))):
                slot = slot_of(seq, q, bs)
                want = tokens[: q + 1]
                found = slots.get(slot) if slot is not None else None
                if holds(found, q, want) and groups.by_full(slot):
                    continue
                where = "outside its block table" if slot is None else f"slot {slot}"
                yield Violation(
                    "E2",
                    step.step,
                    "model runner",
                    f"{seq.name} attends to position {q} at {where}, which holds {held(found)}, "
                    f"not position {q} of its own {show(want)}",
                    (seq.name,),
                )
                break  # one per sequence per step: the first wrong read tells the story
        for t in ended:  # a save reads its blocks once the step is done
            if t.kind == "save" and not t.remote:
                _save(t, slots, store, bs, step.step)
        if trace.traits.hashes_name_prefixes and step.after_postprocess is not None:
            yield from _promised(step.after_postprocess, slots, bs, step.step, trace.traits)


class _Groups:
    """A hybrid model's other layers (issue 51; layers.py), their KV in the same slots as
    full attention's: one pool, so a slot remembers the group whose layer last wrote it
    (a block one group freed may hold another group's KV next)."""

    def __init__(self, layers: tuple[Layer, ...], slots: dict[int, Written], bs: int) -> None:
        self.layers, self.slots, self.bs = layers, slots, bs
        self.owner: dict[int, int] = {}  # slot -> its writer's group, where not full's (0)

    def full_wrote(self, slot: int | None) -> None:
        """Full attention wrote the slot (or a load into its blocks did)."""
        if slot is not None:
            self.owner.pop(slot, None)

    def by_full(self, slot: int | None) -> bool:
        """Whether full attention wrote what the slot holds."""
        return slot is None or slot not in self.owner

    def write(self, seq: Scheduled, tokens: tuple[int, ...], step: int) -> None:
        """Each other layer writes the KV of every position the step computes into its own
        group's blocks (`seq.groups`, in the order of the workload's layers)."""
        start, end = span(seq)
        end = min(end, len(tokens))
        for g, (layer, table) in enumerate(zip(self.layers, seq.groups, strict=False), 1):
            if layer.state:  # the state of the first `end` tokens, in its block's page
                index = state_index(end, self.bs)
                if end > start and 0 <= index < len(table):
                    for slot in range(table[index] * self.bs, (table[index] + 1) * self.bs):
                        self.slots[slot] = (
                            STATE,
                            tokens[:end],
                            f"{seq.name}'s {layer} layer",
                            step,
                        )
                        self.owner[slot] = g
                continue
            for p in range(start, end):
                at = table_slot(table, p, self.bs)
                if at is not None:
                    self.slots[at] = (p, tokens[: p + 1], f"{seq.name}'s {layer} layer", step)
                    self.owner[at] = g

    def read_state(self, seq: Scheduled, tokens: tuple[int, ...], step: int) -> Violation | None:
        """Each state layer starts a step computing from position c > 0 from the state of
        the first c tokens, in the block at state_index(c) of its group's table, which its
        layer wrote (at c = 0 it starts from none)."""
        start, end = span(seq)
        if start == 0 or min(end, len(tokens)) <= start:
            return None
        for g, (layer, table) in enumerate(zip(self.layers, seq.groups, strict=False), 1):
            if not layer.state:
                continue
            index = state_index(start, self.bs)
            block = table[index] if 0 <= index < len(table) else None
            found = None if block is None else self.slots.get(block * self.bs)
            want = tokens[:start]
            if (
                block is not None
                and found is not None
                and found[:2] == (STATE, want)
                and self.owner.get(block * self.bs) == g
            ):
                continue
            where = (
                f"past its block table's end (index {index})"
                if block is None
                else f"block {block} (index {index})"
            )
            return Violation(
                "E2",
                step,
                "model runner",
                f"{seq.name}'s {layer} layer starts from the state of its first {start} "
                f"tokens, at {where} of its group {g} block table {list(table)}, which holds "
                f"{held(found)}, not the state of {show(want)}",
                (seq.name,),
            )
        return None

    def read(self, seq: Scheduled, tokens: tuple[int, ...], step: int) -> Violation | None:
        """Each other layer attends, for every position the step computes, to the
        positions its kind reads (a window's last W, a chunk's own) through its group's
        table: each must hold what that layer wrote there for the sequence's own prefix. A
        block wholly outside what it reads is not read (the engine may have freed it, its
        null block in its place)."""
        start, end = span(seq)
        end = min(end, len(tokens))
        if end <= start:
            return None
        for g, (layer, table) in enumerate(zip(self.layers, seq.groups, strict=False), 1):
            if layer.state:  # read_state's: the state its step starts from
                continue
            for q in range(layer.reads(start).start, end):
                slot = table_slot(table, q, self.bs)
                want = tokens[: q + 1]
                found = self.slots.get(slot) if slot is not None else None
                if holds(found, q, want) and slot is not None and self.owner.get(slot) == g:
                    continue
                where = "outside its block table" if slot is None else f"slot {slot}"
                return Violation(
                    "E2",
                    step,
                    "model runner",
                    f"{seq.name}'s {layer} layer attends to position {q} at {where} (its "
                    f"group {g} block table {list(table)}), which holds {held(found)}, not "
                    f"position {q} of its own {show(want)}",
                    (seq.name,),
                )
        return None


GARBAGE = -1
"""The position of a slot's KV where it holds garbage: a load that failed (the worker
told the engine so) or KV computed on one's. A request reading it computes garbage, which
the simulated model says (trace `tainted`): the engine must discard it, as E7 reads."""


Store = dict[tuple[int, ...], Written]  # the external store's KV, by the prefix it is of


def _load(t: Transfer, slots: dict[int, Written], store: Store, bs: int, step: int) -> None:
    """A load ended: its blocks hold what the store held for each position, its failed
    blocks garbage."""
    for p in t.moved:
        slot = table_slot(t.table, p, bs)
        if slot is None:
            continue
        found = store.get(t.tokens[: p + 1])
        if t.table[p // bs] in t.failed:
            slots[slot] = (GARBAGE, (), f"garbage: {t.name}'s load of it failed", step)
        elif found is None:
            why = f"nothing: the store held no KV of it when {t.name} loaded it"
            slots[slot] = (NOTHING, (), why, step)
        else:
            slots[slot] = (found[0], found[1], f"{found[2]}, loaded for {t.name}", step)


def _save(t: Transfer, slots: dict[int, Written], store: Store, bs: int, step: int) -> None:
    """A save ended: the store holds what its blocks held then, for each position."""
    for p in t.moved:
        slot = table_slot(t.table, p, bs)
        found = slots.get(slot) if slot is not None else None
        store[t.tokens[: p + 1]] = (
            (NOTHING, (), f"nothing: {t.name}'s save found none", step)
            if found is None
            else (found[0], found[1], f"{found[2]}, saved by {t.name} at step {step}", found[3])
        )


NOTHING = -2  # a slot's position where it holds no KV at all
STATE = -3  # a slot's position where its block holds a state layer's state of a prefix


def moved_slots(t: Transfer, bs: int) -> Iterator[tuple[int | None, int]]:
    """An offloading job's positions: (the engine's slot, the tier's slot) of each. Its
    `remote` blocks are the tier's for its blocks in order, from the block of `first`."""
    first = t.first // bs
    for p in t.moved:
        i = p // bs - first
        if 0 <= i < len(t.remote):
            yield table_slot(t.table, p, bs), t.remote[i] * bs + p % bs


def _load_job(
    t: Transfer, slots: dict[int, Written], tier: dict[int, Written], bs: int, step: int
) -> None:
    """An offloading load ended: its blocks hold what the tier's blocks held."""
    for slot, remote in moved_slots(t, bs):
        if slot is None:
            continue
        found = tier.get(remote)
        if found is None:
            why = f"nothing: tier block {remote // bs} held no KV when {t.name} loaded it"
            slots[slot] = (NOTHING, (), why, step)
        else:
            slots[slot] = (found[0], found[1], f"{found[2]}, loaded for {t.name}", step)


def _store_job(
    t: Transfer, slots: dict[int, Written], tier: dict[int, Written], bs: int, step: int
) -> None:
    """An offloading store ended: the tier's blocks hold what its blocks held then."""
    for slot, remote in moved_slots(t, bs):
        found = slots.get(slot) if slot is not None else None
        tier[remote] = (
            (NOTHING, (), f"nothing: {t.name}'s store found none", step)
            if found is None
            else (
                found[0],
                found[1],
                f"{found[2]}, stored to tier block {remote // bs} at step {step}",
                found[3],
            )
        )


def table_slot(table: tuple[int, ...], p: int, bs: int) -> int | None:
    """The slot of position `p` through a block table (a transfer's)."""
    index = p // bs
    return table[index] * bs + p % bs if index < len(table) else None


def _promised(
    pool: Pool, slots: dict[int, Written], bs: int, step: int, traits: Traits
) -> Iterator[Violation]:
    """Each indexed block holds the KV of the prefix its hash names (a state layer's
    block: that prefix's state)."""
    for number, b in pool.cache_index:
        prefix = pool.blocks[b].token_ids if 0 <= b < len(pool.blocks) else ()
        first = len(prefix) - bs
        for j in range(bs if first >= 0 else 0):
            p = first + j
            found = slots.get(b * bs + j)
            if holds(found, p, prefix[: p + 1]) or (found is not None and found[0] == GARBAGE):
                continue  # garbage the engine was told of: E7 judges who reads it
            if found is not None and found[:2] == (STATE, prefix):
                continue  # a state layer's block: the state of the prefix its hash names
            what = (
                "that prefix's state"
                if found is not None and found[0] == STATE
                else f"position {p} of that prefix"
            )
            yield Violation(
                "E2",
                step,
                traits.update_call,
                f"block {b} is in the prefix cache as hash #{number}, the prefix "
                f"{show(prefix)}, but its slot {b * bs + j} holds {held(found)}, not "
                f"{what}: a request with this prefix would read it",
                (),
            )
            return  # the first broken promise tells the story


def holds(found: Written | None, position: int, prefix: tuple[int, ...]) -> bool:
    """Whether a slot holds the KV of `position` of `prefix`."""
    return found is not None and found[0] == position and found[1] == prefix


def held(found: Written | None) -> str:
    """What a slot holds, in words."""
    if found is None:
        return "nothing"
    if found[0] == STATE:
        return f"the state of {show(found[1])} (written for {found[2]} at step {found[3]})"
    if found[0] < 0:
        return f"{found[2]} (step {found[3]})"
    return f"position {found[0]} of {show(found[1])} (written for {found[2]} at step {found[3]})"


def span(seq: Scheduled) -> tuple[int, int]:
    """The positions this step computes for `seq`: [num_cached, num_cached + n)."""
    return seq.num_cached, seq.num_cached + seq.num_scheduled


def slot_of(seq: Scheduled, p: int, block_size: int) -> int | None:
    """The slot `seq`'s block table names for position `p` (None: past its table)."""
    index = p // block_size
    if not 0 <= index < len(seq.block_table):
        return None
    return seq.block_table[index] * block_size + p % block_size


def _last_slot(seq: Scheduled, p: int, block_size: int) -> int | None:
    if not seq.block_table:
        return None
    return seq.block_table[-1] * block_size + p % block_size


def show(tokens: tuple[int, ...]) -> str:
    return "[" + " ".join(map(str, tokens)) + "]"
