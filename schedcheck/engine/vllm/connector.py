"""schedcheck's KV connector for vLLM (issue 50): the scheduler side of vLLM's connector
interface (`vllm/distributed/kv_transfer/kv_connector/v1/base.py`, KVConnectorBase_V1)
implemented over the simulated external store (schedcheck/engine/store.py), registered as
users register theirs: `KVTransferConfig(kv_connector="SchedcheckConnector",
kv_connector_module_path="schedcheck.engine.vllm.connector", kv_role="kv_both")`, the
workload's store and plans in `kv_connector_extra_config["schedcheck"]`.

What it answers, as a connector may (the interface's docstrings):
- `get_num_new_matched_tokens`: the store's hit past the locally computed tokens, loaded
  asynchronously where the request's plan says so (`load` > 0); "not yet" (`None`) for the
  plan's first `lookup_wait` lookups of it;
- `update_state_after_alloc`: a load of those tokens into the blocks vLLM gave, started;
- `build_connector_meta`: the transfers started since the last step, for the worker (the
  simulated runner reads them there, as vLLM's workers do);
- `request_finished`: told once a request finishes; where its plan saves (`save` > 0),
  a save of its computed tokens started and its blocks kept until the worker reports it
  (none while its load is in flight: its KV is not there to save, and no connector saves
  then);
- `update_connector_output`: the store holds what each save reported done.

Every call is recorded as a Transfer event (`events`, drained by the driver into the
trace): what the connector was told is what E18 and E19 read. The worker-side methods are
never called: the simulated runner is the worker.
"""

from __future__ import annotations

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
)

from schedcheck.engine.store import Store
from schedcheck.engine.trace import Transfer
from schedcheck.engine.vllm.offloading import block_table as _table

__all__ = ["SchedcheckConnector", "Started"]


class Started(KVConnectorMetadata):  # type: ignore[misc]
    """A step's connector metadata: the transfers its scheduler side started."""

    def __init__(self, transfers: list[Transfer]) -> None:
        self.transfers = transfers


class SchedcheckConnector(KVConnectorBase_V1):  # type: ignore[misc]
    def __init__(self, vllm_config: Any, role: Any, *rest: Any, **named: Any) -> None:
        super().__init__(vllm_config, role, *rest, **named)
        config = vllm_config.kv_transfer_config.kv_connector_extra_config["schedcheck"]
        self.store = Store(config["stored"])
        self.loads: dict[str, int] = dict(config["loads"])  # steps an async load takes
        self.saves: dict[str, int] = dict(config["saves"])
        self.waits: dict[str, int] = dict(config.get("waits", {}))  # lookups answered "not yet"
        self.block_size = int(config["block_size"])
        self.local: dict[str, int] = {}  # what was computed locally at the last lookup
        self.loading: set[str] = set()  # requests whose asynchronous load is in flight
        self.started: list[Transfer] = []  # since the last step's metadata
        self.events: list[Transfer] = []  # everything it was told, for the trace

    # -- scheduler side --------------------------------------------------------------

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        name = str(request.request_id)
        if self.waits.get(name, 0) > 0:  # it needs more time to know the hit: ask again
            self.waits[name] -= 1
            self.events.append(Transfer(name, "lookup", "wait", (), 0, ()))
            return None, False
        asynchronous = self.loads.get(name, 0) > 0
        prompt = [int(t) for t in request.prompt_token_ids]
        hit = self.store.hit(prompt, int(num_computed_tokens), asynchronous)
        self.local[name] = int(num_computed_tokens)
        return hit, asynchronous and hit > 0

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        if not num_external_tokens:
            return
        name = str(request.request_id)
        first = self.local.get(name, 0)
        tokens = tuple(int(t) for t in request.all_token_ids[: first + num_external_tokens])
        load = Transfer(name, "load", "start", _table(blocks.get_block_ids()), first, tokens)
        if self.loads.get(name, 0):
            self.loading.add(name)
        self.started.append(load)
        self.events.append(load)

    def build_connector_meta(self, scheduler_output: Any) -> Any:
        started, self.started = self.started, []
        return Started(started)

    def request_finished(self, request: Any, block_ids: Any) -> tuple[bool, dict[str, Any] | None]:
        name, table = str(request.request_id), _table(block_ids)
        computed = int(request.num_computed_tokens)
        tokens = tuple(int(t) for t in request.all_token_ids[:computed])
        self.events.append(Transfer(name, "finished", "start", table, 0, tokens))
        if not self.saves.get(name, 0) or not computed or not table or name in self.loading:
            return False, None  # nothing to save (a load in flight: its KV is not there yet)
        save = Transfer(name, "save", "start", table, 0, tokens)
        self.started.append(save)
        self.events.append(save)
        return True, None

    def update_connector_output(self, connector_output: Any) -> None:
        self.loading -= set(connector_output.finished_recving or ())
        for event in self.events:  # a save the worker reports done: the store holds it
            if event.kind == "save" and event.name in (connector_output.finished_sending or ()):
                self.store.add(event.tokens)

    # -- worker side: the simulated runner plays it; vLLM never calls these here -------

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        raise NotImplementedError("the simulated runner is the worker")

    def wait_for_layer_load(self, layer_name: str) -> None:
        raise NotImplementedError("the simulated runner is the worker")

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        raise NotImplementedError("the simulated runner is the worker")

    def wait_for_save(self) -> None:
        raise NotImplementedError("the simulated runner is the worker")
