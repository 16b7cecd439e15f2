"""Scheduler side of ``OrbitKVConnector``: how many prompt tokens OrbitKV
holds, which blocks each worker loads and saves this step.

What ``get_num_new_matched_tokens`` offers is binding: under vLLM's default
``kv_load_failure_policy="fail"`` a block offered and then not restored
fails the request. So every offer is *pinned* at the Manager: the lookup is
a PREPARE ticket (one per request and shard), whose result - a lease on
the leading blocks - stays at the Manager until this side cancels it or
``--op-expiry`` (60 s) passes. A leased block is never evicted, so the
worker's own lease (leases belong to a session; the scheduler's is of no
use to a worker process) covers at least what was offered. The pin ends
when the worker reports the request's load settled
(``OrbitKVWorkerMetadata`` through ``update_connector_output``), when vLLM
allocates no external tokens for it, when the request finishes, or when
the offer changes.

vLLM may ask the same request again (its docstring: "might be called
multiple times ... should be side-effect free"): a repeat with the same
chain reuses the live pins (a Poll, no new ticket), so repeated calls pin
once; a pin older than ``PIN_REFRESH_S`` is renewed (a fresh ticket, the
old one cancelled) before it is offered again, so it cannot expire between
the offer and the restore. While a pin is still Loading (SSD reads, byte budget) the answer is
None - vLLM asks again next step - until ``load_timeout_s``, then 0. So is
a pin the Manager cannot admit (operation bounds or lease limits full:
vLLM may ask for more requests in one step than a session's 128 permits)
while this side holds other pins: the request waits for what their settled
loads give back, up to ``load_timeout_s`` from its first refusal, then it
is a miss (``_pin_refused``). A Manager error or no Manager is a miss (0):
never an offer that is not pinned.

With TP/PP > 1 each (TP rank, PP rank) shard has its own namespace (and,
with ``tp_shard_bootstrap_sockets``, its own Manager): the count is the
minimum over shards, each shard pinned.

With vLLM's hybrid KV cache manager (several KV cache groups:
``orbitkv.vllm.groups``) a hit of k blocks needs every full-attention
group's blocks 0..k-1 and, at k, the blocks each other group needs there
(a sliding window's last blocks, a Mamba state at exactly k). The pin is
one query over those keys, all or nothing: a pin that comes back short
tries the next smaller k (the full groups' prefix, or k - 1 when a state
or window block at k was missing; a candidate whose needs the local
discovery index lacks is passed over without a round trip), at most
``MAX_CANDIDATES`` pins per call, then a miss. A request whose load failed
(``OrbitKVWorkerMetadata.failed``) is a miss from then on: vLLM recomputes
it by asking again, and the same load could fail the same way again. Saves publish every block
of every group that holds tokens of the saved chain blocks, except null
blocks, sliding-window blocks vLLM may already have freed, and Mamba
blocks other than the state this step wrote at a block boundary.

Block records: every saved chain block vLLM hashed carries one
(``metadata.BlockRecords``: vLLM's own block hash as its KV events give it,
the previous block's, the block's token ids), whichever hashes key OrbitKV's
blocks (``orbitkv.block_hashes``), so the Manager's KV events announce it as
vLLM's own would. With KV cache groups only the first full-attention
group's blocks carry records (vLLM's events announce each group's blocks
under the same hash; a router matches the prefix on one). None are sent for
a block vLLM did not hash (its prefix caching off, a request vLLM never
asked this connector about), for blocks of more than ``RECORD_MAX_TOKENS``
tokens, or when vLLM's hash unit does not divide the block (each logged
once).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from array import array
from typing import Any

from .._abi import RECORD_MAX_TOKENS, QueryFlags, Role
from ..errors import OrbitKVError, Unadmitted
from ..hashes import BlockHashes
from ..identity import block_hash16
from .hashing import extend_chain
from .groups import NULL_BLOCK, KVGroups, group_hash
from .metadata import BlockRecords, LoadSpec, OrbitKVConnectorMetadata, SaveSpec, engine_hash
from .options import ConnectorOptions, make_identity
from .session import Session
from .stats import Interval

__all__ = ["SchedulerSide", "PIN_REFRESH_S", "MAX_CANDIDATES"]

#: A pin older than this (seconds) is renewed when vLLM asks again: a
#: preparation expires at the Manager 60 s (``--op-expiry``) after it was
#: submitted, so an offer always has at least 30 s of pin left.
PIN_REFRESH_S = 30.0

#: Pins one ``get_num_new_matched_tokens`` call may try with KV cache groups
#: (each a smaller hit length) before answering a miss.
MAX_CANDIDATES = 3

log = logging.getLogger("orbitkv.vllm")


@dataclasses.dataclass
class _Req:
    req_id: str
    prompt: list[int]
    lora_id: str
    salt: str
    cacheable: bool
    hashes: list[bytes] = dataclasses.field(default_factory=list)
    engine: list[int] = dataclasses.field(default_factory=list)  # vLLM's hash of each chain block (engine_hash)
    block_ids: list[int] = dataclasses.field(default_factory=list)
    matched: int = 0      # leading chain blocks OrbitKV holds (last lookup)
    saved_upto: int = 0   # chain blocks published, loaded or known held
    pins: list = dataclasses.field(default_factory=list)  # [(Session, client, Ticket)] per shard
    pin_len: int = 0      # hashes the live pins cover (0: none)
    pin_since: float = 0.0
    pin_waited: bool = False  # a pin was Loading once (SSD blocks among the hits)
    refused_since: float = 0.0  # first Unadmitted pin (monotonic s; 0: none)
    # KV cache groups only (orbitkv.vllm.groups):
    group_ids: list = dataclasses.field(default_factory=list)  # block ids per group
    gh: list = dataclasses.field(default_factory=list)         # group keys per group, per chain block
    fresh_from: int = 0   # chain blocks from here on have current ids in every group's table
    cand: int = 0         # hit length the live pin is for (0: start from the limit)
    load_failed: bool = False  # a whole load of it failed: a miss from then on (vLLM recomputes)


def lora_of(obj: Any) -> str:
    lr = getattr(obj, "lora_request", None)
    if lr is None:
        return ""
    return str(getattr(lr, "lora_name", None) or getattr(lr, "lora_int_id", ""))


class SchedulerSide:
    """The scheduler half (one per vLLM scheduler process)."""

    def __init__(self, opts: ConnectorOptions, base: dict[str, Any], kv_role: str = "kv_both",
                 groups: KVGroups | None = None, hash_stride: int = 1, record_stride: int | None = None):
        self.opts = opts
        # orbitkv.block_hashes "vllm": vLLM's Request.block_hashes per block
        # (they may be finer than a block: connector._hash_stride).
        self.hash_stride = hash_stride
        # vLLM's Request.block_hashes per block for the block records,
        # whatever orbitkv.block_hashes is (None: no records).
        self.record_stride = record_stride
        if base["block_tokens"] > RECORD_MAX_TOKENS and record_stride:
            log.warning("OrbitKV: blocks of %d tokens are published without block records (a record carries at "
                        "most %d token ids); the Manager's KV events cannot announce them",
                        base["block_tokens"], RECORD_MAX_TOKENS)
            self.record_stride = None
        self._unhashed_logged = False
        # vLLM's kv_role: a kv_producer only saves, a kv_consumer only loads.
        self.load_enabled = kv_role != "kv_producer"
        self.save_enabled = kv_role != "kv_consumer"
        # vLLM's KV cache groups (None: one full-attention table).
        self.groups = groups
        if groups is not None and groups.unsupported:
            log.warning("OrbitKV: %s; every request is a miss and nothing is saved", groups.unsupported)
            self.load_enabled = self.save_enabled = False
        self.base = base
        self.block = base["block_tokens"]
        self.identity = tuple(sorted(base.items()))
        self.interval = Interval()   # this stats interval's figures (orbitkv.vllm.stats)
        self.stats = {"local_misses": 0, "lookups": 0, "lookup_errors": 0, "hit_blocks": 0, "pins": 0, "unpins": 0,
                      "pins_unadmitted": 0, "pins_deferred": 0}
        # The Manager refused a pin and no pin of ours was released since:
        # other requests are put off this step without a round trip each.
        self._refused = False
        sessions: dict[str, Session] = {}
        self.shards: list[tuple[Session, int, int]] = []
        for tp in range(base["tp_size"]):
            path, option = opts.socket_for(tp)
            if path not in sessions:
                sessions[path] = Session(path, option, who="OrbitKVConnector(scheduler)",
                                         instance_id=f"vllm-scheduler-{os.getpid()}", role=Role.SCHEDULER,
                                         timeout_ms=opts.call_timeout_ms,
                                         reconnect_interval_s=opts.reconnect_interval_s,
                                         manager_uid=opts.manager_uid)
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
            if st is not None:
                self._unpin(st)
            mm = getattr(request, "mm_features", None) or getattr(request, "mm_positions", None)
            cacheable = bool(prompt) and not (mm and self.opts.block_hashes == "tokens")
            st = _Req(rid, prompt, lora_of(request), str(getattr(request, "cache_salt", None) or ""), cacheable)
            self._reqs[rid] = st
        if st.cacheable and len(st.hashes) < len(st.prompt) // self.block:
            if self.opts.block_hashes == "vllm":
                r = self.hash_stride
                engine = list(getattr(request, "block_hashes", None) or [])[r - 1::r]
                st.hashes = [block_hash16(h) for h in engine[:len(st.prompt) // self.block]]
            else:
                extend_chain(st.hashes, st.prompt, self.block, st.salt)
        if st.cacheable and self.record_stride and len(st.engine) < len(st.prompt) // self.block:
            r = self.record_stride
            vllm_hashes = list(getattr(request, "block_hashes", None) or [])[r - 1::r]
            st.engine = [engine_hash(h) for h in vllm_hashes[:len(st.prompt) // self.block]]
        if self.groups is not None and st.cacheable:
            if not st.gh:
                st.gh = [[] for _ in self.groups.groups]
            for g, keys in enumerate(st.gh):
                keys.extend(group_hash(h, g) for h in st.hashes[len(keys):])
        return st

    def _namespace(self, tp: int, pp: int, lora: str) -> bytes:
        key = (tp, pp, lora)
        ns = self._ns.get(key)
        if ns is None:
            ns = self._ns[key] = make_identity(self.base, tp, pp, lora).namespace()
        return ns

    def _unpin(self, st: _Req) -> None:
        """Cancel st's pins (their undelivered leases end at once)."""
        pins, st.pins, st.pin_len = st.pins, [], 0
        if pins:
            self._refused = False   # a permit (and its lease) comes back
        for session, client, ticket in pins:
            self.stats["unpins"] += 1
            try:
                if client is session.client and not client.closed:
                    client.cancel(ticket)
            except OrbitKVError as e:  # expired, or the Manager went: nothing is held
                session.fail(e)
            finally:
                client.retire(ticket)

    def _pin(self, st: _Req, n: int, hashes: list[bytes] | None = None) -> int | None:
        """Leading blocks of ``hashes`` (default st.hashes[:n]; the keys of a
        hit of n blocks with KV cache groups) pinned on every shard; None
        while a pin is still Loading or waits to be admitted
        (``_pin_refused``); 0 on any error (no pin is then kept)."""
        if st.pins and (st.pin_len != n or any(c is not s.client or c.closed for s, c, _ in st.pins)
                        or time.monotonic() - st.pin_since > PIN_REFRESH_S):
            self._unpin(st)
        if not st.pins and self._refused and self._pins_held():
            return self._pin_refused(st, None)
        if hashes is None:
            hashes = st.hashes[:n]
        if not st.pins:
            batch = BlockHashes(hashes)
            session = None
            try:
                for session, tp, pp in self.shards:
                    client = session.get()
                    if client is None:
                        self._unpin(st)
                        return 0
                    self.stats["lookups"] += 1
                    t = client.query(self._namespace(tp, pp, st.lora_id), batch, flags=QueryFlags.PREPARE)
                    st.pins.append((session, client, t))
                    self.stats["pins"] += 1
            except Unadmitted as e:
                return self._pin_refused(st, e)
            except OrbitKVError as e:
                return self._pin_failed(st, e, session)
            finally:
                batch.close()
            st.pin_len, st.pin_since, st.pin_waited = n, time.monotonic(), False
        hits = len(hashes)
        session = None
        try:
            for session, client, t in st.pins:
                a = t.answer if not t.live or t.ready else client.poll(t)
                if a.status == "Loading":
                    st.pin_waited = True
                    if time.monotonic() - st.pin_since > self.opts.load_timeout_s:
                        log.warning("OrbitKV pin of request %s still loading after %g s; a miss", st.req_id,
                                    self.opts.load_timeout_s)
                        self._unpin(st)
                        return 0
                    return None
                hits = min(hits, a.hit_count if a.status in ("Candidates", "Ok") else 0)
        except Unadmitted as e:
            return self._pin_refused(st, e)
        except OrbitKVError as e:
            return self._pin_failed(st, e, session)
        return hits

    def _pins_held(self) -> bool:
        """Whether some request holds a pin on a live session whose Manager
        is alive (a pin on one that failed or died gives nothing back)."""
        return any(c is s.client and not c.closed and s.manager_alive()
                   for r in self._reqs.values() for s, c, _ in r.pins)

    def _pin_refused(self, st: _Req, e: Unadmitted | None) -> int | None:
        """The Manager could not admit st's pin (Unadmitted; nothing was
        kept): its operation bounds were full (128 per session, 1,024 per
        Manager by default: ``--max-ops-per-session``, ``--max-ops``), or a
        lease limit (leases or blocks per session, the byte budget). While
        this scheduler holds other pins - their loads settle within a step
        or two and give permits, leases and blocks back - the request waits:
        None, vLLM skips it this step and asks again the next, for up to
        ``load_timeout_s`` from its first refusal. Holding no other pin,
        waiting cannot help (nothing of ours will be given back): a miss at
        once. ``e`` None: put off without asking, after an earlier refusal
        this step."""
        self._unpin(st)
        if e is not None:
            self._refused = True
        now = time.monotonic()
        if not st.refused_since:
            st.refused_since = now
        waited = now - st.refused_since
        if waited < self.opts.load_timeout_s and self._pins_held():
            self.stats["pins_deferred"] += 1
            self.interval.add("deferred_lookups", 1)
            return None
        self.stats["pins_unadmitted"] += 1
        self.interval.add("refused_lookups", 1)
        log.warning("OrbitKV could not pin request %s (%s; waited %.1f s, %s); treating it as a miss", st.req_id,
                    e or "the Manager's bounds were full", waited,
                    "no other pin of this scheduler to wait for" if waited < self.opts.load_timeout_s
                    else f"load_timeout_s {self.opts.load_timeout_s:g}")
        return 0

    def _local_miss(self, st: _Req, n: int, start: int) -> bool:
        """Whether the discovery index of some shard says none of
        st.hashes[start:n] beyond the computed prefix is resident, and that
        shard's Manager serves from RAM only (a local miss there is final):
        the request is then a miss with no round trip. vLLM treats the
        matched count as binding (a block reported and then missing fails
        the request under its default policy), so a local hit is never
        reported as such: False sends the request to the leased PREPARE
        query (``_pin``), as does any doubt (option off, no index, an
        index without OKV_DISCOVER_COMPLETE, an error)."""
        chain = self._chain(st)
        if not self.opts.local_discovery or chain is None:
            return False
        hashes = chain[:n]
        for session, tp, pp in self.shards:
            client = session.get()
            if client is None or not session.manager_alive():
                # A dead Manager's index stays mapped and says "miss" for
                # good: without a round trip nothing else would notice.
                return False
            ns = self._namespace(tp, pp, st.lora_id)
            try:
                if client.discover_complete(ns) and client.discover_local(ns, hashes) <= start:
                    return True
            except OrbitKVError as e:
                log.debug("OrbitKV local discovery for request %s unavailable (%s); asking the Manager", st.req_id, e)
                return False
        return False

    def _chain(self, st: _Req) -> list[bytes] | None:
        """The keys whose leading run bounds st's hit: the chain hashes, or
        with KV cache groups the first full-attention group's keys (None
        without one)."""
        if self.groups is None:
            return st.hashes
        return st.gh[self.groups.full[0]] if self.groups.full else None

    def _locally_held(self, st: _Req, k: int, start: int) -> int:
        """The largest k' in (start, k] whose non-full-group needs the
        discovery index of the first shard holds (advisory, RAM only: no
        round trip), else k (the Manager decides: SSD or peers may hold
        them)."""
        if not self.opts.local_discovery or not self.groups.point:
            return k
        session, tp, pp = self.shards[0]
        client = session.get()
        if client is None or not session.manager_alive():
            return k
        ns = self._namespace(tp, pp, st.lora_id)
        try:
            for c in range(k, start, -1):
                need = self.groups.point_hashes(st.gh, c)
                if client.discover_local(ns, need) == len(need):
                    return c
        except OrbitKVError as e:
            log.debug("OrbitKV local discovery for request %s unavailable (%s)", st.req_id, e)
        return k

    def _matched_groups(self, st: _Req, limit: int, start: int) -> int | None:
        """Chain blocks OrbitKV holds for st in every KV cache group (see
        the module doc), pinned; None while the pin loads or waits."""
        # The live pin's length while one is held (it was Loading or refused);
        # afresh from the limit otherwise: more may be saved by now.
        k = min(st.cand, limit) if st.pins and st.cand else limit
        for _ in range(MAX_CANDIDATES):
            if not (st.pins and st.pin_len == k):
                k = self._locally_held(st, k, start)
            if k <= start:
                break
            hashes, full = self.groups.pin_hashes(st.gh, k)
            got = self._pin(st, k, hashes)
            if got is None:
                st.cand = k
                return None
            if got >= len(hashes):
                st.cand = k
                return k
            k = self.groups.next_candidate(k, got, full)
        self._unpin(st)
        st.cand = 0
        return 0

    def _pin_failed(self, st: _Req, e: OrbitKVError, session: Session | None) -> int:
        self.stats["lookup_errors"] += 1
        if session is not None:
            session.fail(e)
        self._unpin(st)
        log.warning("OrbitKV lookup for request %s failed: %s; treating it as a miss", st.req_id, e)
        return 0

    # ---- vLLM hooks ----

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[int | None, bool]:
        st = self._req(request)
        out = self._matched(st, num_computed_tokens)
        if out[0] is not None:
            st.refused_since = 0.0   # answered: a later refusal (e.g. after a preemption) waits afresh
        return out

    def _matched(self, st: _Req, num_computed_tokens: int) -> tuple[int | None, bool]:
        if not self.load_enabled or not st.cacheable or st.load_failed or num_computed_tokens % self.block:
            return 0, False
        # At least one prompt token must be computed (its logits start decoding).
        limit = min((len(st.prompt) - 1) // self.block, len(st.hashes))
        start = num_computed_tokens // self.block
        if limit <= start:
            self._unpin(st)
            return 0, False
        first = not st.pins
        if first and self._local_miss(st, limit, start):
            self.stats["local_misses"] += 1
            return 0, False
        matched = self._pin(st, limit) if self.groups is None else self._matched_groups(st, limit, start)
        if matched is None:
            return None, False
        st.matched = matched
        st.saved_upto = max(st.saved_upto, st.matched)
        if st.matched <= start:
            self._unpin(st)
            return 0, False
        if first:
            self.stats["hit_blocks"] += st.matched - start
        # KV cache groups: loaded asynchronously, the one way vLLM lets a
        # failed load of several groups' blocks be recomputed (by request,
        # failed_recving; block ids are per group).
        return (st.matched - start) * self.block, self.groups is not None

    def hit_from_disk(self, request: Any) -> bool:
        """Whether the request's pinned hits waited on SSD reads."""
        st = self._reqs.get(request.request_id)
        return bool(st and st.pin_waited)

    def loads_settled(self, req_ids: Any, failed: Any = ()) -> None:
        """The workers settled these requests' loads: end their pins. Those
        in ``failed`` (a whole load failed in some worker) are misses from
        now on: vLLM frees their blocks and asks again, and offering the
        same load again could fail the same way for ever."""
        for rid in failed or ():
            st = self._reqs.get(rid)
            if st is not None:
                st.load_failed = True
        for rid in req_ids or ():
            st = self._reqs.get(rid)
            if st is not None and st.pins:
                self._unpin(st)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if num_external_tokens <= 0:
            if st is not None:
                self._unpin(st)  # vLLM loads nothing of ours for it (e.g. its own cache hit)
            return
        if st is None or num_external_tokens % self.block or num_external_tokens // self.block > st.matched:
            raise ValueError(f"OrbitKVConnector: update_state_after_alloc for request {request.request_id!r} "
                             f"with {num_external_tokens} external tokens that get_num_new_matched_tokens "
                             "did not offer")
        tables = [list(t) for t in blocks.get_block_ids()]
        end = st.matched
        first = end - num_external_tokens // self.block
        for g in [0] if self.groups is None else self.groups.full:
            if len(tables[g]) < end:
                raise ValueError(f"OrbitKVConnector: request {request.request_id!r} has {len(tables[g])} blocks "
                                 f"in KV cache group {g}; {end} needed for its external tokens")
        if self.groups is None:
            st.block_ids = tables[0]
            self._loads[st.req_id] = LoadSpec(st.req_id, st.hashes[:end], first, tables[0][first:end], st.lora_id)
            return
        # Every real block vLLM gave chain blocks first..end-1, in any group,
        # is restored: vLLM reads each of them. One missing fails them all.
        keys, ids = [], []
        for g, table in enumerate(tables):
            for i in range(first, min(end, len(table))):
                if table[i] != NULL_BLOCK:
                    keys.append(st.gh[g][i])
                    ids.append(table[i])
        st.group_ids, st.fresh_from = tables, 0
        self._loads[st.req_id] = LoadSpec(st.req_id, keys, 0, ids, st.lora_id, whole=True)

    def build_connector_meta(self, so: Any) -> OrbitKVConnectorMetadata:
        meta = OrbitKVConnectorMetadata(loads=list(self._loads.values()), identity=self.identity)
        self._loads.clear()
        scheduled = getattr(so, "num_scheduled_tokens", {}) or {}
        for nr in getattr(so, "scheduled_new_reqs", ()) or ():
            st = self._reqs.get(nr.req_id)
            if st is None:  # never asked about (e.g. another connector chose)
                st = self._req(_NewReq(nr))
            st.block_ids = list(nr.block_ids[0]) if nr.block_ids else []
            st.group_ids, st.fresh_from = [list(t) for t in nr.block_ids or ()], 0
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
                if resumed:
                    st.group_ids, st.fresh_from = [list(t) for t in nb or ()], 0
                else:
                    # Only new ids are sent: vLLM may since have freed (and
                    # reused) earlier sliding-window ids this table still holds.
                    st.fresh_from = cached.num_computed_tokens[i] // self.block
                    if nb is not None and len(nb) == len(st.group_ids):
                        for g, t in enumerate(nb):
                            st.group_ids[g].extend(t)
                    elif nb is not None:
                        st.group_ids = []   # tables not known from their start: nothing is saved
                self._plan_save(st, cached.num_computed_tokens[i] + scheduled.get(rid, 0), meta)
        for rid in getattr(so, "finished_req_ids", ()) or ():
            st = self._reqs.pop(rid, None)
            if st is not None:
                self._unpin(st)
        return meta

    def _plan_save(self, st: _Req, computed_after: int, meta: OrbitKVConnectorMetadata) -> None:
        if not st.cacheable or not self.save_enabled:
            return
        if self.groups is not None:
            self._plan_save_groups(st, computed_after, meta)
            return
        full = min(min(computed_after, len(st.prompt)) // self.block, len(st.hashes), len(st.block_ids))
        if full > st.saved_upto:
            a = st.saved_upto
            meta.saves.append(SaveSpec(st.req_id, st.hashes[a:full], st.block_ids[a:full], st.lora_id,
                                       self._records(st, a, full)))
            st.saved_upto = full

    def _records(self, st: _Req, first: int, end: int, at: list[int] | None = None) -> BlockRecords | None:
        """The block records of chain blocks first .. end-1 of st (``at``:
        their positions in the save, None for 0 ..), or of the leading run
        of them vLLM hashed; None when it hashed none of them."""
        if not self.record_stride:
            return None
        have = min(end, len(st.engine))
        if have < end and not self._unhashed_logged:
            self._unhashed_logged = True
            log.info("OrbitKV: request %s has %d of its %d saved blocks hashed by vLLM (prefix caching off, or a "
                     "request this connector was never asked about); the others are published without block "
                     "records (logged once)", st.req_id, max(0, have - first), end - first)
        if have <= first:
            return None
        try:
            tokens = array("I", st.prompt[first * self.block:have * self.block])
        except OverflowError:   # a token id outside uint32: no record can carry it
            return None
        return BlockRecords(array("Q", st.engine[first:have]), st.engine[first - 1] if first else None, tokens,
                            None if at is None else array("I", at[:have - first]))

    def _plan_save_groups(self, st: _Req, computed_after: int, meta: OrbitKVConnectorMetadata) -> None:
        """Saves of chain blocks saved_upto..full-1 in every KV cache group:
        each real block whose id is current and whose content is that
        chain block's (a Mamba block only where this step ended at its
        boundary: the state it wrote there)."""
        tables = st.group_ids
        if len(tables) != len(self.groups.groups):
            return
        full = min(min(computed_after, len(st.prompt)) // self.block, len(st.hashes),
                   *(len(tables[g]) for g in self.groups.full))
        if full <= st.saved_upto:
            return
        keys, ids, at = [], [], []
        recorded = self.groups.full[0] if self.groups.full else None
        for i in range(st.saved_upto, full):
            for grp in self.groups.groups:
                table = tables[grp.index]
                if i >= len(table) or table[i] == NULL_BLOCK:
                    continue
                if grp.kind == "window" and i < st.fresh_from:
                    continue
                if grp.kind == "state" and not (i == full - 1 and full * self.block == computed_after):
                    continue
                if grp.index == recorded:
                    at.append(len(keys))
                keys.append(st.gh[grp.index][i])
                ids.append(table[i])
        if keys:
            # A full-attention table holds every chain block below full (full
            # is at most its length, and such a group has no null blocks):
            # at lists chain blocks saved_upto .. full-1 in order.
            records = self._records(st, st.saved_upto, full, at) if len(at) == full - st.saved_upto else None
            meta.saves.append(SaveSpec(st.req_id, keys, ids, st.lora_id, records))
        st.saved_upto = full

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, None]:
        st = self._reqs.pop(request.request_id, None)
        if st is not None:
            self._unpin(st)
        self._loads.pop(request.request_id, None)
        return False, None

    def shutdown(self) -> None:
        for st in self._reqs.values():
            self._unpin(st)
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
