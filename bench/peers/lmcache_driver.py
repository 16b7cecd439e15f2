"""LMCache side of `orbitkv-bench peers`: the same workload as OrbitKV's,
through LMCache's multiprocess server and LMCache's own client.

Run with the vLLM engine environment's python (build/venv/vllm/bin/python,
which holds lmcache==0.5.6 from engines/vllm.lock). The driver starts
`lmcache server` itself on 127.0.0.1 (free ZMQ and HTTP ports, a CPU-only
DRAM L1 of --l1-size-gb, engine-driven transfer over a POSIX shared-memory
segment of its own name), waits until it answers GET_CHUNK_SIZE, runs the
workload, and stops the server (SIGTERM, then SIGKILL) on every exit path.
The server stays in the driver's process group, so `orbitkv-bench peers`
killing that group on its deadline takes the server with it.

The client is LMCache's own: ServerBenchClient of `lmcache bench server`
(lmcache/cli/commands/bench/server_bench/client.py) for KV registration,
STORE and RETRIEVE (EngineDrivenTransferContext in CPU mode), and its
RequestClient for LOOKUP + WAIT_PREFETCH_STATUS, the blocking lookup its
SGLang adapter uses (integration/sglang/multi_process_adapter.py).

Workload (bench/peers/README.md "Method"): a block is one LMCache chunk of
--chunk-tokens tokens whose KV bytes equal the block size (the KV shape is
chosen per size: blockShape). Per size: one cold batch, --warmup untimed
batches, --iters timed batches of STORE (fresh tokens each batch), and as
many RETRIEVEs of the last stored batch, each preceded by an untimed
LOOKUP that takes the read locks RETRIEVE consumes. Every RETRIEVE lands
in a zeroed range and is compared byte for byte with what was stored.
Lookups: --chains chains of N chunks stored first, then --lookups timed
LOOKUP + WAIT_PREFETCH_STATUS of each (full hits required), each followed
by an untimed FREE_LOOKUP_LOCKS and END_SESSION.

Output: one JSON object on stdout (shape: report()); progress on stderr.
Exit status 0 on success, 2 on bad arguments (argparse), 1 on any failure,
with {"error": "..."} printed on stdout so the caller records it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

#: Bytes of one float16 element: the KV dtype of every shape the driver builds.
DTYPE_BYTES = 2
#: Tokens per LMCache paged block (its bench's default --block-size).
PAGE_TOKENS = 16
#: Head size in elements of the shapes the driver builds, at most.
MAX_HEAD_SIZE = 128
#: Heads per layer of the shapes the driver builds, at most.
MAX_HEADS = 8


def positive(name: str):
    """Return an argparse type that parses an int >= 1, naming `name` in its error."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name}: {s!r} is not an integer")
        if v < 1:
            raise argparse.ArgumentTypeError(f"--{name} must be at least 1, got {v}")
        return v

    return parse


def int_list(name: str, unique: bool = True):
    """Return an argparse type parsing comma-separated ints >= 1 (with
    unique, none twice)."""

    def parse(s: str) -> list[int]:
        out: list[int] = []
        for item in s.split(","):
            item = item.strip()
            if not item:
                continue
            try:
                v = int(item)
            except ValueError:
                raise argparse.ArgumentTypeError(f"--{name}: {item!r} is not an integer")
            if v < 1:
                raise argparse.ArgumentTypeError(f"--{name}: {v} must be at least 1")
            if unique and v in out:
                raise argparse.ArgumentTypeError(f"--{name}: {v} named twice")
            out.append(v)
        if not out:
            raise argparse.ArgumentTypeError(f"--{name} names nothing")
        return out

    return parse


