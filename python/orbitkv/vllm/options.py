"""Options of the vLLM connector and the cache identity it derives.

Options come from ``kv_transfer_config.kv_connector_extra_config``, every key
under the ``orbitkv.`` prefix (other keys belong to other connectors and are
ignored; an unknown ``orbitkv.`` key is an error naming it, so a typo never
silently falls back to a default):

=================================  =========================================
key                                meaning
=================================  =========================================
``orbitkv.bootstrap_socket``       Manager bootstrap socket (path); default,
                                   at each connect: ``$ORBITKV_BOOTSTRAP_SOCKET``,
                                   else ``/run/orbitkv/manager.sock`` when it
                                   is a socket (its directory's owner is
                                   trusted as the Manager's uid when root
                                   vouches for it), else the path derived
                                   from ``$ORBITKV_LISTEN`` or
                                   ``127.0.0.1:7470``
                                   (``orbitkv.resolve_socket_path``)
``orbitkv.tp_shard_bootstrap_sockets``  one socket per TP rank (list, or a
                                   comma-separated string; length tp_size):
                                   TP rank r talks to entry r
``orbitkv.wait_for_full_prefix``   bool (default false): count and await
                                   blocks the Manager holds on SSD, not only
                                   the RAM prefix
``orbitkv.kv_layout``              layout name in the cache identity
                                   (default ``vllm-<KV cache layout>``)
``orbitkv.salt``                   tenant salt in the cache identity
``orbitkv.block_hashes``           ``tokens`` (default): a chain over token
                                   ids; ``vllm``: vLLM's ``request.block_hashes``
``orbitkv.timeout_ms``             control-call deadline (default 5000),
                                   capped at ``load_timeout_s``: every call
                                   runs inside vLLM's engine step
``orbitkv.load_timeout_s``         bound of one engine step's restore
                                   lookups and waits together, and of any
                                   one control call (default 30)
``orbitkv.reconnect_interval_s``   least time between reconnect attempts
                                   after the Manager went away (default 1)
``orbitkv.zero_copy``              bool (default true): allocate vLLM's KV
                                   cache inside an OrbitKV buffer (vLLM's
                                   ``get_mem_pool_context`` hook) so the
                                   Manager copies straight into and out of
                                   the pages attention reads; false, or a
                                   layout that does not allow it: staging
``orbitkv.gpu_direct``             bool (default true): register vLLM's
                                   CUDA KV tensors by IPC handle when they
                                   are one OrbitKV buffer over one base
                                   allocation, so a ``--copy-backend cuda``
                                   Manager copies device pages directly
                                   (``orbitkv.vllm.gpudirect``); false, a
                                   layout that does not fit, or a Manager
                                   that refuses CUDA memory: staging
``orbitkv.staging_blocks``         host staging pages when the KV cache is
                                   not in an OrbitKV buffer (default 256)
``orbitkv.manager_uid``            uid of a Manager serving tenants of
                                   other uids that this engine trusts
                                   besides its own uid (default: none; else
                                   ``ORBITKV_MANAGER_UID``)
``orbitkv.local_discovery``        bool (default true): answer a miss from
                                   the Manager's shared-memory discovery
                                   index without a round trip, where the
                                   index says a miss is final (RAM-only
                                   Manager); a local hit is always
                                   confirmed by the leased query
=================================  =========================================
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..identity import CacheIdentity
from ..revision import resolve_revision

__all__ = ["ConnectorOptions", "OptionError", "parse_options", "identity_base"]

PREFIX = "orbitkv."


class OptionError(ValueError):
    """A bad ``orbitkv.*`` option or vLLM config field; the message names it."""


@dataclasses.dataclass(frozen=True)
class ConnectorOptions:
    """Parsed ``orbitkv.*`` options (see the module docs for each)."""

    bootstrap_socket: str | None = None   # None: the default rule, at each connect
    tp_shard_bootstrap_sockets: tuple[str, ...] = ()
    wait_for_full_prefix: bool = False
    kv_layout: str = ""
    salt: str = ""
    block_hashes: str = "tokens"
    timeout_ms: int = 5000
    load_timeout_s: float = 30.0
    reconnect_interval_s: float = 1.0
    staging_blocks: int = 256
    zero_copy: bool = True
    gpu_direct: bool = True
    local_discovery: bool = True
    manager_uid: int | None = None

    @property
    def call_timeout_ms(self) -> int:
        """Deadline of one control call (ms): ``timeout_ms``, at most
        ``load_timeout_s``. Every call of the connector runs inside vLLM's
        engine step (the scheduler's hooks, the worker's loads and
        publishes), so a Manager that stops answering must not hold a step
        longer than a restore may."""
        return max(1, min(self.timeout_ms, int(self.load_timeout_s * 1000)))

    def socket_for(self, tp_rank: int) -> tuple[str | None, str]:
        """(socket path, the option it came from) for TP rank ``tp_rank``;
        the path is None when no option gives one (the default rule)."""
        if self.tp_shard_bootstrap_sockets:
            return (self.tp_shard_bootstrap_sockets[tp_rank],
                    f"{PREFIX}tp_shard_bootstrap_sockets[{tp_rank}]")
        return self.bootstrap_socket, f"{PREFIX}bootstrap_socket"


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return v.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise OptionError(f"{key}: {v!r} is not a boolean (want true/false)")


def _number(key: str, v: Any, kind: type, lo: float, hi: float) -> Any:
    try:
        if isinstance(v, bool):
            raise ValueError
        x = kind(v)
    except (TypeError, ValueError):
        raise OptionError(f"{key}: {v!r} is not a{'n int' if kind is int else ' number'}") from None
    if not lo <= x <= hi:
        raise OptionError(f"{key}: {x} out of range {lo}..{hi}")
    return x


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise OptionError(f"{key}: want a string, got {type(v).__name__}")
    return v


def parse_options(extra: Mapping[str, Any] | None, tp_size: int = 1) -> ConnectorOptions:
    """The ``orbitkv.*`` options of ``kv_connector_extra_config``.

    Raises ``OptionError`` (a ``ValueError``) naming the key for an unknown
    ``orbitkv.`` key, a value of the wrong type or range, or a
    ``tp_shard_bootstrap_sockets`` list whose length is not ``tp_size``."""
    extra = dict(extra or {})
    fields = {f.name for f in dataclasses.fields(ConnectorOptions)}
    kw: dict[str, Any] = {}
    for key, v in extra.items():
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX):]
        if name not in fields:
            raise OptionError(f"{key}: unknown OrbitKV option (known: "
                              + ", ".join(PREFIX + f for f in sorted(fields)) + ")")
        if name == "bootstrap_socket":
            kw[name] = _str(key, v)
            if not kw[name]:
                raise OptionError(f"{key}: empty path")
        elif name == "tp_shard_bootstrap_sockets":
            items = [s.strip() for s in v.split(",")] if isinstance(v, str) else v
            if not isinstance(items, (list, tuple)) or not all(isinstance(s, str) and s for s in items):
                raise OptionError(f"{key}: want a list of socket paths (or a comma-separated string), got {v!r}")
            if len(items) != tp_size:
                raise OptionError(f"{key}: {len(items)} sockets for tensor_parallel_size {tp_size}; "
                                  "want one per TP rank")
            kw[name] = tuple(items)
        elif name in ("wait_for_full_prefix", "zero_copy", "gpu_direct", "local_discovery"):
            kw[name] = _bool(key, v)
        elif name in ("kv_layout", "salt"):
            kw[name] = _str(key, v)
        elif name == "block_hashes":
            if v not in ("tokens", "vllm"):
                raise OptionError(f"{key}: {v!r}; want \"tokens\" or \"vllm\"")
            kw[name] = v
        elif name == "timeout_ms":
            kw[name] = _number(key, v, int, 1, 3_600_000)
        elif name == "load_timeout_s":
            kw[name] = _number(key, v, float, 0.001, 3600)
        elif name == "reconnect_interval_s":
            kw[name] = _number(key, v, float, 0, 3600)
        elif name == "manager_uid":
            kw[name] = _number(key, v, int, 0, 0xFFFFFFFE)
        elif name == "staging_blocks":
            kw[name] = _number(key, v, int, 1, 1 << 20)
    return ConnectorOptions(**kw)


def _get(obj: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return default
    return obj


def identity_base(vllm_config: Any, opts: ConnectorOptions) -> dict[str, Any]:
    """The fields of ``CacheIdentity`` that come from the vLLM config
    (everything but the ranks and the LoRA id): model id, revision, KV
    dtype, layout, block size, TP and PP sizes, salt. Raises ``OptionError``
    naming a missing config field."""
    model = _get(vllm_config, "model_config.model")
    if not isinstance(model, str) or not model:
        raise OptionError("vllm_config.model_config.model: missing (the model id is part of the cache identity)")
    block = _get(vllm_config, "cache_config.block_size")
    if not isinstance(block, int) or block < 1:
        raise OptionError(f"vllm_config.cache_config.block_size: {block!r}; want a positive int")
    dtype = _get(vllm_config, "cache_config.cache_dtype", "auto")
    if dtype in (None, "auto"):
        dtype = _get(vllm_config, "model_config.dtype", "auto")
    dtype = str(dtype).replace("torch.", "")
    layout = opts.kv_layout or _default_layout()
    revision = resolve_revision(_get(vllm_config, "model_config.revision", "") or "", model,
                                "OrbitKVConnector (model_config.revision)")
    return dict(model_id=model, revision=revision,
                dtype=dtype, kv_layout=layout, block_tokens=block,
                tp_size=int(_get(vllm_config, "parallel_config.tensor_parallel_size", 1)),
                pp_size=int(_get(vllm_config, "parallel_config.pipeline_parallel_size", 1)),
                salt=opts.salt)


def _default_layout() -> str:
    try:  # pragma: no cover - needs vLLM
        from vllm.distributed.kv_transfer.kv_connector.utils import get_kv_cache_layout  # type: ignore
        return "vllm-" + str(get_kv_cache_layout()).lower()
    except Exception:
        return "vllm-nhd"


def make_identity(base: Mapping[str, Any], tp_rank: int, pp_rank: int, lora_id: str = "") -> CacheIdentity:
    """The ``CacheIdentity`` of one (TP rank, PP rank, LoRA) shard."""
    return CacheIdentity(base["model_id"], base["revision"], base["dtype"], base["kv_layout"],
                         base["block_tokens"], tp_rank, base["tp_size"], pp_rank, base["pp_size"],
                         lora_id=lora_id, salt=base["salt"])
