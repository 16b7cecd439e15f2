"""Which SGLang releases ``OrbitKVStorage`` supports, and the check at start.

``OrbitKVStorage`` implements the storage interface of the SGLang releases
named in ``SUPPORTED_SGLANG``: ``HiCacheStorage``'s abstract methods, the
zero-copy ``batch_get_v1``/``batch_set_v1`` and the v2 pool API
(``register_mem_host_pool_v2``, ``on_host_pools_registered``,
``batch_exists_v2``, ``batch_get_v2``, ``batch_set_v2``), with the
signatures of ``sglang/srt/mem_cache/hicache_storage.py`` there. SGLang
changes that interface between minor releases (0.5.23 moved the host pools
to ``pool_host/`` and added v2), so another release is refused at engine
start, never run on a guess.
"""

from __future__ import annotations

__all__ = ["SUPPORTED_SGLANG", "UnsupportedSGLang", "installed_sglang", "check_sglang"]

#: SGLang releases whose storage interface this backend implements, checked
#: against each by ``make e2e-sglang`` (engines/sglang.lock pins the first).
SUPPORTED_SGLANG = ("0.5.23",)


class UnsupportedSGLang(RuntimeError):
    """The installed SGLang is not one of ``SUPPORTED_SGLANG``."""


def installed_sglang() -> str | None:
    """The installed SGLang's version string (its distribution metadata,
    else ``sglang.__version__``); None when SGLang is not installed."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("sglang")
        except PackageNotFoundError:
            pass
        import sglang  # type: ignore
        return str(getattr(sglang, "__version__", "")) or None
    except ImportError:
        return None


def check_sglang(found: str | None) -> None:
    """Raise ``UnsupportedSGLang`` naming ``found`` and the supported
    releases unless ``found`` is one of ``SUPPORTED_SGLANG``. ``found``
    None (version unknown) is refused too."""
    if found in SUPPORTED_SGLANG:
        return
    raise UnsupportedSGLang(
        f"OrbitKVStorage: SGLang {found or '(version unknown)'} is installed; this OrbitKV supports SGLang "
        + ", ".join(SUPPORTED_SGLANG) + " only (its HiCacheStorage interface changes between releases). "
        "Install a supported SGLang (engines/sglang.lock) or an OrbitKV that names this release.")
