"""The vLLM adapter (orbitkv.vllm): options, hashes, construction errors, and
the connector's bookkeeping against a real Manager, driven the way vLLM's
scheduler and worker call it. The whole engine path is `make e2e`."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import tempfile
import time
import unittest
from types import SimpleNamespace

from . import support

orbitkv = support.import_orbitkv()
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

from orbitkv._abi import Code  # noqa: E402
from orbitkv.errors import ManagerDied  # noqa: E402
from orbitkv.vllm.session import MAX_BACKOFF  # noqa: E402
from orbitkv.vllm import (  # noqa: E402
    KVConnectorRole,
    LoadSpec,
    OptionError,
    OrbitKVConnector,
    OrbitKVConnectorMetadata,
    SaveSpec,
    chain_block_hashes,
    kv_cache_buffer,
    parse_options,
)

BLOCK, LAYERS, NUM_BLOCKS, HEADS, DIM = 4, 2, 8, 2, 4


def setUpModule():
    # The adapters log every recovered failure as a warning; the tests
    # provoke them on purpose.
    logging.getLogger("orbitkv").setLevel(logging.ERROR)


def config(sock: str, kv_role: str = "kv_both", **extra) -> SimpleNamespace:
    cfg = {"orbitkv.bootstrap_socket": sock, "orbitkv.kv_layout": "unit-test", "orbitkv.reconnect_interval_s": 0}
    cfg.update(extra)
    return SimpleNamespace(
        model_config=SimpleNamespace(model="unit/model", revision="r1", dtype="float32"),
        cache_config=SimpleNamespace(block_size=BLOCK, cache_dtype="auto"),
        parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0),
        kv_transfer_config=SimpleNamespace(kv_role=kv_role, kv_connector_extra_config=cfg))


def request(rid: str, prompt: list[int]) -> SimpleNamespace:
    return SimpleNamespace(request_id=rid, prompt_token_ids=prompt, lora_request=None, cache_salt=None,
                           mm_features=[])


def all_threads_stopped(pid: int, timeout_s: float = 10) -> bool:
    """Whether every thread of process pid reaches state T (stopped) within
    timeout_s, read from /proc/pid/task/*/stat."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        if states and all(st in ("T", "t") for st in states):
            return True
        time.sleep(0.005)
    return False


def engine_step(s, w, kv: dict, so) -> tuple:
    """One engine step as vLLM runs it: the scheduler's metadata for
    SchedulerOutput so, bound to the worker; loads started; each layer of kv
    waited for and saved; saves waited for. Returns (metadata, the block ids
    with load errors)."""
    meta = s.build_connector_meta(so)
    w.bind_connector_metadata(meta)
    w.start_load_kv(SimpleNamespace())
    for name, t in kv.items():
        w.wait_for_layer_load(name)
        w.save_kv_layer(name, t, None)
    w.wait_for_save()
    errors = w.get_block_ids_with_load_errors()
    w.clear_connector_metadata()
    return meta, errors


class Blocks:
    def __init__(self, ids):
        self.ids = list(ids)

    def get_block_ids(self):
        return (self.ids,)


def new_step(rid, prompt, block_ids, computed, scheduled):
    nr = SimpleNamespace(req_id=rid, prompt_token_ids=prompt, block_ids=(list(block_ids),),
                         num_computed_tokens=computed, lora_request=None)
    return SimpleNamespace(scheduled_new_reqs=[nr], num_scheduled_tokens={rid: scheduled}, finished_req_ids=set(),
                           scheduled_cached_reqs=SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                                 new_block_ids=[], num_computed_tokens=[]))


def cached_step(rid, computed, scheduled, finished=()):
    return SimpleNamespace(scheduled_new_reqs=[], num_scheduled_tokens={rid: scheduled},
                           finished_req_ids=set(finished),
                           scheduled_cached_reqs=SimpleNamespace(req_ids=[rid], resumed_req_ids=set(),
                                                                 new_block_ids=[None], num_computed_tokens=[computed]))


class TestOptions(unittest.TestCase):
    def test_defaults_and_prefix(self):
        o = parse_options({"other.key": 1})
        self.assertIsNone(o.bootstrap_socket)   # the default rule, at each connect
        self.assertEqual(o.socket_for(0), (None, "orbitkv.bootstrap_socket"))
        self.assertFalse(o.wait_for_full_prefix)
        o = parse_options({"orbitkv.wait_for_full_prefix": "true", "orbitkv.bootstrap_socket": "/x.sock"})
        self.assertTrue(o.wait_for_full_prefix)
        self.assertEqual(o.socket_for(0), ("/x.sock", "orbitkv.bootstrap_socket"))

    def test_bad_options_name_the_key(self):
        cases = {
            "unknown key": ({"orbitkv.bootstrap_sockt": "/x"}, "orbitkv.bootstrap_sockt"),
            "not a bool": ({"orbitkv.wait_for_full_prefix": "maybe"}, "wait_for_full_prefix"),
            "empty socket": ({"orbitkv.bootstrap_socket": ""}, "bootstrap_socket"),
            "timeout range": ({"orbitkv.timeout_ms": 0}, "timeout_ms"),
            "block hashes": ({"orbitkv.block_hashes": "python"}, "block_hashes"),
            "shard count": ({"orbitkv.tp_shard_bootstrap_sockets": ["/a"]}, "tp_shard_bootstrap_sockets"),
        }
        for name, (extra, key) in cases.items():
            with self.subTest(name):
                with self.assertRaises(OptionError) as cm:
                    parse_options(extra, tp_size=2)
                self.assertIn(key, str(cm.exception))

    def test_tp_shard_sockets_pick_the_rank(self):
        o = parse_options({"orbitkv.tp_shard_bootstrap_sockets": "/a.sock, /b.sock"}, tp_size=2)
        self.assertEqual(o.socket_for(1), ("/b.sock", "orbitkv.tp_shard_bootstrap_sockets[1]"))


class TestChainHashes(unittest.TestCase):
    def test_a_chain_covers_full_blocks_and_depends_on_every_earlier_token(self):
        a = chain_block_hashes(list(range(10)), 4)
        self.assertEqual(len(a), 2)
        self.assertTrue(all(len(h) == 16 for h in a))
        self.assertEqual(a, chain_block_hashes(list(range(10)), 4))
        self.assertEqual(a, chain_block_hashes(list(range(8)) + [99], 4))  # the tail does not count
        b = chain_block_hashes([1] + list(range(1, 10)), 4)
        self.assertNotEqual(a[1], b[1])  # block 1 equal, block 0 not: the chain differs
        self.assertNotEqual(a, chain_block_hashes(list(range(10)), 4, salt="tenant"))


class TestChainDivergence(unittest.TestCase):
    def test_prompts_parting_mid_block_share_only_the_blocks_before_it(self):
        a = list(range(1000, 1080))
        for at in (55, 60, 63):   # first and second half of block 3 (tokens 48..63)
            b = a[:at] + [t + 7 for t in a[at:]]
            ha, hb = chain_block_hashes(a, 16), chain_block_hashes(b, 16)
            self.assertEqual(ha[:3], hb[:3], at)
            self.assertTrue(all(x != y for x, y in zip(ha[3:], hb[3:])), at)

    def test_a_block_hash_depends_on_its_parent(self):
        a, b = [1] * 4 + [2] * 4, [3] * 4 + [2] * 4
        self.assertNotEqual(chain_block_hashes(a, 4)[1], chain_block_hashes(b, 4)[1])


class TestConstruction(unittest.TestCase):
    def test_a_bad_bootstrap_socket_fails_at_construction_naming_the_option(self):
        path = os.path.join(tempfile.gettempdir(), "orbitkv-no-such-dir", "okv.sock")
        for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
            with self.subTest(role.name):
                with support.hang_guard(30):
                    with self.assertRaises(orbitkv.NativeOSError) as cm:
                        OrbitKVConnector(config(path), role)
                self.assertEqual(cm.exception.errno, errno.ENOENT)
                self.assertIn("orbitkv.bootstrap_socket", str(cm.exception))
                self.assertIn(path, str(cm.exception))

    def test_a_missing_model_id_or_role_is_refused(self):
        cfg = config("/x.sock")
        cfg.model_config.model = ""
        with self.assertRaises(OptionError):
            OrbitKVConnector(cfg, KVConnectorRole.WORKER)
        with self.assertRaises(ValueError):
            OrbitKVConnector(config("/x.sock"), "driver")
        with self.assertRaises(OptionError):
            OrbitKVConnector(config("/x.sock", kv_role="kv_sometimes"), KVConnectorRole.SCHEDULER)


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class ConnectorCase(unittest.TestCase):
    """Scheduler and worker connectors in one process against a Manager."""

    def setUp(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        if not os.access(support.MANAGER_BIN, os.X_OK):
            self.skipTest(f"{support.MANAGER_BIN} not built (run `make go`)")
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "okv.sock")
        self.port = free_port()
        self.start = lambda: ManagerProcess(support.MANAGER_BIN, self.sock, self.port, ram="64MiB")
        self.manager = self.start()
        self.addCleanup(lambda: self.manager.kill())
        torch.manual_seed(0)
        # vLLM's FlashAttention layout: [2, num_blocks, block_size, heads, head_dim] -> staging mode.
        self.kv = {f"layer.{l}": torch.randn(2, NUM_BLOCKS, BLOCK, HEADS, DIM) for l in range(LAYERS)}

    def connectors(self, kv_role="kv_both", kv=None, **extra):
        s = OrbitKVConnector(config(self.sock, kv_role, **extra), KVConnectorRole.SCHEDULER)
        w = OrbitKVConnector(config(self.sock, kv_role, **extra), KVConnectorRole.WORKER)
        w.register_kv_caches(self.kv if kv is None else kv)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        return s, w

    def step(self, s, w, so):
        return engine_step(s, w, self.kv, so)

    def publish_prompt(self, s, w, rid, prompt, blocks):
        self.assertEqual(s.get_num_new_matched_tokens(request(rid, prompt), 0), (0, False))
        meta, errors = self.step(s, w, new_step(rid, prompt, blocks, 0, len(prompt)))
        s.request_finished(request(rid, prompt), blocks)
        return meta

    def live_tickets(self) -> int:
        """Tickets live at the Manager (GET /health)."""
        return int(self.manager.health()["tickets"])


class TestConnector(ConnectorCase):
    """The connector's bookkeeping, step by step."""

    def test_a_published_prefix_is_offered_loaded_byte_exact_and_not_saved_again(self):
        s, w = self.connectors()
        prompt = list(range(11))  # 2 full blocks of 4 (+3 tokens)
        meta = self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        self.assertEqual([sv.block_ids for sv in meta.saves], [[5, 6]])
        self.assertEqual(w.stats["published_blocks"], 2)
        want = {n: t[:, [5, 6]].clone() for n, t in self.kv.items()}
        for t in self.kv.values():
            t[:, 1:3] = 0
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))  # side-effect free
        self.assertEqual(s.get_num_new_matched_tokens(req, 4), (4, False))
        s.update_state_after_alloc(req, Blocks([1, 2, 3]), 8)
        meta, errors = self.step(s, w, new_step("b", prompt, [1, 2, 3], 8, 3))
        self.assertEqual(len(meta.loads), 1)
        self.assertEqual((meta.loads[0].first, meta.loads[0].block_ids), (0, [1, 2]))
        self.assertEqual(meta.saves, [])
        self.assertEqual(errors, set())
        for n, t in self.kv.items():
            self.assertTrue(torch.equal(t[:, 1:3], want[n]), n)
        self.assertEqual(w.stats["restored_bytes"], 2 * LAYERS * 2 * BLOCK * HEADS * DIM * 4)

    def test_each_side_reports_its_interval_to_vllm_stats(self):
        s, w = self.connectors()
        prompt = list(range(11))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        s.update_state_after_alloc(req, Blocks([1, 2, 3]), 8)
        self.step(s, w, new_step("b", prompt, [1, 2, 3], 8, 3))
        sched, work = s.get_kv_connector_stats(), w.get_kv_connector_stats()
        # publish_prompt and this step: 2 offers, 1 alloc, 2 metas, 1 finish
        self.assertGreaterEqual(sched.data["scheduler_calls"], 6)
        self.assertGreater(sched.data["scheduler_s"], 0)
        self.assertEqual((work.data["restored_blocks"], work.data["published_blocks"]), (2, 2))
        self.assertEqual(len(work.data["load_wait_s"]), 1)
        self.assertIsNone(w.get_kv_connector_stats())  # the interval was taken
        total = OrbitKVConnector.build_kv_connector_stats(sched.data).aggregate(work)
        self.assertEqual(total.data["restored_blocks"], 2)
        self.assertEqual(total.data["scheduler_calls"], sched.data["scheduler_calls"])
        self.assertEqual(total.reduce()["load_wait_max_s"], round(work.data["load_wait_s"][0], 6))
        self.assertTrue(OrbitKVConnector.build_kv_connector_stats({}).is_empty())

    def test_a_stopped_manager_holds_an_engine_step_at_most_one_call_deadline(self):
        # load_timeout_s caps every call; a Ping before the publishes finds the
        # stopped Manager before any publish (which has no deadline) is sent.
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 0.5, "orbitkv.reconnect_interval_s": 1.5})
        self.assertEqual(w._worker.opts.call_timeout_ms, 500)
        prompt = list(range(9))
        self.publish_prompt(s, w, "a", prompt, [0, 1, 2])
        w.get_kv_connector_stats()
        os.kill(self.manager.pid, signal.SIGSTOP)
        try:
            # kill() returns before every thread has stopped: a Ping answered
            # meanwhile would let a publish (no deadline) wait out the stop.
            self.assertTrue(all_threads_stopped(self.manager.pid), "the Manager's threads did not stop in 10 s")
            t = time.monotonic()
            _, errors = self.step(s, w, new_step("b", list(range(100, 109)), [3, 4, 5], 0, 9))
            held = time.monotonic() - t
            self.assertLess(held, 1.0)   # one 0.5 s deadline, not the length of the stop
            self.assertEqual(errors, set())
            t = time.monotonic()
            self.assertEqual(s.get_num_new_matched_tokens(request("c", prompt), 0), (0, False))  # a miss
            self.assertLess(time.monotonic() - t, 1.0)
            t = time.monotonic()
            self.step(s, w, new_step("d", list(range(200, 209)), [6, 7, 0], 0, 9))
            self.assertLess(time.monotonic() - t, 0.3)   # the session is down, no reconnect yet: nothing waits
        finally:
            os.kill(self.manager.pid, signal.SIGCONT)
        stats = w.get_kv_connector_stats()
        self.assertGreaterEqual(max(stats.data["step_block_s"]), 0.45)
        self.assertLess(max(stats.data["step_block_s"]), 1.0)
        time.sleep(1.5)   # past the reconnect wait
        self.publish_prompt(s, w, "e", list(range(300, 309)), [3, 4, 5])
        self.assertEqual(w.stats["published_blocks"], 4)   # served again after SIGCONT

    def test_failed_reconnects_wait_longer_each_time(self):
        s, w = self.connectors(**{"orbitkv.reconnect_interval_s": 0.05})
        session = w._worker.session
        self.manager.kill()
        session.fail(ManagerDied("test", Code.EMANAGER_DIED, "killed"))
        tries, last = [], session._last_try
        end = time.monotonic() + 1.6
        while time.monotonic() < end:
            self.assertIsNone(session.get())
            if session._last_try != last:
                tries.append(session._last_try)
                last = session._last_try
            time.sleep(0.002)
        gaps = [b - a for a, b in zip(tries, tries[1:])]
        # each failed try doubles the wait, up to MAX_BACKOFF intervals of 0.05 s
        self.assertEqual(MAX_BACKOFF, 8)
        self.assertGreaterEqual(len(gaps), 4, gaps)
        for g, want in zip(gaps, (0.1, 0.2, 0.4, 0.4)):
            self.assertGreaterEqual(g, want - 0.005, gaps)
            self.assertLess(g, want + 0.3, gaps)
        self.manager = self.start()
        time.sleep(0.45)
        self.assertIsNotNone(session.get())
        self.assertEqual(session._backoff, 1)

    def test_the_last_prompt_token_is_never_offered(self):
        s, w = self.connectors()
        prompt = list(range(8))  # exactly 2 blocks: only block 0 may be loaded
        self.publish_prompt(s, w, "a", prompt, [0, 1])
        self.assertEqual(s.get_num_new_matched_tokens(request("b", prompt), 0), (4, False))

    def test_chunked_prefill_saves_each_block_once_when_it_is_complete(self):
        s, w = self.connectors()
        prompt = list(range(100, 110))
        s.get_num_new_matched_tokens(request("c", prompt), 0)
        saved = []
        for so in (new_step("c", prompt, [4, 5, 6], 0, 4), cached_step("c", 4, 3), cached_step("c", 7, 3),
                   cached_step("c", 10, 1)):
            meta, _ = self.step(s, w, so)
            saved.append([sv.block_ids for sv in meta.saves])
        self.assertEqual(saved, [[[4]], [], [[5]], []])
        s.build_connector_meta(cached_step("c", 11, 0, finished={"c"}))
        self.assertNotIn("c", s._scheduler._reqs)

    def test_a_preempted_request_is_restored_into_its_new_blocks_and_not_saved_again(self):
        # vLLM frees a preempted request's blocks; on resume it asks again and
        # hands the request a whole new block list (resumed_req_ids).
        s, w = self.connectors()
        prompt = list(range(120, 139))   # 4 full blocks (+3 tokens)
        req = request("c", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        for so in (new_step("c", prompt, [0, 1, 2, 3, 4], 0, 8), cached_step("c", 8, 8)):
            self.step(s, w, so)   # chunked prefill: 2 blocks a step
        self.assertEqual(w.stats["published_blocks"], 4)
        want = {n: t[:, 0:4].clone() for n, t in self.kv.items()}
        for t in self.kv.values():
            t.zero_()   # vLLM reused the freed blocks
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (16, False))
        s.update_state_after_alloc(req, Blocks([5, 6, 7, 0, 1]), 16)
        resumed = SimpleNamespace(scheduled_new_reqs=[], num_scheduled_tokens={"c": 3}, finished_req_ids=set(),
                                  scheduled_cached_reqs=SimpleNamespace(req_ids=["c"], resumed_req_ids={"c"},
                                                                        new_block_ids=[([5, 6, 7, 0, 1],)],
                                                                        num_computed_tokens=[16]))
        meta, errors = self.step(s, w, resumed)
        self.assertEqual(errors, set())
        self.assertEqual([(ld.first, ld.block_ids) for ld in meta.loads], [(0, [5, 6, 7, 0])])
        self.assertEqual(meta.saves, [])   # every full block was saved before the preemption
        self.assertEqual(s._scheduler._reqs["c"].block_ids, [5, 6, 7, 0, 1])
        for n, t in self.kv.items():
            self.assertTrue(torch.equal(t[:, [5, 6, 7, 0]], want[n]), n)
        self.assertEqual(w.stats["published_blocks"], 4)

    def test_a_shorter_lease_reports_the_missing_blocks_as_load_errors(self):
        s, w = self.connectors()
        prompt = list(range(12))
        self.publish_prompt(s, w, "a", prompt[:9], [0, 1, 2])   # blocks 0 and 1 only
        hashes = chain_block_hashes(prompt, BLOCK)              # 3 blocks asked
        meta = OrbitKVConnectorMetadata(loads=[LoadSpec("x", hashes, 0, [3, 4, 7])])
        w.bind_connector_metadata(meta)
        w.start_load_kv(None)
        w.wait_for_layer_load("layer.0")
        w.wait_for_save()
        self.assertEqual(w.get_block_ids_with_load_errors(), {7})
        self.assertEqual(w.get_block_ids_with_load_errors(), set())  # cleared by the call
        self.assertEqual(w.stats["restored_blocks"], 2)

    def test_a_dead_manager_turns_loads_into_errors_and_a_new_one_is_reconnected(self):
        s, w = self.connectors()
        prompt = list(range(9))
        self.publish_prompt(s, w, "a", prompt, [0, 1, 2])
        epoch = w.epochs[0]
        self.manager.kill()
        with support.hang_guard(60):
            self.assertEqual(s.get_num_new_matched_tokens(request("b", prompt), 0), (0, False))
            meta = OrbitKVConnectorMetadata(loads=[LoadSpec("b", chain_block_hashes(prompt, BLOCK), 0, [3, 4])])
            w.bind_connector_metadata(meta)
            w.start_load_kv(None)
            w.wait_for_layer_load("layer.0")
            self.assertEqual(w.get_block_ids_with_load_errors(), {3, 4})
            self.manager = self.start()  # same socket: a new epoch
            self.assertEqual(s.get_num_new_matched_tokens(request("c", prompt), 0), (0, False))  # empty cache
            self.publish_prompt(s, w, "d", prompt, [0, 1, 2])
        self.assertEqual(w.stats["published_blocks"], 4)
        self.assertEqual(len(w.epochs), 2)
        self.assertNotEqual(w.epochs[1], epoch)
        self.assertEqual(s.get_num_new_matched_tokens(request("e", prompt), 0), (8, False))

    def test_kv_roles_restrict_loads_and_saves(self):
        s, w = self.connectors(kv_role="kv_consumer")
        prompt = list(range(9))
        meta = self.publish_prompt(s, w, "a", prompt, [0, 1, 2])
        self.assertEqual(meta.saves, [])
        p, pw = self.connectors(kv_role="kv_producer")
        self.publish_prompt(p, pw, "a", prompt, [0, 1, 2])
        self.assertEqual(p.get_num_new_matched_tokens(request("b", prompt), 0), (0, False))
        self.assertEqual(s.get_num_new_matched_tokens(request("b", prompt), 0), (8, False))

    def test_hashes_of_the_wrong_width_are_refused_naming_the_hash(self):
        _, w = self.connectors()
        w.bind_connector_metadata(OrbitKVConnectorMetadata(loads=[LoadSpec("x", [b"\0" * 15], 0, [1])]))
        with self.assertRaises(orbitkv.BadArgument) as cm:
            w.start_load_kv(None)
        self.assertIn("hash 0 is 15 bytes", str(cm.exception))

    def test_external_tokens_that_were_not_offered_are_refused(self):
        s, _ = self.connectors()
        with self.assertRaises(ValueError):
            s.update_state_after_alloc(request("z", list(range(9))), Blocks([0, 1]), 8)

    def test_tp_rank_1_never_restores_rank_0_blocks(self):
        def tp_config(rank):
            c = config(self.sock)
            c.parallel_config = SimpleNamespace(tensor_parallel_size=2, pipeline_parallel_size=1, rank=rank)
            return c

        workers, kvs = [], []
        for rank in (0, 1):
            kv = {n: t.clone() for n, t in self.kv.items()}
            w = OrbitKVConnector(tp_config(rank), KVConnectorRole.WORKER)
            w.register_kv_caches(kv)
            self.addCleanup(w.shutdown)
            workers.append(w)
            kvs.append(kv)
        w0, w1 = workers
        self.assertNotEqual(w0._worker.namespace(), w1._worker.namespace())
        prompt = list(range(200, 209))
        hashes = chain_block_hashes(prompt, BLOCK)
        w0.bind_connector_metadata(OrbitKVConnectorMetadata(saves=[SaveSpec("a", hashes, [0, 1])]))
        w0.start_load_kv(None)
        for name, t in kvs[0].items():
            w0.save_kv_layer(name, t, None)
        w0.wait_for_save()
        w0.clear_connector_metadata()
        self.assertEqual(w0.stats["published_blocks"], 2)
        for w, want_errors in ((w1, {3, 4}), (w0, set())):
            w.bind_connector_metadata(OrbitKVConnectorMetadata(loads=[LoadSpec("b", hashes, 0, [3, 4])]))
            w.start_load_kv(None)
            w.wait_for_layer_load("layer.0")
            w.wait_for_save()
            self.assertEqual(w.get_block_ids_with_load_errors(), want_errors)
            w.clear_connector_metadata()
        self.assertEqual(w1.stats["restored_blocks"], 0)
        self.assertEqual(w0.stats["restored_blocks"], 2)

    def test_tensors_over_a_kv_cache_buffer_are_used_in_place(self):
        page = 2 * BLOCK * HEADS * DIM * 4
        buf = kv_cache_buffer(LAYERS, page, NUM_BLOCKS)
        mem = torch.frombuffer(buf.memoryview(), dtype=torch.float32).view(LAYERS, NUM_BLOCKS, 2, BLOCK, HEADS, DIM)
        _, w = self.connectors(kv={f"layer.{l}": mem[l] for l in range(LAYERS)})
        self.assertEqual(w._worker.mode, "zero-copy")
        _, w2 = self.connectors(kv={f"layer.{l}": mem[LAYERS - 1 - l] for l in range(LAYERS)})
        self.assertEqual(w2._worker.mode, "staging")  # layers out of order: not the buffer's layout


class TestKVCacheAllocation(unittest.TestCase):
    """vLLM's KV cache placed in an OrbitKV buffer through get_mem_pool_context."""

    @staticmethod
    def plan(layers=LAYERS, blocks=NUM_BLOCKS, page=256, **over) -> SimpleNamespace:
        t = dict(size=layers * blocks * page, layers=[f"layer.{l}" for l in range(layers)],
                 layer_stride=blocks * page, block_stride=page, offset=0)
        t.update(over)
        return SimpleNamespace(kv_cache_tensors=[SimpleNamespace(**t)], num_blocks=blocks)

    def test_a_layer_major_plan_has_the_buffer_geometry(self):
        from orbitkv.vllm.kvbuffer import kv_cache_geometry
        self.assertEqual(kv_cache_geometry(self.plan()), ((LAYERS, 256, NUM_BLOCKS), LAYERS * NUM_BLOCKS * 256, ""))

    def test_other_plans_are_refused_naming_the_field(self):
        from orbitkv.vllm.kvbuffer import kv_cache_geometry
        two = self.plan()
        two.kv_cache_tensors.append(SimpleNamespace(**dict(vars(two.kv_cache_tensors[0]), offset=64)))
        for name, plan, field in (
                ("two tensors at different offsets", two, "differ in offset"),
                ("an offset", self.plan(offset=64), "KVCacheTensor.offset 64"),
                ("a block-major layout", self.plan(layer_stride=256, block_stride=256 * LAYERS),
                 "KVCacheTensor.layer_stride"),
                ("pages not a multiple of 64", self.plan(page=100), "KVCacheTensor.block_stride 100"),
                ("padding at the end", self.plan(size=LAYERS * NUM_BLOCKS * 256 + 64), "KVCacheTensor.size")):
            with self.subTest(name):
                geometry, size, why = kv_cache_geometry(plan)
                self.assertIsNone(geometry)
                self.assertIn(field, why)

    @unittest.skipIf(torch is None, "torch not installed (python3-torch)")
    def test_the_backing_zeros_land_in_a_buffer_and_others_do_not(self):
        from orbitkv.vllm.kvbuffer import KVCacheAllocation, find_buffer, kv_cache_geometry
        geometry, size, _ = kv_cache_geometry(self.plan())
        with KVCacheAllocation(geometry, size) as alloc:
            small = torch.zeros(size // 2, dtype=torch.int8)
            raw = torch.zeros(size, dtype=torch.int8, device="cpu")
            again = torch.zeros(size, dtype=torch.int8)  # only the first is the KV cache
        self.assertIsNotNone(alloc.buffer)
        self.addCleanup(alloc.buffer.close)
        self.assertEqual(raw.numel(), size)
        self.assertEqual(int(raw.abs().sum()), 0)
        found = find_buffer(raw.data_ptr())
        self.assertIsNotNone(found)
        self.assertIs(found[0], alloc.buffer)
        self.assertIsNone(find_buffer(small.data_ptr()))
        self.assertIsNone(find_buffer(again.data_ptr()))
        raw[5] = 7  # the tensor is the buffer's memory
        self.assertEqual(alloc.buffer.memoryview()[5], 7)
        del raw


def evict_all(sock: str) -> str:
    """``orbitkvctl evict --all --yes`` against the Manager at ``sock``; its output."""
    import subprocess
    ctl = os.path.join(os.path.dirname(support.MANAGER_BIN), "orbitkvctl")
    r = subprocess.run([ctl, "--socket", sock, "evict", "--all", "--yes"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode:
        raise AssertionError(f"orbitkvctl evict: {r.stdout}{r.stderr}")
    return r.stdout


class TestBindingOffers(ConnectorCase):
    """What get_num_new_matched_tokens offers is pinned until the worker restored it."""

    def offer_then_evict_then_load(self, s, w, finish_before_evict: bool):
        prompt = list(range(300, 311))  # 2 full blocks offered
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        if finish_before_evict:
            s.request_finished(req, [])  # the pin ends: nothing protects the blocks now
            self.assertEqual(s.get_num_new_matched_tokens(request("c", prompt), 0), (8, False))
            s.request_finished(request("c", prompt), [])
            req = request("b", prompt)
            s._scheduler._req(req).matched = 2  # the stale offer, as if never unpinned
        evict_all(self.sock)
        if not finish_before_evict:
            s.update_state_after_alloc(req, Blocks([1, 2, 3]), 8)
            meta, errors = self.step(s, w, new_step("b", prompt, [1, 2, 3], 8, 3))
        else:
            meta = OrbitKVConnectorMetadata(loads=[LoadSpec("b", chain_block_hashes(prompt, BLOCK)[:2], 0, [1, 2])])
            w.bind_connector_metadata(meta)
            w.start_load_kv(None)
            w.wait_for_layer_load("layer.0")
            w.wait_for_save()
            errors = w.get_block_ids_with_load_errors()
            w.clear_connector_metadata()
        return errors

    def test_an_eviction_between_the_offer_and_the_restore_cannot_fail_the_request(self):
        s, w = self.connectors()
        errors = self.offer_then_evict_then_load(s, w, finish_before_evict=False)
        self.assertEqual(errors, set())
        self.assertEqual(w.stats["restored_blocks"], 2)

    def test_without_the_pin_the_same_eviction_does_fail_the_load(self):
        # The control: the eviction above really removes unpinned blocks.
        s, w = self.connectors()
        errors = self.offer_then_evict_then_load(s, w, finish_before_evict=True)
        self.assertEqual(errors, {1, 2})

    def test_repeated_offers_for_one_request_pin_once(self):
        s, w = self.connectors()
        prompt = list(range(400, 411))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        pins = s.stats["pins"]
        req = request("b", prompt)
        for computed in (0, 0, 4, 0):
            self.assertEqual(s.get_num_new_matched_tokens(req, computed), (8 - computed, False))
        self.assertEqual(s.stats["pins"] - pins, 1)
        self.assertEqual(self.live_tickets(), 1)

    def test_an_old_pin_is_renewed_before_it_is_offered_again(self):
        import orbitkv.vllm.scheduler as sched
        s, w = self.connectors()
        prompt = list(range(450, 461))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        pins = s.stats["pins"]
        old, sched.PIN_REFRESH_S = sched.PIN_REFRESH_S, 0.0
        try:
            self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        finally:
            sched.PIN_REFRESH_S = old
        self.assertEqual(s.stats["pins"] - pins, 1)
        self.assertEqual(self.live_tickets(), 1)  # the old pin was cancelled

    def test_the_pin_ends_when_the_worker_reports_the_load_settled(self):
        s, w = self.connectors()
        prompt = list(range(500, 511))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        self.assertEqual(self.live_tickets(), 1)
        s.update_state_after_alloc(req, Blocks([1, 2, 3]), 8)
        self.step(s, w, new_step("b", prompt, [1, 2, 3], 8, 3))
        wm = w.build_connector_worker_meta()
        self.assertEqual(wm.loaded, frozenset({"b"}))
        self.assertIsNone(w.build_connector_worker_meta())  # cleared by the call
        s.update_connector_output(SimpleNamespace(kv_connector_worker_meta=wm))
        self.assertEqual(self.live_tickets(), 0)
        self.assertEqual(self.manager.health()["leases"], 0)

    def test_an_offer_vllm_does_not_take_is_unpinned(self):
        s, w = self.connectors()
        prompt = list(range(600, 611))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, False))
        s.update_state_after_alloc(req, Blocks([1, 2, 3]), 0)
        self.assertEqual(self.live_tickets(), 0)


class BoundsCase(ConnectorCase):
    """A Manager started with ``manager_extra`` (operation bounds)."""

    manager_extra: tuple = ()

    def setUp(self):
        super().setUp()
        from orbitkv.testing.manager import ManagerProcess
        if self.manager_extra:
            self.manager.kill()
            self.manager = ManagerProcess(support.MANAGER_BIN, self.sock, self.port, ram="64MiB",
                                          extra=self.manager_extra)

    def published_requests(self, s, w, names: str, base: int = 1000) -> dict:
        prompts = {r: list(range(base + 20 * i, base + 11 + 20 * i)) for i, r in enumerate(names)}
        for r, p in prompts.items():
            self.publish_prompt(s, w, "pub-" + r, p, [5, 6, 7])
        return {r: request(r, p) for r, p in prompts.items()}


class TestPinsPastTheOperationBounds(BoundsCase):
    """A Manager with 2 operation permits per session (``--max-ops-per-session``;
    128 by default, fewer than vLLM may ask for in one step): a request the
    Manager cannot pin waits for a permit (None: vLLM asks again next step)
    and is a miss only after ``load_timeout_s``."""

    manager_extra = ("--max-ops-per-session", "2")

    def three_pinned_requests(self, s, w) -> dict:
        reqs = self.published_requests(s, w, "abcd")
        self.assertEqual(s.get_num_new_matched_tokens(reqs["a"], 0), (8, False))
        self.assertEqual(s.get_num_new_matched_tokens(reqs["b"], 0), (8, False))
        lookups = s.stats["lookups"]
        self.assertEqual(s.get_num_new_matched_tokens(reqs["c"], 0), (None, False))  # no permit this step
        self.assertEqual(s.get_num_new_matched_tokens(reqs["d"], 0), (None, False))
        self.assertEqual(s.stats["lookups"] - lookups, 1)   # d was put off without a round trip
        self.assertEqual((s.stats["pins_deferred"], s.stats["pins_unadmitted"]), (2, 0))
        self.assertEqual(self.live_tickets(), 2)
        return reqs

    def test_a_request_past_the_bounds_waits_for_a_settled_load_then_hits(self):
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 10})
        reqs = self.three_pinned_requests(s, w)
        s.update_state_after_alloc(reqs["a"], Blocks([1, 2, 3]), 8)
        self.step(s, w, new_step("a", reqs["a"].prompt_token_ids, [1, 2, 3], 8, 3))
        s.update_connector_output(SimpleNamespace(kv_connector_worker_meta=w.build_connector_worker_meta()))
        self.assertEqual(s.get_num_new_matched_tokens(reqs["c"], 0), (8, False))  # a's permit came back
        self.assertEqual(s._scheduler._reqs["c"].refused_since, 0.0)
        self.assertEqual(s.stats["pins_unadmitted"], 0)
        self.assertEqual(s.get_kv_connector_stats().data["deferred_lookups"], 2)

    def test_a_request_refused_for_load_timeout_s_is_a_miss(self):
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 0.3})
        reqs = self.three_pinned_requests(s, w)
        time.sleep(0.35)
        with self.assertLogs("orbitkv.vllm", level="WARNING") as cm:
            self.assertEqual(s.get_num_new_matched_tokens(reqs["c"], 0), (0, False))
        self.assertIn("could not pin request c", cm.output[0])
        self.assertIn("load_timeout_s 0.3", cm.output[0])
        self.assertEqual((s.stats["pins_deferred"], s.stats["pins_unadmitted"]), (2, 1))
        self.assertEqual(s.get_kv_connector_stats().data["refused_lookups"], 1)
        self.assertEqual(self.live_tickets(), 2)   # a's and b's pins are untouched


class TestPinsAfterTheManagerDied(BoundsCase):
    """Pins held on a Manager that died give nothing back: a deferred
    request is then a miss, not put off again."""

    manager_extra = ("--max-ops-per-session", "2")

    def test_a_deferred_request_is_a_miss_once_the_manager_is_gone(self):
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 10})
        reqs = self.published_requests(s, w, "abc", base=5000)
        self.assertEqual(s.get_num_new_matched_tokens(reqs["a"], 0), (8, False))
        self.assertEqual(s.get_num_new_matched_tokens(reqs["b"], 0), (8, False))
        self.assertEqual(s.get_num_new_matched_tokens(reqs["c"], 0), (None, False))
        self.manager.kill()
        with support.hang_guard(30):
            for _ in range(50):   # vLLM asks each step; the death is seen within 0.1 s (manager_alive)
                out = s.get_num_new_matched_tokens(reqs["c"], 0)
                if out == (0, False):
                    break
                time.sleep(0.02)
        self.assertEqual(out, (0, False))


class TestPinsPastTheManagersBound(BoundsCase):
    """A Manager with 2 operation permits in all (``--max-ops``), both held
    by another scheduler: this scheduler holds no pin whose settling could
    free one, so waiting cannot help and its refused lookup is a miss at
    once (as is a refusal waiting cannot cure, such as a lease over the
    whole byte budget)."""

    manager_extra = ("--max-ops", "2")

    def test_a_refusal_with_no_pin_of_its_own_to_wait_for_is_a_miss_at_once(self):
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 10})
        other = OrbitKVConnector(config(self.sock), KVConnectorRole.SCHEDULER)
        self.addCleanup(other.shutdown)
        reqs = self.published_requests(s, w, "abc", base=3000)
        self.assertEqual(other.get_num_new_matched_tokens(reqs["a"], 0), (8, False))
        self.assertEqual(other.get_num_new_matched_tokens(reqs["b"], 0), (8, False))
        with self.assertLogs("orbitkv.vllm", level="WARNING") as cm:
            self.assertEqual(s.get_num_new_matched_tokens(reqs["c"], 0), (0, False))
        self.assertIn("no other pin of this scheduler to wait for", cm.output[0])
        self.assertEqual((s.stats["pins_deferred"], s.stats["pins_unadmitted"]), (0, 1))


class TestPinsInABurst(ConnectorCase):
    """More requests with hits in one scheduler step than a session's 128
    permits (the default bounds): the rest wait one step, none misses."""

    def test_a_burst_of_200_offers_128_puts_off_72_and_misses_none(self):
        s, w = self.connectors(**{"orbitkv.load_timeout_s": 10})
        reqs = []
        for i in range(200):
            p = list(range(10000 + 20 * i, 10011 + 20 * i))
            self.publish_prompt(s, w, f"p{i}", p, [5, 6, 7])
            reqs.append(request(f"r{i}", p))
        first = [s.get_num_new_matched_tokens(r, 0)[0] for r in reqs]
        self.assertEqual((first.count(8), first.count(None), first.count(0)), (128, 72, 0))
        for r, x in zip(reqs, first):
            if x:
                s.update_state_after_alloc(r, Blocks([1, 2, 3]), 0)   # vLLM took none: the pin ends
        second = [s.get_num_new_matched_tokens(r, 0)[0] for r, x in zip(reqs, first) if x is None]
        self.assertEqual((second.count(8), second.count(None), second.count(0)), (72, 0, 0))
        self.assertEqual(s.stats["pins_unadmitted"], 0)


class TestLocalDiscovery(ConnectorCase):
    """The scheduler answers a miss from the Manager's discovery index and
    confirms every hit with the leased query (docs/discover.md)."""

    def test_a_local_miss_takes_no_round_trip(self):
        s, w = self.connectors()
        lookups = s.stats["lookups"]
        self.assertEqual(s.get_num_new_matched_tokens(request("cold", list(range(700, 711))), 0), (0, False))
        self.assertEqual(s.stats["local_misses"], 1)
        self.assertEqual(s.stats["lookups"], lookups)
        self.assertEqual(self.live_tickets(), 0)

    def test_a_local_hit_is_confirmed_by_the_leased_query(self):
        s, w = self.connectors()
        prompt = list(range(720, 731))
        self.publish_prompt(s, w, "a", prompt, [5, 6, 7])
        misses, lookups, pins = s.stats["local_misses"], s.stats["lookups"], s.stats["pins"]
        self.assertEqual(s.get_num_new_matched_tokens(request("b", prompt), 0), (8, False))
        self.assertEqual(s.stats["local_misses"], misses)
        self.assertEqual((s.stats["lookups"] - lookups, s.stats["pins"] - pins), (1, 1))
        self.assertEqual(self.live_tickets(), 1)  # the pin the offer rests on

    def test_with_local_discovery_off_a_miss_asks_the_manager(self):
        s = OrbitKVConnector(config(self.sock, **{"orbitkv.local_discovery": False}), KVConnectorRole.SCHEDULER)
        self.addCleanup(s.shutdown)
        self.assertEqual(s.get_num_new_matched_tokens(request("cold", list(range(740, 751))), 0), (0, False))
        self.assertEqual((s.stats["local_misses"], s.stats["lookups"]), (0, 1))


class TestLocalDiscoveryPastTheBudget(ConnectorCase):
    """A Manager whose --discover-bytes holds one table, which another
    client holds: the scheduler's index is refused, and every request
    after the first is answered from the client's memory of the refusal
    (no MapDiscovery round trip per shard per request)."""

    def setUp(self):
        super().setUp()
        from orbitkv.testing.manager import ManagerProcess
        self.manager.kill()
        # 64 MiB of 16 KiB chunks: a table of 256 KiB and 64 bytes; 300 KiB holds one.
        self.manager = ManagerProcess(support.MANAGER_BIN, self.sock, self.port, ram="64MiB",
                                      extra=("--discover-bytes", "300KiB"))
        self.filler = orbitkv.CacheManagerClient(socket_path=self.sock, instance_id="filler")
        self.addCleanup(self.filler.close)
        self.filler.discover_open(b"\x01" * 16)

    def test_a_refused_index_is_asked_for_once_not_per_request(self):
        s, w = self.connectors()
        with self.assertLogs("orbitkv.vllm", level="DEBUG") as cm:
            for i in range(3):
                prompt = list(range(800 + 20 * i, 811 + 20 * i))
                self.assertEqual(s.get_num_new_matched_tokens(request(f"cold{i}", prompt), 0), (0, False))
        unavailable = [m for m in cm.output if "local discovery" in m and "unavailable" in m]
        self.assertEqual(len(unavailable), 3, cm.output)
        self.assertIn("--discover-bytes", unavailable[0])
        self.assertNotIn("ms ago", unavailable[0])
        # From memory unless a loaded VM spent the 1 s backoff between two
        # requests: at least one of the later ones is.
        remembered = [m for m in unavailable[1:] if "ms ago; asked again 1000 ms after it" in m]
        self.assertTrue(remembered, unavailable)
        self.assertEqual(s.stats["local_misses"], 0)  # every request took the leased query


class TestEngineStartChecks(unittest.TestCase):
    """Misconfigurations that must stop vLLM at start, naming what is wrong."""

    def test_only_the_supported_vllm_series_are_accepted(self):
        from orbitkv.vllm.connector import check_vllm_version
        for version, ok in (("0.32.0", True), ("0.32.7+cpu", True), ("0.33.0", True), ("0.33.2", True),
                            ("0.31.2", False), ("0.34.0", False), ("1.0.0", False), ("0.3.3", False), ("", False)):
            with self.subTest(version=version):
                if ok:
                    check_vllm_version(version)
                else:
                    with self.assertRaises(RuntimeError) as cm:
                        check_vllm_version(version)
                    self.assertIn(f"the installed vLLM is {version or 'of unknown version'}", str(cm.exception))

    def test_a_refused_vllm_is_told_the_supported_range(self):
        from orbitkv.vllm.connector import SUPPORTED_VLLM, check_vllm_version, supported_range
        self.assertEqual(SUPPORTED_VLLM, ("0.32", "0.33"))
        self.assertEqual(supported_range(), "0.32.x and 0.33.x")
        with self.assertRaises(RuntimeError) as cm:
            check_vllm_version("0.34.1")
        self.assertTrue(str(cm.exception).startswith(
            "OrbitKVConnector supports vLLM 0.32.x and 0.33.x; the installed vLLM is 0.34.1 ("), str(cm.exception))

    def test_a_manager_of_another_version_is_refused_at_construction_naming_it(self):
        import socket
        import struct
        import threading
        BOOT_MAGIC, BOOT_VERSION, HELLO_BYTES, ERROR_BYTES = 0x42564B4F, 3, 96, 128
        cases = [
            # A Manager of another ABI answers the hello BAD_VERSION (status 2) with its reason.
            ("refused with BAD_VERSION", BOOT_VERSION, 2, "abi_version 3 differs from this Manager's 4",
             orbitkv.Refused, "BAD_VERSION"),
            # A Manager speaking another bootstrap protocol is caught by the client's own check.
            ("another bootstrap protocol", BOOT_VERSION + 1, 0, "", orbitkv.VersionMismatch,
             f"protocol_version {BOOT_VERSION + 1} differs from {BOOT_VERSION}"),
        ]
        for name, version, status, why, err, want in cases:
            with self.subTest(name):
                d = tempfile.mkdtemp(prefix="orbitkv-pytest-")
                self.addCleanup(shutil.rmtree, d, True)
                path = os.path.join(d, "other.sock")
                srv = socket.socket(socket.AF_UNIX)
                srv.bind(path)
                srv.listen(1)
                got: list[bytes] = []

                def serve():
                    conn, _ = srv.accept()
                    with conn:
                        got.append(conn.recv(HELLO_BYTES))
                        reply = struct.pack("<IHHQ16sQQIIIIIIIHH", BOOT_MAGIC, version, status, 7, b"\0" * 16, 0,
                                            1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                        conn.sendall(reply + why.encode().ljust(ERROR_BYTES, b"\0"))

                t = threading.Thread(target=serve, daemon=True)
                t.start()
                with support.hang_guard(30), self.assertRaises(err) as cm:
                    OrbitKVConnector(config(path), KVConnectorRole.SCHEDULER)
                t.join(5)
                srv.close()
                self.assertEqual(struct.unpack_from("<I", got[0])[0], BOOT_MAGIC)  # it did speak to us
                self.assertIn(f"orbitkv.bootstrap_socket={path!r}", str(cm.exception))
                self.assertIn(want, str(cm.exception))

    def test_vllm_block_hashes_without_pythonhashseed_are_refused_under_xxhash_only(self):
        from orbitkv.vllm.connector import check_hash_seed
        for algo in ("xxhash", "xxhash_cbor"):
            with self.subTest(algo=algo):
                cfg = config("/nonexistent.sock", **{"orbitkv.block_hashes": "vllm"})
                cfg.cache_config.prefix_caching_hash_algo = algo
                with self.assertRaises(OptionError) as cm:
                    check_hash_seed(cfg, environ={})
                self.assertIn("PYTHONHASHSEED", str(cm.exception))
                self.assertIn(repr(algo), str(cm.exception))
                check_hash_seed(cfg, environ={"PYTHONHASHSEED": "0"})
                # vLLM seeds NONE_HASH with the variable's value whenever it
                # is set (resolve_none_hash_seed): "" is a seed like any other.
                check_hash_seed(cfg, environ={"PYTHONHASHSEED": ""})
        for algo in ("sha256", "sha256_cbor", None):   # None: vLLM's default, sha256
            with self.subTest(algo=algo):
                cfg = config("/nonexistent.sock")
                if algo:
                    cfg.cache_config.prefix_caching_hash_algo = algo
                check_hash_seed(cfg, environ={})   # a fixed seed: nothing to refuse
        old = os.environ.pop("PYTHONHASHSEED", None)
        self.addCleanup(lambda: os.environ.__setitem__("PYTHONHASHSEED", old) if old is not None else None)
        cfg = config("/nonexistent.sock", **{"orbitkv.block_hashes": "vllm"})
        cfg.cache_config.prefix_caching_hash_algo = "xxhash"
        with self.assertRaises(OptionError) as cm:
            OrbitKVConnector(cfg, KVConnectorRole.SCHEDULER)
        self.assertIn("PYTHONHASHSEED", str(cm.exception))

    def test_a_worker_refuses_a_scheduler_of_another_block_size_or_model(self):
        from orbitkv.vllm.options import identity_base
        opts = parse_options({})
        mine = identity_base(config("/x"), opts)
        for field, value in (("block_tokens", BLOCK * 2), ("model_id", "other/model")):
            with self.subTest(field=field):
                theirs = dict(mine, **{field: value})
                meta = OrbitKVConnectorMetadata(identity=tuple(sorted(theirs.items())))
                from orbitkv.vllm.worker import WorkerSide
                side = WorkerSide.__new__(WorkerSide)
                side._identity, side.tp_rank = tuple(sorted(mine.items())), 0
                with self.assertRaises(ValueError) as cm:
                    side.check_identity(meta)
                self.assertIn(f"{field} is {value!r} at the scheduler", str(cm.exception))

    def test_the_connector_is_a_best_effort_host_cache_for_vllm(self):
        self.assertFalse(OrbitKVConnector.requires_kv_delivery.fget(None))
        self.assertEqual(str(getattr(OrbitKVConnector._cache_hit_source, "value",
                                     OrbitKVConnector._cache_hit_source)), "host")


if __name__ == "__main__":
    unittest.main()