def block_shape(block_bytes: int, chunk_tokens: int) -> tuple[int, int, int]:
    """Return (layers, heads, head_size) of a float16 K/V cache whose one
    chunk of `chunk_tokens` tokens holds exactly `block_bytes` bytes.

    Per token a layer holds 2 (K and V) x heads x head_size x 2 bytes. The
    head size is at most MAX_HEAD_SIZE and heads at most MAX_HEADS; the
    rest goes into layers. Raises ValueError naming the size when the bytes
    do not split that way (not a multiple of 4 x chunk_tokens bytes, or
    per-token bytes not a power-of-two multiple of 4 below 512).
    """
    unit = 2 * DTYPE_BYTES * chunk_tokens  # bytes of one element per K/V pair per token
    if block_bytes <= 0 or block_bytes % unit:
        raise ValueError(
            f"block size {block_bytes} bytes is not a multiple of {unit} "
            f"(2 x {DTYPE_BYTES} bytes x {chunk_tokens} tokens per chunk)"
        )
    elems = block_bytes // unit  # heads x head_size x layers
    head = min(MAX_HEAD_SIZE, elems)
    if elems % head:
        raise ValueError(f"block size {block_bytes} bytes: {elems} elements per token do not split into heads of {head}")
    rest = elems // head
    heads = min(MAX_HEADS, rest)
    if rest % heads:
        raise ValueError(f"block size {block_bytes} bytes: {rest} heads do not split into layers of {heads}")
    return rest // heads, heads, head


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse and validate the driver's arguments; argparse exits 2 on bad ones.

    Cross-field rules (each error names the flag): every --sizes entry
    splits into a KV shape (block_shape); --blocks x the largest size is at
    most --max-batch-bytes per batch; --l1-size-gb holds the lookup chains
    and four batches of the largest size.
    """
    p = argparse.ArgumentParser(prog="lmcache_driver.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--lmcache", default=os.path.join(os.path.dirname(sys.executable), "lmcache"),
                   help="the lmcache CLI (default: beside this python)")
    p.add_argument("--sizes", type=int_list("sizes"), required=True, help="block sizes in bytes, comma-separated")
    p.add_argument("--blocks", type=int_list("blocks", unique=False), required=True,
                   help="blocks per STORE/RETRIEVE batch, one per --sizes entry")
    p.add_argument("--chains", type=int_list("chains"), default=[32, 256, 1000], help="lookup chain lengths in chunks")
    p.add_argument("--lookup-block-bytes", type=positive("lookup-block-bytes"), default=65536,
                   help="block size of the chains stored for the lookups")
    p.add_argument("--lookups", type=positive("lookups"), default=200, help="timed lookups per chain")
    p.add_argument("--iters", type=positive("iters"), default=8, help="timed batches per size and operation")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches per size and operation after the cold one")
    p.add_argument("--transfer-mode", choices=["lmcache_driven", "engine_driven"], default="lmcache_driven",
                   help="LMCache's data path: server-driven STORE/RETRIEVE over POSIX SHM (its server's default), "
                   "or engine-driven PREPARE/COMMIT through a SHM segment")
    p.add_argument("--chunk-tokens", type=positive("chunk-tokens"), default=256, help="the server's --chunk-size")
    p.add_argument("--l1-size-gb", type=float, default=4.0, help="the server's DRAM L1")
    p.add_argument("--max-batch-bytes", type=positive("max-batch-bytes"), default=1 << 30)
    p.add_argument("--start-timeout", type=float, default=120.0, help="seconds to wait for the server to answer")
    p.add_argument("--rpc-timeout", type=float, default=30.0, help="seconds per LMCache call")
    a = p.parse_args(argv)
    if a.warmup < 0:
        p.error(f"--warmup must be at least 0, got {a.warmup}")
    if len(a.blocks) == 1:
        a.blocks = a.blocks * len(a.sizes)
    if len(a.blocks) != len(a.sizes):
        p.error(f"--blocks names {len(a.blocks)} counts for {len(a.sizes)} --sizes (want one, or one per size)")
    if a.chunk_tokens % PAGE_TOKENS:
        p.error(f"--chunk-tokens {a.chunk_tokens} must be a multiple of {PAGE_TOKENS} (tokens per paged block)")
    for size in a.sizes + [a.lookup_block_bytes]:
        try:
            block_shape(size, a.chunk_tokens)
        except ValueError as e:
            p.error(f"--sizes: {e}")
    for size, n in zip(a.sizes, a.blocks):
        if size * n > a.max_batch_bytes:
            p.error(f"--blocks {n} x {size} bytes = more than --max-batch-bytes {a.max_batch_bytes}")
    need = sum(a.chains) * a.lookup_block_bytes + 4 * max(s * n for s, n in zip(a.sizes, a.blocks))
    if a.l1_size_gb * (1 << 30) < need:
        p.error(f"--l1-size-gb {a.l1_size_gb} is below the {need} bytes the chains and four batches need")
    if a.start_timeout <= 0 or a.rpc_timeout <= 0:
        p.error("--start-timeout and --rpc-timeout must be above 0")
    return a


def log(msg: str) -> None:
    """Print one progress line on stderr."""
    print(f"lmcache_driver: {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 free at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quantile(samples: list[int], q: float) -> int:
    """Return the nearest-rank q-quantile (0 < q <= 1) of samples in ns."""
    s = sorted(samples)
    return s[max(0, min(len(s) - 1, int(q * len(s) + 0.999999) - 1))]


def gbps(nbytes: int, ns: int) -> float:
    """Return nbytes over ns nanoseconds in GB/s (10^9 bytes per second)."""
    return nbytes / ns if ns > 0 else 0.0


class Server:
    """The `lmcache server` process the driver owns: started on loopback,
    stopped by stop() (idempotent), which every exit path calls."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.port, self.http = free_port(), free_port()
        self.shm = f"okvbench-{os.getpid()}"
        self.log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"okv-peers-lmcache-{os.getpid()}.log")
        self.argv = [a.lmcache, "server", "--host", "127.0.0.1", "--port", str(self.port),
                     "--http-host", "127.0.0.1", "--http-port", str(self.http),
                     "--chunk-size", str(a.chunk_tokens), "--l1-size-gb", str(a.l1_size_gb),
                     "--no-l1-use-lazy", "--eviction-policy", "LRU", "--supported-transfer-mode", a.transfer_mode,
                     "--disable-observability", "--disable-metrics", "--prometheus-port", str(free_port())]
        if a.transfer_mode == "engine_driven":
            self.argv += ["--shm-name", self.shm]
        env = dict(os.environ, LMCACHE_DISABLE_BANNER="1")
        self.logf = open(self.log_path, "wb")
        log("starting " + " ".join(self.argv))
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT, env=env)

    def url(self) -> str:
        """The server's ZMQ request endpoint."""
        return f"tcp://127.0.0.1:{self.port}"

    def tail(self, n: int = 3000) -> str:
        """The last n bytes of the server's log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                return f.read().decode(errors="replace")
        except OSError as e:
            return f"(no log: {e})"

    def stop(self) -> None:
        """SIGTERM the server, SIGKILL it after 10 s, remove its log."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        try:
            if not os.environ.get("OKV_PEERS_VERBOSE"):
                os.unlink(self.log_path)
        except OSError:
            pass


