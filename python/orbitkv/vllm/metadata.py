"""What the scheduler-side connector tells the workers each step."""

from __future__ import annotations

import dataclasses

from ._base import KVConnectorMetadata, KVConnectorWorkerMetadata

__all__ = ["LoadSpec", "SaveSpec", "OrbitKVConnectorMetadata", "OrbitKVWorkerMetadata"]


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
    computed by the end of this step)."""

    req_id: str
    hashes: list[bytes]
    block_ids: list[int]
    lora_id: str = ""


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
