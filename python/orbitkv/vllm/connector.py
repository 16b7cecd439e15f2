"""``OrbitKVConnector``: vLLM's KV connector (``KVConnectorBase_V1``) on OrbitKV.

Configure vLLM with::

    --kv-transfer-config '{"kv_connector": "OrbitKVConnector",
        "kv_connector_module_path": "orbitkv.vllm.connector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"orbitkv.bootstrap_socket": "/run/orbitkv/manager.sock"}}'

The scheduler process builds one with role SCHEDULER, every worker one with
role WORKER; each connects to the Manager at construction, so a wrong
socket fails vLLM's startup with an error naming the option. Options:
``orbitkv.options``; the halves: ``orbitkv.vllm.scheduler`` and
``orbitkv.vllm.worker``; docs/adapters.md explains the whole.

Loading is synchronous within the step (``get_num_new_matched_tokens``
answers ``load_async`` False): restores start in ``start_load_kv`` and end
in the first ``wait_for_layer_load``; saves are published in
``wait_for_save``, so ``request_finished`` never holds blocks. With several
KV cache groups (vLLM's hybrid KV cache manager: ``SupportsHMA``,
``orbitkv.vllm.groups``) loads are asynchronous, settled within the step
and reported by ``get_transfer_results``, the one way vLLM recomputes a
failed load of several groups. ``kv_role``: ``kv_both`` loads and saves,
``kv_consumer`` only loads, ``kv_producer`` only saves.

Supported vLLM: ``SUPPORTED_VLLM``, the release series whose
``KVConnectorBase_V1`` ``make vllm-contract`` checks this class against
(docs/adapters.md, "vLLM releases and their environments"); in another vLLM the constructor
raises ``RuntimeError`` naming the supported range and the installed
version. Without vLLM (the stand-in base) nothing is checked.

Statistics: ``get_kv_connector_stats`` hands vLLM each side's figures (time
in the scheduler-side calls, blocks restored and published, per-step load
waits), which vLLM exports on its ``/metrics`` as ``vllm:orbitkv_*``
(``orbitkv.vllm.stats``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ._base import (CACHE_HIT_DISK, CACHE_HIT_HOST, VLLM_AVAILABLE, VLLM_VERSION, KVConnectorBase_V1,
                    KVConnectorTransferResults, SupportsHMA, role_name)
from .groups import KVGroups
from .metadata import OrbitKVConnectorMetadata, OrbitKVWorkerMetadata
from .options import OptionError, identity_base, parse_options
from .scheduler import SchedulerSide
from .stats import OrbitKVConnectorStats, build_prom_metrics
from .worker import WorkerSide

log = logging.getLogger("orbitkv.vllm")

__all__ = ["OrbitKVConnector", "SUPPORTED_VLLM", "check_vllm_version", "check_hash_seed", "supported_range"]

#: vLLM release series (``major.minor``) the connector supports, oldest
#: first: the ones ``make vllm-contract`` checks (docs/adapters.md).
SUPPORTED_VLLM = ("0.32", "0.33")


def supported_range() -> str:
    """``SUPPORTED_VLLM`` in words: ``"0.32.x and 0.33.x"``."""
    names = [v + ".x" for v in SUPPORTED_VLLM]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def check_vllm_version(version: str) -> None:
    """Raise ``RuntimeError`` naming the supported range and ``version``
    (``vllm.__version__``; a local part such as ``+cpu`` is ignored) when
    it is not of a series in ``SUPPORTED_VLLM``."""
    series = ".".join(version.split("+")[0].split(".")[:2])
    if series not in SUPPORTED_VLLM:
        raise RuntimeError(f"OrbitKVConnector supports vLLM {supported_range()}; the installed vLLM is "
                           f"{version or 'of unknown version'} (its KVConnectorBase_V1 call sequence is not "
                           "one this connector was checked against)")


def _ranks(vllm_config: Any, tp_size: int, pp_size: int) -> tuple[int, int]:
    """(TP rank, PP rank) of this worker: vLLM's parallel state when it is
    initialised, else ``parallel_config.rank`` (TP-major)."""
    try:  # pragma: no cover - needs vLLM
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank  # type: ignore
        return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)
    except Exception:
        rank = int(getattr(getattr(vllm_config, "parallel_config", None), "rank", 0) or 0)
        return rank % tp_size, (rank // tp_size) % pp_size


#: vLLM's ``prefix_caching_hash_algo`` values whose block hashes vLLM seeds
#: randomly per process unless ``PYTHONHASHSEED`` is set
#: (``resolve_none_hash_seed`` in vllm/v1/core/kv_cache_utils.py); the
#: sha256 ones use a fixed seed.
PER_PROCESS_SEEDED = ("xxhash", "xxhash_cbor")


def check_hash_seed(vllm_config: Any, environ: Any = os.environ) -> None:
    """Raise ``OptionError`` when ``orbitkv.block_hashes="vllm"`` could not
    hit across processes: vLLM's ``cache_config.prefix_caching_hash_algo``
    is one of ``PER_PROCESS_SEEDED`` and ``PYTHONHASHSEED`` is unset (vLLM's
    own rule: any value, the empty string too, is the seed itself)."""
    algo = str(getattr(getattr(vllm_config, "cache_config", None), "prefix_caching_hash_algo", None) or "sha256")
    if algo in PER_PROCESS_SEEDED and environ.get("PYTHONHASHSEED") is None:
        raise OptionError(f"orbitkv.block_hashes=\"vllm\" with prefix_caching_hash_algo {algo!r} needs "
                          "PYTHONHASHSEED set to one value in every vLLM process: without it vLLM seeds "
                          f"{algo} randomly per process, so no other process could ever hit these blocks (or "
                          "use sha256, vLLM's default, or orbitkv.block_hashes \"tokens\")")


def _hash_unit(vllm_config: Any, kv_cache_config: Any, block: int) -> int:
    """Tokens per entry of vLLM's ``Request.block_hashes``:
    ``KVCacheConfig.hash_block_size``; with several KV cache groups
    ``cache_config.prefix_match_unit`` (the GCD of the groups' block
    sizes); else ``block``."""
    unit = getattr(kv_cache_config, "hash_block_size", None)
    if not unit and len(getattr(kv_cache_config, "kv_cache_groups", None) or ()) > 1:
        unit = getattr(getattr(vllm_config, "cache_config", None), "prefix_match_unit", None)
    return int(unit or block)


def _hash_stride(vllm_config: Any, kv_cache_config: Any, block: int) -> int:
    """How many of vLLM's ``Request.block_hashes`` make one scheduler block
    of ``block`` tokens (``_hash_unit``), so block i's hash is entry
    ``(i + 1) * stride - 1`` (the hashes are a chain: that entry covers
    tokens 0 .. (i + 1) * block - 1; vLLM's own
    ``BlockHashListWithBlockSize`` reads it so). Raises ``OptionError``
    when ``block`` is not a multiple of that unit."""
    unit = _hash_unit(vllm_config, kv_cache_config, block)
    if unit < 1 or block % unit:
        raise OptionError(f"orbitkv.block_hashes=\"vllm\": vLLM hashes every {unit} tokens (hash_block_size, "
                          f"prefix_match_unit), not a divisor of the block size {block}; use orbitkv.block_hashes "
                          "\"tokens\"")
    return block // unit


def _record_stride(vllm_config: Any, kv_cache_config: Any, block: int) -> int | None:
    """``_hash_stride`` for the block records (vLLM's hash of each block,
    whatever ``orbitkv.block_hashes`` is); None, logged, when vLLM's hash
    unit does not divide the block: its blocks are then published without
    records."""
    unit = _hash_unit(vllm_config, kv_cache_config, block)
    if unit < 1 or block % unit:
        log.warning("OrbitKV: vLLM hashes every %d tokens, not a divisor of the block size %d; blocks are "
                    "published without block records", unit, block)
        return None
    return block // unit


class OrbitKVConnector(KVConnectorBase_V1, SupportsHMA):
    """vLLM KV connector backed by the node's OrbitKV Manager.

    ``OrbitKVConnector(vllm_config, role, kv_cache_config=None)``; ``role``
    is ``KVConnectorRole.SCHEDULER`` or ``.WORKER``. Raises ``OptionError``
    (a ``ValueError``) for a bad ``orbitkv.*`` option or config field, and
    the ``OrbitKVError`` of the failed connect (``NativeOSError`` for a
    socket no Manager serves) with the option and path in the message.

    ``stats`` (dict of counts and bytes) and ``epochs`` (Manager epochs of
    the sessions so far) are for monitoring and tests.
    """

    _cache_hit_source = CACHE_HIT_HOST

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        if VLLM_AVAILABLE:
            check_vllm_version(VLLM_VERSION)
        try:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        except TypeError:  # vLLM before kv_cache_config was added
            super().__init__(vllm_config=vllm_config, role=role)
        ktc = getattr(vllm_config, "kv_transfer_config", None)
        extra = getattr(ktc, "kv_connector_extra_config", None) or {}
        tp = int(getattr(getattr(vllm_config, "parallel_config", None), "tensor_parallel_size", 1) or 1)
        self.options = parse_options(extra, tp_size=tp)
        if self.options.block_hashes == "vllm":
            check_hash_seed(vllm_config)
        base = identity_base(vllm_config, self.options)
        self.block_size: int = base["block_tokens"]
        #: vLLM's KV cache groups (``orbitkv.vllm.groups``); None: one
        #: full-attention table.
        cfg = getattr(self, "_kv_cache_config", None) or kv_cache_config
        self.groups = KVGroups.of(cfg, self.block_size)
        if self.groups is not None:
            base["kv_layout"] = f"{base['kv_layout']}+{self.groups.layout_tag()}"
        hash_stride = _hash_stride(vllm_config, cfg, self.block_size) if self.options.block_hashes == "vllm" else 1
        record_stride = hash_stride if self.options.block_hashes == "vllm" else _record_stride(vllm_config, cfg,
                                                                                              self.block_size)
        self._scheduler: SchedulerSide | None = None
        self._worker: WorkerSide | None = None
        if role_name(role) == "SCHEDULER":
            role_kind = str(getattr(ktc, "kv_role", None) or "kv_both")
            if role_kind not in ("kv_both", "kv_producer", "kv_consumer"):
                raise OptionError(f"kv_transfer_config.kv_role {role_kind!r}: want kv_both, kv_producer "
                                  "or kv_consumer")
            self._scheduler = SchedulerSide(self.options, base, role_kind, self.groups, hash_stride, record_stride)
        else:
            tp_rank, pp_rank = _ranks(vllm_config, base["tp_size"], base["pp_size"])
            self._worker = WorkerSide(self.options, base, tp_rank, pp_rank, self.groups)

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

    @property
    def kv_mode(self) -> str:
        """Where the worker's restores land: ``"zero-copy"`` (vLLM's KV
        tensors are an OrbitKV buffer), ``"gpu-direct"`` (vLLM's CUDA KV
        tensors, registered by IPC handle: ``orbitkv.vllm.gpudirect``) or
        ``"staging"``, once ``register_kv_caches`` ran; ``""`` before that
        and on the scheduler side."""
        return self._worker.mode if self._worker is not None else ""

    @property
    def requires_kv_delivery(self) -> bool:
        """False: OrbitKV is a best-effort cache; a save dropped by a
        preemption is a future miss, never a lost hand-off."""
        return False

    @classmethod
    def supports_sleep_mode(cls, kv_transfer_config: Any) -> bool:
        """False (vLLM 0.33's hook): vLLM then refuses ``enable_sleep_mode``
        with this connector at configuration (``ValueError: OrbitKVConnector
        does not support sleep mode.``). Sleep frees and remaps the KV cache
        the worker registered with the Manager (in place, or by CUDA IPC
        handle); ``unregister_kv_caches`` and ``restore_kv_caches`` drop and
        take that registration again, but a remap under a Manager mapping
        has not run on a GPU in this project's tests, so the combination
        stays refused."""
        return False

    # ---- scheduler side ----

    def get_external_cache_hit_sources(self, request: Any, num_external_tokens: int) -> dict:
        """vLLM's statistics label: ``CacheHitSource.HOST`` (RAM tier), or
        ``DISK`` when the pinned hits waited on SSD reads."""
        if num_external_tokens <= 0:
            return {}
        disk = self._scheduler is not None and self._scheduler.hit_from_disk(request)
        return {CACHE_HIT_DISK if disk else CACHE_HIT_HOST: num_external_tokens}

    def update_connector_output(self, connector_output: Any) -> None:
        """Take the workers' ``OrbitKVWorkerMetadata``: end the pins of the
        requests whose loads settled; a request whose whole load failed is
        a miss from then on (vLLM recomputes it)."""
        meta = getattr(connector_output, "kv_connector_worker_meta", None)
        if self._scheduler is not None and isinstance(meta, OrbitKVWorkerMetadata):
            self._scheduler.interval.timed(self._scheduler.loads_settled, meta.loaded, meta.failed)

    def _timed(self, name: str, *args: Any) -> Any:
        """The scheduler side's method ``name`` called with args, its wall
        time counted in the stats (``vllm:orbitkv_scheduler_seconds``)."""
        side = self._side("SCHEDULER")
        return side.interval.timed(getattr(side, name), *args)

    def _held(self, name: str, *args: Any) -> Any:
        """The worker side's method ``name`` called with args, its wall time
        counted in this step's hold (``vllm:orbitkv_step_block_seconds``)."""
        side = self._side("WORKER")
        return side.interval.held(getattr(side, name), *args)

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[int | None, bool]:
        """Prompt tokens beyond ``num_computed_tokens`` that OrbitKV holds as
        full blocks (a multiple of the block size; never the last prompt
        token) and pinned at the Manager until the worker restored them,
        and whether the load is asynchronous (with KV cache groups only);
        None while a pin is still
        loading. Idempotent per request (a repeat reuses the pin); a
        Manager error counts as a miss. See ``orbitkv.vllm.scheduler``."""
        return self._timed("get_num_new_matched_tokens", request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        """Plan the load of the ``num_external_tokens`` tokens offered by
        ``get_num_new_matched_tokens`` into ``blocks.get_block_ids()`` (the
        first table; with KV cache groups, every group's)."""
        self._timed("update_state_after_alloc", request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> OrbitKVConnectorMetadata:
        """This step's loads (planned since the last call) and saves (full
        prompt blocks computed by the end of the step, not yet in OrbitKV)."""
        try:
            return self._timed("build_connector_meta", scheduler_output)
        finally:
            self._scheduler.interval.end_step()   # the scheduler's last call of a step

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, dict | None]:
        """Forget the request; (False, None): blocks may be freed at once
        (saves were published synchronously)."""
        return self._timed("request_finished", request, block_ids)

    def request_finished_all_groups(self, request: Any, block_ids: tuple) -> tuple[bool, dict | None]:
        """``SupportsHMA``: the request finished in every KV cache group
        (``block_ids``: one list per group); as ``request_finished``."""
        return self._timed("request_finished", request, block_ids)

    def get_kv_connector_stats(self) -> OrbitKVConnectorStats | None:
        """This side's figures since the last call (``orbitkv.vllm.stats``),
        or None when there were none."""
        return (self._scheduler or self._worker).interval.take()

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> OrbitKVConnectorStats:
        """vLLM's hook: the stats object of a data dict from any process."""
        return OrbitKVConnectorStats(data=dict(data or {}))

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: dict, labelnames: list,
                           per_engine_labelvalues: dict) -> Any:
        """vLLM's hook: the ``vllm:orbitkv_*`` metrics (``orbitkv.vllm.stats``)."""
        return build_prom_metrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    # ---- worker side ----

    def get_mem_pool_context(self) -> Any:
        """Worker side: the context vLLM allocates its KV cache in, placing
        it in an OrbitKV buffer so restores and publishes copy in place
        (``orbitkv.vllm.kvbuffer.KVCacheAllocation``); None (vLLM's default
        pool) on the scheduler side, with ``orbitkv.zero_copy`` false, or
        when the planned layout does not allow it."""
        if self._worker is None:
            return None
        return self._worker.mem_pool_context(getattr(self, "_kv_cache_config", None))

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        """Register the per-layer KV tensors (layer order = dict order).
        Tensors over an ``orbitkv.vllm.kv_cache_buffer`` are used in place
        (zero copy); CUDA tensors laid out as one OrbitKV buffer over one
        allocation are registered by IPC handle (GPU direct,
        ``orbitkv.gpu_direct``); others go through a host staging buffer
        (the reason logged). Block ids are vLLM's manager blocks
        (``KVCacheConfig.num_blocks``), whatever kernel blocks the views
        hold (``kvbuffer.manager_blocks_view``)."""
        cfg = getattr(self, "_kv_cache_config", None)
        self._side("WORKER").register_kv_caches(kv_caches, num_blocks=getattr(cfg, "num_blocks", None))

    def unregister_kv_caches(self) -> None:
        """Before vLLM frees the KV cache (vLLM 0.33's sleep and discard):
        wait for this step's restores, then end the worker's Manager
        session, which unmaps the registered KV memory at the Manager.
        Lookups miss and saves are skipped while it is down;
        ``restore_kv_caches`` reconnects (as would a step run meanwhile,
        as after a Manager restart). Idempotent; nothing on the scheduler
        side."""
        if self._worker is not None:
            self._worker.settle()
            self._worker.session.close()

    def restore_kv_caches(self) -> None:
        """After vLLM remapped the KV cache (wake-up): a new Manager session
        registers the same KV memory again. Reconnects are at most one per
        ``orbitkv.reconnect_interval_s``: within that interval of the last
        attempt the next step's lookup reconnects instead. A Manager that
        does not answer is logged, not raised, and lookups miss until it
        does. Idempotent; nothing on the scheduler side."""
        if self._worker is not None:
            self._worker.session.get()

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Look up and start restoring this step's loads."""
        meta = self._get_connector_metadata()
        self._held("start_load_kv", meta)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Block until this step's restores reached their terminal result
        (all layers land together) and layer ``layer_name`` holds them."""
        self._held("wait_for_layer_load", layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        """Staging mode: copy this step's saved blocks out of the layer."""
        meta = self._connector_metadata if self.has_connector_metadata() else None
        self._held("save_kv_layer", layer_name, kv_layer, meta)

    def wait_for_save(self) -> None:
        """Publish this step's saved blocks (the copy has completed and the
        blocks are visible when this returns; failures are logged)."""
        meta = self._connector_metadata if self.has_connector_metadata() else None
        try:
            self._held("wait_for_save", meta)
        finally:
            self._worker.interval.end_step()   # the worker's last call of a step

    def build_connector_worker_meta(self) -> OrbitKVWorkerMetadata | None:
        """The requests whose loads settled this step (None when none), for
        the scheduler's ``update_connector_output``."""
        if self._worker is None:
            return None
        done, failed = self._worker.worker_meta()
        return OrbitKVWorkerMetadata(frozenset(done), frozenset(failed)) if done or failed else None

    def get_transfer_results(self, finished_req_ids: set[str]) -> KVConnectorTransferResults:
        """Worker side: the requests whose asynchronous loads (KV cache
        groups) ended this step, the failed among them (vLLM recomputes
        those); nothing is sent asynchronously."""
        done, failed = self._worker.take_recving() if self._worker is not None else (set(), set())
        return KVConnectorTransferResults(finished_sending=set(), finished_recving=done, failed_recving=failed)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        """(None, the requests whose asynchronous loads ended), as
        ``get_transfer_results``; (None, None) when none did."""
        return None, self.get_transfer_results(finished_req_ids).finished_recving or None

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


