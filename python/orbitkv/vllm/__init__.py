"""OrbitKV for vLLM: ``OrbitKVConnector``, a ``KVConnectorBase_V1``.

vLLM is imported lazily and only if present: with vLLM the connector
subclasses vLLM's base class; without it (tests, the test engine) a stand-in
base with the same method names (``VLLM_AVAILABLE`` says which). See
``connector`` for the configuration and docs/adapters.md for the whole.
"""

from ._base import VLLM_AVAILABLE, KVConnectorMetadata, KVConnectorRole
from .connector import OrbitKVConnector
from .hashing import chain_block_hashes, extend_chain
from .kvbuffer import kv_cache_buffer
from .metadata import LoadSpec, OrbitKVConnectorMetadata, SaveSpec
from .options import ConnectorOptions, OptionError, parse_options

__all__ = [
    "OrbitKVConnector",
    "OrbitKVConnectorMetadata",
    "LoadSpec",
    "SaveSpec",
    "KVConnectorRole",
    "KVConnectorMetadata",
    "VLLM_AVAILABLE",
    "ConnectorOptions",
    "OptionError",
    "parse_options",
    "chain_block_hashes",
    "extend_chain",
    "kv_cache_buffer",
]
