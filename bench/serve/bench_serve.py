"""orbitkv serving benchmark: vLLM's OpenAI server under load, with and
without OrbitKV, through vLLM's own benchmark client. Method, subjects and
figures: bench/serve/README.md. ``--help`` lists the options.

Progress goes to stderr; ``--json`` prints exactly one JSON object on
stdout (``subjects`` -> subject -> workload -> figures, ``bounds``,
``targets``, ``conditions``); the same object is written to
``OUT_DIR/results.json`` either way, beside the servers' and clients' logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model as model_mod  # noqa: E402
import procs  # noqa: E402
import workloads  # noqa: E402
from procs import REPO, RoundRobin, Server, cpu_s, rss  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "python"))
from orbitkv.testing.manager import ManagerProcess, free_port  # noqa: E402

T0 = time.monotonic()
WORKLOADS = ("trace", "vllm-client", "no-reuse")
SERVED_NAME = "serve-bench"


def progress(msg: str) -> None:
    print(f"[bench-serve {time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Subject:
    """How one subject serves: servers (each on its own core), the Manager
    it uses (None, "ram": a RAM tier holding the working set, "ram-ssd": a
    RAM tier smaller than the working set over an SSD tier), the connector's
    kv_role and zero copy, or LMCache's connector."""

    name: str
    servers: int = 1
    manager: str | None = None
    kv_role: str = "kv_both"
    zero_copy: bool = True
    lmcache: bool = False
    what: str = ""


