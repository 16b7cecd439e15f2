"""The test engine process: ``python -m orbitkv.testing.engine``.

Runs the gate's prompts through ``TinyDecoder`` with greedy decoding and a
paged KV cache in an OrbitKV buffer, one request at a time, prefill in
chunks of one block (16 tokens) per step, and writes a JSON result
(generated tokens, SHA-256 of each request's first-token logits, time to
first token, the adapter's counters) to ``--out``.

``--adapter``:

* ``none`` - no cache (the cold run);
* ``vllm`` - ``OrbitKVConnector`` driven as vLLM's scheduler and worker
  drive it (``vllm_driver``);
* ``sglang`` - ``OrbitKVStorage`` driven as SGLang's HiCache drives it
  (``sglang_driver``).

Test hooks: ``--events`` prints ``EVENT <name> <monotonic s> ...`` lines on
stdout (load-wait-enter/-return around the blocking load call, page-read
when the layer-0 cache is first read after a load, request-done);
``--hold`` waits for a line on stdin after each request but the last;
``--corrupt-restored`` flips one byte of the first restored block before
any layer reads it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from typing import Any

from .model import ModelConfig, TinyDecoder, deterministic
from .workload import DTYPE, MODEL_ID, REVISION, workload

__all__ = ["Engine", "main"]


class PlainKV:
    """KV memory that is not an OrbitKV buffer (``--staging``): the same
    layer-major layout in a plain bytearray, so the adapters must go
    through their staging buffers, as with vLLM's own GPU caches."""

    def __init__(self, layers: int, page_bytes: int, page_count: int):
        self.layers, self.page_bytes, self.page_count = layers, page_bytes, page_count
        self._mem = bytearray(layers * page_bytes * page_count)

    def memoryview(self) -> memoryview:
        return memoryview(self._mem)

    def offset(self, layer: int, page: int) -> int:
        return (layer * self.page_count + page) * self.page_bytes


class Engine:
    """Model, KV buffer, page allocator and the event/hold hooks."""

    def __init__(self, args: argparse.Namespace):
        from ..vllm.kvbuffer import kv_cache_buffer
        deterministic()
        self.args = args
        self.cfg = ModelConfig()
        if args.staging:
            self.buf = PlainKV(self.cfg.layers, self.cfg.page_bytes, args.pages)
        else:
            self.buf = kv_cache_buffer(self.cfg.layers, self.cfg.page_bytes, args.pages)
        self.model = TinyDecoder(self.cfg, self.buf)
        self.free = list(range(args.pages))
        self.corrupted = False

    def emit(self, name: str, *detail: Any) -> None:
        if self.args.events:
            print("EVENT", name, f"{time.monotonic():.6f}", *detail, flush=True)

    def alloc(self, tokens: int) -> list[int]:
        n = -(-tokens // self.cfg.block_tokens)
        if n > len(self.free):
            raise RuntimeError(f"out of KV pages: need {n}, {len(self.free)} free")
        pages, self.free = self.free[:n], self.free[n:]
        return pages

    def release(self, pages: list[int]) -> None:
        self.free = sorted(self.free + pages)

    def corrupt(self, page: int) -> None:
        """Flip a high bit of the first V value of layer 0, block ``page``."""
        if self.corrupted:
            return
        off = self.buf.offset(0, page) + self.cfg.page_bytes // 2 + 3
        mv = self.buf.memoryview()
        mv[off] ^= 0x40
        mv.release()
        self.corrupted = True
        self.emit("corrupted", f"page={page}")

    def chunk(self, computed: int, total: int) -> int:
        """Tokens of the next step: to the end of the current block."""
        B = self.cfg.block_tokens
        return min(B - computed % B, total - computed)


def _digest(logits) -> str:
    return hashlib.sha256(logits.contiguous().numpy().tobytes()).hexdigest()


def run_plain(engine: Engine, rid: str, prompt: list[int], max_new: int) -> dict:
    """Cold run: no connector, same chunking as the adapters' runs."""
    t0 = time.monotonic()
    pages = engine.alloc(len(prompt) + max_new)
    out: list[int] = []
    computed, ttft, digest = 0, 0.0, ""
    while len(out) < max_new:
        seq = prompt + out
        n = engine.chunk(computed, len(seq))
        logits = engine.model.forward(seq[computed:computed + n], computed, pages)
        computed += n
        if computed == len(seq):
            if not out:
                ttft, digest = time.monotonic() - t0, _digest(logits)
            out.append(int(logits.argmax()))
    engine.release(pages)
    return {"id": rid, "tokens": out, "ttft_s": ttft, "logits_sha256": digest}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m orbitkv.testing.engine", description=__doc__.split("\n")[0])
    p.add_argument("--adapter", choices=("none", "vllm", "sglang"), default="none")
    p.add_argument("--socket", default="", help="Manager bootstrap socket (vllm, sglang)")
    p.add_argument("--revision", default=REVISION, help="model revision in the cache identity")
    p.add_argument("--dtype", default=DTYPE, help="KV dtype in the cache identity")
    p.add_argument("--max-new", type=int, default=16, help="tokens to generate per prompt")
    p.add_argument("--pages", type=int, default=64, help="KV cache pages (blocks of 16 tokens)")
    p.add_argument("--out", required=True, help="JSON result file")
    p.add_argument("--events", action="store_true", help="print EVENT lines on stdout")
    p.add_argument("--hold", action="store_true", help="wait for a stdin line after each request")
    p.add_argument("--corrupt-restored", action="store_true", help="flip a byte of the first restored block")
    p.add_argument("--read-only", action="store_true",
                   help="load but never save (vLLM kv_role kv_consumer; SGLang: no backup)")
    p.add_argument("--staging", action="store_true",
                   help="KV memory outside any OrbitKV buffer: the adapter copies through its staging pages")
    p.add_argument("--kv-layout", default="", help="vLLM orbitkv.kv_layout (default: the driver's)")
    p.add_argument("--workload", choices=("default", "diverge-a", "diverge-b"), default="default",
                   help="prompts (workload.workload)")
    p.add_argument("--reconnect-interval", type=float, default=0.1, help="adapter reconnect interval, s")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    engine = Engine(args)
    if args.adapter == "vllm":
        from .vllm_driver import VllmDriver
        driver: Any = VllmDriver(engine)
    elif args.adapter == "sglang":
        from .sglang_driver import SGLangDriver
        driver = SGLangDriver(engine)
    else:
        driver = None
    results = []
    ps = workload(args.workload)
    for i, prompt in enumerate(ps):
        rid = f"req-{i}"
        if driver is None:
            results.append(run_plain(engine, rid, prompt, args.max_new))
        else:
            results.append(driver.generate(rid, prompt, args.max_new))
        engine.emit("request-done", i)
        if args.hold and i + 1 < len(ps):
            if not sys.stdin.readline():
                raise SystemExit("engine: stdin closed while holding")
    out = {"adapter": args.adapter, "requests": results, "corrupted": engine.corrupted,
           "layers": engine.cfg.layers, "page_bytes": engine.cfg.page_bytes,
           "block_tokens": engine.cfg.block_tokens}
    if driver is not None:
        out.update(driver.report())
        driver.close()
    engine.model.release()
    with open(args.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
