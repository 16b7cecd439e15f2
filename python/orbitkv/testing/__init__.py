"""Test engine and end-to-end gate of the OrbitKV engine adapters.

* ``model`` - a small decoder-only transformer (PyTorch, CPU, float32,
  fixed-seed weights) with a paged KV cache in an OrbitKV ``EngineBuffer``;
* ``engine`` - the engine process (``python -m orbitkv.testing.engine``):
  greedy decoding, driving ``orbitkv.vllm.OrbitKVConnector`` through vLLM's
  scheduler/worker call sequence or ``orbitkv.sglang.OrbitKVStorage``
  through HiCache's calls;
* ``manager`` - an orbitkv-manager process and its failpoint controls;
* ``e2e`` - the gate (``python -m orbitkv.testing.e2e``; ``make e2e``).

The engine stands in for vLLM and SGLang, which cannot run here: what it
validates is the adapters' contract with the Manager and the call order the
real engines use, not the engines themselves (docs/adapters.md).
"""