SUBJECTS = (
    Subject("vllm", what="vLLM alone, prefix caching on"),
    Subject("orbitkv-nohit", manager="ram", kv_role="kv_producer",
            what="OrbitKV configured, nothing ever hits: kv_role kv_producer publishes every block as "
                 "orbitkv-ram does and never looks up"),
    Subject("orbitkv-ram", manager="ram", what="OrbitKV, a RAM tier that holds the working set"),
    Subject("orbitkv-nohit-staging", manager="ram", kv_role="kv_producer", zero_copy=False,
            what="orbitkv-nohit with orbitkv.zero_copy=false (vLLM allocates its KV cache itself)"),
    Subject("orbitkv-ram-ssd", manager="ram-ssd",
            what="OrbitKV, a RAM tier smaller than the working set over an SSD tier "
                 "(orbitkv.wait_for_full_prefix=true)"),
    Subject("vllm-x2", servers=2, what="two vLLM servers, one core each, requests round-robin"),
    Subject("orbitkv-x2", servers=2, manager="ram",
            what="two servers sharing one Manager: a prefix computed by one is served to the other"),
    Subject("lmcache", lmcache=True,
            what="LMCache 0.5.6: vLLM's LMCacheMPConnector and lmcache server, a CPU DRAM L1 the size of "
                 "OrbitKV's RAM tier (LMCacheConnectorV1 does not run on a CPU engine: \"No supported cpu "
                 "connector found\")"),
)
#: Subjects whose servers run side by side and whose runs interleave, by
#: default (--side-by-side).
TRIO = ("vllm", "orbitkv-nohit", "orbitkv-ram")
#: Per-round ratios reported when both subjects run side by side: (subject, base).
PAIRS = (("orbitkv-nohit", "vllm"), ("orbitkv-ram", "vllm"), ("orbitkv-ram", "orbitkv-nohit"), ("lmcache", "vllm"),
         ("orbitkv-ram", "lmcache"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench-serve",
        description="vLLM's OpenAI server under load, with and without OrbitKV: every subject and workload in "
                    "one invocation, reported as ratios against vLLM alone and against OrbitKV configured "
                    "with no hits. Figures: bench/serve/README.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--markdown", metavar="RESULTS_JSON",
                   help="run nothing: print the tables of a results.json as Markdown (the README's figures)")
    p.add_argument("--out-dir", default=os.path.join(REPO, "build", "bench-serve"),
                   help="directory for results.json, the trace sample and every process's log")
    p.add_argument("--subjects", default=",".join(s.name for s in SUBJECTS),
                   help="comma-separated subjects to run (vllm always runs: every ratio is against it)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated workloads to run")
    p.add_argument("--side-by-side", default=",".join(TRIO),
                   help="one-server subjects whose servers run side by side, their runs interleaved in --rounds "
                        "rounds (vllm among them; the others run one after another, once)")
    p.add_argument("--shape", choices=sorted(model_mod.SHAPES), default="bench",
                   help="model shape (tiny: the harness smoke test; its figures mean nothing)")
    p.add_argument("--block-tokens", type=int, default=64, help="vLLM's --block-size (tokens per KV block)")
    p.add_argument("--gpu-blocks", type=int, default=48,
                   help="vLLM's KV space in blocks (--num-gpu-blocks-override): well below the working set")
    p.add_argument("--max-model-len", type=int, default=2048,
                   help="vLLM's --max-model-len (tokens; at most (--gpu-blocks - 1) x --block-tokens: vLLM keeps "
                        "one block back)")
    p.add_argument("--concurrency", type=int, default=4, help="closed-loop --max-concurrency")
    p.add_argument("--open-load", type=float, default=0.7,
                   help="open-loop request rate as a fraction of vLLM alone's closed-loop throughput")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds of vllm, orbitkv-nohit and orbitkv-ram: each round runs every workload's "
                        "closed loop (no-reuse's open loop too; the others' open loop runs in the first round only); "
                        "the median of the per-round ratios is reported")
    p.add_argument("--trace", default=os.path.join(REPO, "bench", "traces", "mooncake-conversation.jsonl.gz"),
                   help="Mooncake trace (jsonl, plain or gzip)")
    p.add_argument("--trace-blocks", type=int, default=240,
                   help="sample whole conversations until they hold this many distinct blocks")
    p.add_argument("--trace-order", choices=workloads.ORDERS, default="turns",
                   help="turns: conversations interleaved turn by turn (a turn follows every other conversation's "
                        "turn of its round, as turns are far apart in the whole trace); trace: the trace's own "
                        "order, where a sample's turns follow each other closely (bench/serve/README.md)")
    p.add_argument("--prefixes", type=int, default=32, help="vllm-client: distinct prefixes")
    p.add_argument("--prefix-len", type=int, default=512, help="vllm-client: prefix tokens")
    p.add_argument("--client-requests", type=int, default=64, help="vllm-client: requests")
    p.add_argument("--noreuse-requests", type=int, default=24, help="no-reuse: requests per run")
    p.add_argument("--noreuse-len", type=int, default=512, help="no-reuse: prompt tokens")
    p.add_argument("--ram-capacity", default="512MiB", help="OrbitKV RAM tier of the ram subjects (size)")
    p.add_argument("--small-ram", default="4MiB", help="orbitkv-ram-ssd's RAM tier (size, below the working set)")
    p.add_argument("--ssd-capacity", default="512MiB", help="orbitkv-ram-ssd's SSD tier (size)")
    p.add_argument("--load-timeout-s", type=float, default=2.0, help="the connector's orbitkv.load_timeout_s")
    p.add_argument("--start-timeout-s", type=float, default=600, help="how long a vLLM server may take to start")
    p.add_argument("--run-timeout-s", type=float, default=900,
                   help="how long one client run may take (seconds); past it the run is an error of its subject")
    p.add_argument("--omp-bind", choices=("pinned", "auto"), default="pinned",
                   help="pinned: each server's Worker on its own core (VLLM_CPU_OMP_THREADS_BIND=1, or 0 and 1 for "
                        "two servers); auto: vLLM's own binding, which on this 2-core machine gives a server with "
                        "a connector both cores and one without a single core (docs/adapters.md)")
    p.add_argument("--stall-s", type=float, default=10,
                   help="the stall check: SIGSTOP orbitkv-ram's Manager this long (seconds) in the middle of a "
                        "closed-loop vllm-client run, then SIGCONT; 0 skips it")
    p.add_argument("--seed", type=int, default=1, help="seed of the trace sample and the client's prompts")
    a = p.parse_args(argv)
    a.subjects = [s for s in a.subjects.split(",") if s]
    a.workloads = [w for w in a.workloads.split(",") if w]
    known = {s.name for s in SUBJECTS}
    for s in a.subjects:
        if s not in known:
            p.error(f"--subjects: unknown subject {s!r} (known: {', '.join(sorted(known))})")
    for w in a.workloads:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    if "vllm" not in a.subjects:
        a.subjects.insert(0, "vllm")
    a.side_by_side = [s for s in a.side_by_side.split(",") if s]
    for s in a.side_by_side:
        if s not in known or _subject(s).servers != 1:
            p.error(f"--side-by-side: {s!r} is not a one-server subject")
    if "vllm" not in a.side_by_side:
        p.error("--side-by-side: want vllm among them (every open loop's rate is a fraction of its capacity)")
    if "orbitkv-x2" in a.subjects and "vllm-x2" not in a.subjects:
        a.subjects.append("vllm-x2")
    for flag, v in (("--ram-capacity", a.ram_capacity), ("--small-ram", a.small_ram), ("--ssd-capacity", a.ssd_capacity)):
        try:
            _size_bytes(v)
        except ValueError:
            p.error(f"{flag} {v!r}: want a size above 0: bytes, or a number with KiB, MiB, GiB or TiB")
    for flag in ("rounds", "block_tokens", "gpu_blocks", "max_model_len", "concurrency", "trace_blocks", "prefixes",
                 "prefix_len", "client_requests", "noreuse_requests", "noreuse_len"):
        if getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} {getattr(a, flag)}: want >= 1")
    for flag in ("open_load", "load_timeout_s", "start_timeout_s", "run_timeout_s"):
        v = getattr(a, flag)
        if not v > 0 or v == float("inf"):   # also refuses nan
            p.error(f"--{flag.replace('_', '-')} {v}: want a number above 0")
    if not a.stall_s >= 0:
        p.error(f"--stall-s {a.stall_s}: want >= 0 (0 skips the stall check)")
    if len(set(a.side_by_side)) != len(a.side_by_side):
        p.error(f"--side-by-side {','.join(a.side_by_side)}: a subject named twice")
    if a.client_requests % a.prefixes:
        p.error(f"--client-requests {a.client_requests}: want a multiple of --prefixes {a.prefixes} (vLLM's "
                "prefix_repetition dataset sends prefixes x (requests // prefixes))")
    if a.max_model_len > (a.gpu_blocks - 1) * a.block_tokens:
        p.error(f"--max-model-len {a.max_model_len}: above (--gpu-blocks {a.gpu_blocks} - 1) x --block-tokens "
                f"{a.block_tokens} = {(a.gpu_blocks - 1) * a.block_tokens}; vLLM would refuse to start")
    return a


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        os.makedirs(os.path.join(a.out_dir, "logs"), exist_ok=True)
        self.model = model_mod.write(os.path.join(REPO, "build", "models", f"serve-{a.shape}"), a.shape)
        self.manager_bin = os.path.join(REPO, "bin", "orbitkv-manager")
        self.orbitkvctl = os.path.join(REPO, "bin", "orbitkvctl")
        self.workloads = self._workloads()
        self.results: dict[str, dict[str, Any]] = {}
        self.capacity: dict[str, float] = {}   # "vllm"/"vllm-x2" + workload -> closed-loop req/s
        self.errors: dict[str, str] = {}
        self.run_no = 0

    # ---- workloads ----

    def _workloads(self) -> dict[str, workloads.Workload]:
        a = self.a
        out = {}
        if "trace" in a.workloads:
            out["trace"] = workloads.trace(a.trace, os.path.join(a.out_dir, "trace-sample.jsonl"),
                                           chunk=a.block_tokens, max_prompt=a.max_model_len - 64,
                                           min_distinct_blocks=a.trace_blocks, max_output=32, seed=a.seed,
                                           engine_blocks=a.gpu_blocks, order=a.trace_order)
        if "vllm-client" in a.workloads:
            out["vllm-client"] = workloads.prefix_repetition(
                prefixes=a.prefixes, prefix_len=a.prefix_len, suffix_len=max(1, a.block_tokens // 2), output_len=8,
                requests=a.client_requests, block=a.block_tokens)
        if "no-reuse" in a.workloads:
            out["no-reuse"] = workloads.no_reuse(input_len=a.noreuse_len, output_len=8, requests=a.noreuse_requests)
        for w in out.values():
            best = w.best_ratios()
            progress(f"workload {w.name}: {w.requests} requests, {w.prompt_tokens} prompt tokens, "
                     f"{w.servable_tokens} servable ({w.servable_fraction:.1%}), {w.distinct_blocks} distinct "
                     f"blocks (vLLM holds {a.gpu_blocks}); best a cache allows: TTFT x{best['ttft']}, "
                     f"throughput x{best['throughput']}")
            over = w.best_ratios_over_engine()
            if over is not None:
                progress(f"workload {w.name}: an LRU cache of vLLM's {a.gpu_blocks} blocks would serve "
                         f"{w.notes['engine_lru_servable_tokens']} of the servable tokens; best against vLLM "
                         f"alone: TTFT x{over['ttft']}, throughput x{over['throughput']}")
        return out

    # ---- processes ----

    def _manager(self, kind: str, tag: str) -> ManagerProcess:
        d = tempfile.mkdtemp(prefix=f"okv-{tag}-", dir="/tmp")
        extra: tuple[str, ...] = ()
        ram = self.a.ram_capacity
        if kind == "ram-ssd":
            ram = self.a.small_ram
            extra += ("--ssd-dir", os.path.join(d, "ssd"), "--ssd-create-dir", "--ssd-capacity", self.a.ssd_capacity)
        m = ManagerProcess(self.manager_bin, os.path.join(d, "m.sock"), free_port(), ram=ram, extra=extra)
        m.dir = d  # type: ignore[attr-defined]
        return m

    def _ktc(self, s: Subject, mgr: Any) -> dict[str, Any] | None:
        if isinstance(mgr, procs.LMCacheServer):
            return mgr.connector_config()
        if mgr is None:
            return None
        sock = mgr.sock
        if sock is None:
            return None
        extra = {"orbitkv.bootstrap_socket": sock, "orbitkv.load_timeout_s": self.a.load_timeout_s}
        if not s.zero_copy:
            extra["orbitkv.zero_copy"] = False
        if s.manager == "ram-ssd":
            extra["orbitkv.wait_for_full_prefix"] = True
        return {"kv_connector": "OrbitKVConnector", "kv_connector_module_path": "orbitkv.vllm.connector",
                "kv_role": s.kv_role, "kv_load_failure_policy": "recompute", "kv_connector_extra_config": extra}

    def start(self, s: Subject, cores: list[str]) -> dict[str, Any]:
        """Start subject s: its Manager (if any) and servers; returns its handle."""
        a = self.a
        if s.lmcache:
            mgr = procs.LMCacheServer(os.path.join(os.path.dirname(sys.executable), "lmcache"),
                                      _size_bytes(a.ram_capacity), a.block_tokens,
                                      os.path.join(a.out_dir, "logs", f"{s.name}-server.log"), free_port)
            try:
                mgr.wait_ready(a.start_timeout_s)
            except Exception:
                mgr.stop()
                raise
        else:
            mgr = self._manager(s.manager, s.name) if s.manager else None
        ktc = self._ktc(s, mgr)
        args = ["--max-model-len", str(a.max_model_len), "--enable-prefix-caching", "--block-size",
                str(a.block_tokens), "--num-gpu-blocks-override", str(a.gpu_blocks), "--max-num-seqs", "8",
                "--max-num-batched-tokens", "2048", "--dtype", "bfloat16", "--seed", "0"]
        if ktc:
            args += ["--kv-transfer-config", json.dumps(ktc)]
        env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
        if s.lmcache:
            env["LMCACHE_DISABLE_BANNER"] = "1"
        servers = []
        for i in range(s.servers):
            port = free_port()
            core = cores[i % len(cores)] if a.omp_bind == "pinned" else "auto"
            servers.append(Server(f"{s.name}-{i}", port, core, self.model, SERVED_NAME, args, env,
                                  os.path.join(a.out_dir, "logs", f"{s.name}-{i}.log")))
        where = f"core(s) {','.join(cores[:len(servers)])}" if a.omp_bind == "pinned" else "vLLM's auto binding"
        progress(f"{s.name}: starting {len(servers)} server(s) on {where}{(' and lmcache server' if s.lmcache else ' and a Manager') if mgr else ''}")
        return {"subject": s, "manager": mgr, "servers": servers, "proxy": None}

    def ready(self, h: dict[str, Any]) -> None:
        """Wait until h's servers answer (``Server.wait_ready``); put the
        round-robin proxy in front of two."""
        for srv in h["servers"]:
            srv.wait_ready(self.a.start_timeout_s)
        if len(h["servers"]) > 1:
            h["proxy"] = RoundRobin(free_port(), [srv.url for srv in h["servers"]])
        progress(f"{h['subject'].name}: ready")

    def stop(self, h: dict[str, Any]) -> None:
        for srv in h["servers"]:
            srv.stop()
        if h["manager"] is not None:
            h["manager"].stop()
            if h["manager"].dir:
                shutil.rmtree(h["manager"].dir, ignore_errors=True)

    # ---- one run ----

    def _reset(self, h: dict[str, Any]) -> None:
        s: Subject = h["subject"]
        for srv in h["servers"]:
            srv.reset_prefix_cache(external=s.lmcache)
        if isinstance(h["manager"], procs.LMCacheServer):
            h["manager"].clear()
        elif h["manager"] is not None:
            r = subprocess.run([self.orbitkvctl, "--socket", h["manager"].sock, "flush", "--all", "--yes"],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                raise RuntimeError(f"orbitkvctl flush --all: exit {r.returncode}: {r.stderr.strip()}")

    def _snapshot(self, h: dict[str, Any]) -> dict[str, Any]:
        m: dict[str, float] = {}
        for srv in h["servers"]:
            for k, v in srv.metrics().items():
                m[k] = m.get(k, 0.0) + v
        eng = [p for srv in h["servers"] for p in srv.engine_procs()]
        mp = [procs.psutil.Process(h["manager"].proc.pid)] if h["manager"] is not None else []
        return {"metrics": m, "engine_cpu_s": cpu_s(eng), "manager_cpu_s": cpu_s(mp), "manager_rss_bytes": rss(mp)}

    def run(self, h: dict[str, Any], w: workloads.Workload, mode: str, rate: float | None, seed: int) -> dict:
        """One client run of workload w on h: closed loop (``rate`` None) or
        open loop at ``rate`` req/s; caches reset first."""
        a = self.a
        s: Subject = h["subject"]
        self.run_no += 1
        url = h["proxy"].url if h["proxy"] else h["servers"][0].url
        tag = f"{self.run_no:03d}-{s.name}-{w.name}-{mode}"
        self._reset(h)
        before = self._snapshot(h)
        cmd = [sys.executable, os.path.join(REPO, "bench", "serve", "client.py"), "--backend", "vllm",
               "--base-url", url, "--endpoint", "/v1/completions", "--model", SERVED_NAME, "--tokenizer", self.model,
               *w.client_args, "--seed", str(seed), "--percentile-metrics", "ttft,tpot,e2el",
               "--metric-percentiles", "50,99", "--disable-tqdm", "--save-result", "--result-dir",
               os.path.join(a.out_dir, "runs"), "--result-filename", tag + ".json"]
        cmd += ["--max-concurrency", str(a.concurrency), "--request-rate", "inf"] if rate is None else \
            ["--max-concurrency", str(4 * a.concurrency), "--request-rate", f"{rate:.4f}"]
        t = time.monotonic()
        with open(os.path.join(a.out_dir, "logs", tag + ".client.log"), "w") as logf:
            try:
                r = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=REPO,
                                   env=dict(os.environ, PYTHONHASHSEED="0"), timeout=a.run_timeout_s)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"client run {tag} took over --run-timeout-s {a.run_timeout_s:g} s; see "
                                   f"{logf.name}") from None
        if r.returncode != 0:
            raise RuntimeError(f"client run {tag} exited {r.returncode}; see {logf.name}:\n{procs.tail(logf.name)}")
        time.sleep(1.5)   # the engine's last stats interval reaches /metrics
        after = self._snapshot(h)
        with open(os.path.join(a.out_dir, "runs", tag + ".json")) as f:
            res = json.load(f)
        d = {k: after["metrics"].get(k, 0.0) - before["metrics"].get(k, 0.0) for k in after["metrics"]}
        fig = {
            "ttft_p50_s": res.get("p50_ttft_ms", res.get("median_ttft_ms", 0)) / 1e3,
            "ttft_p99_s": res.get("p99_ttft_ms", 0) / 1e3,
            "tpot_p50_s": res.get("p50_tpot_ms", res.get("median_tpot_ms", 0)) / 1e3,
            "throughput_rps": res.get("request_throughput", 0.0),
            "output_tok_s": res.get("output_throughput", 0.0),
            "completed": res.get("completed", 0),
            "failed": res.get("failed", 0) or (w.requests - res.get("completed", 0)),
            "duration_s": res.get("duration", time.monotonic() - t),
            "engine_hit_tokens": int(d.get("vllm:prefix_cache_hits_total", 0)),
            "connector_hit_tokens": int(d.get("vllm:external_prefix_cache_hits_total", 0)),
            "preemptions": int(d.get("vllm:num_preemptions_total", 0)),
            "manager_cpu_s": round(after["manager_cpu_s"] - before["manager_cpu_s"], 3),
            "manager_rss_bytes": after["manager_rss_bytes"],
            "engine_cpu_s": round(after["engine_cpu_s"] - before["engine_cpu_s"], 3),
            "connector_sched_s": round(d.get("vllm:orbitkv_scheduler_seconds_total", 0.0), 4),
            "connector_sched_calls": int(d.get("vllm:orbitkv_scheduler_calls_total", 0)),
            "restored_blocks": int(d.get("vllm:orbitkv_restored_blocks_total", 0)),
            "published_blocks": int(d.get("vllm:orbitkv_published_blocks_total", 0)),
            "load_error_blocks": int(d.get("vllm:orbitkv_load_error_blocks_total", 0)),
            # vLLM's per-request phase times, summed over requests (they overlap
            # when requests run together): where a request's time goes
            "prefill_s_sum": round(d.get("vllm:request_prefill_time_seconds_sum", 0.0), 3),
            "decode_s_sum": round(d.get("vllm:request_decode_time_seconds_sum", 0.0), 3),
            "queue_s_sum": round(d.get("vllm:request_queue_time_seconds_sum", 0.0), 3),
            "deferred_lookups": int(d.get("vllm:orbitkv_deferred_lookups_total", 0)),
            "refused_lookups": int(d.get("vllm:orbitkv_refused_lookups_total", 0)),
        }
        bound = self.a.load_timeout_s + 0.5
        steps, over, longest = _hist(d, "vllm:orbitkv_step_block_seconds", bound)
        fig.update(steps_held=steps, steps_held_over_bound=over, step_block_max_le_s=longest)
        steps, over, longest = _hist(d, "vllm:orbitkv_load_wait_seconds", bound)
        fig.update(load_wait_steps=steps, load_wait_over_bound=over, load_wait_max_le_s=longest)
        if rate is not None:
            fig["request_rate"] = round(rate, 4)
        progress(f"{tag}: {fig['completed']}/{w.requests} done, {fig['throughput_rps']:.3f} req/s, TTFT p50 "
                 f"{fig['ttft_p50_s']:.3f} s p99 {fig['ttft_p99_s']:.3f} s, hits engine {fig['engine_hit_tokens']} "
                 f"connector {fig['connector_hit_tokens']} tokens, engine CPU {fig['engine_cpu_s']:.1f} s")
        return fig

    # ---- the plan ----

    def _record(self, subject: str, workload: str, closed: dict, opened: dict, rounds: dict | None = None) -> None:
        fig = {k: closed[k] for k in ("throughput_rps", "output_tok_s", "engine_hit_tokens", "connector_hit_tokens",
                                      "preemptions", "manager_cpu_s", "manager_rss_bytes", "engine_cpu_s",
                                      "connector_sched_s", "connector_sched_calls", "restored_blocks",
                                      "published_blocks", "load_error_blocks", "prefill_s_sum", "decode_s_sum",
                                      "queue_s_sum", "deferred_lookups",
                                      "refused_lookups", "completed", "failed")}
        fig.update({k: opened[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s")})
        fig["closed"], fig["open"] = closed, opened
        if rounds:
            fig["rounds"] = rounds
        self.results.setdefault(subject, {})[workload] = fig

    def _open_every_round(self, w: str) -> bool:
        """Whether w's open loop runs every round (no-reuse: its targets are
        within 10% of vLLM's TTFT, below one run's noise here) or once."""
        return w == "no-reuse"

    def run_trio(self) -> None:
        names = [n for n in self.a.side_by_side if n in self.a.subjects]
        hs = []
        try:
            for n in names:   # started together: their start-up is mostly compiling, one core each
                hs.append(self.start(_subject(n), ["1"]))
            for h in hs:
                self.ready(h)
            for wname, w in self.workloads.items():
                closed: dict[str, list[dict]] = {n: [] for n in names}
                opened: dict[str, list[dict]] = {n: [] for n in names}
                for r in range(self.a.rounds):
                    seed = self.a.seed + 1000 * r
                    order = hs[r % len(hs):] + hs[:r % len(hs)] if r else hs
                    for h in order:
                        closed[h["subject"].name].append(self.run(h, w, "closed", None, seed))
                    self.capacity.setdefault(f"vllm/{wname}", closed["vllm"][0]["throughput_rps"])
                    if r and not self._open_every_round(wname):
                        continue
                    for h in order:
                        opened[h["subject"].name].append(
                            self.run(h, w, "open", self.a.open_load * self.capacity[f"vllm/{wname}"], seed + 1))
                for n in names:
                    self._record(n, wname, _median_run(closed[n]), _median_run(opened[n]),
                                 {"closed": closed[n], "open": opened[n]} if self.a.rounds > 1 else None)
                self.pair_ratios[wname] = _pair_ratios(closed, opened)
            ram = next((h for h in hs if h["subject"].name == "orbitkv-ram"), None)
            if ram is not None and self.a.stall_s > 0 and "vllm-client" in self.workloads:
                def stall() -> None:
                    self.stall = self.run_stall(ram, self.workloads["vllm-client"])
                self.guarded("stall", stall)
        finally:
            for h in hs:
                self.stop(h)

    def run_stall(self, h: dict[str, Any], w: workloads.Workload) -> dict[str, Any]:
        """The stall check: a closed-loop run of w on h whose Manager is
        SIGSTOPped for --stall-s seconds, from a quarter of h's own
        closed-loop duration after the server started running requests,
        then a second run after SIGCONT. Checks:
        no request fails, no engine step is held by the connector past
        load_timeout_s + 0.5 s, and the second run is served from OrbitKV
        again (the sessions reconnected)."""
        pid = h["manager"].proc.pid
        own = self.results.get(h["subject"].name, {}).get(w.name)
        start = 0.25 * own["closed"]["duration_s"] if own else 5.0
        log: list[str] = []
        srv = h["servers"][0]

        def stop_and_continue() -> None:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 120:   # the client takes seconds to start sending
                try:
                    if srv.metrics().get("vllm:num_requests_running", 0) > 0:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            time.sleep(start)
            os.kill(pid, signal.SIGSTOP)
            log.append(f"SIGSTOP {time.monotonic() - t0:.1f} s after the run started, {start:.1f} s into its traffic")
            time.sleep(self.a.stall_s)
            os.kill(pid, signal.SIGCONT)
            log.append(f"SIGCONT {self.a.stall_s:g} s later")

        progress(f"stall check: the Manager of {h['subject'].name} stopped for {self.a.stall_s:.0f} s from "
                 f"{start:.1f} s into the traffic of a closed-loop {w.name} run")
        t = threading.Thread(target=stop_and_continue, daemon=True)
        t.start()
        try:
            during = self.run(h, w, "stall", None, self.a.seed + 7)
        finally:
            t.join()
            os.kill(pid, signal.SIGCONT)
        after = self.run(h, w, "after-stall", None, self.a.seed + 8)
        bound = self.a.load_timeout_s + 0.5
        checks = [
            {"name": "no request fails while the Manager is stopped", "ok": during["failed"] == 0
             and during["completed"] == w.requests, "figure": f"{during['completed']}/{w.requests} completed"},
            {"name": f"no engine step held by one connector side (scheduler or worker) past {bound:g} s",
             "ok": during["steps_held_over_bound"] == 0,
             "figure": f"{during['steps_held_over_bound']} steps over, longest <= {during['step_block_max_le_s']} s"},
            {"name": "served from OrbitKV again after SIGCONT", "ok": after["connector_hit_tokens"] > 0
             and after["failed"] == 0, "figure": f"{after['connector_hit_tokens']} connector hit tokens"},
        ]
        checks.append({"name": "the stop fell inside the run's traffic", "ok": during["connector_hit_tokens"]
                       < after["connector_hit_tokens"] or during["load_error_blocks"] > 0,
                       "figure": f"{during['connector_hit_tokens']} connector hit tokens during, "
                                 f"{after['connector_hit_tokens']} after; {'; '.join(log)}"})
        for c in checks:
            progress(f"stall check: {'ok' if c['ok'] else 'FAILED'}: {c['name']} ({c['figure']})")
        return {"stall_s": self.a.stall_s, "events": log, "during": during, "after": after, "checks": checks}

    def guarded(self, what: str, fn: Any, *args: Any) -> None:
        """fn(*args); any exception is recorded in ``errors[what]`` (the
        report is still written) and logged."""
        try:
            fn(*args)
        except Exception as e:   # noqa: BLE001 - every failure is reported, none loses the other figures
            self.errors[what] = f"{type(e).__name__}: {e}"
            progress(f"{what}: failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    def run_single(self, name: str) -> None:
        s = _subject(name)
        h = None
        try:
            h = self.start(s, ["0", "1"] if s.servers > 1 else ["1"])
            self.ready(h)
        except Exception as e:   # noqa: BLE001 - a subject that cannot start (a missing binary, too) is reported
            if h is not None:
                self.stop(h)
            self.errors[name] = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
            progress(f"{name}: did not start: {str(e).splitlines()[0]}")
            return
        try:
            for wname, w in self.workloads.items():
                key = f"{'vllm-x2' if s.servers > 1 else 'vllm'}/{wname}"
                c = self.run(h, w, "closed", None, self.a.seed)
                if name == "vllm-x2":
                    self.capacity[key] = c["throughput_rps"]
                o = self.run(h, w, "open", self.a.open_load * self.capacity[key], self.a.seed + 1)
                self._record(name, wname, c, o)
        except Exception as e:   # noqa: BLE001 - recorded; the other subjects still run
            self.errors[name] = f"{type(e).__name__}: {e}"
            progress(f"{name}: failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        finally:
            self.stop(h)

    def main(self) -> dict[str, Any]:
        self.pair_ratios: dict[str, dict[str, Any]] = {}
        self.stall: dict[str, Any] = {}
        try:
            self.guarded("trio", self.run_trio)
            for s in SUBJECTS:
                if s.name in self.a.subjects and s.name not in self.a.side_by_side:
                    self.run_single(s.name)
        finally:
            out = self.report()
        return out

    # ---- report ----

    def report(self) -> dict[str, Any]:
        a = self.a
        c = model_mod.SHAPES[a.shape]
        bounds = {w.name: {"servable_prompt_tokens": w.servable_tokens, "prompt_tokens": w.prompt_tokens,
                           "servable_fraction": round(w.servable_fraction, 4),
                           "cross_server_servable_tokens": w.cross_servable_tokens,
                           "distinct_blocks": w.distinct_blocks, "requests": w.requests,
                           "best_ratios": w.best_ratios(), "best_ratios_over_engine": w.best_ratios_over_engine(),
                           **w.notes} for w in self.workloads.values()}
        out = {
            "subjects": self.results,
            "bounds": bounds,
            "targets": targets(self.results, self.workloads, self.pair_ratios),
            "pair_ratios": self.pair_ratios,
            "stall": self.stall,
            "errors": self.errors,
            "conditions": {
                "cpu": _cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
                "model": dict(c, shape=a.shape, kv_bytes_per_token=model_mod.kv_bytes_per_token(c),
                              kv_kib_per_prefill_gflop=round(model_mod.kv_bytes_per_gflop(c) / 1024, 2)),
                "block_tokens": a.block_tokens, "gpu_blocks": a.gpu_blocks, "max_model_len": a.max_model_len,
                "concurrency": a.concurrency, "open_load": a.open_load, "rounds": a.rounds, "omp_bind": a.omp_bind,
                "side_by_side": a.side_by_side,
                "ram_capacity": a.ram_capacity, "small_ram": a.small_ram, "ssd_capacity": a.ssd_capacity,
                "load_timeout_s": a.load_timeout_s, "capacity_rps": self.capacity,
                "subjects": {s.name: s.what for s in SUBJECTS if s.name in a.subjects},
                "wall_s": round(time.monotonic() - T0, 1),
            },
        }
        with open(os.path.join(a.out_dir, "results.json"), "w") as f:
            json.dump(out, f, indent=1)
        return out


def _hist(d: dict[str, float], name: str, bound_s: float) -> tuple[int, int, float | None]:
    """From the deltas of histogram ``name`` (the connector's per-step
    seconds, ``orbitkv.vllm.stats``): (observations, observations past
    the largest bucket edge at or below ``bound_s`` (never fewer than past
    ``bound_s`` itself), the smallest bucket edge that holds every
    observation: an upper bound of the longest; None past the last edge)."""
    count = d.get(name + "_count", 0)
    edges = sorted((float(k.split("le=")[1].rstrip("}")), v) for k, v in d.items()
                   if k.startswith(name + "_bucket{le="))
    within = max((v for e, v in edges if e <= bound_s), default=0) if edges else count
    longest = next((e for e, v in edges if v >= count), None) if count else 0.0
    if longest == float("inf"):
        longest = None
    return int(count), int(count - within), longest


def _size_bytes(s: str) -> int:
    """A size above 0: bytes, or a number with a binary unit (``512MiB``,
    ``1.5GiB``; the unit's case is free). Raises ``ValueError``."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]iB|B)?", s.strip(), re.IGNORECASE)
    if not m:
        raise ValueError(s)
    mult = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}[(m[2] or "").upper()]
    n = int(float(m[1]) * mult)
    if n <= 0:
        raise ValueError(s)
    return n


def _subject(name: str) -> Subject:
    return next(s for s in SUBJECTS if s.name == name)


def _pair_ratios(closed: dict[str, list[dict]], opened: dict[str, list[dict]]) -> dict[str, Any]:
    """Per-round ratios of one workload's interleaved runs: each subject
    against vllm and orbitkv-ram against orbitkv-nohit in the same round
    (throughput from the closed loops, TTFT p50 from the open loops), and
    their medians."""
    out = {}

    def whole(r: dict, k: str) -> bool:   # a run with a failed request (or none done) gives no ratio
        return not r["failed"] and r["completed"] > 0 and r[k] > 0

    for subj, base in PAIRS:
        if subj not in closed or base not in closed:
            continue
        tp = [s["throughput_rps"] / b["throughput_rps"] for s, b in zip(closed[subj], closed[base])
              if whole(s, "throughput_rps") and whole(b, "throughput_rps")]
        tt = [s["ttft_p50_s"] / b["ttft_p50_s"] for s, b in zip(opened[subj], opened[base])
              if whole(s, "ttft_p50_s") and whole(b, "ttft_p50_s")]
        if not tp or not tt:
            continue
        out[f"{subj}/{base}"] = {"throughput": [round(x, 3) for x in tp], "ttft_p50": [round(x, 3) for x in tt],
                                 "throughput_median": round(statistics.median(tp), 3),
                                 "ttft_p50_median": round(statistics.median(tt), 3)}
    return out


def _median_run(runs: list[dict]) -> dict:
    """The run of median throughput (closed) or TTFT p50 (open), whole."""
    if len(runs) == 1:
        return runs[0]
    key = "ttft_p50_s" if "request_rate" in runs[0] else "throughput_rps"   # open loop, closed loop
    return sorted(runs, key=lambda r: r[key])[len(runs) // 2]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _ratio(x: float, y: float) -> float | None:
    return round(x / y, 3) if y else None


def targets(res: dict, wls: dict, pairs: dict) -> list[dict[str, Any]]:
    """The targets (bench/serve/README.md), each {name, want, ratio, met};
    ratio and met None where a figure was not measured."""
    out: list[dict[str, Any]] = []

    def add(name: str, want: str, ratio: float | None, ok) -> None:
        # met None: not measured in this invocation (a subject or workload not run)
        out.append({"name": name, "want": want, "ratio": ratio, "met": None if ratio is None else bool(ok(ratio))})

    def fig(s: str, w: str, k: str) -> float | None:
        return res.get(s, {}).get(w, {}).get(k)

    def paired(w: str, key: str, base: str, what: str) -> float | None:
        p = pairs.get(w, {}).get(f"{key}/{base}")
        return p and p[what]

    tr = wls.get("trace")
    if tr is not None:
        for base in ("vllm", "orbitkv-nohit"):
            add(f"trace: orbitkv-ram TTFT p50 / {base}", "<= 0.6", paired("trace", "orbitkv-ram", base, "ttft_p50_median"),
                lambda r: r <= 0.6)
            add(f"trace: orbitkv-ram throughput / {base} (median of rounds)", ">= 1.25",
                paired("trace", "orbitkv-ram", base, "throughput_median"), lambda r: r >= 1.25)
        hits, eng = fig("orbitkv-x2", "trace", "connector_hit_tokens"), fig("orbitkv-x2", "trace", "engine_hit_tokens")
        left = tr.servable_tokens - (eng or 0)
        add("trace: orbitkv-x2 connector hits / (servable - engine hits), which holds every cross-server token",
            ">= 0.9", _ratio(hits, left) if hits is not None and left > 0 else None, lambda r: r >= 0.9)
        x, y = fig("orbitkv-x2", "trace", "ttft_p50_s"), fig("vllm-x2", "trace", "ttft_p50_s")
        out.append({"name": "trace: orbitkv-x2 TTFT p50 / vllm-x2 (reported, no target)", "want": "",
                    "ratio": _ratio(x, y) if x and y else None, "met": None})
    for key, base in (("orbitkv-ram/vllm", "vllm"), ("orbitkv-nohit/vllm", "vllm"),
                      ("orbitkv-ram/orbitkv-nohit", "orbitkv-nohit")):
        p = pairs.get("no-reuse", {}).get(key)
        add(f"no-reuse: {key} throughput (median of rounds)", ">= 0.95", p and p["throughput_median"],
            lambda r: r >= 0.95)
        add(f"no-reuse: {key} TTFT p50 (median of rounds)", "<= 1.10", p and p["ttft_p50_median"],
            lambda r: r <= 1.10)
    for wname in ("trace", "vllm-client"):
        w = wls.get(wname)
        if w is None:
            continue
        for subj in ("orbitkv-ram", "orbitkv-ram-ssd"):
            hits, eng = fig(subj, wname, "connector_hit_tokens"), fig(subj, wname, "engine_hit_tokens")
            left = w.servable_tokens - (eng or 0)
            add(f"{wname}: {subj} connector hits / (servable - engine hits)", ">= 0.95",
                _ratio(hits, left) if hits is not None and left > 0 else None, lambda r: r >= 0.95)
    x, y = fig("orbitkv-ram", "trace", "connector_sched_s"), fig("orbitkv-ram", "trace", "engine_cpu_s")
    add("trace: orbitkv-ram connector_sched_s / engine_cpu_s", "<= 0.02", _ratio(x, y) if x is not None and y else None,
        lambda r: r <= 0.02)
    return out


def table(out: dict[str, Any]) -> str:
    """The report as text: one line per subject and workload, then the targets."""
    lines = [f"{'subject':<22} {'workload':<12} {'req/s':>7} {'x vllm':>7} {'TTFT p50':>9} {'x vllm':>7} "
             f"{'TTFT p99':>9} {'TPOT p50':>9} {'engine hit':>10} {'conn hit':>9} {'preempt':>7} "
             f"{'eng CPU s':>9} {'mgr CPU s':>9} {'sched s':>8}"]
    res = out["subjects"]
    for s, ws in res.items():
        for w, f in ws.items():
            base = res.get("vllm-x2" if s.endswith("x2") else "vllm", {}).get(w, {})
            lines.append(
                f"{s:<22} {w:<12} {f['throughput_rps']:7.3f} {_fmt(_ratio(f['throughput_rps'], base.get('throughput_rps', 0)))} "
                f"{f['ttft_p50_s']:9.3f} {_fmt(_ratio(f['ttft_p50_s'], base.get('ttft_p50_s', 0)))} "
                f"{f['ttft_p99_s']:9.3f} {f['tpot_p50_s']:9.4f} {f['engine_hit_tokens']:10d} "
                f"{f['connector_hit_tokens']:9d} {f['preemptions']:7d} {f['engine_cpu_s']:9.1f} "
                f"{f['manager_cpu_s']:9.2f} {f['connector_sched_s']:8.3f}")
    lines.append("")
    for t in out["targets"]:
        met = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(f"{met:<7} {t['name']}: {t['ratio']} (want {t['want']})")
    for c in (out.get("stall") or {}).get("checks", ()):
        lines.append(f"{'ok' if c['ok'] else 'FAILED':<7} stall: {c['name']} ({c['figure']})")
    for s, e in out["errors"].items():
        lines.append(f"error   {s}: {e.splitlines()[0]}")
    return "\n".join(lines)


def markdown(out: dict[str, Any]) -> str:
    """The report as the README's Markdown tables."""
    res = out["subjects"]
    rows = ["| subject | workload | req/s | x vllm | x nohit | TTFT p50 s | x vllm | x nohit | TTFT p99 s | "
            "TPOT p50 ms | engine hit tok | OrbitKV hit tok | preempt | engine CPU s | Manager CPU s | "
            "sched s | Manager RSS MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s, ws in res.items():
        for w, f in ws.items():
            x2 = s.endswith("x2")
            base = res.get("vllm-x2" if x2 else "vllm", {}).get(w, {})
            nohit = {} if x2 else res.get("orbitkv-nohit", {}).get(w, {})

            def r(k: str, b: dict) -> str:
                v = _ratio(f[k], b.get(k, 0)) if b else None
                return "" if v is None else f"{v:.2f}"
            rows.append(f"| {s} | {w} | {f['throughput_rps']:.3f} | {r('throughput_rps', base)} | "
                        f"{r('throughput_rps', nohit)} | {f['ttft_p50_s']:.3f} | {r('ttft_p50_s', base)} | "
                        f"{r('ttft_p50_s', nohit)} | {f['ttft_p99_s']:.3f} | {f['tpot_p50_s'] * 1e3:.1f} | "
                        f"{f['engine_hit_tokens']} | {f['connector_hit_tokens']} | {f['preemptions']} | "
                        f"{f['engine_cpu_s']:.1f} | {f['manager_cpu_s']:.2f} | {f['connector_sched_s']:.3f} | "
                        f"{f['manager_rss_bytes'] / 2**20:.0f} |")
    rows += ["", "| target | want | ratio | met |", "|---|---|---|---|"]
    for t in out["targets"]:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        rows.append(f"| {t['name']} | {t['want']} | {t['ratio']} | {met} |")
    for c in (out.get("stall") or {}).get("checks", ()):
        rows.append(f"| stall: {c['name']} | | {c['figure']} | {'yes' if c['ok'] else '**no**'} |")
    rows += ["", "| workload | pair | req/s ratio per round | median | TTFT p50 ratio per round | median |",
             "|---|---|---|---|---|---|"]
    for w, ps in (out.get("pair_ratios") or {}).items():
        for k, p in ps.items():
            rows.append(f"| {w} | {k} | {', '.join(map(str, p['throughput']))} | {p['throughput_median']} | "
                        f"{', '.join(map(str, p['ttft_p50']))} | {p['ttft_p50_median']} |")
    rows += ["", "| workload | requests | prompt tokens | servable | fraction | best TTFT x | best req/s x | "
             "vLLM-sized LRU serves | best TTFT x vllm | best req/s x vllm |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for w, b in out["bounds"].items():
        over = b.get("best_ratios_over_engine") or {}
        rows.append(f"| {w} | {b['requests']} | {b['prompt_tokens']} | {b['servable_prompt_tokens']} | "
                    f"{b['servable_fraction']:.3f} | {b['best_ratios']['ttft']} | {b['best_ratios']['throughput']} | "
                    f"{b.get('engine_lru_servable_tokens', '')} | {over.get('ttft', '')} | "
                    f"{over.get('throughput', '')} |")
    for s, e in out["errors"].items():
        rows.append(f"\n`{s}` did not run: `{e.splitlines()[0]}`")
    return "\n".join(rows)


def _fmt(r: float | None) -> str:
    return f"{r:7.3f}" if r is not None else f"{'-':>7}"


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.markdown:
        with open(a.markdown) as f:
            print(markdown(json.load(f)))
        return 0
    os.makedirs(os.path.join(a.out_dir, "runs"), exist_ok=True)
    for p in (os.path.join(REPO, "bin", "orbitkv-manager"), os.path.join(REPO, "bin", "orbitkvctl")):
        if not os.access(p, os.X_OK):
            print(f"bench-serve: {p}: missing (build it: make go)", file=sys.stderr)
            return 2
    out = Bench(a).main()
    print(table(out), file=sys.stderr)
    if a.json:
        print(json.dumps(out, allow_nan=False))
    progress(f"done; {os.path.join(a.out_dir, 'results.json')}")
    failed = [c["name"] for c in (out.get("stall") or {}).get("checks", ()) if not c["ok"]]
    if failed or "stall" in out["errors"] or "trio" in out["errors"]:
        progress("exit 1: " + "; ".join(failed + [k for k in ("trio", "stall") if k in out["errors"]]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
