"""What the scheduler-side connector tells the workers each step."""

from __future__ import annotations

import dataclasses
from array import array

from ..client import BlockRecord
from ._base import KVConnectorMetadata, KVConnectorWorkerMetadata

__all__ = ["LoadSpec", "SaveSpec", "BlockRecords", "OrbitKVConnectorMetadata", "OrbitKVWorkerMetadata",
           "ENGINE_HASH_MASK", "engine_hash"]

#: vLLM's KV events carry a block hash as its low 64 bits (read big-endian)
#: under ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` (default 1):
#: ``maybe_convert_block_hash`` in vllm/v1/core/kv_cache_utils.py.
ENGINE_HASH_MASK = (1 << 64) - 1


def engine_hash(block_hash: bytes | int) -> int:
    """vLLM's block hash (``BlockHash``: bytes, e.g. a 32-byte SHA-256) as
    vLLM's KV events give it: ``int.from_bytes(h, "big") & (2**64 - 1)``,
    an unsigned 64-bit int (vLLM's ``maybe_convert_block_hash`` with
    ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``). An int is masked alike."""
    if isinstance(block_hash, int):
        return block_hash & ENGINE_HASH_MASK
    return int.from_bytes(block_hash, "big") & ENGINE_HASH_MASK


@dataclasses.dataclass
class BlockRecords:
    """Block records (``orbitkv.BlockRecord``) of some blocks of one
    ``SaveSpec``, packed for the scheduler -> worker transport: consecutive
    chain blocks c, c+1, ..., c+m-1 of the request.

    * ``hashes`` - ``array("Q")``, m entries: vLLM's engine hash of each
      (``engine_hash``), 8 bytes a block;
    * ``parent`` - the engine hash of chain block c-1; None when c is 0;
    * ``tokens`` - ``array("I")``, m * block_tokens entries: block k's token
      ids are ``tokens[k * B:(k + 1) * B]``, 4 bytes a token;
    * ``at`` - ``array("I")``, m entries: the position in ``SaveSpec.hashes``
      of each recorded block (KV cache groups: the first full-attention
      group's block of that chain block), 4 bytes a block; None: positions
      0 .. m-1.

    So a block costs 8 + 4 * B bytes (B = block tokens; + 4 with groups) and
    a save 8 more for ``parent``: 136 B a block for B = 32.
    """

    hashes: array
    parent: int | None
    tokens: array
    at: array | None = None

    def per_block(self, n: int) -> list[BlockRecord | None]:
        """One entry per position 0 .. n-1 of the ``SaveSpec``: the
        ``BlockRecord`` of a recorded block, None for the others. Raises
        ``ValueError`` when the arrays disagree (m hashes, m positions < n,
        a token count that is not a multiple of m)."""
        m = len(self.hashes)
        at = range(m) if self.at is None else self.at
        if m == 0 or len(at) != m or len(self.tokens) % m or max(at) >= n:
            raise ValueError(f"BlockRecords: {m} hashes, {len(at)} positions (largest {max(at, default=-1)}), "
                             f"{len(self.tokens)} tokens for {n} blocks")
        b = len(self.tokens) // m
        out: list[BlockRecord | None] = [None] * n
        parent = self.parent
        for k, pos in enumerate(at):
            h = self.hashes[k]
            out[pos] = BlockRecord(h, parent, self.tokens[k * b:(k + 1) * b])
            parent = h
        return out


@dataclasses.dataclass
class LoadSpec:
    """Load chain blocks ``first .. len(hashes) - 1`` of request ``req_id``.

    * ``hashes`` - 16-byte hashes of chain blocks 0 .. end-1 (the worker
      looks the whole prefix up: a lease covers a prefix of the chain);
    * ``first`` - first block to load (earlier ones are computed locally);
    * ``block_ids`` - the engine's block ids of chain blocks first .. end-1;
    * ``lora_id`` - selects the namespace;
    * ``whole`` - all or nothing: unless every one of ``hashes`` is leased,
      no block is restored and all of ``block_ids`` fail (KV cache groups,
      ``orbitkv.vllm.groups``: ``hashes`` are then exactly the blocks to
      restore, ``first`` 0).
    """

    req_id: str
    hashes: list[bytes]
    first: int
    block_ids: list[int]
    lora_id: str = ""
    whole: bool = False


@dataclasses.dataclass
class SaveSpec:
    """Publish the blocks ``block_ids[i]`` under ``hashes[i]`` (full blocks
    computed by the end of this step); ``records`` the block records of
    those of them vLLM hashed (``BlockRecords``; None: none)."""

    req_id: str
    hashes: list[bytes]
    block_ids: list[int]
    lora_id: str = ""
    records: BlockRecords | None = None


@dataclasses.dataclass
class OrbitKVConnectorMetadata(KVConnectorMetadata):
    """One step's loads and saves (plain data: picklable for vLLM's
    scheduler -> worker transport)."""

    loads: list[LoadSpec] = dataclasses.field(default_factory=list)
    saves: list[SaveSpec] = dataclasses.field(default_factory=list)
    #: The scheduler's cache identity fields, ``(name, value)`` pairs of
    #: ``options.identity_base`` (block tokens, model, revision, dtype,
    #: layout, TP/PP sizes, salt); a worker whose own differ refuses the
    #: step naming the field. Empty: not checked.
    identity: tuple = ()


@dataclasses.dataclass
class OrbitKVWorkerMetadata(KVConnectorWorkerMetadata):
    """Worker -> scheduler, once per step: the requests whose loads settled
    this step (restored or failed), so the scheduler ends their pins, and
    among them those whose whole load (KV cache groups) failed, which the
    scheduler then never offers again (vLLM recomputes them).
    ``aggregate`` (vLLM merges the TP/PP workers' metadata) is the union of
    each."""

    loaded: frozenset = frozenset()
    failed: frozenset = frozenset()

    def aggregate(self, other: "OrbitKVWorkerMetadata") -> "OrbitKVWorkerMetadata":
        return OrbitKVWorkerMetadata(self.loaded | getattr(other, "loaded", frozenset()),
                                     self.failed | getattr(other, "failed", frozenset()))
