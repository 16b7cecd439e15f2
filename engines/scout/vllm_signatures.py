"""Compares OrbitKVConnector's methods with the installed vLLM's
KVConnectorBase_V1: every signature that differs, and the real base's
methods the adapter inherits.

  PYTHONPATH=python build/venv/vllm/bin/python engines/scout/vllm_signatures.py"""

import inspect

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1 as Real

import orbitkv.vllm._base as standin
from orbitkv.vllm.connector import OrbitKVConnector


def shape(sig):
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]


print("orbitkv took vLLM's base:", standin.VLLM_AVAILABLE)
real = {n: inspect.signature(f) for n, f in inspect.getmembers(Real, inspect.isfunction)}
ours = {n: inspect.signature(f) for n, f in vars(OrbitKVConnector).items() if inspect.isfunction(f)}
for name in sorted(ours):
    if name.startswith("_") and name != "__init__":
        continue
    if name not in real:
        print("only in OrbitKVConnector:", name, ours[name])
    elif shape(ours[name]) != shape(real[name]):
        print("differs:", name, "\n   ours:", ours[name], "\n   real:", real[name])
print("every abstract method implemented:", all(n in ours for n in Real.__abstractmethods__))
print("inherited from the real base:", sorted(n for n in real if n not in ours and not n.startswith("_")))
