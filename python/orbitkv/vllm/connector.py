"""``OrbitKVConnector``: vLLM's KV connector (``KVConnectorBase_V1``) on OrbitKV.

Configure vLLM with::

    --kv-transfer-config '{"kv_connector": "OrbitKVConnector",
        "kv_connector_module_path": "orbitkv.vllm",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"orbitkv.bootstrap_socket": "/run/orbitkv.sock"}}'

The scheduler process builds one with role SCHEDULER, every worker one with
role WORKER; each connects to the Manager at construction, so a wrong
socket fails vLLM's startup with an error naming the option. Options:
``orbitkv.options``; the halves: ``orbitkv.vllm.scheduler`` and
``orbitkv.vllm.worker``; docs/adapters.md explains the whole.

Loading is synchronous within the step (``get_num_new_matched_tokens``
answers ``load_async`` False): restores start in ``start_load_kv`` and end
in the first ``wait_for_layer_load``; saves are published in
``wait_for_save``, so ``request_finished`` never holds blocks and
``get_finished`` reports nothing. ``kv_role``: ``kv_both`` loads and
saves, ``kv_consumer`` only loads, ``kv_producer`` only saves.
"""

from __future__ import annotations

from typing import Any

from ._base import KVConnectorBase_V1, role_name
from .metadata import OrbitKVConnectorMetadata
from .options import OptionError, identity_base, parse_options
from .scheduler import SchedulerSide
from .worker import WorkerSide

__all__ = ["OrbitKVConnector"]


def _ranks(vllm_config: Any, tp_size: int, pp_size: int) -> tuple[int, int]:
    """(TP rank, PP rank) of this worker: vLLM's parallel state when it is
    initialised, else ``parallel_config.rank`` (TP-major)."""
    try:  # pragma: no cover - needs vLLM
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank  # type: ignore
        return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)
    except Exception:
        rank = int(getattr(getattr(vllm_config, "parallel_config", None), "rank", 0) or 0)
        return rank % tp_size, (rank // tp_size) % pp_size


class OrbitKVConnector(KVConnectorBase_V1):
    """vLLM KV connector backed by the node's OrbitKV Manager.

    ``OrbitKVConnector(vllm_config, role, kv_cache_config=None)``; ``role``
    is ``KVConnectorRole.SCHEDULER`` or ``.WORKER``. Raises ``OptionError``
    (a ``ValueError``) for a bad ``orbitkv.*`` option or config field, and
    the ``OrbitKVError`` of the failed connect (``NativeOSError`` for a
    socket no Manager serves) with the option and path in the message.

    ``stats`` (dict of counts and bytes) and ``epochs`` (Manager epochs of
    the sessions so far) are for monitoring and tests.
    """

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        try:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        except TypeError:  # vLLM before kv_cache_config was added
            super().__init__(vllm_config=vllm_config, role=role)
        ktc = getattr(vllm_config, "kv_transfer_config", None)
        extra = getattr(ktc, "kv_connector_extra_config", None) or {}
        tp = int(getattr(getattr(vllm_config, "parallel_config", None), "tensor_parallel_size", 1) or 1)
        self.options = parse_options(extra, tp_size=tp)
        base = identity_base(vllm_config, self.options)
        self.block_size: int = base["block_tokens"]
        self._scheduler: SchedulerSide | None = None
        self._worker: WorkerSide | None = None
        if role_name(role) == "SCHEDULER":
            role_kind = str(getattr(ktc, "kv_role", None) or "kv_both")
            if role_kind not in ("kv_both", "kv_producer", "kv_consumer"):
                raise OptionError(f"kv_transfer_config.kv_role {role_kind!r}: want kv_both, kv_producer "
                                  "or kv_consumer")
            self._scheduler = SchedulerSide(self.options, base, role_kind)
        else:
            tp_rank, pp_rank = _ranks(vllm_config, base["tp_size"], base["pp_size"])
            self._worker = WorkerSide(self.options, base, tp_rank, pp_rank)

    def _side(self, which: str) -> Any:
        side = self._scheduler if which == "SCHEDULER" else self._worker
        if side is None:
            raise RuntimeError(f"OrbitKVConnector: a {which.lower()}-side method called on a "
                               f"{'worker' if which == 'SCHEDULER' else 'scheduler'} connector")
        return side

    @property
    def stats(self) -> dict[str, int]:
        return dict((self._scheduler or self._worker).stats)

    @property
    def epochs(self) -> list[int]:
        if self._worker is not None:
            return list(self._worker.session.epochs)
        return [e for s in self._scheduler.sessions for e in s.epochs]

    # ---- scheduler side ----

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[int | None, bool]:
        """Prompt tokens beyond ``num_computed_tokens`` that OrbitKV holds as
        full blocks (a multiple of the block size; never the last prompt
        token), and False (loads are synchronous). Side-effect free at the
        Manager (DISCOVER); a Manager error counts as a miss."""
        return self._side("SCHEDULER").get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        """Plan the load of the ``num_external_tokens`` tokens offered by
        ``get_num_new_matched_tokens`` into ``blocks.get_block_ids()[0]``."""
        self._side("SCHEDULER").update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> OrbitKVConnectorMetadata:
        """This step's loads (planned since the last call) and saves (full
        prompt blocks computed by the end of the step, not yet in OrbitKV)."""
        return self._side("SCHEDULER").build_connector_meta(scheduler_output)

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, dict | None]:
        """Forget the request; (False, None): blocks may be freed at once
        (saves were published synchronously)."""
        return self._side("SCHEDULER").request_finished(request, block_ids)

    # ---- worker side ----

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Register the per-layer KV tensors (layer order = dict order).
        Tensors over an ``orbitkv.vllm.kv_cache_buffer`` are used in place
        (zero copy); others go through a host staging buffer."""
        self._side("WORKER").register_kv_caches(kv_caches)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Look up and start restoring this step's loads."""
        meta = self._get_connector_metadata()
        self._side("WORKER").start_load_kv(meta)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Block until this step's restores reached their terminal result
        (all layers land together) and layer ``layer_name`` holds them."""
        self._side("WORKER").wait_for_layer_load(layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        """Staging mode: copy this step's saved blocks out of the layer."""
        meta = self._connector_metadata if self.has_connector_metadata() else None
        self._side("WORKER").save_kv_layer(layer_name, kv_layer, meta)

    def wait_for_save(self) -> None:
        """Publish this step's saved blocks (the copy has completed and the
        blocks are visible when this returns; failures are logged)."""
        meta = self._connector_metadata if self.has_connector_metadata() else None
        self._side("WORKER").wait_for_save(meta)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """(None, None): nothing is sent or received asynchronously."""
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Block ids whose load failed since the last call (vLLM recomputes
        them); the set is cleared by the call."""
        if self._worker is None:
            return set()
        return self._worker.get_block_ids_with_load_errors()

    def shutdown(self) -> None:
        """Wait for restores in flight, then close the Manager session(s)."""
        if self._worker is not None:
            self._worker.shutdown()
        if self._scheduler is not None:
            self._scheduler.shutdown()


