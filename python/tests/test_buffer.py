"""EngineBuffer layout, bounds and lifetime without a Manager (registration
is covered in test_client)."""

from __future__ import annotations

import fcntl
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import EngineBuffer  # noqa: E402

F_GET_SEALS = 1034
F_SEAL_SHRINK, F_SEAL_GROW = 0x0002, 0x0004


class TestEngineBuffer(unittest.TestCase):
    def test_pages_are_layer_major(self):
        with EngineBuffer(3, 128, 4) as buf:
            self.assertEqual(buf.nbytes, 3 * 4 * 128)
            for layer in range(3):
                for page in range(4):
                    buf.page(layer, page)[:] = bytes([layer * 16 + page]) * 128
            whole = buf.memoryview()
            for layer in range(3):
                for page in range(4):
                    off = (layer * 4 + page) * 128
                    self.assertEqual(buf.offset(layer, page), off)
                    self.assertEqual(bytes(whole[off:off + 128]), bytes([layer * 16 + page]) * 128)
            del whole

    def test_the_memfd_is_sealed_against_shrink_and_grow(self):
        with EngineBuffer(1, 64, 1) as buf:
            seals = fcntl.fcntl(buf.fd, F_GET_SEALS)
            self.assertEqual(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW)

    def test_bad_dimensions_are_refused_naming_them(self):
        for args, name in [((0, 64, 1), "layers"), ((1, 100, 1), "page_bytes"), ((1, 64, 0), "page_count"),
                           ((1, 64, 2 ** 64), "page_count")]:
            with self.subTest(args=args):
                with self.assertRaises(ValueError) as cm:
                    EngineBuffer(*args)
                self.assertIn(name, str(cm.exception))

    def test_page_indices_out_of_range_raise_index_error(self):
        with EngineBuffer(2, 64, 3) as buf:
            with self.assertRaises(IndexError):
                buf.page(2, 0)
            with self.assertRaises(IndexError):
                buf.page(0, 3)

    def test_close_refuses_while_views_are_alive_then_succeeds(self):
        buf = EngineBuffer(1, 64, 2)
        view = buf.page(0, 1)
        view[:4] = b"abcd"
        with self.assertRaises(orbitkv.BufferInUse):
            buf.close()
        self.assertFalse(buf.closed)
        self.assertEqual(bytes(buf.page(0, 1)[:4]), b"abcd")
        view.release()
        buf.close()
        buf.close()
        self.assertTrue(buf.closed)
        self.assertEqual(buf.fd, -1)
        with self.assertRaises(orbitkv.Closed):
            buf.memoryview()


if __name__ == "__main__":
    unittest.main()