def wait_ready(server: Server, timeout: float):
    """Poll GET_CHUNK_SIZE until the server answers; return (zmq context,
    RequestClient, chunk size). Raises RuntimeError with the server's log
    tail if it exits or does not answer within timeout seconds."""
    import zmq
    from lmcache.v1.multiprocess.transport.factory import RequestClientFactory

    deadline = time.monotonic() + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"lmcache server exited with status {server.proc.returncode}:\n{server.tail()}")
        ctx = zmq.Context()
        ctx.setsockopt(zmq.LINGER, 0)
        rc = RequestClientFactory.create(server.url(), context=ctx)
        try:
            return ctx, rc, int(rc.get_chunk_size().result(timeout=2.0))
        except Exception:
            rc.close()
            ctx.term()
        if time.monotonic() > deadline:
            raise RuntimeError(f"lmcache server did not answer within {timeout:.0f} s:\n{server.tail()}")
        time.sleep(0.5)


class Sized:
    """One block size's LMCache client: a ServerBenchClient registered with
    a KV cache of `slots` chunk-sized slots (plus a spare first page, since
    the server treats block id 0 as the null block)."""

    def __init__(self, a, url: str, block_bytes: int, chunks: int, salt: int) -> None:
        from lmcache.cli.commands.bench.server_bench.client import ServerBenchClient
        from lmcache.cli.commands.bench.server_bench.config import BenchConfig

        layers, heads, head = block_shape(block_bytes, a.chunk_tokens)
        self.a, self.chunks, self.block_bytes, self.salt = a, chunks, block_bytes, salt
        self.pages = chunks * a.chunk_tokens // PAGE_TOKENS
        spec = f"(2,{self.pages + 1},{PAGE_TOKENS},{heads},{head}):float16:{layers}"
        cfg = BenchConfig(rpc_url=url, http_url="", mode="cpu", transfer_mode=a.transfer_mode, tp_size=1, use_mla=False,
                          num_tokens=chunks * a.chunk_tokens, kvcache_shape_spec=spec,
                          num_blocks=self.pages + 1, block_size=PAGE_TOKENS)
        # One registration per client: every Sized registers under an
        # instance id of its own (the bench client derives it from this base)
        # rather than reusing one a closed client unregistered.
        from lmcache.cli.commands.bench.server_bench import helpers

        helpers._INSTANCE_ID_BASE = 1000 + 10 * salt
        self.client = ServerBenchClient(cfg, log=log if os.environ.get("OKV_PEERS_VERBOSE") else (lambda m: None))
        self.client.start()
        self.rc = self.client._require_started()
        self.seq = 0

    def request(self, kind: str):
        """A fresh request (new leading token: every chunk hashes anew) over pages 1..pages."""
        import dataclasses

        self.seq += 1
        seq = self.salt * 1_000_000 + self.seq
        r = self.client.create_request(seq, f"okv-{kind}-{seq}", kind)
        return dataclasses.replace(r, block_offset=1)

    def tensors(self):
        """The registered KV tensors, in layer order."""
        return list(self.client._workers[0].kv_caches.values())

    def fill(self, seed: int) -> None:
        """Write a seed-dependent pattern into the request's pages of every layer."""
        import torch

        for i, t in enumerate(self.tensors()):
            v = t.narrow(1, 1, self.pages)
            bits = (torch.arange(v.numel(), dtype=torch.int64) * 2654435761 + seed * 97 + i) & 0x7BFF
            v.copy_(bits.to(torch.int16).view(torch.float16).reshape(v.shape))

    def snapshot(self):
        """Copies of the request's pages of every layer."""
        return [t.narrow(1, 1, self.pages).clone() for t in self.tensors()]

    def zero(self) -> None:
        """Zero the request's pages: a RETRIEVE that writes nothing fails verify()."""
        for t in self.tensors():
            t.narrow(1, 1, self.pages).zero_()

    def verify(self, want) -> int:
        """Return how many float16 elements of the request's pages differ
        from want, compared bit for bit."""
        import torch

        bad = 0
        for t, w in zip(self.tensors(), want):
            bad += int((t.narrow(1, 1, self.pages).view(torch.int16) != w.view(torch.int16)).sum())
        return bad

    def lookup(self, req) -> tuple[int, int]:
        """LOOKUP + WAIT_PREFETCH_STATUS of req's chunks; return (hit chunks, ns)."""
        from lmcache.cli.commands.bench.server_bench.helpers import _make_key

        key = _make_key(req.token_ids, req.request_id, start=0, end=req.num_full_tokens, world_size=1)
        t = time.perf_counter_ns()
        self.rc.lookup(key, 1).result(timeout=self.a.rpc_timeout)
        hits = self.rc.wait_prefetch_status(req.request_id, self.a.rpc_timeout).result(timeout=self.a.rpc_timeout + 5)
        d = time.perf_counter_ns() - t
        return (hits or 0), d

    def unlock(self, req) -> None:
        """FREE_LOOKUP_LOCKS and END_SESSION of a lookup not followed by RETRIEVE."""
        from lmcache.cli.commands.bench.server_bench.helpers import _make_key

        key = _make_key(req.token_ids, req.request_id, start=0, end=req.num_full_tokens, world_size=1)
        self.rc.free_lookup_locks(key, 1).result(timeout=self.a.rpc_timeout)
        self.rc.end_session(req.request_id).result(timeout=self.a.rpc_timeout)

    def store(self, req) -> tuple[int, int]:
        """STORE every chunk of req after an untimed LOOKUP of it (a miss, as
        an engine looks up before it stores); return (ns until the chunks
        are visible, ns until the STORE replied).

        The server replies to STORE before the chunks are visible to a
        lookup (measured: a LOOKUP right after the reply misses, one a
        second later hits), so the store is timed until a LOOKUP under a
        fresh request id finds every chunk: OrbitKV's Publish returns once
        its blocks are resident, and both sides are timed to the same point.
        Raises on a failed STORE, a pre-lookup that hits, or chunks not
        visible within --rpc-timeout."""
        hits, _ = self.lookup(req)
        self.unlock(req)
        if hits:
            raise RuntimeError(f"lookup of {self.chunks} fresh chunks hit {hits}")
        t = time.perf_counter_ns()
        r = self.client.store(req, 0, req.num_full_tokens)
        reply = time.perf_counter_ns() - t
        if r is None or not r.succeeded:
            raise RuntimeError(f"STORE of {self.chunks} x {self.block_bytes} bytes failed: {r}")
        import dataclasses

        deadline = t + int(self.a.rpc_timeout * 1e9)
        for k in range(1_000_000):
            probe = dataclasses.replace(req, request_id=f"{req.request_id}-v{k}")
            hits, _ = self.lookup(probe)
            now = time.perf_counter_ns()
            self.unlock(probe)
            if hits == self.chunks:
                return now - t, reply
            if now > deadline:
                break
        raise RuntimeError(f"{self.chunks} stored chunks of {self.block_bytes} bytes not visible within {self.a.rpc_timeout} s ({hits} visible)")

    def retrieve(self, req) -> int:
        """RETRIEVE every chunk of req (its lookup already taken); return ns."""
        t = time.perf_counter_ns()
        r = self.client.retrieve(req, 0, req.num_full_tokens)
        d = time.perf_counter_ns() - t
        if r is None or not r.succeeded:
            raise RuntimeError(f"RETRIEVE of {self.chunks} x {self.block_bytes} bytes failed: {r}")
        return d

    def close(self) -> None:
        """Unregister the KV cache and close the client."""
        self.client.close()


