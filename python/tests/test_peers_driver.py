"""Argument parsing and KV-shape choice of bench/peers/lmcache_driver.py,
without LMCache: the driver imports LMCache only once it runs, so these run
under the system python."""

import contextlib
import importlib.util
import io
import os
import unittest

_DRIVER = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "peers", "lmcache_driver.py")


def _load():
    spec = importlib.util.spec_from_file_location("lmcache_driver", _DRIVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


driver = _load()


def _refused(argv):
    """Run parse_args on argv expecting argparse to exit 2; return its stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), self_exit() as code:
        driver.parse_args(argv)
    return code[0], err.getvalue()


@contextlib.contextmanager
def self_exit():
    code = [None]
    try:
        yield code
    except SystemExit as e:
        code[0] = e.code


class BlockShapeTest(unittest.TestCase):
    def test_every_default_size_gets_a_shape_holding_exactly_its_bytes(self):
        for size in (64 << 10, 256 << 10, 1 << 20, 2 << 20, 32 << 20):
            with self.subTest(size=size):
                layers, heads, head = driver.block_shape(size, 256)
                self.assertEqual(2 * driver.DTYPE_BYTES * 256 * layers * heads * head, size)
                self.assertLessEqual(head, driver.MAX_HEAD_SIZE)
                self.assertLessEqual(heads, driver.MAX_HEADS)

    def test_lmcache_default_chunk_is_its_bench_shape(self):
        # (2,NB,16,8,128):float16:32, the default of `lmcache bench server`.
        self.assertEqual(driver.block_shape(32 << 20, 256), (32, 8, 128))

    def test_a_size_that_is_no_whole_number_of_elements_is_refused(self):
        with self.assertRaisesRegex(ValueError, "not a multiple of 1024"):
            driver.block_shape(1000, 256)


class ParseArgsTest(unittest.TestCase):
    def test_one_block_count_applies_to_every_size(self):
        a = driver.parse_args(["--sizes", "65536,2097152", "--blocks", "16", "--l1-size-gb", "1"])
        self.assertEqual(a.blocks, [16, 16])
        self.assertEqual(a.chains, [32, 256, 1000])

    def test_bad_arguments_exit_2_naming_the_flag(self):
        cases = [
            (["--sizes", "65536,65536", "--blocks", "1"], "--sizes: 65536 named twice"),
            (["--sizes", "65536", "--blocks", "1,2"], "--blocks names 2 counts for 1 --sizes"),
            (["--sizes", "1000", "--blocks", "1"], "not a multiple of 1024"),
            (["--sizes", "65536", "--blocks", "1", "--chunk-tokens", "100"], "--chunk-tokens 100 must be a multiple of 16"),
            (["--sizes", "2097152", "--blocks", "1024", "--max-batch-bytes", "1048576"], "more than --max-batch-bytes"),
            (["--sizes", "65536", "--blocks", "1", "--l1-size-gb", "0.01"], "--l1-size-gb 0.01 is below"),
            (["--sizes", "65536", "--blocks", "0"], "--blocks: 0 must be at least 1"),
            (["--sizes", "65536", "--blocks", "1", "--warmup", "-1"], "--warmup must be at least 0"),
        ]
        for argv, want in cases:
            with self.subTest(argv=argv):
                code, err = _refused(argv)
                self.assertEqual(code, 2, err)
                self.assertIn(want, err)


class QuantileTest(unittest.TestCase):
    def test_nearest_rank_matches_the_go_side(self):
        s = list(range(200, 0, -1))
        self.assertEqual(driver.quantile(s, 0.5), 100)
        self.assertEqual(driver.quantile(s, 0.99), 198)


if __name__ == "__main__":
    unittest.main()
