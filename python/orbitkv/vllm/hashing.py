"""Block hashes of a token sequence: a chain over full blocks.

Block i's engine hash is ``(parent, tokens of block i)`` where ``parent`` is
block i-1's 16-byte hash (block 0's parent is a root made from the domain
and an optional salt); ``block_hash16`` turns it into the 16 bytes the
Manager keys by. The chain makes a block's hash depend on every token
before it, so equal hashes mean equal prefixes. Only full blocks get a hash:
a partial tail block is never published or restored.

Pure functions, deterministic across processes (never Python's ``hash()``).
"""

from __future__ import annotations

from typing import Sequence

from ..identity import block_hash16

__all__ = ["ROOT_TAG", "chain_block_hashes", "extend_chain"]

ROOT_TAG = "orbitkv-token-chain-v1"


def _root(salt: str) -> bytes:
    return block_hash16((ROOT_TAG, salt))


def extend_chain(hashes: list[bytes], token_ids: Sequence[int], block_tokens: int, salt: str = "") -> list[bytes]:
    """Append to ``hashes`` (the chain of ``token_ids[:len(hashes) *
    block_tokens]``) the hashes of the further full blocks of ``token_ids``;
    returns ``hashes``. O(new tokens)."""
    if block_tokens < 1:
        raise ValueError(f"block_tokens {block_tokens}: want >= 1")
    full = len(token_ids) // block_tokens
    parent = hashes[-1] if hashes else _root(salt)
    for i in range(len(hashes), full):
        block = tuple(int(t) for t in token_ids[i * block_tokens:(i + 1) * block_tokens])
        parent = block_hash16((parent, block))
        hashes.append(parent)
    return hashes


def chain_block_hashes(token_ids: Sequence[int], block_tokens: int, salt: str = "") -> list[bytes]:
    """The 16-byte hashes of the ``len(token_ids) // block_tokens`` full
    blocks of ``token_ids`` (ints). ``salt`` (str) seeds the root, e.g.
    vLLM's per-request ``cache_salt``."""
    return extend_chain([], token_ids, block_tokens, salt)
