"""What of the installed vLLM imports and constructs on a machine without a
GPU: one line per step, ``ok`` with what was made or ``FAIL`` with the
exact exception. Not a test (the contract is ``make vllm-contract``); the
findings are in docs/adapters.md, "vLLM releases".

  engines/deps.sh vllm033
  PYTHONPATH=python build/venv/vllm033/bin/python engines/scout/vllm033_spike.py
  VLLM_TARGET_DEVICE=cpu PYTHONPATH=python build/venv/vllm033/bin/python engines/scout/vllm033_spike.py

Nothing is downloaded: the model directory holds a Qwen2 config.json made
here (no weights; nothing below loads them). No Manager is started, so the
connector steps show how far construction gets before it needs one."""

import json
import os
import sys
import tempfile
import traceback

results = {}


def step(name, fn):
    try:
        out = fn()
        results[name] = out
        print(f"ok    {name}: {out!r}"[:300], flush=True)
        return out
    except BaseException as e:  # noqa: BLE001 - the spike reports every failure as it is
        tb = traceback.extract_tb(e.__traceback__)[-1]
        print(f"FAIL  {name}: {type(e).__name__}: {e}  [{os.path.relpath(tb.filename)}:{tb.lineno}]"[:600],
              flush=True)
        return None


import vllm  # noqa: E402

print("vllm", vllm.__version__, "python", sys.version.split()[0])
step("platform", lambda: (type(__import__("vllm.platforms", fromlist=["x"]).current_platform).__name__,
                          __import__("vllm.platforms", fromlist=["x"]).current_platform.device_type))
step("torch.cuda.is_available", lambda: __import__("torch").cuda.is_available())

from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, VllmConfig  # noqa: E402

model_dir = tempfile.mkdtemp(prefix="vllm033-spike-")


def write_config():
    from transformers import Qwen2Config
    Qwen2Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                torch_dtype="float32", tie_word_embeddings=False).save_pretrained(model_dir)
    return sorted(os.listdir(model_dir))


step("Qwen2 config.json", write_config)
step("VllmConfig()", lambda: type(VllmConfig()).__name__)
mc = step("ModelConfig(local config, skip_tokenizer_init)",
          lambda: ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=2048))
ktc = step("KVTransferConfig(OrbitKVConnector)", lambda: KVTransferConfig(
    kv_connector="OrbitKVConnector", kv_connector_module_path="orbitkv.vllm.connector", kv_role="kv_both",
    kv_connector_extra_config={"orbitkv.bootstrap_socket": os.path.join(model_dir, "nobody.sock")}))
vc = step("VllmConfig(model, cache block 32, kv transfer)", lambda: VllmConfig(
    model_config=mc, cache_config=CacheConfig(block_size=32), kv_transfer_config=ktc))
step("DeviceConfig(device='cpu')", lambda: DeviceConfig(device="cpu"))
vc = vc or step("VllmConfig(model, cache block 32, kv transfer, device cpu)", lambda: VllmConfig(
    model_config=mc, cache_config=CacheConfig(block_size=32), kv_transfer_config=ktc,
    device_config=DeviceConfig(device="cpu")))

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

step("KVConnectorFactory.get_connector_class", lambda: KVConnectorFactory.get_connector_class(ktc).__name__)

import torch  # noqa: E402
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec,  # noqa: E402
                                        KVCacheTensor, MambaSpec, SlidingWindowSpec)

full = step("FullAttentionSpec", lambda: FullAttentionSpec(block_size=32, num_kv_heads=2, head_size=64,
                                                            dtype=torch.float32))
swa = step("SlidingWindowSpec", lambda: SlidingWindowSpec(block_size=32, num_kv_heads=2, head_size=64,
                                                          dtype=torch.float32, sliding_window=128))
mamba = step("MambaSpec", lambda: MambaSpec(block_size=32, shapes=((4, 64), (2, 16, 16)),
                                            dtypes=(torch.float32, torch.float32)))
step("page sizes (full, swa, mamba)", lambda: (full.page_size_bytes, swa.page_size_bytes, mamba.page_size_bytes))


def kvcfg(specs):
    groups = [KVCacheGroupSpec([f"model.layers.{i}.attn"], s) for i, s in enumerate(specs)]
    tensors = [KVCacheTensor(size=64 * s.page_size_bytes, layers=[f"model.layers.{i}.attn"],
                             layer_stride=0, block_stride=s.page_size_bytes) for i, s in enumerate(specs)]
    return KVCacheConfig(num_blocks=64, kv_cache_tensors=tensors, kv_cache_groups=groups)


kc_full = step("KVCacheConfig(full)", lambda: kvcfg([full]))
step("KVCacheConfig(full + sliding window)", lambda: kvcfg([full, swa]))
step("KVCacheConfig(full + Mamba)", lambda: kvcfg([full, mamba]))

from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import KVCacheBlock  # noqa: E402
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

req = step("Request", lambda: Request("r0", list(range(1, 101)), SamplingParams(max_tokens=4), None))
step("KVCacheBlocks.get_block_ids", lambda: KVCacheBlocks(([KVCacheBlock(i) for i in range(4)],)).get_block_ids())
step("SchedulerOutput.make_empty", lambda: type(SchedulerOutput.make_empty()).__name__)
step("CachedRequestData.make_empty", lambda: type(CachedRequestData.make_empty()).__name__)
step("NewRequestData.from_request", lambda: NewRequestData.from_request(req, ([0, 1, 2, 3],), None).req_id
     if req else None)
step("KVCacheManager(full)", lambda: type(KVCacheManager(kc_full, max_model_len=2048, scheduler_block_size=32,
                                                         hash_block_size=32)).__name__)


def scheduler():
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.structured_output import StructuredOutputManager
    return type(Scheduler(vc, kc_full, StructuredOutputManager(vc), block_size=32)).__name__


step("Scheduler(VllmConfig, KVCacheConfig) with the connector", scheduler)
step("OrbitKVConnector(VllmConfig, SCHEDULER) without a Manager",
     lambda: KVConnectorFactory.create_connector(vc, KVConnectorRole.SCHEDULER, kc_full))
step("OrbitKVConnector(VllmConfig, WORKER) without a Manager",
     lambda: KVConnectorFactory.create_connector(vc, KVConnectorRole.WORKER, kc_full))
