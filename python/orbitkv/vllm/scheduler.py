"""Scheduler side of ``OrbitKVConnector``: how many prompt tokens OrbitKV
holds, which blocks each worker loads and saves this step.

Lookups here are DISCOVER tickets: a count of leading blocks, no lease, no
bytes reserved, retired at once, so ``get_num_new_matched_tokens`` is free
of side effects (vLLM may call it repeatedly). The worker takes the lease
itself when it loads (leases belong to a session; the scheduler's would be
useless to a worker). Blocks evicted in between make the worker's lease
shorter: those blocks are reported by ``get_block_ids_with_load_errors``
and vLLM recomputes them.

With TP/PP > 1 each (TP rank, PP rank) shard has its own namespace (and,
with ``tp_shard_bootstrap_sockets``, its own Manager): the count is the
minimum over shards.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from .._abi import QueryFlags, Role
from ..errors import OrbitKVError
from ..hashes import BlockHashes
from ..identity import block_hash16
from .hashing import extend_chain
from .metadata import LoadSpec, OrbitKVConnectorMetadata, SaveSpec
from .options import ConnectorOptions, make_identity
from .session import Session

__all__ = ["SchedulerSide"]

log = logging.getLogger("orbitkv.vllm")


@dataclasses.dataclass
class _Req:
    req_id: str
    prompt: list[int]
    lora_id: str
    salt: str
    cacheable: bool
    hashes: list[bytes] = dataclasses.field(default_factory=list)
    block_ids: list[int] = dataclasses.field(default_factory=list)
    matched: int = 0      # leading chain blocks OrbitKV holds (last lookup)
    saved_upto: int = 0   # chain blocks published, loaded or known held


def lora_of(obj: Any) -> str:
    lr = getattr(obj, "lora_request", None)
    if lr is None:
        return ""
    return str(getattr(lr, "lora_name", None) or getattr(lr, "lora_int_id", ""))


class SchedulerSide:
    """The scheduler half (one per vLLM scheduler process)."""

    def __init__(self, opts: ConnectorOptions, base: dict[str, Any], kv_role: str = "kv_both"):
        self.opts = opts
        # vLLM's kv_role: a kv_producer only saves, a kv_consumer only loads.
        self.load_enabled = kv_role != "kv_producer"
        self.save_enabled = kv_role != "kv_consumer"
        self.base = base
        self.block = base["block_tokens"]
        self.stats = {"lookups": 0, "lookup_errors": 0, "hit_blocks": 0}
        sessions: dict[str, Session] = {}
        self.shards: list[tuple[Session, int, int]] = []
        for tp in range(base["tp_size"]):
            path, option = opts.socket_for(tp)
            if path not in sessions:
                sessions[path] = Session(path, option, who="OrbitKVConnector(scheduler)",
                                         instance_id=f"vllm-scheduler-{os.getpid()}", role=Role.SCHEDULER,
                                         timeout_ms=opts.timeout_ms,
                                         reconnect_interval_s=opts.reconnect_interval_s)
            for pp in range(base["pp_size"]):
                self.shards.append((sessions[path], tp, pp))
        self.sessions = list(sessions.values())
        self._ns: dict[tuple[int, int, str], bytes] = {}
        self._reqs: dict[str, _Req] = {}
        self._loads: dict[str, LoadSpec] = {}

    # ---- request state ----

    def _req(self, request: Any) -> _Req:
        rid = request.request_id
        prompt = list(getattr(request, "prompt_token_ids", None) or [])
        st = self._reqs.get(rid)
        if st is None or st.prompt != prompt:
            mm = getattr(request, "mm_features", None) or getattr(request, "mm_positions", None)
            cacheable = bool(prompt) and not (mm and self.opts.block_hashes == "tokens")
            st = _Req(rid, prompt, lora_of(request), str(getattr(request, "cache_salt", None) or ""), cacheable)
            self._reqs[rid] = st
        if st.cacheable and len(st.hashes) < len(st.prompt) // self.block:
            if self.opts.block_hashes == "vllm":
                engine = list(getattr(request, "block_hashes", None) or [])
                st.hashes = [block_hash16(h) for h in engine[:len(st.prompt) // self.block]]
            else:
                extend_chain(st.hashes, st.prompt, self.block, st.salt)
        return st

    def _namespace(self, tp: int, pp: int, lora: str) -> bytes:
        key = (tp, pp, lora)
        ns = self._ns.get(key)
        if ns is None:
            ns = self._ns[key] = make_identity(self.base, tp, pp, lora).namespace()
        return ns

    def _discover(self, st: _Req, n: int) -> int:
        """Leading blocks of st.hashes[:n] every shard holds (0 on errors)."""
        hits = n
        batch = BlockHashes(st.hashes[:n])
        try:
            for session, tp, pp in self.shards:
                client = session.get()
                if client is None:
                    return 0
                self.stats["lookups"] += 1
                try:
                    a = client.lookup(self._namespace(tp, pp, st.lora_id), batch, flags=QueryFlags.DISCOVER)
                except OrbitKVError as e:
                    self.stats["lookup_errors"] += 1
                    session.fail(e)
                    log.warning("OrbitKV lookup for request %s failed: %s; treating it as a miss", st.req_id, e)
                    return 0
                held = a.hit_count if self.opts.wait_for_full_prefix else a.ram_hits
                hits = min(hits, held if a.status == "Candidates" else 0)
                if hits == 0:
                    return 0
            return hits
        finally:
            batch.close()

    # ---- vLLM hooks ----

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[int, bool]:
        st = self._req(request)
        if not self.load_enabled or not st.cacheable or num_computed_tokens % self.block:
            return 0, False
        # At least one prompt token must be computed (its logits start decoding).
        limit = min((len(st.prompt) - 1) // self.block, len(st.hashes))
        start = num_computed_tokens // self.block
        if limit <= start:
            return 0, False
        st.matched = self._discover(st, limit)
        st.saved_upto = max(st.saved_upto, st.matched)
        if st.matched <= start:
            return 0, False
        self.stats["hit_blocks"] += st.matched - start
        return (st.matched - start) * self.block, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        if num_external_tokens <= 0:
            return
        st = self._reqs.get(request.request_id)
        if st is None or num_external_tokens % self.block or num_external_tokens // self.block > st.matched:
            raise ValueError(f"OrbitKVConnector: update_state_after_alloc for request {request.request_id!r} "
                             f"with {num_external_tokens} external tokens that get_num_new_matched_tokens "
                             "did not offer")
        ids = list(blocks.get_block_ids()[0])
        end = st.matched
        first = end - num_external_tokens // self.block
        if len(ids) < end:
            raise ValueError(f"OrbitKVConnector: request {request.request_id!r} has {len(ids)} blocks; "
                             f"{end} needed for its external tokens")
        st.block_ids = ids
        self._loads[st.req_id] = LoadSpec(st.req_id, st.hashes[:end], first, ids[first:end], st.lora_id)

    def build_connector_meta(self, so: Any) -> OrbitKVConnectorMetadata:
        meta = OrbitKVConnectorMetadata(loads=list(self._loads.values()))
        self._loads.clear()
        scheduled = getattr(so, "num_scheduled_tokens", {}) or {}
        for nr in getattr(so, "scheduled_new_reqs", ()) or ():
            st = self._reqs.get(nr.req_id)
            if st is None:  # never asked about (e.g. another connector chose)
                st = self._req(_NewReq(nr))
            st.block_ids = list(nr.block_ids[0]) if nr.block_ids else []
            self._plan_save(st, nr.num_computed_tokens + scheduled.get(nr.req_id, 0), meta)
        cached = getattr(so, "scheduled_cached_reqs", None)
        if cached is not None:
            resumed_ids = set(getattr(cached, "resumed_req_ids", ()) or ())
            resumed_flags = getattr(cached, "resumed_from_preemption", None)
            for i, rid in enumerate(cached.req_ids):
                st = self._reqs.get(rid)
                if st is None:
                    continue
                resumed = rid in resumed_ids or bool(resumed_flags and resumed_flags[i])
                nb = cached.new_block_ids[i]
                if nb is not None:
                    st.block_ids = list(nb[0]) if resumed else st.block_ids + list(nb[0])
                self._plan_save(st, cached.num_computed_tokens[i] + scheduled.get(rid, 0), meta)
        for rid in getattr(so, "finished_req_ids", ()) or ():
            self._reqs.pop(rid, None)
        return meta

    def _plan_save(self, st: _Req, computed_after: int, meta: OrbitKVConnectorMetadata) -> None:
        if not st.cacheable or not self.save_enabled:
            return
        full = min(min(computed_after, len(st.prompt)) // self.block, len(st.hashes), len(st.block_ids))
        if full > st.saved_upto:
            a = st.saved_upto
            meta.saves.append(SaveSpec(st.req_id, st.hashes[a:full], st.block_ids[a:full], st.lora_id))
            st.saved_upto = full

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, None]:
        self._reqs.pop(request.request_id, None)
        self._loads.pop(request.request_id, None)
        return False, None

    def shutdown(self) -> None:
        for s in self.sessions:
            s.close()


class _NewReq:
    """A ``NewRequestData`` seen as a request (request_id, prompt, LoRA)."""

    def __init__(self, nr: Any):
        self.request_id = nr.req_id
        self.prompt_token_ids = nr.prompt_token_ids
        self.lora_request = getattr(nr, "lora_request", None)
        self.mm_features = getattr(nr, "mm_features", None)
        self.cache_salt = None
        self.block_hashes = None
