"""A small decoder-only transformer with a paged KV cache (the test engine's model).

Geometry (``ModelConfig``): vocabulary 256, width 64, 4 layers, 4 heads of
16, MLP 128, learned positions up to 512, float32. Weights come from
``torch.manual_seed(seed)``: the same seed gives the same model in every
process.

KV cache: one OrbitKV ``EngineBuffer`` (layer-major: page p of layer l at
``(l * page_count + p) * page_bytes``); a page is one block of 16 tokens of
one layer: K then V, each ``[16 tokens, 4 heads, 16]`` float32, so
``page_bytes`` = 2 * 16 * 4 * 16 * 4 = 8 KiB. ``layer_tensor(l)`` is layer
l as ``[page_count, 2, 16, 4, 16]`` over the buffer's memory (no copy).

Determinism: call ``deterministic()`` first (one thread, deterministic
algorithms). ``forward`` must be given chunks that start on a block
boundary and do not cross one (the engine's chunked prefill of one block
per step, and single-token decode), so a chunk's arithmetic has the same
shapes and inputs whether the blocks before it were computed in this
process or restored from OrbitKV: cold and warm runs give bit-identical
logits.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import torch

__all__ = ["ModelConfig", "TinyDecoder", "deterministic"]


def deterministic() -> None:
    """One thread, deterministic algorithms (call before building a model)."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab: int = 256
    width: int = 64
    layers: int = 4
    heads: int = 4
    mlp: int = 128
    max_pos: int = 512
    block_tokens: int = 16
    seed: int = 1234

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @property
    def page_bytes(self) -> int:
        """Bytes of one block of one layer: K and V of block_tokens tokens."""
        return 2 * self.block_tokens * self.width * 4


class TinyDecoder:
    """The model and its paged KV cache over ``buf`` (an ``EngineBuffer`` of
    ``cfg.layers`` layers x ``cfg.page_bytes`` bytes)."""

    def __init__(self, cfg: ModelConfig, buf):
        if buf.layers != cfg.layers or buf.page_bytes != cfg.page_bytes:
            raise ValueError(f"buffer {buf.layers} x {buf.page_bytes} B does not fit the model "
                             f"({cfg.layers} x {cfg.page_bytes} B)")
        self.cfg = cfg
        torch.manual_seed(cfg.seed)
        d, f = cfg.width, cfg.mlp

        def w(*shape: int, scale: float) -> torch.Tensor:
            return torch.randn(*shape, dtype=torch.float32) * scale

        self.emb = w(cfg.vocab, d, scale=0.5)
        self.pos = w(cfg.max_pos, d, scale=2.0)
        self.blocks = []
        for _ in range(cfg.layers):
            self.blocks.append(dict(qkv=w(d, 3 * d, scale=d ** -0.5), out=w(d, d, scale=d ** -0.5),
                                    up=w(d, f, scale=d ** -0.5), down=w(f, d, scale=f ** -0.5)))
        self.head = w(cfg.vocab, d, scale=1.0)  # untied: tied weights make it echo its input
        self.buf = buf
        self._mem = torch.frombuffer(buf.memoryview(), dtype=torch.float32)
        per_layer = buf.page_count * cfg.page_bytes // 4
        shape = (buf.page_count, 2, cfg.block_tokens, cfg.heads, cfg.head_dim)
        self.kv = [self._mem[l * per_layer:(l + 1) * per_layer].view(shape) for l in range(cfg.layers)]

    def layer_tensor(self, layer: int) -> torch.Tensor:
        return self.kv[layer]

    def release(self) -> None:
        """Drop the tensors over the buffer (so it can be closed)."""
        self.kv = []
        self._mem = None

    @torch.no_grad()
    def forward(self, tokens: Sequence[int], start: int, block_table: Sequence[int],
                before_layer: Callable[[int], None] | None = None,
                after_layer: Callable[[int], None] | None = None) -> torch.Tensor:
        """Run tokens at positions [start, start + n) (one block at most, not
        crossing a block boundary), writing their K/V into the cache pages
        of ``block_table`` (block i of the sequence is page block_table[i])
        and attending over positions [0, start + n). ``before_layer(l)`` runs
        before layer l's cache is read (a connector waits for loads there);
        ``after_layer(l)`` after it is written. Returns the logits of the
        last token ([vocab] float32)."""
        cfg = self.cfg
        B, H, hd = cfg.block_tokens, cfg.heads, cfg.head_dim
        n = len(tokens)
        end = start + n
        if n == 0 or start // B != (end - 1) // B:
            raise ValueError(f"chunk [{start}, {end}) must be non-empty within one block")
        ids = torch.tensor(list(tokens), dtype=torch.long)
        x = self.emb[ids] + self.pos[start:end]
        nblocks = (end + B - 1) // B
        pages = torch.tensor(list(block_table[:nblocks]), dtype=torch.long)
        page, off = block_table[start // B], start % B
        q_pos = torch.arange(start, end).unsqueeze(1)
        k_pos = torch.arange(0, end).unsqueeze(0)
        mask = k_pos > q_pos  # [n, end]
        for l, blk in enumerate(self.blocks):
            if before_layer is not None:
                before_layer(l)
            h = torch.nn.functional.layer_norm(x, (cfg.width,))
            q, k, v = (h @ blk["qkv"]).split(cfg.width, dim=1)
            cache = self.kv[l]
            cache[page, 0, off:off + n] = k.view(n, H, hd)
            cache[page, 1, off:off + n] = v.view(n, H, hd)
            if after_layer is not None:
                after_layer(l)
            kv = cache.index_select(0, pages)             # [nblocks, 2, B, H, hd]
            keys = kv[:, 0].reshape(-1, H, hd)[:end]      # [end, H, hd]
            vals = kv[:, 1].reshape(-1, H, hd)[:end]
            qh = q.view(n, H, hd).transpose(0, 1)         # [H, n, hd]
            scores = qh @ keys.permute(1, 2, 0) / math.sqrt(hd)   # [H, n, end]
            scores = scores.masked_fill(mask, float("-inf"))
            att = torch.softmax(scores, dim=-1) @ vals.transpose(0, 1)   # [H, n, hd]
            x = x + att.transpose(0, 1).reshape(n, cfg.width) @ blk["out"]
            h = torch.nn.functional.layer_norm(x, (cfg.width,))
            x = x + torch.nn.functional.gelu(h @ blk["up"]) @ blk["down"]
        x = torch.nn.functional.layer_norm(x[-1], (cfg.width,))
        return x @ self.head.t()
