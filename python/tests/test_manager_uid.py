"""The Manager uid a client trusts besides its own (docs/security.md
"Tenants"): the ``manager_uid`` argument, the adapters' ``orbitkv.manager_uid``
option, and ``ORBITKV_MANAGER_UID``."""

from __future__ import annotations

import os
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import CacheManagerClient  # noqa: E402
from orbitkv.errors import BadArgument  # noqa: E402
from orbitkv.sglang.options import options as sglang_options  # noqa: E402
from orbitkv.vllm.options import OptionError, parse_options  # noqa: E402


class ManagerUIDTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.manager = support.Manager()

    @classmethod
    def tearDownClass(cls):
        cls.manager.stop()

    def test_bad_values_are_refused_naming_the_argument(self):
        for bad in ("0", -1, 0xFFFFFFFF, True, 1.5):
            with self.subTest(bad=bad), self.assertRaisesRegex(BadArgument, "manager_uid"):
                CacheManagerClient(socket_path=self.manager.socket, manager_uid=bad)

    def test_the_own_uid_is_always_trusted(self):
        other = os.geteuid() + 12345
        with CacheManagerClient(socket_path=self.manager.socket, manager_uid=other) as c:
            self.assertGreater(c.epoch, 0)

    def test_a_bad_variable_is_refused_naming_it(self):
        old = os.environ.get("ORBITKV_MANAGER_UID")
        os.environ["ORBITKV_MANAGER_UID"] = "not-a-uid"
        try:
            with self.assertRaisesRegex(Exception, "ORBITKV_MANAGER_UID"):
                CacheManagerClient(socket_path=self.manager.socket)
        finally:
            if old is None:
                del os.environ["ORBITKV_MANAGER_UID"]
            else:
                os.environ["ORBITKV_MANAGER_UID"] = old

    def test_adapters_take_the_option_in_range(self):
        self.assertEqual(parse_options({"orbitkv.manager_uid": 0}).manager_uid, 0)
        self.assertIsNone(parse_options({}).manager_uid)
        with self.assertRaisesRegex(OptionError, "orbitkv.manager_uid"):
            parse_options({"orbitkv.manager_uid": -1})
        self.assertEqual(sglang_options({"orbitkv.manager_uid": "1000"}, 1)["manager_uid"], 1000)
        with self.assertRaisesRegex(OptionError, "orbitkv.manager_uid"):
            sglang_options({"orbitkv.manager_uid": 1 << 32}, 1)

if __name__ == "__main__":
    unittest.main()
