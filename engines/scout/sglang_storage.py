"""Real SGLang pieces on the CPU: SGLang's StorageBackendFactory builds
OrbitKVStorage from a 'dynamic' backend config, SGLang's own
MHATokenToKVPool (device="cpu") and MHATokenToKVPoolHost are registered
with it, and two pages go out (batch_set_v1) and back (batch_get_v1)
through the Manager.

  PYTHONPATH=python build/venv/sglang/bin/python engines/scout/sglang_storage.py SOCKET"""

import sys
import uuid

import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory

cfg = HiCacheStorageConfig(
    tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1, is_mla_model=False,
    enable_storage_metrics=False, is_page_first_layout=False, model_name="tiny",
    extra_config={"backend_name": "orbitkv", "module_path": "orbitkv.sglang", "class_name": "OrbitKVStorage",
                  "orbitkv.bootstrap_socket": sys.argv[1], "orbitkv.model_revision": "r1"})
backend = StorageBackendFactory.create_backend("dynamic", cfg, None)
print("factory built", type(backend).__module__, type(backend).__name__)
dev = MHATokenToKVPool(size=1024, page_size=32, dtype=torch.float32, head_num=2, head_dim=64, layer_num=2,
                       device="cpu", enable_memory_saver=False)
host = MHATokenToKVPoolHost(
    dev.get_device_pool_infos()[0].buffer_info, 2.0, 0, 32, "layer_first", pin_memory=False, device="cpu",
    device_capacity_tokens=dev.size if dev.host_capacity_tokens is None else dev.host_capacity_tokens,
    start_layer=dev.start_layer, end_layer=dev.end_layer, write_back_staging=dev.hicache_write_back_staging)
backend.register_mem_pool_host(host)
host.kv_buffer.copy_(torch.randn(host.kv_buffer.shape))
# Keys name content (SGLang's page hashes): fresh keys for fresh random pages.
keys = [uuid.uuid4().hex for _ in range(3)]
print("set", backend.batch_set_v1(keys[:2], torch.arange(0, 64)))
print("exists", backend.batch_exists(keys))
print("get", backend.batch_get_v1(keys[:2], torch.arange(64, 128)))
same = all(torch.equal(host.get_data_page(i, flat=True), host.get_data_page(64 + i, flat=True)) for i in (0, 32))
print("restored pages equal the saved ones:", same, "stats", backend.stats)
