"""One real-vLLM engine process of the ``make e2e-vllm`` gate.

``python e2e_vllm_engine.py model DIR [FAMILY] [DIR FAMILY ...]`` writes a
gate's model into each DIR, random weights from a fixed seed (nothing
downloaded); FAMILY is ``qwen2`` (the default: ``make e2e-vllm``'s main
gate), ``gemma3`` or ``qwen3next`` (its hybrid gate,
``e2e_vllm_hybrid.py``; see MODELS).
``python e2e_vllm_engine.py run SPEC_JSON`` starts one in-process vLLM
engine (the caller sets ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) as SPEC says,
prints ``STARTED {json}`` (the vLLM version, the worker connector's
``kv_mode``, and ``kv_cache``: the scheduler's hybrid KV cache manager flag
and its KV cache groups, see ``kv_cache_groups``) and runs its steps in
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

SPEC fields: ``model``, ``steps``; optional ``dtype`` (default float32),
``block_size`` (default 32; vLLM raises it for a model with Mamba layers
until an attention page holds a Mamba state), ``max_model_len`` (default 1024),
``max_num_batched_tokens`` (vLLM's chunk size), ``disable_hybrid`` (true:
``disable_hybrid_kv_cache_manager=True``), ``tp``, ``revision``,
``prefix_caching``, ``kv_events`` (an endpoint: vLLM's own KV events on,
published there over ZeroMQ, ``KVEventsConfig``), and the connector's
``ktc``, ``socket``, ``extra``, ``policy``. vLLM's own log lines go to the same stdout.

The gates themselves are ``e2e_vllm.py`` and ``e2e_vllm_hybrid.py``; they
read these lines.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

BLOCK = 32
MAX_TOKENS = 8


#: The families ``model`` writes: vocabulary 1024, hidden 256, attention
#: heads of 64 with 2 KV heads, float32 weights from seed 1234.
#: qwen2: 2 full-attention layers. gemma3: 2 layers, the first a sliding
#: window of 64 tokens, the second full attention. qwen3next: 3 linear
#: attention (Gated DeltaNet, Mamba-style state) layers then 1 full
#: attention layer, 4 experts of which 2 per token; its linear heads are 128
#: wide because vLLM-CPU's Gated DeltaNet kernel takes no other width
#: ("Unexpected head dim size, 32") and it runs only in bfloat16.
MODELS = ("qwen2", "gemma3", "qwen3next")


def make_model(out: str, family: str = "qwen2") -> None:
    import torch
    import transformers as tf

    torch.manual_seed(1234)
    common = dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                  num_key_value_heads=2, torch_dtype="float32")
    if family == "qwen2":
        cfg = tf.Qwen2Config(num_hidden_layers=2, max_position_embeddings=2048, tie_word_embeddings=False, **common)
        model = tf.Qwen2ForCausalLM(cfg)
    elif family == "gemma3":
        cfg = tf.Gemma3TextConfig(num_hidden_layers=2, head_dim=64, max_position_embeddings=2048, sliding_window=64,
                                  layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=64,
                                  tie_word_embeddings=False, **common)
        model = tf.Gemma3ForCausalLM(cfg)
    elif family == "qwen3next":
        cfg = tf.Qwen3NextConfig(num_hidden_layers=4, head_dim=64, max_position_embeddings=4096,
                                 layer_types=["linear_attention"] * 3 + ["full_attention"], full_attention_interval=4,
                                 linear_num_value_heads=2, linear_num_key_heads=1, linear_key_head_dim=128,
                                 linear_value_head_dim=128, linear_conv_kernel_dim=4, num_experts=4,
                                 num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
                                 decoder_sparse_step=1, tie_word_embeddings=False, **common)
        model = tf.Qwen3NextForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown model family {family!r}: want one of {', '.join(MODELS)}")
    model.to(torch.float32).save_pretrained(out)


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


def kv_cache_groups(llm) -> dict:
    """The scheduler's view of the KV cache (in-process engine): whether
    vLLM disabled its hybrid KV cache manager, and one entry per KV cache
    group: spec class name, layers, block size (tokens), page size (bytes
    per block of one layer) and, for sliding-window groups, the window
    (tokens). Empty when the scheduler is not in this process."""
    try:
        core = llm.llm_engine.engine_core.engine_core
        sched = core.scheduler
        cfg = sched.kv_cache_config
    except Exception:
        return {}
    groups = []
    for g in cfg.kv_cache_groups:
        spec = g.kv_cache_spec
        groups.append({"spec": type(spec).__name__, "layers": len(g.layer_names), "block_size": spec.block_size,
                       "page_size_bytes": spec.page_size_bytes,
                       "sliding_window": getattr(spec, "sliding_window", None)})
    return {"disable_hybrid_kv_cache_manager": core.vllm_config.scheduler_config.disable_hybrid_kv_cache_manager,
            "num_blocks": cfg.num_blocks, "groups": groups}


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

    kw = dict(model=spec["model"], skip_tokenizer_init=True, dtype=spec.get("dtype", "float32"),
              enforce_eager=True, max_model_len=spec.get("max_model_len", 1024), seed=0,
              block_size=spec.get("block_size", BLOCK), enable_prefix_caching=True, logprobs_mode="raw_logits",
              tensor_parallel_size=spec.get("tp", 1), max_num_seqs=4, disable_log_stats=False)
    if spec.get("max_num_batched_tokens"):
        kw["max_num_batched_tokens"] = spec["max_num_batched_tokens"]
    if spec.get("disable_hybrid"):
        kw["disable_hybrid_kv_cache_manager"] = True
    if spec.get("revision"):
        kw["revision"] = spec["revision"]
    if spec.get("prefix_caching") is False:
        kw["enable_prefix_caching"] = False
    if spec.get("kv_events"):
        from vllm.config import KVEventsConfig
        kw["kv_events_config"] = KVEventsConfig(enable_kv_cache_events=True, publisher="zmq",
                                                endpoint=spec["kv_events"])
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
    emit("STARTED", {"seconds": round(time.monotonic() - t0, 1), "vllm": vllm.__version__, "kv_mode": kv_mode,
                     "kv_cache": kv_cache_groups(llm)})
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
        if len(sys.argv) > 4 and len(sys.argv) % 2:
            raise SystemExit("model DIR [FAMILY] or model DIR FAMILY DIR FAMILY ...")
        args = sys.argv[2:] if len(sys.argv) > 3 else sys.argv[2:] + ["qwen2"]
        for out, family in zip(args[::2], args[1::2]):
            make_model(out, family)
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
