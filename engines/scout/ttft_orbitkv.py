"""Time to first token of 1024- and 2048-token prompts in real vLLM with
OrbitKVConnector (in-process engine, vLLM's prefix cache on but empty in a
new process). Run it twice against one Manager, LABEL save then warm: the
second process restores from OrbitKV.

  PYTHONPATH=python VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=2 \
      build/venv/vllm/bin/python engines/scout/ttft_orbitkv.py MODEL SOCKET LABEL"""

import sys, time
def main():
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt
    ktc = KVTransferConfig(kv_connector="OrbitKVConnector", kv_connector_module_path="orbitkv.vllm.connector",
                           kv_role="kv_both", kv_connector_extra_config={"orbitkv.bootstrap_socket": sys.argv[2]})
    llm = LLM(model=sys.argv[1], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
              max_model_len=4096, seed=0, enable_prefix_caching=True, kv_transfer_config=ktc)
    for n in (1024, 2048):
        p = [TokensPrompt(prompt_token_ids=[(i * 13 + n) % 8000 + 1 for i in range(n)])]
        t = time.time()
        o = llm.generate(p, SamplingParams(temperature=0, max_tokens=1, detokenize=False))
        print(f"{sys.argv[3]} prompt {n}: TTFT {time.time()-t:.3f} s cached {o[0].num_cached_tokens} token {list(o[0].outputs[0].token_ids)}", flush=True)
    from vllm.distributed.kv_transfer import get_kv_transfer_group
    print(sys.argv[3], "worker stats", get_kv_transfer_group().stats)
if __name__ == "__main__":
    main()
