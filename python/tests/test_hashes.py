"""BlockHashes batches and HashView prefixes: validation, sharing, lifetime.
No Manager needed."""

from __future__ import annotations

import gc
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import BlockHashes, HashView  # noqa: E402


def hashes(n: int) -> list[bytes]:
    return [bytes([i % 256]) * 16 for i in range(n)]


class TestBlockHashes(unittest.TestCase):
    def test_len_index_and_iteration_return_the_hashes(self):
        hs = hashes(5)
        bh = BlockHashes(hs)
        self.assertEqual(len(bh), 5)
        self.assertEqual(bh[0], hs[0])
        self.assertEqual(bh[-1], hs[4])
        self.assertEqual(list(bh), hs)
        with self.assertRaises(IndexError):
            bh[5]

    def test_a_hash_of_the_wrong_width_is_refused_naming_its_index(self):
        for bad, index in [([b"a" * 16, b"b" * 15], 1), ([b"a" * 17], 0), ([b"a" * 16] * 3 + [b""], 3)]:
            with self.subTest(index=index):
                with self.assertRaises(ValueError) as cm:
                    BlockHashes(bad)
                self.assertIn(f"hash {index}", str(cm.exception))
                self.assertIn("16", str(cm.exception))

    def test_non_bytes_and_empty_batches_are_refused(self):
        with self.assertRaises(ValueError) as cm:
            BlockHashes([b"a" * 16, 7])
        self.assertIn("hash 1 is a int", str(cm.exception))
        with self.assertRaises(ValueError):
            BlockHashes([])
        with self.assertRaises(ValueError):
            BlockHashes.from_bytes(b"x" * 17)

    def test_prefix_slices_share_the_batch(self):
        bh = BlockHashes(hashes(8))
        v = bh[:3]
        self.assertIsInstance(v, HashView)
        self.assertIs(v.batch, bh)
        self.assertEqual(len(v), 3)
        self.assertEqual(v.batch.handle, bh.handle)
        self.assertEqual(v.batch.data_address, bh.data_address)
        self.assertEqual(v[:2], bh[:2])
        self.assertIs(v[:2].batch, bh)
        self.assertEqual(bh.view(), bh[:8])
        self.assertEqual(bh[:100].length, 8)   # Python slice rules: clamped
        self.assertEqual(bh[:-1].length, 7)
        self.assertNotEqual(bh[:3], BlockHashes(hashes(8))[:3])  # another batch, same bytes

    def test_only_prefix_slices_exist(self):
        bh = BlockHashes(hashes(4))
        for key in (slice(1, None), slice(None, None, 2)):
            with self.subTest(key=key):
                with self.assertRaises(ValueError):
                    bh[key]

    def test_from_engine_and_from_bytes_agree(self):
        engine = [1, 2, (3, b"x")]
        a = BlockHashes.from_engine(engine)
        b = BlockHashes([orbitkv.block_hash16(h) for h in engine])
        c = BlockHashes.from_bytes(b"".join(orbitkv.block_hash16(h) for h in engine))
        self.assertEqual(list(a), list(b))
        self.assertEqual(list(a), list(c))

    def test_close_is_idempotent_and_later_use_raises_closed(self):
        bh = BlockHashes(hashes(2))
        v = bh[:1]
        bh.close()
        bh.close()
        self.assertTrue(bh.closed)
        with self.assertRaises(orbitkv.Closed):
            bh.handle
        with self.assertRaises(orbitkv.Closed):
            v[0]

    def test_many_batches_are_freed_by_the_collector(self):
        for _ in range(2000):
            BlockHashes(hashes(64))[:10]
        gc.collect()


if __name__ == "__main__":
    unittest.main()
