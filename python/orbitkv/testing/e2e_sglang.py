"""The real-SGLang gate of the SGLang adapter (``make e2e-sglang``).

``python -m orbitkv.testing.e2e_sglang --manager bin/orbitkv-manager-fp
--python build/venv/sglang/bin/python`` (with ``PYTHONPATH=python``)
starts its own Manager (the failpoint build) on a temporary socket and runs
each engine role of ``orbitkv.testing.sglang_real`` as its own process of
SGLang's environment, in order (what of SGLang is real there: that
module's doc):

1. ``save``: SGLang's parser takes the flags of docs/adapters.md, its
   ``HybridCacheController`` builds ``OrbitKVStorage`` through its backend
   factory ("dynamic"), on the real base class with the real signatures and
   the zero-copy v1 calls selected and the SWA sidecar pool registered
   (v2); its backup thread publishes a 4-page prompt (an exact multiple of
   the page size), and a hybrid prompt's KV (v1) and 2-page window (v2);
2. ``warm`` (a new process): the prefetch thread's hit query finds all 4
   pages, the I/O thread loads them into other host slots, bytes equal;
   a prompt diverging mid-page 3 hits its 2 shared pages only; restored
   bytes = pages x page bytes; the hybrid prompt's hit query goes through
   ``batch_exists_v2`` and its window comes back through ``batch_get_v2``,
   bytes equal; more v2 calls with SGLang's own types;
3. ``other``: another model revision (another namespace) gets 0 hits; bad
   settings (an unknown ``orbitkv.*`` key, a socket no Manager serves) fail
   at construction through SGLang's factory, naming the key or path;
4. ``kill``: the Manager paused mid-restore (failpoint copy-complete) and
   SIGKILLed: the pages are misses, the host slots untouched, no hang; a
   new Manager on the same socket serves the same process again.

Then the Manager's idle invariant (no lease, pin or operation left). Each
check prints ``ok`` or ``FAILED``; the last line is
``e2e-sglang: sglang <version> real HybridCacheController + host pool,
<passed>/<total> checks passed, <skipped> skipped, restored <bytes> B in
<s> s``. Exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .manager import ManagerProcess, free_port

PY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.dirname(PY_DIR)
PAGES = 4          # the shared prompt's full pages (sglang_real.PROMPTS)
WINDOW = 2         # the hybrid prompt's sliding-window pages (sglang_real.WINDOW)
DIVERGE_PAGES = 2  # the full pages the diverging prompt shares with it


class Gate:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="orbitkv-e2e-sglang-")
        self.sock = os.path.join(self.tmp, "okv.sock")
        self.port = free_port()
        self.model = os.path.join(REPO, "build", "models", "sglang-tiny-qwen2")
        self.failed: list[str] = []
        self.n = 0
        self.restored = 0
        self.version = "?"
        self.manager: ManagerProcess | None = None

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.n += 1
        print(f"{'ok    ' if ok else 'FAILED'}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
        if not ok:
            self.failed.append(name)
        return bool(ok)

    def start_manager(self) -> None:
        self.manager = ManagerProcess(self.args.manager, self.sock, self.port)

    def argv(self, role: str, revision: str = "r1") -> tuple[list[str], str]:
        out = os.path.join(self.tmp, f"{role}.json")
        return [self.args.python, "-m", "orbitkv.testing.sglang_real", "--role", role, "--socket", self.sock,
                "--out", out, "--model", self.model, "--revision", revision], out

    def env(self) -> dict:
        env = dict(os.environ)
        env["PYTHONPATH"] = PY_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def role(self, role: str, revision: str = "r1") -> dict | None:
        argv, out = self.argv(role, revision)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            self.check(f"{role}: engine process finished within {self.args.timeout} s", False)
            return None
        return self.result(role, out, p.returncode, p.stdout + p.stderr, time.monotonic() - t0)

    def result(self, role: str, out: str, rc: int, log: str, wall: float) -> dict | None:
        res = None
        if os.path.exists(out):
            with open(out) as f:
                res = json.load(f)
        ok = rc == 0 and res is not None and res.get("ok")
        detail = f"{wall:.1f} s, SGLang start {res['start_s']:.1f} s" if ok else \
            (res or {}).get("traceback", "") or log[-3000:]
        self.check(f"{role}: engine process ran to the end", ok, detail)
        return res if ok else None

    # ---- roles ----

    def save(self) -> None:
        r = self.role("save")
        if r is None:
            return
        f = r["facts"]
        self.version = r["sglang"]
        from orbitkv.sglang import SUPPORTED_SGLANG
        self.check(f"SGLang {r['sglang']} is a supported release", r["sglang"] in SUPPORTED_SGLANG,
                   f"supported: {', '.join(SUPPORTED_SGLANG)}")
        self.check("SGLang's HybridCacheController built OrbitKVStorage through its dynamic backend factory",
                   f["backend_class"] == "orbitkv.sglang.storage.OrbitKVStorage"
                   and f["controller"].endswith("HybridCacheController"), f"{f['backend_class']} in {f['controller']}")
        self.check("OrbitKVStorage subclasses the real HiCacheStorage with no abstract method left",
                   f["real_base"] and not f["abstract_left"], f"abstract left: {f['abstract_left']}")
        self.check("every HiCacheStorage method OrbitKVStorage overrides has SGLang's parameters",
                   not f["signature_differences"] and {"batch_get_v1", "batch_set_v1", "batch_exists_v2",
                                                        "batch_get_v2", "batch_set_v2"} <= set(f["overridden"]),
                   "; ".join(f["signature_differences"]) or f"{len(f['overridden'])} methods")
        self.check("interface_v1 in the extra config selects SGLang's zero-copy page calls",
                   (f["page_get_func"], f["page_set_func"]) == ("_page_get_zero_copy", "_page_set_zero_copy"),
                   f"{f['page_get_func']}, {f['page_set_func']}")
        print(f"note    SGLang's own host pool assembler on this CPU: {f['assembler_error'] or 'built'}", flush=True)
        st, sv = r["stats"], r["saved"]
        self.check("the controller registered the sidecar host pool (register_mem_host_pool_v2)",
                   r["registered_pools"] == ["kv", "swa"], f"pools {r['registered_pools']}")
        self.check(f"the backup thread stored the {PAGES}-page prompt (batch_set_v1)",
                   sv["shared"]["tokens"] == PAGES * 32, f"{sv['shared']['tokens']} tokens completed")
        self.check(f"a hybrid prompt: {PAGES} KV pages (v1) and its {WINDOW}-page sliding window (batch_set_v2)",
                   sv["hybrid"]["tokens"] == PAGES * 32 and sv["hybrid"]["pools"] == {"swa": WINDOW}
                   and st["published_pages"] == 2 * PAGES + WINDOW,
                   f"{sv['hybrid']['tokens']} tokens, pools {sv['hybrid']['pools']}, "
                   f"{st['published_pages']} pages published in all")

    def warm(self) -> None:
        r = self.role("warm")
        if r is None:
            return
        s, d = r["prefetch"]["shared"], r["prefetch"]["diverge"]
        self.check("new process: the prefetch thread's hit query finds every saved page (batch_exists)",
                   s["hit_tokens"] == PAGES * 32, f"{s['hit_tokens']} tokens")
        self.check("the I/O thread loaded them into other host slots, bytes equal (batch_get_v1)",
                   s["loaded_tokens"] == PAGES * 32 and s["pages_equal"] == [True] * PAGES,
                   f"{s['loaded_tokens']} tokens, pages equal {s['pages_equal']}, {s.get('load_s', 0) * 1e3:.1f} ms")
        self.check(f"a prompt diverging mid-page {DIVERGE_PAGES + 1} hits and loads its {DIVERGE_PAGES} shared "
                   f"pages only", d["hit_tokens"] == d["loaded_tokens"] == DIVERGE_PAGES * 32
                   and d["pages_equal"] == [True] * DIVERGE_PAGES,
                   f"hit {d['hit_tokens']}, loaded {d['loaded_tokens']} tokens")
        want = (PAGES + DIVERGE_PAGES) * r["page_bytes"]
        self.restored += r["stats"]["restored_bytes"]
        self.check("restored bytes = loaded pages x page bytes", r["kv_restored_bytes"] == want,
                   f"{r['kv_restored_bytes']} B, want {PAGES + DIVERGE_PAGES} x {r['page_bytes']}")
        h = r["hybrid"]
        self.check("hybrid prompt: the hit query goes through batch_exists_v2 and finds the KV pages and the window",
                   h["hit_tokens"] == PAGES * 32 and h.get("query_pool_hit_pages", {}).get("kv") == PAGES
                   and h.get("query_pool_hit_pages", {}).get("swa") == PAGES,
                   f"hit {h['hit_tokens']} tokens, per pool {h.get('query_pool_hit_pages')}")
        self.check("hybrid prompt: the I/O thread loads the KV pages (v1) and the window (batch_get_v2), bytes equal",
                   h["loaded_tokens"] == PAGES * 32 and h["pages_equal"] == [True] * PAGES
                   and h.get("pool_hits") == {"swa": WINDOW} and h.get("window_equal") == [True] * WINDOW,
                   f"loaded {h['loaded_tokens']}, pool hits {h.get('pool_hits')}, window equal {h.get('window_equal')}")
        v = r["pools_v2"]
        self.check("v2: a sidecar host pool's pages set and got back into other slots, bytes equal",
                   v["set"] == {"swa": v["pages"]} and v["get"] == {"swa": v["pages"]} and v["bytes_equal"],
                   f"set {v['set']}, get {v['get']}")
        self.check("v2: batch_exists_v2 as SGLang reads it (kv hit, PoolName.KV, the pool's own)",
                   v["exists_all_pages"] == [PAGES] * 3 and v["exists_trailing"] == [PAGES, list(range(1, PAGES + 1))]
                   and v["exists_unregistered_pool"] == 0,
                   f"all pages {v['exists_all_pages']}, trailing {v['exists_trailing']}, "
                   f"unregistered pool {v['exists_unregistered_pool']}")

    def other(self) -> None:
        r = self.role("other", revision="r2")
        if r is None:
            return
        s = r["prefetch"]["shared"]
        self.check("another model revision (another namespace) gets 0 hits",
                   s["hit_tokens"] == 0 and r["stats"]["restored_bytes"] == 0, f"{s['hit_tokens']} tokens")
        b = r["bad_config"]
        self.check("an unknown orbitkv.* key fails at construction naming it",
                   "orbitkv.bootstrap_sokcet" in b["unknown_key"] and b["unknown_key_s"] < 5, b["unknown_key"][:200])
        self.check("a socket no Manager serves fails at construction naming it",
                   "nobody.sock" in b["dead_socket"] and b["dead_socket_s"] < 5, b["dead_socket"][:200])

    def kill(self) -> None:
        fp, m = "copy-complete", self.manager
        m.arm(fp)
        argv, out = self.argv("kill")
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        paused, deadline = False, t0 + self.args.timeout
        while not paused and p.poll() is None and time.monotonic() < deadline:
            paused = m.wait_paused(fp, 30)  # the Manager answers within at most 1 min
        self.check("kill: the Manager paused mid-restore, then SIGKILLed", paused)
        m.kill()
        self.start_manager()
        try:
            log, _ = p.communicate(timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            log, _ = p.communicate()
            self.check(f"kill: engine process finished within {self.args.timeout} s (no hang)", False, log[-2000:])
            return
        r = self.result("kill", out, p.returncode, log, time.monotonic() - t0)
        if r is None:
            return
        s = r["prefetch"]["shared"]
        self.check("kill: the pages of the dead Manager's restore are misses, host slots untouched",
                   s["hit_tokens"] == PAGES * 32 and s["loaded_tokens"] == 0 and s.get("untouched") == [True] * PAGES,
                   f"hit {s['hit_tokens']}, loaded {s['loaded_tokens']}, untouched {s.get('untouched')}")
        self.check("kill: the prefetch returned within the load timeout (10 s), no hang",
                   r["dead_manager_s"] < 15, f"{r['dead_manager_s']:.1f} s")
        a = r["after_restart"]
        self.restored += r["stats"]["restored_bytes"]
        self.check("kill: the same process reconnected; the new Manager stores and serves the prompt",
                   r["saved_after_restart"] == PAGES * 32 and a["loaded_tokens"] == PAGES * 32
                   and a["pages_equal"] == [True] * PAGES and len(set(r["epochs"])) == 2,
                   f"saved {r['saved_after_restart']}, loaded {a['loaded_tokens']}, epochs {len(set(r['epochs']))}")

    def idle(self) -> None:
        h = self.manager.health()
        busy = {k: h.get(k, "missing") for k in ("leases", "pins", "operations", "tickets", "reserved_bytes")
                if h.get(k, "missing") != 0}
        self.check("the Manager is idle after the engines exited (no lease, pin, operation, ticket, reservation)",
                   not busy, json.dumps(busy) if busy else f"{h['blocks']} blocks resident")


def main() -> int:
    ap = argparse.ArgumentParser(description="make e2e-sglang: OrbitKVStorage inside real SGLang on the CPU")
    ap.add_argument("--manager", required=True, help="orbitkv-manager built with -tags failpoints")
    ap.add_argument("--python", default=os.path.join(REPO, "build", "venv", "sglang", "bin", "python"),
                    help="SGLang's environment (make deps-engines)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per engine process")
    args = ap.parse_args()
    if not os.access(args.python, os.X_OK):
        print(f"e2e-sglang: {args.python}: no SGLang environment (run `make deps-engines`)", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    g = Gate(args)
    try:
        g.start_manager()
        g.save()
        g.warm()
        g.other()
        g.kill()
        g.idle()
    finally:
        if g.manager is not None:
            g.manager.kill()
        shutil.rmtree(g.tmp, True)
    passed = g.n - len(g.failed)
    print(f"e2e-sglang: sglang {g.version} real HybridCacheController + host pool, {passed}/{g.n} checks passed, "
          f"0 skipped, restored {g.restored} B in {time.monotonic() - t0:.0f} s", flush=True)
    if g.failed:
        print("FAILED: " + "; ".join(g.failed), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
