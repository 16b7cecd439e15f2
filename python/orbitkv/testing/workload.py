"""The gate's workload: prompts with a shared system prefix, and the
identity every engine run uses (so the gate and the engines agree)."""

from __future__ import annotations

import random

from .model import ModelConfig

__all__ = ["MODEL_ID", "REVISION", "DTYPE", "prompts", "expected_restore_blocks", "DIVERGE_AT", "workload"]

MODEL_ID = "orbitkv-testing/tiny-decoder-4l"
REVISION = "seed-1234"
DTYPE = "float32"
SYSTEM_PREFIX = 48
SUFFIXES = (16, 29, 42, 52)   # prompt lengths 64, 77, 90, 100


def prompts(seed: int = 7, cfg: ModelConfig = ModelConfig()) -> list[list[int]]:
    """4 prompts of 64-100 tokens sharing a 48-token system prefix."""
    rng = random.Random(seed)
    system = [rng.randrange(cfg.vocab) for _ in range(SYSTEM_PREFIX)]
    return [system + [rng.randrange(cfg.vocab) for _ in range(n)] for n in SUFFIXES]


def expected_restore_blocks(prompt_len: int, block_tokens: int) -> int:
    """Full blocks of a prompt a warm run restores: every full block but the
    one holding the last prompt token, which is always computed."""
    return (prompt_len - 1) // block_tokens


#: Where the divergent pair's prompts part: token 60, in the second half of
#: block 3 (tokens 48..63 at 16 tokens a block).
DIVERGE_AT = 60


def workload(name: str = "default", cfg: ModelConfig = ModelConfig()) -> list[list[int]]:
    """The prompts of an engine run: ``default`` (``prompts()``), or one
    prompt of the divergent pair: ``diverge-a`` (80 tokens) and
    ``diverge-b`` (A's first ``DIVERGE_AT`` tokens, then others): B may
    restore A's blocks 0..2 only, never block 3 where they part."""
    if name == "default":
        return prompts(cfg=cfg)
    rng = random.Random(99)
    a = [rng.randrange(cfg.vocab) for _ in range(80)]
    if name == "diverge-a":
        return [a]
    if name == "diverge-b":
        b = a[:DIVERGE_AT] + [(t + 1 + rng.randrange(cfg.vocab - 1)) % cfg.vocab for t in a[DIVERGE_AT:]]
        return [b]
    raise ValueError(f"unknown workload {name!r}")
