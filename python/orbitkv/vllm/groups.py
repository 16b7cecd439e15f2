"""vLLM's KV cache groups as OrbitKV saves and restores them.

With vLLM's hybrid KV cache manager on (the connector is ``SupportsHMA``),
a model whose layers keep different kinds of state has several KV cache
groups (``KVCacheConfig.kv_cache_groups``), each with its own block table
per request. ``KVGroups.of(kv_cache_config, block_tokens)`` reads them:

=================  ====================  ===================================
vLLM spec          kind                  blocks a restore at chain block k
                                         needs (k: hit length in blocks)
=================  ====================  ===================================
FullAttentionSpec  ``full``              0 .. k-1
(MLA, sink)
SlidingWindowSpec  ``window``            the last ``ceil((W - 1) / B)``
                                         before k (W: window, B: block
                                         tokens), as vLLM's own
                                         ``SlidingWindowManager`` hits
MambaSpec          ``state``             k-1 only: the recurrent state after
(mode ``align``)                         token k*B; a state is stored only
                                         where a scheduler step ended at a
                                         block boundary
=================  ====================  ===================================

A ``UniformTypeKVCacheSpecs`` group (layers of one type but not one spec:
vLLM's block-outermost packing of mixed page sizes) is read as its first
spec, as vLLM's scheduler reads it. Any other spec, a group whose block
size is not the scheduler's, or a Mamba group in another cache mode, is a
group OrbitKV cannot serve:
``unsupported`` names it and the connector then loads and saves nothing
(every request a miss, never a wrong restore).

Every group's block ``i`` of a request is its own OrbitKV block, stored
under ``group_hash(chain hash i, g)``: the chain hash (a prefix hash over
the tokens of blocks 0..i) bound to the group index, so blocks of
different groups never share a key. The group structure, with each
group's dtypes, is also part of the cache identity (``layout_tag`` goes
into ``kv_layout``), so engines with different groupings or state dtypes
never share a namespace.

vLLM lays the groups over one backing allocation: layer slot j of every
group shares the same memory (``KVCacheTensor`` per group, offset 0), and a
block id belongs to one group at a time, so a group's block b is page b of
every slot; the worker registers the slots as the OrbitKV buffer's layers
(``orbitkv.vllm.kvbuffer.slot_views``). Block id 0 is vLLM's null block
(a sliding-window block outside the window, a Mamba position without
state): never saved, never restored.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from ..identity import block_hash16

__all__ = ["Group", "KVGroups", "NULL_BLOCK", "group_hash"]

#: vLLM's null block id (``BlockPool.null_block``): a table entry holding
#: nothing (out of window, no state there).
NULL_BLOCK = 0

#: Binds a chain hash to a group index in ``group_hash``.
GROUP_TAG = "orbitkv-kv-group-v1"

_FULL = {"FullAttentionSpec", "MLAAttentionSpec", "SinkFullAttentionSpec"}
_WINDOW = {"SlidingWindowSpec"}
_STATE = {"MambaSpec"}


def group_hash(chain_hash: bytes, group: int) -> bytes:
    """The 16-byte key of group ``group``'s block whose chain hash is
    ``chain_hash`` (16 bytes): ``block_hash16`` of (domain tag, group
    index, chain hash)."""
    return block_hash16((GROUP_TAG, group, chain_hash))


@dataclasses.dataclass(frozen=True)
class Group:
    """One KV cache group: ``kind`` (``full``, ``window``, ``state``),
    ``window_blocks`` (window groups: blocks before a hit end that a
    restore needs), ``spec`` (the vLLM spec's class name) and the number of
    layers."""

    index: int
    kind: str
    spec: str
    layers: int
    window_blocks: int = 0
    dtypes: str = ""   # the spec's dtype(s), comma-separated ("" when it names none)

    def needed(self, k: int) -> range:
        """Chain-block indices of this group a restore of k blocks needs."""
        if self.kind == "full":
            return range(0, k)
        if self.kind == "window":
            return range(max(0, k - self.window_blocks), k)
        return range(k - 1, k) if k > 0 else range(0)

    def tag(self) -> str:
        kind = f"window{self.window_blocks}" if self.kind == "window" else self.kind
        return f"{kind}x{self.layers}" + (f"[{self.dtypes}]" if self.dtypes else "")


def _dtypes(spec: Any) -> str:
    """A spec's element dtype(s) as names: a ``MambaSpec``'s ``dtypes`` (one
    per state tensor: vLLM's ``mamba_cache_dtype`` and
    ``mamba_ssm_cache_dtype`` choose them), an attention spec's ``dtype``;
    "" when it names none."""
    found = getattr(spec, "dtypes", None)
    if found is None:
        one = getattr(spec, "dtype", None)
        found = () if one is None else (one,)
    return ",".join(str(d).replace("torch.", "") for d in found)


def _spec_names(spec: Any) -> set[str]:
    return {c.__name__ for c in type(spec).__mro__}


class KVGroups:
    """The KV cache groups of one engine (``of`` builds it). ``groups``:
    ``Group`` per vLLM group, in vLLM's order; ``unsupported``: why OrbitKV
    cannot serve them ("" when it can)."""

    def __init__(self, groups: list[Group], unsupported: str = "", layout: str = ""):
        self.groups = groups
        self.unsupported = unsupported
        self.layout = layout   # vLLM's KVCacheConfig.kv_cache_layout ("" when it names none)
        self.full = [g.index for g in groups if g.kind == "full"]
        self.point = [g for g in groups if g.kind != "full"]

    @classmethod
    def of(cls, kv_cache_config: Any, block_tokens: int) -> "KVGroups | None":
        """The groups of ``kv_cache_config`` (vLLM's ``KVCacheConfig``), or
        None where the connector keeps its one-table path: no config (the
        stand-in base) or exactly one full-attention group."""
        raw = list(getattr(kv_cache_config, "kv_cache_groups", None) or [])
        if not raw:
            return None
        groups: list[Group] = []
        why = ""
        for i, g in enumerate(raw):
            spec = getattr(g, "kv_cache_spec", None)
            members = getattr(spec, "kv_cache_specs", None)
            if isinstance(members, dict) and members:
                # UniformTypeKVCacheSpecs (layers of one type, not one spec):
                # its first spec, the one vLLM's scheduler holds in its copy
                # of the config (generate_scheduler_kv_cache_config), so the
                # scheduler and its workers plan the same groups and identity.
                spec = next(iter(members.values()))
            names = _spec_names(spec)
            name = type(spec).__name__
            layers = len(getattr(g, "layer_names", ()) or ())
            size = getattr(spec, "block_size", None)
            kind = ("window" if names & _WINDOW else "state" if names & _STATE
                    else "full" if name in _FULL else "")
            if kind == "state" and str(getattr(spec, "mamba_cache_mode", "align")) != "align":
                why = why or (f"KV cache group {i} ({name}) keeps its state in mamba_cache_mode "
                              f"{getattr(spec, 'mamba_cache_mode', None)!r}; OrbitKV restores states of mode 'align'")
            elif not kind:
                why = why or f"KV cache group {i} has a {name}, a kind of KV cache OrbitKV does not save"
            elif size != block_tokens:
                why = why or (f"KV cache group {i} ({name}) has block size {size}, not the scheduler's "
                              f"{block_tokens}")
            window = 0
            if kind == "window":
                w = int(getattr(spec, "sliding_window", 0) or 0)
                window = -(-(w - 1) // block_tokens) if w > 1 else 0
            groups.append(Group(i, kind or "unsupported", name, layers, window, _dtypes(spec)))
        if len(groups) == 1 and groups[0].kind == "full":
            return None
        return cls(groups, why, str(getattr(kv_cache_config, "kv_cache_layout", None) or ""))

    def layout_tag(self) -> str:
        """The group structure for the cache identity's ``kv_layout``: vLLM's
        physical KV cache layout when the config names it, then per group
        its kind, layer count and dtypes, e.g.
        ``groups@LBHNC:window2x1[bfloat16],fullx1[bfloat16],statex3[bfloat16,float32]``
        (a SHA-256 prefix when long). A page is the slots' bytes as they lie
        in memory, so the layout (LBHNC and LBNHC order a block's heads and
        tokens differently, with the same page size) decides what they
        mean; and a state page's dtypes are vLLM cache options of their own
        (``mamba_cache_dtype``, ``mamba_ssm_cache_dtype``) that can leave
        the block size and page size unchanged."""
        tag = ",".join(g.tag() for g in self.groups)
        if len(tag) > 200:
            tag = "sha256-" + hashlib.sha256(tag.encode()).hexdigest()[:32]
        return "groups" + (f"@{self.layout}" if self.layout else "") + ":" + tag

    def pin_hashes(self, gh: list[list[bytes]], k: int) -> tuple[list[bytes], int]:
        """(hashes, full) to pin for a hit of k chain blocks: every full
        group's blocks 0..k-1 (chain block by chain block), then what each
        other group needs at k; ``full`` is the length of the first part.
        ``gh[g][i]``: group g's key of chain block i."""
        head = [gh[g][i] for i in range(k) for g in self.full]
        return head + self.point_hashes(gh, k), len(head)

    def point_hashes(self, gh: list[list[bytes]], k: int) -> list[bytes]:
        """What the non-full groups need at k (``pin_hashes``' tail)."""
        return [gh[p.index][i] for p in self.point for i in p.needed(k)]

    def next_candidate(self, k: int, hits: int, full: int) -> int:
        """The next hit length to try after a pin of k blocks got ``hits``
        of its hashes (``full``: the length of its full-group part): the
        full groups' prefix when it ended early, else k - 1 (a point
        requirement at k was missing)."""
        if hits < full:
            return min(k - 1, hits // max(1, len(self.full)))
        return k - 1
