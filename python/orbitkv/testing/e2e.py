"""The end-to-end recovery gate of the engine adapters (``make e2e``).

``python -m orbitkv.testing.e2e --manager bin/orbitkv-manager-fp`` (with
``PYTHONPATH=python``) starts its own Manager (the failpoint build) on a
temporary socket and runs every engine run as a child process
(``python -m orbitkv.testing.engine``). Each check prints ``ok`` or
``FAILED``; the exit status is 1 if any failed.

For the vLLM path and the SGLang path:

* cold run (no cache) -> tokens; save run (publishes) -> same tokens;
* warm run in a new process: tokens equal the cold run token for token,
  first-token logits bit-identical, restored bytes > 0 and equal to full
  blocks x layers x page bytes (a hit that restored nothing fails);
* another namespace (model revision for vLLM, dtype for SGLang), run
  read-only so it cannot hit its own blocks: no hits, nothing restored,
  same tokens;
* a flipped byte in a restored block changes the output: reported
  "detected"; unchanged output fails the control;
* hold point restore-done: the warm run's restore copies complete but
  their terminal state is withheld (RestorePoll answers Loading); 300 ms
  later the load call (vLLM wait_for_layer_load, SGLang batch_get_v1) has
  not returned and no page was read, while another client's ping and
  health are answered (the Manager is not paused: the block is the adapter
  waiting for the terminal result); it returns only after release, and the
  output and restored bytes are right;
* staging: engine KV memory outside any OrbitKV buffer (``--staging``), a
  save and a warm run under their own revision: the warm run decodes the
  cold tokens with bit-identical logits, restoring the expected bytes
  through the adapter's staging pages;
* a prompt pair diverging at token 60 (mid-block 3): after prompt A was
  saved, prompt B restores blocks 0..2 only and decodes as its cold run.

vLLM only: an identity differing only in kv_layout gets no hits; the
Manager SIGKILLed mid-load (failpoint copy-complete) -> load errors
reported, the engine recomputes, tokens still right; a new Manager on the
same socket -> the engine reconnects (new epoch). Bad configuration: a
connector on a missing socket, or on a socket no Manager serves, raises at
construction.
Last, a table of cold vs warm time to first token (no assertion).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from .manager import ManagerProcess, free_port
from .model import ModelConfig
from .workload import DIVERGE_AT, expected_restore_blocks, prompts

PY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Gate:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="orbitkv-e2e-")
        self.sock = os.path.join(self.tmp, "okv.sock")
        self.port = free_port()
        self.failed: list[str] = []
        self.n = 0
        self.manager: ManagerProcess | None = None
        cfg = ModelConfig()
        self.expected_bytes = sum(expected_restore_blocks(len(p), cfg.block_tokens) for p in prompts()) \
            * cfg.layers * cfg.page_bytes
        self.ttft: dict[str, list[float]] = {}

    # ---- plumbing ----

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.n += 1
        print(f"{'ok    ' if ok else 'FAILED'}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
        if not ok:
            self.failed.append(name)
        return ok

    def start_manager(self) -> None:
        self.manager = ManagerProcess(self.args.manager, self.sock, self.port)

    def engine(self, tag: str, adapter: str, *extra: str, events: bool = False, hold: bool = False) -> "EngineRun":
        out = os.path.join(self.tmp, f"{tag}.json")
        argv = [self.args.python, "-m", "orbitkv.testing.engine", "--adapter", adapter, "--socket", self.sock,
                "--out", out, *extra]
        if events:
            argv.append("--events")
        if hold:
            argv.append("--hold")
        return EngineRun(argv, out, self.args.engine_timeout)

    def run(self, tag: str, adapter: str, *extra: str) -> dict | None:
        r = self.engine(tag, adapter, *extra).finish()
        if r.result is None:
            self.check(f"{tag}: engine run", False, r.failure())
        return r.result

    # ---- checks ----

    def same_tokens(self, name: str, res: dict | None, cold: dict) -> bool:
        if res is None:
            return self.check(name, False, "no result")
        got = [r["tokens"] for r in res["requests"]]
        want = [r["tokens"] for r in cold["requests"]]
        diff = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        return self.check(name, got == want, f"{sum(map(len, got))} tokens" if got == want
                          else f"requests {diff} differ: {got[diff[0]]} vs cold {want[diff[0]]}")

    def path(self, adapter: str, cold: dict, other_ns: tuple[str, str]) -> None:
        p = adapter
        save = self.run(f"{p}-save", adapter)
        if save is not None:
            self.same_tokens(f"{p}: save run tokens equal the cold run", save, cold)
            self.check(f"{p}: save run published blocks", save["published_blocks"] > 0,
                       f"{save['published_blocks']} blocks published, {save['restored_bytes']} B restored "
                       "(shared prefix)")
        warm = self.run(f"{p}-warm", adapter)
        if warm is not None:
            self.same_tokens(f"{p}: warm run (new process) tokens equal the cold run token for token", warm, cold)
            same = [a["logits_sha256"] for a in warm["requests"]] == [c["logits_sha256"] for c in cold["requests"]]
            self.check(f"{p}: warm first-token logits bit-identical to cold", same)
            self.check(f"{p}: warm run restored the expected KV bytes",
                       warm["restored_bytes"] == self.expected_bytes and warm["restored_bytes"] > 0,
                       f"{warm['restored_bytes']} B in {warm['restored_blocks']} blocks; expected "
                       f"{self.expected_bytes} B")
            self.check(f"{p}: warm run used the engine's pages in place (zero copy)", warm["zero_copy"])
            self.ttft[adapter] = [r["ttft_s"] for r in warm["requests"]]
        flag, value = other_ns
        neg = self.run(f"{p}-other-ns", adapter, flag, value, "--read-only")
        if neg is not None:
            self.check(f"{p}: other namespace ({flag[2:]} {value}) gets no hits",
                       neg["restored_bytes"] == 0 and all(r["external_tokens"] == 0 for r in neg["requests"]),
                       f"{neg['restored_bytes']} B restored")
            self.same_tokens(f"{p}: other namespace still decodes correctly (computed)", neg, cold)
        bad = self.run(f"{p}-corrupt", adapter, "--corrupt-restored")
        if bad is not None:
            changed = [r["tokens"] for r in bad["requests"]] != [r["tokens"] for r in cold["requests"]]
            logits = [r["logits_sha256"] for r in bad["requests"]] != [r["logits_sha256"] for r in cold["requests"]]
            self.check(f"{p}: flipped byte in a restored block detected",
                       bad["corrupted"] and bad["restored_bytes"] > 0 and changed,
                       "detected: output differs from cold" if changed else
                       ("flip applied but the output did not change" if bad["corrupted"] else "no restore to corrupt"))
            self.check(f"{p}: flipped byte changed the first-token logits", logits)
        self.restore_done_hold(adapter, cold)
        self.staging(adapter, cold)

    def restore_done_hold(self, adapter: str, cold: dict) -> None:
        """The load call must wait for the restore's terminal result: with
        the hold point restore-done on, the copies complete but RestorePoll
        keeps answering Loading while the Manager serves everything else."""
        sys.path.insert(0, PY_DIR)
        import orbitkv
        p, hp = adapter, "restore-done"
        call = "wait_for_layer_load" if adapter == "vllm" else "batch_get_v1"
        m = self.manager
        m.hold(hp, True)
        run = self.engine(f"{p}-hold", adapter, events=True)
        try:
            held = m.held(hp, 20)
            if not self.check(f"{p}: Manager withheld a restore's completion (hold {hp}) during the warm run",
                              held):
                m.hold(hp, False)
                run.finish()
                return
            entered = run.wait_event("load-wait-enter", 5)
            time.sleep(0.3)
            t0 = time.monotonic()
            try:
                with orbitkv.CacheManagerClient(socket_path=self.sock, instance_id="e2e-probe", timeout_ms=2000) as c:
                    echo = c.ping(4242)
                    health = c.health()
                answered = echo == 4242 and health["status"] == "serving"
                detail = f"ping and health answered in {(time.monotonic() - t0) * 1000:.1f} ms"
            except orbitkv.OrbitKVError as e:
                answered, detail = False, f"{type(e).__name__}: {e}"
            returned = run.event("load-wait-return") or run.event("page-read")
            self.check(f"{p}: {call} still blocked 300 ms after the copies completed (terminal state withheld, "
                       "no page read)", entered is not None and returned is None,
                       "not entered" if entered is None else ("returned early" if returned else "blocked"))
            self.check(f"{p}: Manager answered another client's ping and health meanwhile (dispatcher not paused)",
                       answered, detail)
            t_release = time.monotonic()
            m.hold(hp, False)
        except Exception:
            m.hold(hp, False)
            raise
        r = run.finish()
        ret = r.event("load-wait-return")
        self.check(f"{p}: {call} returned only after the hold was released",
                   ret is not None and ret >= t_release,
                   f"{(ret - t_release) * 1000:.1f} ms after release" if ret is not None else r.failure())
        if r.result is not None:
            self.same_tokens(f"{p}: output after the withheld restore equals cold", r.result, cold)
            self.check(f"{p}: held run restored the expected bytes", r.result["restored_bytes"] == self.expected_bytes,
                       f"{r.result['restored_bytes']} B")

    def staging(self, adapter: str, cold: dict) -> None:
        """Engine KV outside any OrbitKV buffer: saves and loads go through
        the adapter's staging pages (its own revision, so the warm run can
        only restore what the staging save published)."""
        p, rev = f"{adapter} staging", f"staging-{adapter}"
        save = self.run(f"{adapter}-staging-save", adapter, "--staging", "--revision", rev)
        if save is not None:
            self.same_tokens(f"{p}: save run tokens equal the cold run", save, cold)
            self.check(f"{p}: save run published blocks through staging",
                       save["published_blocks"] > 0 and not save["zero_copy"],
                       f"{save['published_blocks']} blocks, zero_copy {save['zero_copy']}")
        warm = self.run(f"{adapter}-staging-warm", adapter, "--staging", "--revision", rev)
        if warm is not None:
            self.same_tokens(f"{p}: warm run tokens equal the cold run", warm, cold)
            same = [a["logits_sha256"] for a in warm["requests"]] == [c["logits_sha256"] for c in cold["requests"]]
            self.check(f"{p}: warm first-token logits bit-identical to cold", same)
            self.check(f"{p}: warm run restored the expected KV bytes through staging",
                       warm["restored_bytes"] == self.expected_bytes and not warm["zero_copy"],
                       f"{warm['restored_bytes']} B, zero_copy {warm['zero_copy']}; expected {self.expected_bytes} B")

    def layout_mismatch(self, cold: dict) -> None:
        """An identity that differs from the saved one only in kv_layout."""
        neg = self.run("vllm-other-layout", "vllm", "--kv-layout", "orbitkv-test-engine-pages-OTHER", "--read-only")
        if neg is not None:
            self.check("vllm: other kv_layout (identity otherwise equal) gets no hits",
                       neg["restored_bytes"] == 0 and all(r["external_tokens"] == 0 for r in neg["requests"]),
                       f"{neg['restored_bytes']} B restored")
            self.same_tokens("vllm: other kv_layout still decodes correctly (computed)", neg, cold)

    def diverging_pair(self, adapter: str, cold_b: dict) -> None:
        """Prompt B shares prompt A's first DIVERGE_AT tokens (mid-block):
        after A was saved, B restores the shared full blocks only."""
        B = ModelConfig().block_tokens
        want = DIVERGE_AT // B
        rev = f"diverge-{adapter}"
        a = self.run(f"{adapter}-diverge-a", adapter, "--workload", "diverge-a", "--revision", rev)
        b = self.run(f"{adapter}-diverge-b", adapter, "--workload", "diverge-b", "--revision", rev, "--read-only")
        if a is None or b is None:
            return
        self.check(f"{adapter}: prompt diverging at token {DIVERGE_AT} restores only the {want} shared full blocks "
                   f"(not block {want}, where it diverges)", b["restored_blocks"] == want,
                   f"{b['restored_blocks']} blocks restored, {a['published_blocks']} published by prompt A")
        self.same_tokens(f"{adapter}: diverging prompt decodes as its cold run", b, cold_b)
        same = [x["logits_sha256"] for x in b["requests"]] == [c["logits_sha256"] for c in cold_b["requests"]]
        self.check(f"{adapter}: diverging prompt's first-token logits bit-identical to its cold run", same)

    def manager_dies_mid_load(self, cold: dict) -> None:
        fp, m = "copy-complete", self.manager
        m.arm(fp)
        run = self.engine("vllm-manager-dies", "vllm", events=True, hold=True)
        paused = m.wait_paused(fp, 20)
        self.check("vllm: Manager paused mid-restore, then SIGKILLed", paused)
        m.kill()
        done = run.wait_event("request-done", 30)
        errs = run.event("load-errors")
        self.check("vllm: get_block_ids_with_load_errors reported the blocks of the dead Manager's restore",
                   done is not None and errs is not None, run.event_line("load-errors") or "no load-errors event")
        self.start_manager()
        run.release_hold()
        r = run.finish()
        if r.result is None:
            self.check("vllm: engine survived the Manager's death", False, r.failure())
            return
        res = r.result
        self.same_tokens("vllm: recomputed output equals cold after the Manager died mid-load", res, cold)
        self.check("vllm: engine reconnected to the restarted Manager (new epoch)", len(res["epochs"]) == 2,
                   f"epochs {len(res['epochs'])}, {res['load_error_blocks']} load-error blocks, "
                   f"{res['recomputed_tokens']} tokens recomputed, {res['published_blocks']} blocks published again")

    def bad_config(self) -> None:
        sys.path.insert(0, PY_DIR)
        import socket as so

        import orbitkv
        from orbitkv.vllm import KVConnectorRole, OrbitKVConnector

        from .vllm_driver import vllm_config
        missing = os.path.join(self.tmp, "no-such-dir", "okv.sock")
        t0 = time.monotonic()
        try:
            OrbitKVConnector(vllm_config(missing, "r", "float32"), KVConnectorRole.WORKER)
            self.check("bad orbitkv.bootstrap_socket raises at construction", False, "no error")
        except orbitkv.NativeOSError as e:
            self.check("bad orbitkv.bootstrap_socket raises at construction",
                       "orbitkv.bootstrap_socket" in str(e) and missing in str(e) and time.monotonic() - t0 < 5,
                       str(e)[:200])
        dead = os.path.join(self.tmp, "dead.sock")
        s = so.socket(so.AF_UNIX)
        s.bind(dead)
        s.close()
        try:
            OrbitKVConnector(vllm_config(dead, "r", "float32"), KVConnectorRole.SCHEDULER)
            self.check("socket of a Manager that is not running raises at construction", False, "no error")
        except orbitkv.NativeOSError as e:
            self.check("socket of a Manager that is not running raises at construction",
                       e.errno == 111, str(e)[:200])

    def table(self, cold: dict) -> None:
        c = [r["ttft_s"] for r in cold["requests"]]
        print("\ntime to first token on this CPU (ms; the gate asserts nothing about timing)")
        print(f"  {'prompt':>6} {'tokens':>6} {'cold':>8}" + "".join(f" {a + ' warm':>12}" for a in self.ttft))
        for i, p in enumerate(prompts()):
            print(f"  {i:>6} {len(p):>6} {c[i] * 1000:>8.2f}" + "".join(f" {v[i] * 1000:>12.2f}" for v in self.ttft.values()))
        print(f"  {'mean':>6} {'':>6} {sum(c) / len(c) * 1000:>8.2f}"
              + "".join(f" {sum(v) / len(v) * 1000:>12.2f}" for v in self.ttft.values()))

    def main(self) -> int:
        t0 = time.monotonic()
        try:
            self.start_manager()
            cold = self.run("cold", "none")
            if cold is None:
                return 1
            self.check("cold run (no cache) decoded every prompt", True,
                       f"{len(cold['requests'])} prompts, {sum(len(r['tokens']) for r in cold['requests'])} tokens")
            cold_b = self.run("cold-diverge-b", "none", "--workload", "diverge-b")
            self.path("vllm", cold, ("--revision", "other-revision"))
            self.layout_mismatch(cold)
            if cold_b is not None:
                self.diverging_pair("vllm", cold_b)
            self.manager_dies_mid_load(cold)
            self.path("sglang", cold, ("--dtype", "bfloat16"))
            if cold_b is not None:
                self.diverging_pair("sglang", cold_b)
            self.bad_config()
            self.table(cold)
        finally:
            if self.manager is not None:
                self.manager.stop()
            if not self.args.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
        print(f"\ne2e gate: {self.n - len(self.failed)}/{self.n} checks passed in {time.monotonic() - t0:.1f} s")
        if self.failed:
            print("e2e gate: FAILED: " + "; ".join(self.failed))
            return 1
        return 0


class EngineRun:
    """An engine child process, its EVENT lines, and its JSON result."""

    def __init__(self, argv: list[str], out: str, timeout_s: float):
        env = dict(os.environ, PYTHONPATH=PY_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.out, self.timeout_s, self.t0 = out, timeout_s, time.monotonic()
        self.events: list[tuple[str, float, str]] = []
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.result: dict | None = None
        self.rc: int | None = None

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line)
                parts = line.split(maxsplit=3)
                if len(parts) >= 3 and parts[0] == "EVENT":
                    self.events.append((parts[1], float(parts[2]), parts[3].strip() if len(parts) > 3 else ""))
                self._cv.notify_all()

    def event(self, name: str) -> float | None:
        with self._cv:
            return next((t for n, t, _ in self.events if n == name), None)

    def event_line(self, name: str) -> str | None:
        with self._cv:
            return next((f"{n} {d}" for n, _, d in self.events if n == name), None)

    def wait_event(self, name: str, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                t = next((t for n, t, _ in self.events if n == name), None)
                left = deadline - time.monotonic()
                if t is not None or left <= 0 or self.proc.poll() is not None:
                    return t
                self._cv.wait(min(left, 0.05))

    def release_hold(self) -> None:
        try:
            self.proc.stdin.write("go\n" * 16)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def finish(self) -> "EngineRun":
        try:
            self.rc = self.proc.wait(max(1.0, self.timeout_s - (time.monotonic() - self.t0)))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.rc = self.proc.wait()
            self.lines.append(f"[killed after {self.timeout_s:g} s]\n")
        self._reader.join(5)
        if self.rc == 0 and os.path.exists(self.out):
            with open(self.out) as f:
                self.result = json.load(f)
        return self

    def failure(self) -> str:
        tail = "".join(l for l in self.lines if not l.startswith("EVENT"))[-1500:]
        return f"exit {self.rc}: {tail.strip()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m orbitkv.testing.e2e", description=__doc__.split("\n")[0])
    ap.add_argument("--manager", required=True, help="orbitkv-manager built with -tags failpoints")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the engine processes")
    ap.add_argument("--engine-timeout", type=float, default=90, help="bound of one engine run, s")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return Gate(ap.parse_args(argv)).main()


if __name__ == "__main__":
    sys.exit(main())
