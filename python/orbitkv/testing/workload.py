"""The gate's workload: prompts with a shared system prefix, and the
identity every engine run uses (so the gate and the engines agree)."""

from __future__ import annotations

import random

from .model import ModelConfig

__all__ = ["MODEL_ID", "REVISION", "DTYPE", "prompts", "expected_restore_blocks"]

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
