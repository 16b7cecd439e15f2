"""In-tree PEP 517 build backend of the orbitkv wheel (standard library only).

The wheel holds the ``orbitkv`` package (every ``.py`` under
``python/orbitkv``) and one native file, ``orbitkv/_lib/liborbitkv.so.0``: a
copy of the library built by ``make native`` (``build/native``), where
``orbitkv._native`` looks first after ``$ORBITKV_LIB``. The library links
against the system's libc, libcrypto (3) and libprotobuf-c (1), so the tag is
the build machine's platform (``linux_x86_64``, ``linux_aarch64``), not a
manylinux tag: the wheel installs on hosts with the same Debian 12 libraries.

Where the library comes from, first match wins: the ``liborbitkv`` key of
``config_settings`` (``pip wheel -C liborbitkv=PATH``), ``$ORBITKV_WHEEL_LIB``,
then ``<repository>/build/native/liborbitkv.so.0``. A missing file is a
``FileNotFoundError`` naming the path and ``make native``.

The version is the repository's, in PEP 440 form, as ``ci/version.sh
pep440`` prints it from ``VERSION`` and git: ``0.1.0`` for a release,
``0.1.0.devN+gHASH`` between releases (N commits since VERSION last changed),
``.dirty`` appended for a modified tree. ``$ORBITKV_WHEEL_VERSION``, when
set, replaces it (a build outside the repository). A version that is not
PEP 440 is a ``ValueError`` naming it.

The wheel is reproducible: entries are sorted and dated
``$SOURCE_DATE_EPOCH`` (1980-01-01 when unset), so two builds of the same
tree are byte-identical.

Run directly, ``python3 orbitkv_wheel.py OUTDIR`` builds into OUTDIR and
prints the wheel's path.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile

__all__ = ["build_wheel", "get_requires_for_build_wheel", "version", "wheel_name"]

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REPO = os.path.dirname(_PYTHON_DIR)
_PACKAGE = "orbitkv"
#: Where the bundled library lies inside the wheel (orbitkv._native.BUNDLED_LIBRARY).
LIBRARY_ARCNAME = f"{_PACKAGE}/_lib/liborbitkv.so.0"
_DEFAULT_LIBRARY = os.path.join(_REPO, "build", "native", "liborbitkv.so.0")


# PEP 440's canonical public version with an optional local label (the
# subset ci/version.sh prints: N.N.N, .devN, +label.label).
_PEP440 = re.compile(r"^[0-9]+(\.[0-9]+)*(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")


def version() -> str:
    """The wheel's version: ``$ORBITKV_WHEEL_VERSION``, else ``ci/version.sh
    pep440`` of the repository. Raises ``ValueError`` for a version that is
    not PEP 440 and ``RuntimeError`` when ci/version.sh fails."""
    v = os.environ.get("ORBITKV_WHEEL_VERSION")
    if not v:
        script = os.path.join(_REPO, "ci", "version.sh")
        r = subprocess.run([script, "pep440"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"orbitkv wheel: {script} pep440 failed (exit {r.returncode}): {r.stderr.strip()}")
        v = r.stdout.strip()
    if not _PEP440.match(v):
        raise ValueError(f"orbitkv wheel: version {v!r} is not PEP 440 (want 0.1.0 or 0.1.0.dev12+g0123456789ab)")
    return v


def _project() -> dict:
    with open(os.path.join(_PYTHON_DIR, "pyproject.toml"), "rb") as f:
        p = tomllib.load(f)["project"]
    p["version"] = version()
    return p


def _tag() -> str:
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{plat}"


def wheel_name() -> str:
    """The file name of the wheel this tree builds on this machine, e.g.
    ``orbitkv-0.1.0.dev12+g0123456789ab-py3-none-linux_x86_64.whl``."""
    p = _project()
    return f"{p['name']}-{p['version']}-{_tag()}.whl"


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    """PEP 517: nothing beyond the standard library."""
    return []


def _library(config_settings: dict | None) -> str:
    path = (config_settings or {}).get("liborbitkv") or os.environ.get("ORBITKV_WHEEL_LIB") or _DEFAULT_LIBRARY
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise FileNotFoundError(f"orbitkv wheel: liborbitkv {path!r} does not exist: run `make native` "
                                "(it builds build/native/liborbitkv.so.0) or pass -C liborbitkv=PATH")
    return real


def _sources() -> list[tuple[str, str]]:
    root = os.path.join(_PYTHON_DIR, _PACKAGE)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "_lib")
        for name in sorted(filenames):
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                out.append((os.path.relpath(full, _PYTHON_DIR).replace(os.sep, "/"), full))
    return out


def _metadata(p: dict) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    readme = p.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_PYTHON_DIR, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return ("\n".join(lines) + "\n" + body).encode()


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    """PEP 517: write the wheel into ``wheel_directory`` (created if needed)
    and return its file name. Raises ``FileNotFoundError`` when liborbitkv
    is missing (see the module doc for where it is looked up)."""
    p = _project()
    lib = _library(config_settings)
    dist_info = f"{p['name']}-{p['version']}.dist-info"
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    date = time.gmtime(max(epoch, 315532800))[:6]
    entries: list[tuple[str, bytes, int]] = []  # (arcname, data, unix mode)
    for arcname, full in _sources():
        with open(full, "rb") as f:
            entries.append((arcname, f.read(), 0o644))
    with open(lib, "rb") as f:
        entries.append((LIBRARY_ARCNAME, f.read(), 0o755))
    entries.append((f"{dist_info}/METADATA", _metadata(p), 0o644))
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: orbitkv_wheel\nRoot-Is-Purelib: false\nTag: {_tag()}\n"
    entries.append((f"{dist_info}/WHEEL", wheel_meta.encode(), 0o644))
    record = [_record_line(a, d) for a, d, _ in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    os.makedirs(wheel_directory, exist_ok=True)
    name = wheel_name()
    tmp = os.path.join(wheel_directory, name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arcname, data, mode in entries:
            info = zipfile.ZipInfo(arcname, date_time=date)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, os.path.join(wheel_directory, name))
    return name


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: orbitkv_wheel.py OUTDIR")
    print(os.path.join(sys.argv[1], build_wheel(sys.argv[1])))
