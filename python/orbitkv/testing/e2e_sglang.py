"""The real-SGLang gate of the SGLang adapter (``make e2e-sglang``).

``python -m orbitkv.testing.e2e_sglang --manager bin/orbitkv-manager-fp
--python build/venv/sglang/bin/python`` (with ``PYTHONPATH=python``)
starts its own Manager (the failpoint build) on a temporary socket and runs
each engine role of ``orbitkv.testing.sglang_real`` as its own process of
SGLang's environment, in order (what of SGLang is real there: that
module's doc; the engine is a hybrid model's stack, full-attention,
sliding-window and Mamba layers):

1. ``save``: SGLang's parser takes the flags of docs/adapters.md, its
   ``HybridCacheController`` builds ``OrbitKVStorage`` through its backend
   factory ("dynamic"), on the real base class with the real signatures and
   the zero-copy v1 calls selected, and registers SGLang's SWA
   (``MHATokenToKVPoolHost``) and Mamba (``MambaPoolHost``) host pools
   (v2); a Mamba pool's namespace names its SSM dtype and its page length
   (side states); its backup thread publishes a 4-page prompt (an exact
   multiple of the page size), a hybrid prompt's KV (v1), 2-page window
   and Mamba state (v2), and two prompts whose state, or window, is stored
   for their first 2 pages only;
2. ``warm`` (a new process): the prefetch thread's hit query finds all 4
   pages, the I/O thread loads them into other host slots, bytes equal;
   a prompt diverging mid-page 3 hits its 2 shared pages only; restored
   bytes = pages x page bytes; the hybrid prompt's hit query goes through
   ``batch_exists_v2`` and its window and state come back through
   ``batch_get_v2``, bytes equal; a missing state or window page cuts the
   hit to the 2 pages that have theirs (KV, window and state of those
   loaded, bytes equal), and KV without them is no hit; more v2 calls with
   SGLang's own types on both sidecar pools;
3. ``other``: another model revision (another namespace) gets 0 hits; bad
   settings (an unknown ``orbitkv.*`` key, a socket no Manager serves) fail
   at construction through SGLang's factory, naming the key or path;
4. ``kill``: the Manager paused mid-restore (failpoint copy-complete) and
   SIGKILLed: the pages are misses, the host slots untouched, no hang; a
   new Manager on the same socket serves the same process again.

Then the Manager's idle invariant (no lease, pin or operation left). Each
check prints ``ok`` or ``FAILED``; ``note`` lines say which SGLang parts did
not run here and their exact errors (its host pool assembler: the pinning
of host memory needs a CUDA driver; its ``MambaPoolHost`` on the
``layer_first`` layout). The last line is ``e2e-sglang: sglang <version>
real HybridCacheController + KV, SWA and Mamba host pools, <passed>/<total>
checks passed, <skipped> skipped, restored <bytes> B in <s> s``. Exit
status 1 if any check failed.
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
from .sglang_real import HYBRID_SAVES, WINDOW

PY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.dirname(PY_DIR)
PAGES = 4          # the full pages of the shared and the hybrid prompts (sglang_real.PROMPTS)
DIVERGE_PAGES = 2  # the full pages the diverging prompt shares with "shared"


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
        print(f"note    SGLang's own host pool assembler (build_hybrid_mamba_swa_stack) on this CPU: "
              f"{f['assembler_error'] or 'built'}", flush=True)
        print(f"note    SGLang's MambaPoolHost on the layer_first layout: {r['mamba_layer_first']}", flush=True)
        pools = f["pools"]
        want = {"kv": "pool_host.mha.MHATokenToKVPoolHost", "swa": "pool_host.mha.MHATokenToKVPoolHost",
                "mamba": "pool_host.mamba.MambaPoolHost"}
        self.check(f"the controller registered SGLang's SWA and Mamba host pools beside the KV pool "
                   f"({f['layout']}; register_mem_host_pool_v2)",
                   r["registered_pools"] == sorted(want) and all(
                       pools[n]["class"] == "sglang.srt.mem_cache." + c and pools[n]["same_object"]
                       for n, c in want.items()),
                   ", ".join(f"{n} {p['class'].rsplit('.', 1)[-1]} {p['page_size']} tok/{p['page_bytes']} B"
                             for n, p in sorted(pools.items())))
        ns = r["mamba_namespaces"]
        bf, f16, reg, ng = ns["bfloat16"], ns["float16"], ns["registered"], ns["ngram"]
        self.check("the Mamba pool's namespace names its SSM state dtype: pools differing only in it "
                   "(bfloat16, float16) share no page",
                   pools["mamba"]["dtype"] == "bfloat16+ssm-float32" and bf["page_bytes"] == f16["page_bytes"]
                   and bf["namespace"] != f16["namespace"],
                   f"dtype {pools['mamba']['dtype']}, layout {pools['mamba']['kv_layout']}; "
                   f"bfloat16 and float16 SSM states {bf['page_bytes']} B either way")
        self.check("a Mamba pool with SGLang's n-gram slot side state (a longer page, the same staging page) "
                   "shares no page with the plain one",
                   ng["page_bytes"] == reg["page_bytes"] + 32 and ng["staging_bytes"] == reg["staging_bytes"]
                   and ng["namespace"] != reg["namespace"],
                   f"{ng['page_bytes']} B vs {reg['page_bytes']} B, staging pages {ng['staging_bytes']} B "
                   f"and {reg['staging_bytes']} B")
        st, sv = r["stats"], r["saved"]
        self.check(f"the backup thread stored the {PAGES}-page prompt (batch_set_v1)",
                   sv["shared"][0]["tokens"] == PAGES * 32, f"{sv['shared'][0]['tokens']} tokens completed")
        h = sv["hybrid"][0]
        self.check(f"a hybrid prompt: {PAGES} KV pages (v1), its {WINDOW}-page sliding window and its Mamba state "
                   f"(batch_set_v2)", h["tokens"] == PAGES * 32 and h["pools"] == {"swa": WINDOW, "mamba": 1},
                   f"{h['tokens']} tokens, pools {h['pools']}")
        first = {"tokens": 64, "pools": {"swa": WINDOW, "mamba": 1}}
        self.check("the gap prompts: 2 pages with window and state, then all 4 without the Mamba state "
                   "(mamba_gap) or without the window (swa_gap)",
                   sv["mamba_gap"] == [first, {"tokens": 128, "pools": {"swa": WINDOW}}]
                   and sv["swa_gap"] == [first, {"tokens": 128, "pools": {"mamba": 1}}],
                   f"mamba_gap {sv['mamba_gap']}, swa_gap {sv['swa_gap']}")
        sent = PAGES + sum(p + w + s for writes in HYBRID_SAVES.values() for p, w, s in writes)
        self.check("every page sent was stored or already held, none failed",
                   st["published_pages"] + st["present_pages"] == sent and st["set_failed_pages"] == 0,
                   f"{st['published_pages']} stored + {st['present_pages']} held of {sent}, "
                   f"{st['set_failed_pages']} failed")

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
        hy = r["hybrid"]
        h = hy["hybrid"]
        self.check("hybrid prompt: the hit query (batch_exists_v2) finds its KV pages, window and Mamba state",
                   h["hit_tokens"] == PAGES * 32
                   and h.get("query_pool_hit_pages") == {"kv": PAGES, "swa": PAGES, "mamba": PAGES},
                   f"hit {h['hit_tokens']} tokens, per pool {h.get('query_pool_hit_pages')}")
        self.check("hybrid prompt: the I/O thread loads the KV pages (v1), then the window and the state into "
                   "SGLang's SWA and Mamba pools (batch_get_v2), bytes equal",
                   self.loaded(h, PAGES), self.loaded_detail(h))
        for name, what in (("mamba_gap", "the Mamba state stored at page 2 only"),
                           ("swa_gap", "the window stored for pages 1-2 only")):
            g = hy[name]
            self.check(f"{name}: {what} cuts the hit to 2 pages; KV, window and state of those restored, bytes "
                       f"equal (never KV without its state)",
                       g["hit_tokens"] == 64 and self.loaded(g, 2),
                       f"hit {g['hit_tokens']}, per pool {g.get('query_pool_hit_pages')}; {self.loaded_detail(g)}")
        n = hy["shared"]
        self.check("a prompt whose KV is stored but no window or state of it: no hit, nothing loaded",
                   n["hit_tokens"] == 0 and n["loaded_tokens"] == 0 and not n.get("sidecars"),
                   f"hit {n['hit_tokens']}, per pool {n.get('query_pool_hit_pages')}")
        v = r["pools_v2"]
        ok = {p: v[p]["set"] == [True] * v["pages"] and v[p]["get"] == [True] * v["pages"] + [False]
              and v[p]["equal"] == [True] * v["pages"] for p in ("swa", "mamba")}
        self.check("v2: SWA and Mamba pages set and got back into other slots with SGLang's PoolTransfer, bytes "
                   "equal; a key never stored fails", all(ok.values()),
                   "; ".join(f"{p} set {v[p]['set']} get {v[p]['get']} equal {v[p]['equal']}" for p in ok))
        so = v["sidecar_only"]
        self.check("v2: a page stored in the Mamba pool only is not a KV page (batch_exists finds none)",
                   so["set"] == [True] and so["kv_exists"] == 0, f"set {so['set']}, KV pages {so['kv_exists']}")
        self.check("v2: batch_exists_v2 as SGLang reads it (kv hit, PoolName.KV, the pool's own; all pages of the "
                   "prefix, cut where the pool's run ends; the prefetch's placeholder transfers; a pool never "
                   "registered)",
                   v["exists_all_pages"] == [PAGES] * 3
                   and v["exists_all_pages_cut"] == [2, [1, 2], {"kv": PAGES, "swa": 2}]
                   and v["exists_trailing"] == [PAGES, list(range(1, PAGES + 1)),
                                                {"kv": PAGES, "swa": PAGES, "mamba": PAGES}]
                   and v["exists_unregistered_pool"] == 0,
                   f"all pages {v['exists_all_pages']}, swa_gap all pages {v['exists_all_pages_cut']}, "
                   f"placeholders {v['exists_trailing']}, "
                   f"unregistered pool {v['exists_unregistered_pool']}")

    @staticmethod
    def loaded(h: dict, pages: int) -> bool:
        """Prefetch result ``h`` loaded ``pages`` KV pages, the window of
        the last WINDOW of them and the state of the last, all equal to
        what was saved under those pages' keys."""
        sc = h.get("sidecars", {})
        return (h["loaded_tokens"] == pages * 32 and h["pages_equal"] == [True] * pages
                and h.get("pool_hits") == {"swa": WINDOW, "mamba": 1}
                and sc.get("swa") == {"pages": list(range(pages - WINDOW, pages)), "equal": [True] * WINDOW}
                and sc.get("mamba") == {"pages": [pages - 1], "equal": [True]})

    @staticmethod
    def loaded_detail(h: dict) -> str:
        return (f"loaded {h['loaded_tokens']} tokens, KV equal {h['pages_equal']}, pool hits {h.get('pool_hits')}, "
                + ", ".join(f"{p} pages {x['pages']} equal {x['equal']}" for p, x in h.get("sidecars", {}).items()))

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
    print(f"e2e-sglang: sglang {g.version} real HybridCacheController + KV, SWA and Mamba host pools, "
          f"{passed}/{g.n} checks passed, "
          f"0 skipped, restored {g.restored} B in {time.monotonic() - t0:.0f} s", flush=True)
    if g.failed:
        print("FAILED: " + "; ".join(g.failed), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
