"""The orbitkv wheel (python/pyproject.toml, python/_build/orbitkv_wheel.py):
it bundles liborbitkv, declares no dependencies, builds reproducibly, and a
fresh virtual environment that installs it without network (pip
--no-index) imports the bundled library and talks to a real Manager."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from tests.support import PYTHON_DIR, REPO, Manager, hang_guard

BACKEND = os.path.join(PYTHON_DIR, "_build", "orbitkv_wheel.py")
LIBRARY = os.path.join(REPO, "build", "native", "liborbitkv.so.0")


def _backend():
    spec = importlib.util.spec_from_file_location("_orbitkv_wheel_backend", BACKEND)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The venv's python runs this: the package must come from site-packages and
# its library from inside the package, never from the repository.
_PROBE = r"""
import os, sys
import orbitkv
from orbitkv import CacheManagerClient
here = os.path.dirname(orbitkv.__file__)
assert "site-packages" in here, here
assert orbitkv.LIBRARY_PATH == os.path.join(here, "_lib", "liborbitkv.so.0"), orbitkv.LIBRARY_PATH
c = CacheManagerClient(socket_path=sys.argv[1], instance_id="wheel-probe")
print("pong", c.ping(41))
c.close()
"""


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LIBRARY):
            raise unittest.SkipTest(f"{LIBRARY} not built (run `make native`)")
        cls.backend = _backend()
        cls.version = subprocess.run([os.path.join(REPO, "ci", "version.sh"), "pep440"], check=True,
                                     capture_output=True, text=True).stdout.strip()
        cls.tmp = tempfile.TemporaryDirectory(prefix="orbitkv-wheel-")
        cls.name = cls.backend.build_wheel(os.path.join(cls.tmp.name, "a"))
        cls.wheel = os.path.join(cls.tmp.name, "a", cls.name)
        cls.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORBITKV_LIB")}
        cls.env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        cls.venv = os.path.join(cls.tmp.name, "venv")
        with hang_guard(120):
            subprocess.run([sys.executable, "-m", "venv", cls.venv], check=True, env=cls.env)
        cls.py = os.path.join(cls.venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_wheel_holds_the_package_and_the_library_and_no_dependencies(self):
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            meta = z.read(f"orbitkv-{self.version}.dist-info/METADATA").decode()
            record = z.read(f"orbitkv-{self.version}.dist-info/RECORD").decode().splitlines()
            lib = z.read("orbitkv/_lib/liborbitkv.so.0")
        with open(LIBRARY, "rb") as f:
            built = f.read()
        cases = [
            ("the client module is inside", "orbitkv/client.py" in names),
            ("the vLLM adapter is inside", "orbitkv/vllm/connector.py" in names),
            ("the SGLang adapter is inside", "orbitkv/sglang/storage.py" in names),
            ("no compiled Python file is inside", not any(n.endswith(".pyc") for n in names)),
            ("the library is the one make native built", lib == built),
            ("no runtime dependency is declared", "Requires-Dist" not in meta),
            ("the version is ci/version.sh pep440's", f"\nVersion: {self.version}\n" in meta),
            ("the file name carries the version", self.name.startswith(f"orbitkv-{self.version}-py3-none-")),
            ("every file but RECORD is in RECORD", len(record) == len(names)),
        ]
        for what, ok in cases:
            with self.subTest(what):
                self.assertTrue(ok, what)

    def test_two_builds_of_the_same_tree_are_byte_identical(self):
        other = self.backend.build_wheel(os.path.join(self.tmp.name, "b"))
        with open(self.wheel, "rb") as a, open(os.path.join(self.tmp.name, "b", other), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_a_version_that_is_not_pep440_is_refused_naming_it(self):
        old = os.environ.get("ORBITKV_WHEEL_VERSION")
        os.environ["ORBITKV_WHEEL_VERSION"] = "0.1.0-dev.3+gabc"
        try:
            with self.assertRaisesRegex(ValueError, r"'0\.1\.0-dev\.3\+gabc' is not PEP 440"):
                self.backend.build_wheel(os.path.join(self.tmp.name, "c"))
            os.environ["ORBITKV_WHEEL_VERSION"] = "0.2.0.dev5+g0123456789ab"
            self.assertTrue(self.backend.wheel_name().startswith("orbitkv-0.2.0.dev5+g0123456789ab-py3-none-"))
        finally:
            if old is None:
                del os.environ["ORBITKV_WHEEL_VERSION"]
            else:
                os.environ["ORBITKV_WHEEL_VERSION"] = old

    def test_a_missing_library_names_the_path_and_make_native(self):
        missing = os.path.join(self.tmp.name, "no-such-liborbitkv.so")
        with self.assertRaises(FileNotFoundError) as cm:
            self.backend.build_wheel(os.path.join(self.tmp.name, "c"), {"liborbitkv": missing})
        for part in (missing, "make native"):
            with self.subTest(f"the error names {part!r}"):
                self.assertIn(part, str(cm.exception))

    def test_a_fresh_venv_installs_the_wheel_offline_and_reaches_a_manager(self):
        with hang_guard(120):
            subprocess.run([self.py, "-m", "pip", "install", "-q", "--no-index", "--force-reinstall",
                            self.wheel], check=True, env=self.env, cwd=self.tmp.name)
            manager = Manager()
            try:
                out = subprocess.run([self.py, "-c", _PROBE, manager.socket], env=self.env, cwd=self.tmp.name,
                                     capture_output=True, text=True, timeout=60)
            finally:
                manager.stop()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "pong 41")

    def test_pip_builds_the_source_directory_offline_through_the_in_tree_backend(self):
        out = os.path.join(self.tmp.name, "pip")
        with hang_guard(120):
            subprocess.run([self.py, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "-w", out,
                            PYTHON_DIR], check=True, env=self.env, cwd=self.tmp.name)
        with open(self.wheel, "rb") as a, open(os.path.join(out, self.name), "rb") as b:
            self.assertEqual(a.read(), b.read(), "pip's build differs from the backend's own")


if __name__ == "__main__":
    unittest.main()
