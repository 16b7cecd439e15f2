"""vLLM's connector base classes, imported lazily.

When vLLM is importable, ``KVConnectorBase_V1``, ``KVConnectorMetadata`` and
``KVConnectorRole`` are vLLM's own (``vllm/distributed/kv_transfer/
kv_connector/v1/base.py``), so ``OrbitKVConnector`` is a real vLLM connector.
Without vLLM (this repository's tests, the test engine) they are plain
stand-ins with the same names, method names and role values, so the adapter
loads and runs; only ``import orbitkv.vllm`` itself is needed.

``VLLM_AVAILABLE`` says which one was taken; ``VLLM_IMPORT_ERROR`` keeps why
vLLM could not be imported (None when it was).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

__all__ = ["KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "KVConnectorWorkerMetadata", "SupportsHMA",
           "KVConnectorTransferResults",
           "VLLM_AVAILABLE", "VLLM_IMPORT_ERROR", "VLLM_VERSION", "CACHE_HIT_HOST", "CACHE_HIT_DISK", "role_name"]

VLLM_IMPORT_ERROR: str | None = None
#: ``vllm.__version__`` of the vLLM imported ("" without vLLM).
VLLM_VERSION = ""

try:  # pragma: no cover - vLLM is not installed where the tests run
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
        KVConnectorTransferResults,
        KVConnectorWorkerMetadata,
        SupportsHMA,
    )
    from vllm.v1.metrics.cache_hit_source import CacheHitSource  # type: ignore
    import vllm as _vllm  # type: ignore

    VLLM_VERSION = str(getattr(_vllm, "__version__", ""))
    CACHE_HIT_HOST, CACHE_HIT_DISK = CacheHitSource.HOST, CacheHitSource.DISK
    VLLM_AVAILABLE = True
except Exception as _e:  # ImportError, or a vLLM that fails to import here
    VLLM_AVAILABLE = False
    VLLM_IMPORT_ERROR = f"{type(_e).__name__}: {_e}"

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorRole`` (same names and values)."""

        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorMetadata`` (scheduler -> worker)."""

    class KVConnectorWorkerMetadata:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorWorkerMetadata`` (worker ->
        scheduler, merged over workers by ``aggregate``)."""

        def aggregate(self, other: Any) -> Any:
            raise NotImplementedError

    @dataclasses.dataclass
    class KVConnectorTransferResults:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorTransferResults`` (asynchronous
        transfers ended this step; failed receives are among the received)."""

        finished_sending: set = dataclasses.field(default_factory=set)
        finished_recving: set = dataclasses.field(default_factory=set)
        failed_recving: set = dataclasses.field(default_factory=set)

    class SupportsHMA:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``SupportsHMA`` (a connector that serves the
        hybrid KV cache manager implements ``request_finished_all_groups``)."""

        def request_finished_all_groups(self, request: Any, block_ids: tuple) -> tuple:
            raise NotImplementedError

    #: vLLM's ``CacheHitSource.HOST`` / ``.DISK`` (their string values here).
    CACHE_HIT_HOST, CACHE_HIT_DISK = "host", "disk"

    class KVConnectorBase_V1:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorBase_V1``: the constructor and the
        metadata binding of the real base; every hook the engine calls exists
        with the real name and signature (subclasses override them)."""

        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self) -> Any:
            return self._role

        def bind_connector_metadata(self, connector_metadata: Any) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> Any:
            assert self._connector_metadata is not None, "no connector metadata bound"
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches: dict) -> None:
            return None

        def get_finished(self, finished_req_ids: set) -> tuple:
            return None, None

        def get_block_ids_with_load_errors(self) -> set:
            return set()

        def request_finished(self, request: Any, block_ids: list) -> tuple:
            return False, None

        def update_connector_output(self, connector_output: Any) -> None:
            return None

        def build_connector_worker_meta(self) -> Any:
            return None

        def take_events(self):
            return ()

        def shutdown(self) -> None:
            return None


def role_name(role: Any) -> str:
    """"SCHEDULER" or "WORKER" for vLLM's enum, the stand-in, or a string/int."""
    name = getattr(role, "name", role)
    if isinstance(name, int) and not isinstance(name, bool):
        name = {0: "SCHEDULER", 1: "WORKER"}.get(name, str(name))
    name = str(name).upper()
    if name not in ("SCHEDULER", "WORKER"):
        raise ValueError(f"OrbitKVConnector: role {role!r}: want KVConnectorRole.SCHEDULER or .WORKER")
    return name
