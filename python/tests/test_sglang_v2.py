"""The SGLang adapter's version gate, its documented flags, and the faults
of its v2 pool API (the hybrid cache controller's sidecar pools) against a
real Manager.

The v2 API's ordinary work runs with SGLang 0.5.23's real host pools in
``make e2e-sglang`` (``orbitkv.testing.sglang_real``): pages of its
``MHATokenToKVPoolHost`` SWA pool and its ``MambaPoolHost`` out and back,
bytes equal, ``batch_exists_v2``'s per-pool policies, hits cut short by a
missing window or state, the namespaces. SGLang is not importable here
(the standard-library suite), so the tests below stand in for its pools,
and only to inject what its controller never sends or a real Manager
killed under the calls."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

from . import support

orbitkv = support.import_orbitkv()
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

from orbitkv.sglang import SUPPORTED_SGLANG, OrbitKVStorage, UnsupportedSGLang  # noqa: E402
from orbitkv.sglang import storage as storage_mod  # noqa: E402
from orbitkv.sglang.version import check_sglang  # noqa: E402

from .test_sglang_adapter import PAGE, FakeHostPool, slots, storage_config  # noqa: E402


def setUpModule():
    logging.getLogger("orbitkv").setLevel(logging.ERROR)


class StatePool:
    """Stand-in for SGLang's MambaPoolHost (one state of 3x5 float32 per
    slot, page_size 1), for the fault tests only: the real MambaPoolHost
    runs in make e2e-sglang."""

    def __init__(self, n=16):
        self.page_size, self.dtype, self.layout = 1, torch.float32, "page_first_direct"
        self.state = torch.randn(n, 3, 5)

    def get_data_page(self, index, flat=True):
        return self.state[index].flatten()

    def set_from_flat_data_page(self, index, data):
        self.state[index] = data.reshape(3, 5)


def transfer(name, keys, indices, policy="all_pages"):
    return SimpleNamespace(name=name, keys=keys, host_indices=torch.tensor(indices, dtype=torch.int64),
                           hit_policy=policy)


class TestVersionGate(unittest.TestCase):
    def test_versions_are_accepted_only_when_supported(self):
        cases = [
            ("the supported release starts", SUPPORTED_SGLANG[0], None),
            ("an older release is refused naming both versions", "0.5.22", "0.5.22"),
            ("a newer release is refused naming both versions", "0.6.0", "0.6.0"),
            ("an unknown version is refused", None, "version unknown"),
        ]
        for name, found, refused in cases:
            with self.subTest(name):
                if refused is None:
                    check_sglang(found)
                    continue
                with self.assertRaises(UnsupportedSGLang) as cm:
                    check_sglang(found)
                self.assertIn(refused, str(cm.exception))
                self.assertIn(SUPPORTED_SGLANG[0], str(cm.exception))

    def test_the_backend_refuses_an_unsupported_sglang_before_connecting(self):
        missing = os.path.join(tempfile.gettempdir(), "orbitkv-no-such-dir", "okv.sock")
        with mock.patch.object(storage_mod, "SGLANG_AVAILABLE", True), \
                mock.patch.object(storage_mod, "installed_sglang", return_value="0.4.9"):
            with self.assertRaises(UnsupportedSGLang) as cm:
                OrbitKVStorage(storage_config(missing), {})
        self.assertIn("SGLang 0.4.9 is installed", str(cm.exception))


class TestDocumentedFlags(unittest.TestCase):
    def test_the_flags_in_docs_adapters_md_are_the_ones_make_e2e_sglang_runs(self):
        import json
        import shlex

        from orbitkv.testing.sglang_real import extra_config, server_flags
        doc = os.path.join(support.REPO, "docs", "adapters.md")
        with open(doc) as f:
            text = f.read()
        block = text.split("<!-- sglang-flags -->")[1].split("<!-- /sglang-flags -->")[0]
        argv = shlex.split(block.split("```sh")[1].split("```")[0].replace("\\\n", " "))
        self.assertEqual(argv[:3], ["python", "-m", "sglang.launch_server"])
        got = argv[3:]
        documented = json.loads(got[got.index("--hicache-storage-backend-extra-config") + 1])
        want = server_flags("MODEL", extra_config(documented["orbitkv.bootstrap_socket"], "r1"))
        for flags in (got, want):
            i = flags.index("--hicache-storage-backend-extra-config") + 1
            flags[i] = json.loads(flags[i])
        self.assertEqual(got, want)


@unittest.skipIf(torch is None, "torch is not installed")
class TestPoolsV2Faults(unittest.TestCase):
    """Faults of the v2 calls: transfers SGLang's controller never sends,
    and the Manager killed. The KV anchor and the sidecar are stand-ins
    (``FakeHostPool``, ``StatePool``): SGLang's real pools run in make
    e2e-sglang."""

    def setUp(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        if not os.access(support.MANAGER_BIN, os.X_OK):
            self.skipTest(f"{support.MANAGER_BIN} not built (run `make go`)")
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "okv.sock")
        self.manager = ManagerProcess(support.MANAGER_BIN, self.sock, free_port(), ram="64MiB")
        self.addCleanup(self.manager.kill)
        self.kv, self.mamba = FakeHostPool(), StatePool()
        self.st = OrbitKVStorage(storage_config(self.sock), {})
        self.addCleanup(self.st.close)
        self.st.register_mem_pool_host(self.kv)
        self.st.register_mem_host_pool_v2(self.mamba, "mamba")
        self.st.on_host_pools_registered()

    def test_exists_v2_with_a_transfer_not_served_is_no_hit(self):
        keys = ["a", "b", "c", "d"]
        self.assertEqual(self.st.batch_set_v1(keys, slots([0, 1, 2, 3])), [True] * 4)
        self.assertEqual(self.st.batch_set_v2([transfer("mamba", keys, [0, 1, 2, 3])]), {"mamba": [True] * 4})
        cases = [
            ("a pool never registered restores nothing", [transfer("swa", keys, [0, 1, 2, 3])]),
            ("a block-groups policy is not served", [transfer("mamba", keys, [0, 1, 2, 3], "block_groups")]),
            ("one such pool beside a served one is no hit either",
             [transfer("mamba", ["d"], [3], "trailing_pages"), transfer("swa", keys, [0, 1, 2, 3])]),
        ]
        self.assertEqual(self.st.batch_exists_v2(keys, [transfer("mamba", ["d"], [3], "trailing_pages")]).kv_hit_pages,
                         4, "the served pool alone hits")
        for name, transfers in cases:
            with self.subTest(name):
                r = self.st.batch_exists_v2(keys, transfers)
                self.assertEqual(r.kv_hit_pages, 0)
                self.assertEqual(list(r.restorable_prefix_pages), [])

    def test_bad_v2_transfers_fail_their_pages_without_raising(self):
        cases = [
            ("an unregistered pool", transfer("swa", ["a"], [0])),
            ("indices not matching the keys", transfer("mamba", ["a", "b"], [0])),
            ("no indices", SimpleNamespace(name="mamba", keys=["a"], host_indices=None, hit_policy="all_pages")),
        ]
        for name, t in cases:
            with self.subTest(name):
                self.assertEqual(self.st.batch_set_v2([t]), {t.name: [False] * len(t.keys)})
                self.assertEqual(self.st.batch_get_v2([t]), {t.name: [False] * len(t.keys)})

    def test_a_dead_manager_makes_v2_calls_misses(self):
        self.assertEqual(self.st.batch_set_v2([transfer("mamba", ["a"], [0])]), {"mamba": [True]})
        self.manager.kill()
        with support.hang_guard(60):
            self.assertEqual(self.st.batch_get_v2([transfer("mamba", ["a"], [5])]), {"mamba": [False]})
            self.assertEqual(self.st.batch_exists_v2(["a"], [transfer("mamba", ["a"], [0])]).kv_hit_pages, 0)


if __name__ == "__main__":
    unittest.main()
