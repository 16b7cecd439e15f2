"""CacheIdentity namespaces and block_hash16: deterministic, distinct, and
refusing what they cannot encode. No Manager needed."""

from __future__ import annotations

import collections
import hashlib
import os
import struct
import subprocess
import sys
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import CacheIdentity, block_hash16  # noqa: E402

BASE = dict(model_id="meta-llama/Llama-3.1-8B", revision="0e9e39f", dtype="bfloat16", kv_layout="vllm-nhd",
            block_tokens=16, tp_rank=0, tp_size=2, pp_rank=0, pp_size=1)


def twin_fingerprint(i: CacheIdentity) -> bytes:
    """identity.c's encoding restated from its comment: tag, then each field
    as a u32 LE length and its bytes (integers as length 4 + u32 LE)."""
    out = bytearray(b"orbitkv.namespace.v1")

    def s(v: str) -> None:
        raw = v.encode()
        out.extend(struct.pack("<I", len(raw)) + raw)

    def n(v: int) -> None:
        out.extend(struct.pack("<II", 4, v))

    for v in (i.model_id, i.revision, i.dtype, i.kv_layout):
        s(v)
    for v in (i.block_tokens, i.tp_rank, i.tp_size, i.pp_rank, i.pp_size, i.cp_rank, i.cp_size):
        n(v)
    s(i.lora_id)
    s(i.salt)
    return hashlib.sha256(out).digest()[:16]


class TestNamespace(unittest.TestCase):
    def test_namespace_is_16_bytes_and_matches_the_documented_encoding(self):
        i = CacheIdentity(**BASE, cp_rank=1, cp_size=2, lora_id="sql-lora", salt="tenant-a")
        ns = i.namespace()
        self.assertEqual(len(ns), 16)
        self.assertEqual(ns, twin_fingerprint(i))
        self.assertEqual(CacheIdentity(**BASE).namespace(), twin_fingerprint(CacheIdentity(**BASE)))

    def test_two_identities_differ_in_every_field(self):
        base = CacheIdentity(**BASE)
        changes = dict(model_id="other", revision="x", dtype="fp8_e4m3", kv_layout="sglang", block_tokens=32,
                       tp_rank=1, tp_size=4, pp_size=2, cp_size=2, lora_id="a", salt="b")
        seen = {base.namespace()}
        for field, value in changes.items():
            with self.subTest(field=field):
                ns = CacheIdentity(**{**BASE, field: value}).namespace()
                self.assertNotIn(ns, seen)
                seen.add(ns)

    def test_length_prefixes_keep_neighbouring_strings_apart(self):
        a = CacheIdentity(**{**BASE, "model_id": "ab", "revision": "c"})
        b = CacheIdentity(**{**BASE, "model_id": "a", "revision": "bc"})
        self.assertNotEqual(a.namespace(), b.namespace())

    def test_namespace_is_the_same_in_another_process(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import orbitkv; "
                f"print(orbitkv.CacheIdentity(**{BASE!r}).namespace().hex())")
        out = subprocess.run([sys.executable, "-c", code, support.PYTHON_DIR], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.strip()
        self.assertEqual(out, CacheIdentity(**BASE).namespace().hex())

    def test_bad_identities_name_the_field(self):
        cases = {
            "block_tokens": dict(block_tokens=0),
            "tp_rank": dict(tp_rank=2),
            "pp_size": dict(pp_size=0),
            "cp_rank": dict(cp_rank=1),
            "model_id": dict(model_id="a\0b"),
            "salt": dict(salt="x" * 1025),
            "dtype": dict(dtype=3),
            "tp_size": dict(tp_size=2 ** 32),
        }
        for field, change in cases.items():
            with self.subTest(field=field):
                with self.assertRaises(ValueError) as cm:
                    CacheIdentity(**{**BASE, **change}).namespace()
                self.assertIn(field, str(cm.exception))
                self.assertIsInstance(cm.exception, orbitkv.BadArgument)


class TestBlockHash16(unittest.TestCase):
    # Computed once with this package (identity.py's encoding) and frozen:
    # a change here changes every engine's keys.
    GOLDEN = [
        (0, "654307b91079a350479a9f228d4af8ce"),
        (1, "090f072513621393ee37cd053550a101"),
        (-1, "a5d170b0a4c9658db4f0a638611f5bc6"),
        (2 ** 64 + 7, "adce325a51ea42bdfde9ae64f89f9b07"),
        (b"\x01", "d9f88b95e7463ecf29e74195080123af"),
        (bytes(range(16)), "698b249221374228bc8071fcf9dff8c8"),
        ((1, (2, 3), None, "img"), "fc20f3327b043f0e48d9e64f8f84aed8"),
        ((), "299247d212bce9c5b1ba9a3f0723b74b"),
    ]

    def test_golden_values(self):
        for value, want in self.GOLDEN:
            with self.subTest(value=value):
                self.assertEqual(block_hash16(value).hex(), want)

    def test_encoding_is_the_documented_one(self):
        raw = b"orbitkv-block-hash-v1\0" + b"i" + struct.pack("<I", 1) + b"\x01"
        self.assertEqual(block_hash16(1), hashlib.sha256(raw).digest()[:16])
        raw = b"orbitkv-block-hash-v1\0" + b"t" + struct.pack("<I", 2) + b"b" + struct.pack("<I", 2) + b"ab" \
            + b"i" + struct.pack("<I", 2) + (300).to_bytes(2, "little")
        self.assertEqual(block_hash16((b"ab", 300)), hashlib.sha256(raw).digest()[:16])

    def test_types_never_collide(self):
        values = [1, b"\x01", (1,), ((1,),), (b"\x01",), 256, b"\x00\x01", -256, (1, 2), ((1, 2),), (1, (2,))]
        hashes = [block_hash16(v) for v in values]
        self.assertEqual(len(set(hashes)), len(values))

    def test_a_16_byte_value_is_hashed_not_passed_through(self):
        v = bytes(range(16))
        self.assertNotEqual(block_hash16(v), v)
        self.assertEqual(len(block_hash16(v)), 16)

    def test_bytes_like_and_named_tuples_are_accepted(self):
        self.assertEqual(block_hash16(bytearray(b"xy")), block_hash16(b"xy"))
        self.assertEqual(block_hash16(memoryview(b"xy")), block_hash16(b"xy"))
        BlockHash = collections.namedtuple("BlockHash", "hash_value token_ids extra_keys")
        self.assertEqual(block_hash16(BlockHash(7, (1, 2), None)), block_hash16((7, (1, 2), None)))

    def test_deterministic_across_processes(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import orbitkv; "
                "print(orbitkv.block_hash16((2**100, b'k', ('s', None))).hex())")
        outs = set()
        for seed in (1, 2):
            run = subprocess.run([sys.executable, "-c", code, support.PYTHON_DIR], capture_output=True, text=True,
                                 check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)})
            outs.add(run.stdout.strip())
        self.assertEqual(outs, {block_hash16((2 ** 100, b"k", ("s", None))).hex()})

    def test_other_types_are_refused_naming_the_type(self):
        for value, name in [(1.5, "float"), ("abc", "str"), ([1, 2], "list"), (None, "NoneType"), (True, "bool"),
                            ({1: 2}, "dict"), ((1, 2.0), "float"), ((1, [2]), "list")]:
            with self.subTest(value=value):
                with self.assertRaises(TypeError) as cm:
                    block_hash16(value)
                self.assertIn(name, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
