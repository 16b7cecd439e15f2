"""The model revision of a cache identity when the engine gives none.

KV computed by one set of weights must never be restored into a model with
other weights. The namespace carries the model id and its revision; when
the engine's revision is ``None`` or empty, ``resolve_revision`` derives
one:

* the model path is a local directory: ``"sha256:<hex>"``, the SHA-256 of
  its ``config.json`` and, when present, of its weights index
  (``model.safetensors.index.json``, ``pytorch_model.bin.index.json``), so
  a checkpoint whose config or shard layout changed gets a new namespace.
  (Weights rewritten in place with the same config and index are not seen:
  set the revision explicitly when you retrain under the same path);
* otherwise (a hub id, or a directory without ``config.json``): ``""``, and
  a warning, once per model, that KV of updated weights published under
  the same id could be reused: set the revision explicitly.
"""

from __future__ import annotations

import hashlib
import logging
import os

__all__ = ["resolve_revision", "derive_revision", "WEIGHT_INDEX_FILES"]

log = logging.getLogger("orbitkv.adapter")

WEIGHT_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")

_warned: set[str] = set()


def derive_revision(model_path: str) -> str:
    """``"sha256:<64 hex>"`` over the directory's config.json (and weights
    index, if present), or "" when ``model_path`` is not a local model
    directory."""
    if not model_path or not os.path.isdir(model_path):
        return ""
    cfg = os.path.join(model_path, "config.json")
    if not os.path.isfile(cfg):
        return ""
    h = hashlib.sha256()
    for name in ("config.json",) + WEIGHT_INDEX_FILES:
        p = os.path.join(model_path, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                data = f.read()
            h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return "sha256:" + h.hexdigest()


def resolve_revision(revision: object, model_path: str, who: str = "OrbitKV") -> str:
    """``revision`` when given (non-empty), else ``derive_revision``, else ""
    with a one-time warning naming ``who`` and the model."""
    if revision:
        return str(revision)
    derived = derive_revision(model_path)
    if derived:
        return derived
    if model_path not in _warned:
        _warned.add(model_path)
        log.warning("%s: model %r has no revision and is not a local model directory: KV cached for updated "
                    "weights published under the same model id could be reused; set the revision explicitly",
                    who, model_path)
    return ""
