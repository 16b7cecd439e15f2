"""Real vLLM with OrbitKVConnector loaded through vLLM's own mechanism
(kv_connector_module_path), the same prompt twice, vLLM's prefix cache off:
the second run's num_cached_tokens can only come from OrbitKV.

  PYTHONPATH=python VLLM_CPU_KVCACHE_SPACE=1 [VLLM_ENABLE_V1_MULTIPROCESSING=0] \\
      build/venv/vllm/bin/python engines/scout/vllm_connector.py MODEL SOCKET [BLOCK_SIZE]

A Manager must serve SOCKET. With VLLM_ENABLE_V1_MULTIPROCESSING=0 the
engine runs in this process and the connectors' stats are printed."""

import sys
import time


def main():
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt

    ktc = KVTransferConfig(kv_connector="OrbitKVConnector", kv_connector_module_path="orbitkv.vllm.connector",
                           kv_role="kv_both", kv_connector_extra_config={"orbitkv.bootstrap_socket": sys.argv[2]})
    extra = {"block_size": int(sys.argv[3])} if len(sys.argv) > 3 else {}
    t0 = time.time()
    llm = LLM(model=sys.argv[1], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
              max_model_len=1024, seed=0, kv_transfer_config=ktc, enable_prefix_caching=False, **extra)
    print("startup s", round(time.time() - t0, 1), flush=True)
    prompt = [TokensPrompt(prompt_token_ids=[(i * 7) % 1000 + 1 for i in range(300)])]
    for i in range(2):
        t = time.time()
        o = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=8, detokenize=False))
        print("run", i, list(o[0].outputs[0].token_ids), "cached", o[0].num_cached_tokens,
              "s", round(time.time() - t, 3), flush=True)
    try:
        from vllm.distributed.kv_transfer import get_kv_transfer_group
        print("worker stats", get_kv_transfer_group().stats)
        print("scheduler stats", llm.llm_engine.engine_core.engine_core.scheduler.connector.stats)
    except Exception as e:  # the engine runs in other processes
        print("stats not reachable from this process:", type(e).__name__)


if __name__ == "__main__":
    main()
