"""The ctypes mirrors of _abi agree with the C headers: sizeof and offsetof
of every mirrored field, and the values of the codes, statuses, flags and
limits, as compiled by gcc against native/include (CONTRIBUTING.md habit 13:
shared layouts are checked by a test, not by eye)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import _abi  # noqa: E402


def _c_program() -> tuple[str, dict[str, int]]:
    """A C program printing "key value" lines, and the values ctypes says."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "orbitkv/client.h"', "int main(void) {"]
    want: dict[str, int] = {}

    def emit(key: str, expr: str, value: int) -> None:
        lines.append(f'\tprintf("%s %lld\\n", "{key}", (long long)({expr}));')
        want[key] = value

    for cls, cname in _abi.C_STRUCTS.items():
        emit(f"sizeof {cname}", f"sizeof(struct {cname})", ctypes.sizeof(cls))
        emit(f"alignof {cname}", f"_Alignof(struct {cname})", ctypes.alignment(cls))
        for name, _type in cls._fields_:
            emit(f"offsetof {cname}.{name}", f"offsetof(struct {cname}, {name})", getattr(cls, name).offset)
            emit(f"sizeof {cname}.{name}", f"sizeof(((struct {cname} *)0)->{name})", getattr(cls, name).size)
    for member in _abi.Code:
        emit(f"code {member.name}", f"OKV_{member.name}", int(member))
    for member in _abi.Status:
        emit(f"status {member.name}", f"OKV_STATUS_{member.name}", int(member))
    for member in _abi.QueryFlags:
        if member.name != "NONE":
            emit(f"flag {member.name}", f"OKV_QUERY_{member.name}", int(member))
    emit("flags all", "OKV_QUERY_FLAGS_ALL", int(sum(_abi.QueryFlags)))
    for member in _abi.Role:
        emit(f"role {member.name}", f"OKV_ROLE_{member.name}", int(member))
    emit("OKV_MAX_TIMEOUT_MS", "OKV_MAX_TIMEOUT_MS", _abi.MAX_TIMEOUT_MS)
    emit("OKV_SERVICE_ID_BYTES", "OKV_SERVICE_ID_BYTES", _abi.SERVICE_ID_BYTES)
    emit("OKV_INSTANCE_ID_BYTES", "OKV_INSTANCE_ID_BYTES", _abi.INSTANCE_ID_BYTES)
    emit("OKV_RECORD_MAX_TOKENS", "OKV_RECORD_MAX_TOKENS", _abi.RECORD_MAX_TOKENS)
    emit("status max", "OKV_STATUS_MAX", max(_abi.Status))
    lines += ["\treturn 0;", "}"]
    return "\n".join(lines) + "\n", want


class TestLayoutsMatchTheHeaders(unittest.TestCase):
    def test_every_mirrored_struct_field_and_constant_matches_the_c_compiler(self):
        gcc = shutil.which("gcc")
        if gcc is None:
            self.skipTest("gcc not installed: the C sizes cannot be compiled")
        source, want = _c_program()
        with tempfile.TemporaryDirectory(prefix="orbitkv-abi-") as d:
            src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
            with open(src, "w") as f:
                f.write(source)
            cc = subprocess.run([gcc, "-std=gnu11", "-Wall", "-Werror", "-I", support.INCLUDE_DIR, src, "-o", exe],
                                capture_output=True, text=True)
            self.assertEqual(cc.returncode, 0, f"compiling the layout probe failed:\n{cc.stderr}")
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        got = {}
        for line in out.splitlines():
            key, _, value = line.rpartition(" ")
            got[key] = int(value)
        mismatches = [f"{k}: C {got.get(k)} vs ctypes {v}" for k, v in want.items() if got.get(k) != v]
        self.assertEqual(mismatches, [], "ctypes mirrors differ from the C headers")
        self.assertGreater(len(want), 100)

    def test_every_struct_has_a_c_name(self):
        mirrored = {cls for cls in vars(_abi).values()
                    if isinstance(cls, type) and issubclass(cls, ctypes.Structure)}
        self.assertEqual(mirrored, set(_abi.C_STRUCTS))


if __name__ == "__main__":
    unittest.main()