def measure_size(a, url: str, size: int, blocks: int, salt: int) -> dict:
    """Cold, then --warmup, then --iters STOREs and as many verified
    RETRIEVEs of one block size; return its figures (GB/s over the median)."""
    s = Sized(a, url, size, blocks, salt)
    try:
        batch = size * blocks
        stores: list[int] = []
        replies: list[int] = []
        last = None
        want = None
        for i in range(1 + a.warmup + a.iters):
            req = s.request("store")
            s.fill(salt * 1000 + i)
            want = s.snapshot()
            d, reply = s.store(req)
            if i == 0:
                cold_store = d
            elif i > a.warmup:
                stores.append(d)
                replies.append(reply)
            last = req
        retrieves: list[int] = []
        for i in range(1 + a.warmup + a.iters):
            hits, _ = s.lookup(last)
            if hits != blocks:
                raise RuntimeError(f"{size}-byte blocks: lookup of the batch just stored hit {hits} of {blocks} chunks")
            s.zero()
            d = s.retrieve(last)
            bad = s.verify(want)
            if bad:
                raise RuntimeError(f"{size}-byte blocks: retrieved batch differs from the stored one in {bad} float16 elements")
            s.rc.end_session(last.request_id).result(timeout=a.rpc_timeout)
            if i == 0:
                cold_retrieve = d
            elif i > a.warmup:
                retrieves.append(d)
        med_s, med_r = quantile(stores, 0.5), quantile(retrieves, 0.5)
        log(f"{size} B x {blocks}: store {gbps(batch, med_s):.2f} GB/s, retrieve {gbps(batch, med_r):.2f} GB/s (warm medians)")
        return {"block_bytes": size, "blocks": blocks, "batch_bytes": batch,
                "verified_retrieves": 1 + a.warmup + a.iters,
                "store_gbps": gbps(batch, med_s), "retrieve_gbps": gbps(batch, med_r),
                "store_reply_gbps": gbps(batch, quantile(replies, 0.5)),
                "store_cold_gbps": gbps(batch, cold_store), "retrieve_cold_gbps": gbps(batch, cold_retrieve)}
    finally:
        s.close()


