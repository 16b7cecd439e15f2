"""The engine lock files (engines/*.lock, made by `make engines-lock`) agree
with what they were compiled from: every package is pinned exactly and
hashed, every pin of engines/*.in and engines/vllm.overrides is in its lock
at that version, and engines/deps.sh installs the uv its lock names. No
network: it reads the committed files only."""

from __future__ import annotations

import os
import re
import unittest

from tests.support import REPO, load_testing_module

docs = load_testing_module("docs")

ENGINES = os.path.join(REPO, "engines")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def _name(n: str) -> str:
    return re.sub(r"[-_.]+", "-", n).lower()


def parse_lock(path: str) -> dict[str, tuple[str, int]]:
    """{normalised name: (version, number of hashes)} of a uv/pip lock; a
    requirement that is not ``name==version`` raises ValueError naming it."""
    out: dict[str, tuple[str, int]] = {}
    current = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("--hash=sha256:"):
                if current is None or not re.fullmatch(r"--hash=sha256:[0-9a-f]{64}( \\)?", line):
                    raise ValueError(f"{path}: bad hash line {line!r}")
                v, n = out[current]
                out[current] = (v, n + 1)
                continue
            m = _PIN.match(line)
            if not m:
                raise ValueError(f"{path}: {line!r} is not an exact pin (name==version)")
            current = _name(m.group(1))
            out[current] = (m.group(2), 0)
    return out


def parse_pins(path: str) -> dict[str, str]:
    """{normalised name: version} of the ``name==version`` lines of an .in or
    overrides file (comments and blank lines skipped)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if line:
                m = _PIN.match(line)
                if not m:
                    raise ValueError(f"{path}: {line!r} is not an exact pin (name==version)")
                out[_name(m.group(1))] = m.group(2)
    return out


class EngineLockTest(unittest.TestCase):
    def test_every_locked_package_is_pinned_and_hashed(self):
        for lock in ("uv.lock", "vllm.lock", "vllm033.lock", "sglang.lock", "mooncake.lock", "dynamo.lock"):
            with self.subTest(f"{lock} pins and hashes every package"):
                pkgs = parse_lock(os.path.join(ENGINES, lock))
                self.assertTrue(pkgs, f"{lock} is empty")
                unhashed = sorted(n for n, (_, h) in pkgs.items() if h == 0)
                self.assertEqual(unhashed, [], f"{lock}: packages without a hash")

    def test_every_input_pin_is_in_its_lock_at_that_version(self):
        cases = [("uv.in", "uv.lock"), ("vllm.in", "vllm.lock"), ("vllm.overrides", "vllm.lock"),
                 ("vllm033.in", "vllm033.lock"), ("sglang.in", "sglang.lock"), ("mooncake.in", "mooncake.lock"),
                 ("dynamo.in", "dynamo.lock")]
        for src, lock in cases:
            pkgs = parse_lock(os.path.join(ENGINES, lock))
            for name, version in parse_pins(os.path.join(ENGINES, src)).items():
                with self.subTest(f"{lock} holds {name}=={version} of {src}"):
                    self.assertIn(name, pkgs)
                    self.assertEqual(pkgs[name][0], version)

    def test_the_two_engines_keep_their_own_torch(self):
        vllm = parse_lock(os.path.join(ENGINES, "vllm.lock"))
        sglang = parse_lock(os.path.join(ENGINES, "sglang.lock"))
        with self.subTest("no local-version torch (PyPI has none) is locked for vLLM"):
            self.assertNotIn("+", vllm["torch"][0])
        with self.subTest("SGLang's torch differs from vLLM's, so they need two environments"):
            self.assertNotEqual(vllm["torch"][0], sglang["torch"][0])

    def test_deps_sh_knows_every_locked_environment(self):
        with open(os.path.join(ENGINES, "deps.sh"), encoding="utf-8") as f:
            text = f.read()
        accepted = re.search(r"^\s*([a-z0-9|]+)\) envs\+=", text, re.M).group(1).split("|")
        default = re.search(r"\|\| envs=\(([^)]*)\)", text).group(1).split()
        for lock in sorted(os.listdir(ENGINES)):
            env = lock[:-len(".lock")]
            if not lock.endswith(".lock") or env == "uv":
                continue
            with self.subTest(f"deps.sh takes {env}, installs it by default and locks it from {env}.in"):
                self.assertIn(env, accepted)
                self.assertIn(env, default)
                self.assertIn(f'"$here/{env}.in" -o "$here/{env}.lock"', text)

    def test_deps_sh_installs_the_uv_of_uv_lock(self):
        with open(os.path.join(ENGINES, "deps.sh"), encoding="utf-8") as f:
            m = re.search(r"^uv_version=(\S+)", f.read(), re.M)
        self.assertIsNotNone(m, "engines/deps.sh sets no uv_version")
        self.assertEqual(m.group(1), parse_lock(os.path.join(ENGINES, "uv.lock"))["uv"][0])

    def test_a_loose_pin_is_refused_with_its_line(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".lock", delete=False) as f:
            f.write("torch>=2.13\n")
        try:
            with self.assertRaises(ValueError) as cm:
                parse_lock(f.name)
            self.assertIn("torch>=2.13", str(cm.exception))
        finally:
            os.unlink(f.name)


_LOCK_CELL = re.compile(r"^`engines/([a-z0-9]+)\.lock` \(`([A-Za-z0-9._-]+)`\)$")


def compatibility_table() -> list[dict[str, str]]:
    """docs/adapters.md's engine compatibility table
    (``orbitkv.testing.docs``), backquotes stripped except in the lock
    column."""
    return [{k: (v.strip("`") if k != "lock" else v) for k, v in r.items()} for r in docs.compatibility_table()]


class CompatibilityTableTest(unittest.TestCase):
    """docs/adapters.md's table of engine versions says what the locks pin
    (make vllm-contract checks it against the installed engines too)."""

    def test_every_row_is_what_its_lock_pins(self):
        rows = compatibility_table()
        self.assertTrue(rows)
        for row in rows:
            m = _LOCK_CELL.match(row["lock"])
            with self.subTest(f"{row['engine']} {row['version']}: lock cell {row['lock']!r} names a lock and a package"):
                self.assertIsNotNone(m)
            if m is None:
                continue
            env, package = m.groups()
            pkgs = parse_lock(os.path.join(ENGINES, env + ".lock"))
            with self.subTest(f"{env}.lock pins {package}=={row['version']} and torch=={row['torch']}"):
                self.assertEqual(pkgs.get(_name(package), ("missing",))[0], row["version"])
                self.assertEqual(pkgs.get("torch", ("missing",))[0], row["torch"])
            with self.subTest(f"{row['engine']} {row['version']} runs in build/venv/{env}"):
                self.assertEqual(row["environment"], f"build/venv/{env}")

    def test_the_vllm_rows_are_the_connectors_supported_series(self):
        from orbitkv.vllm.connector import SUPPORTED_VLLM
        series = sorted(".".join(r["version"].split(".")[:2]) for r in compatibility_table() if r["engine"] == "vLLM")
        self.assertEqual(series, sorted(SUPPORTED_VLLM))

    def test_every_engine_environment_has_a_row(self):
        envs = {_LOCK_CELL.match(r["lock"]).group(1) for r in compatibility_table() if _LOCK_CELL.match(r["lock"])}
        self.assertEqual(envs, {"vllm", "vllm033", "sglang"})


if __name__ == "__main__":
    unittest.main()
