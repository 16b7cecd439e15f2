"""One real-vLLM engine process of the ``make e2e-vllm`` gate.

``python e2e_vllm_engine.py model DIR`` writes the gate's model (a random
Qwen2, float32, fixed seed; nothing downloaded). ``python e2e_vllm_engine.py
run SPEC_JSON`` starts one in-process vLLM engine (the caller sets
``VLLM_ENABLE_V1_MULTIPROCESSING=0``) as SPEC says and runs its steps in
order, one line per step on stdout:

* ``{"op": "gen", "name": N, "prompt": [ids], "reset": bool}`` - greedy
  generation (``reset``: empty vLLM's own prefix cache first); prints
  ``RESULT {json}``: tokens, the top-2 raw logits of each generated token,
  ``num_cached_tokens``, the connector's stats (worker and scheduler, when
  in this process), vLLM's own counters of external hits
  (``vllm:external_prefix_cache_hits``, ``vllm:prompt_tokens_cached_by_source``),
  the error if vLLM raised;
* ``{"op": "event", "name": N}`` - prints ``EVENT N``;
* ``{"op": "wait", "path": P}`` - waits (at most 300 s) until file P exists.

The gate itself is ``e2e_vllm.py``; it reads these lines.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

BLOCK = 32
MAX_TOKENS = 8


def make_model(out: str) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1234)
    cfg = Qwen2Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      torch_dtype="float32", tie_word_embeddings=False)
    Qwen2ForCausalLM(cfg).to(torch.float32).save_pretrained(out)


def emit(kind: str, obj) -> None:
    sys.stdout.write(f"{kind} {json.dumps(obj) if not isinstance(obj, str) else obj}\n")
    sys.stdout.flush()


def connector_stats(llm) -> dict:
    """The connectors' stats and vLLM's connector hit statistics, where
    this process can reach them (the worker is elsewhere under TP > 1)."""
    out: dict = {}
    try:
        from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group
        if has_kv_transfer_group():
            out["worker"] = dict(get_kv_transfer_group().stats)
    except Exception:
        pass
    try:
        sched = llm.llm_engine.engine_core.engine_core.scheduler
    except Exception:
        return out
    if getattr(sched, "connector", None) is not None:
        out["scheduler"] = dict(getattr(sched.connector, "stats", {}) or {})
    return out


def vllm_metrics(llm) -> dict:
    """vLLM's own Prometheus counters of external (connector) hits."""
    out: dict = {"vllm_connector_hits": 0, "vllm_connector_queries": 0, "vllm_hits_by_source": {}}
    for m in llm.get_metrics():
        if m.name == "vllm:external_prefix_cache_hits":
            out["vllm_connector_hits"] += int(m.value)
        elif m.name == "vllm:external_prefix_cache_queries":
            out["vllm_connector_queries"] += int(m.value)
        elif m.name == "vllm:prompt_tokens_cached_by_source":
            src = m.labels.get("source", "?")
            out["vllm_hits_by_source"][src] = out["vllm_hits_by_source"].get(src, 0) + int(m.value)
    return out


def delta(after: dict, before: dict) -> dict:
    d: dict = {}
    for k, v in after.items():
        if isinstance(v, dict):
            d[k] = delta(v, before.get(k, {}))
        elif isinstance(v, (int, float)):
            d[k] = v - before.get(k, 0)
    return d


def gen(llm, step: dict) -> dict:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    if step.get("reset"):
        llm.reset_prefix_cache()
    before = dict(connector_stats(llm), **vllm_metrics(llm))
    res = {"name": step["name"], "tokens": [], "top2": [], "num_cached_tokens": None, "error": None,
           "finish_reason": None}
    t0 = time.monotonic()
    try:
        outs = llm.generate([TokensPrompt(prompt_token_ids=step["prompt"])],
                            SamplingParams(temperature=0, max_tokens=MAX_TOKENS, detokenize=False, logprobs=2),
                            use_tqdm=False)
        o = outs[0]
        c = o.outputs[0]
        res["tokens"] = [int(t) for t in c.token_ids]
        res["finish_reason"] = c.finish_reason
        res["num_cached_tokens"] = o.num_cached_tokens
        for pos in c.logprobs or []:
            top = sorted(((float(lp.logprob), int(tok)) for tok, lp in pos.items()), reverse=True)[:2]
            res["top2"].append([[t, v] for v, t in top])
    except Exception as e:  # vLLM's own way of failing a request
        res["error"] = f"{type(e).__name__}: {e}"
    res["seconds"] = round(time.monotonic() - t0, 3)
    res["stats"] = delta(dict(connector_stats(llm), **vllm_metrics(llm)), before)
    res["stats"]["vllm_hits_by_source"] = {k: v for k, v in res["stats"]["vllm_hits_by_source"].items() if v}
    return res


def run(spec: dict) -> None:
    from vllm import LLM
    from vllm.config import KVTransferConfig

    kw = dict(model=spec["model"], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
              max_model_len=1024, seed=0, block_size=BLOCK, enable_prefix_caching=True,
              logprobs_mode="raw_logits", tensor_parallel_size=spec.get("tp", 1), max_num_seqs=4,
              disable_log_stats=False)
    if spec.get("revision"):
        kw["revision"] = spec["revision"]
    if spec.get("prefix_caching") is False:
        kw["enable_prefix_caching"] = False
    if spec.get("ktc"):
        # The documented kv-transfer-config, on the gate's socket; the gate
        # reconnects at once after it restarts the Manager.
        # A spec socket of None keeps the documented default socket.
        cfg = dict(spec["ktc"])
        own = {"orbitkv.reconnect_interval_s": 0}
        if spec.get("socket") is not None:
            own["orbitkv.bootstrap_socket"] = spec["socket"]
        cfg["kv_connector_extra_config"] = dict(cfg.get("kv_connector_extra_config") or {}, **own,
                                                **spec.get("extra", {}))
        if spec.get("policy"):
            cfg["kv_load_failure_policy"] = spec["policy"]
        kw["kv_transfer_config"] = KVTransferConfig(**cfg)
    t0 = time.monotonic()
    llm = LLM(**kw)
    import vllm
    kv_mode = ""
    try:  # the worker connector, when it runs in this process (TP 1)
        from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group
        if has_kv_transfer_group():
            kv_mode = getattr(get_kv_transfer_group(), "kv_mode", "")
    except Exception:
        pass
    emit("STARTED", {"seconds": round(time.monotonic() - t0, 1), "vllm": vllm.__version__, "kv_mode": kv_mode})
    for step in spec["steps"]:
        op = step["op"]
        if op == "gen":
            emit("RESULT", gen(llm, step))
        elif op == "event":
            emit("EVENT", step["name"])
        elif op == "wait":
            deadline = time.monotonic() + 300
            while not os.path.exists(step["path"]):
                if time.monotonic() > deadline:
                    raise SystemExit(f"waited 300 s for {step['path']}")
                time.sleep(0.05)
    emit("DONE", {})
    sys.stdout.flush()
    # The engine's own shutdown can take seconds; the gate needs no more.
    os._exit(0)


def main() -> None:
    if sys.argv[1] == "model":
        make_model(sys.argv[2])
    elif sys.argv[1] == "run":
        try:
            run(json.loads(sys.argv[2]))
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3)
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}: want model or run")


if __name__ == "__main__":
    main()