def measure_lookups(a, url: str) -> dict:
    """Store one chain per --chains length, then time --lookups full-hit
    LOOKUP + WAIT_PREFETCH_STATUS round trips of each; return p50/p99 ns."""
    out = {}
    for n, chain in enumerate(a.chains):
        s = Sized(a, url, a.lookup_block_bytes, chain, 900 + n)
        try:
            req = s.request("chain")
            s.fill(n)
            s.store(req)
            samples = []
            for _ in range(a.lookups + max(1, a.lookups // 10)):
                hits, d = s.lookup(req)
                s.unlock(req)
                if hits != chain:
                    raise RuntimeError(f"lookup of a stored chain of {chain} chunks hit {hits}")
                samples.append(d)
            samples = samples[max(1, a.lookups // 10):]
            out[str(chain)] = {"p50": quantile(samples, 0.5), "p99": quantile(samples, 0.99), "samples": len(samples)}
            log(f"lookup of {chain} chunks: p50 {out[str(chain)]['p50']} ns, p99 {out[str(chain)]['p99']} ns")
        finally:
            s.close()
    return out


def run(a) -> dict:
    """Start the server, measure, stop it; return the report object."""
    import lmcache

    server = Server(a)
    try:
        ctx, rc, chunk = wait_ready(server, a.start_timeout)
        rc.close()
        ctx.term()
        if chunk != a.chunk_tokens:
            raise RuntimeError(f"server reports chunk size {chunk}, asked for {a.chunk_tokens}")
        lookups = measure_lookups(a, server.url())
        sizes = [measure_size(a, server.url(), size, blocks, k + 1) for k, (size, blocks) in enumerate(zip(a.sizes, a.blocks))]
        return {"version": getattr(lmcache, "__version__", "unknown"), "server_argv": server.argv[1:],
                "chunk_tokens": chunk, "lookup_rtt_ns": lookups, "sizes": sizes}
    except Exception:
        if server.proc.poll() is not None:
            raise RuntimeError(f"lmcache server exited with status {server.proc.returncode}:\n{server.tail()}")
        raise
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    """Entry point: parse, run, print one JSON object; see the module doc."""
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # runs Server.stop via finally
    try:
        rep = run(a)
    except BaseException as e:  # noqa: BLE001 - every failure is reported, exactly
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    print(json.dumps(rep), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
