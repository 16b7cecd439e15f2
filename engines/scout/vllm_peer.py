"""Real vLLM with a peer KV connector (one of vLLM's own, or LMCache's),
the same prompt twice with vLLM's prefix cache off: does the peer load on
this CPU, and does the second run hit?

  VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 \\
      build/venv/vllm/bin/python engines/scout/vllm_peer.py MODEL CONNECTOR [EXTRA_JSON]

CONNECTOR: a name vLLM's connector factory knows (OffloadingConnector,
SimpleCPUOffloadConnector, LMCacheConnectorV1, ...). With PREFIX_CACHE=1,
vLLM's prefix cache is on and emptied (reset_prefix_cache) between the
runs, for connectors that offload from it."""

import json
import os
import sys
import time


def main():
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.inputs import TokensPrompt

    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    ktc = KVTransferConfig(kv_connector=sys.argv[2], kv_role="kv_both", kv_connector_extra_config=extra)
    prefix = os.environ.get("PREFIX_CACHE") == "1"
    t0 = time.time()
    llm = LLM(model=sys.argv[1], skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
              max_model_len=1024, seed=0, kv_transfer_config=ktc, enable_prefix_caching=prefix)
    print("startup s", round(time.time() - t0, 1), flush=True)
    prompt = [TokensPrompt(prompt_token_ids=[(i * 7) % 1000 + 1 for i in range(300)])]
    for i in range(2):
        if i and prefix:
            print("vLLM prefix cache emptied:", llm.reset_prefix_cache(), flush=True)
        t = time.time()
        o = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=8, detokenize=False))
        print("run", i, list(o[0].outputs[0].token_ids), "cached", o[0].num_cached_tokens,
              "s", round(time.time() - t, 3), flush=True)


if __name__ == "__main__":
    main()
