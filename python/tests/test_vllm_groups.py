"""vLLM's KV cache groups (hybrid KV cache manager) in the vLLM connector:
how groups are read, which blocks a hit needs in each kind of group, and
the connector's saves and restores of a full-attention, a sliding-window and
a Mamba-state group over one backing, against a real Manager, driven the
way vLLM's scheduler and worker call it; what a group's cache identity
holds; and slot_views on the layouts vLLM plans and on bad ones. The real
engine is `make e2e-vllm`."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import unittest
from types import SimpleNamespace

from . import support

orbitkv = support.import_orbitkv()
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

from orbitkv.vllm import KVConnectorRole, LoadSpec, OrbitKVConnector, OrbitKVConnectorMetadata  # noqa: E402
from orbitkv.vllm.groups import KVGroups, group_hash  # noqa: E402
from orbitkv.vllm.hashing import chain_block_hashes  # noqa: E402

from .test_vllm_adapter import config, request  # noqa: E402

BLOCK, BLOCKS, PAGE = 4, 32, 256


class FullAttentionSpec:
    def __init__(self, block_size=BLOCK, dtype=None):
        self.block_size = block_size
        if dtype is not None:
            self.dtype = dtype


class SlidingWindowSpec(FullAttentionSpec):
    """vLLM's SlidingWindowSpec is not a FullAttentionSpec; the name decides."""

    def __init__(self, window, block_size=BLOCK, dtype=None):
        super().__init__(block_size, dtype)
        self.sliding_window = window


class MambaSpec(FullAttentionSpec):
    def __init__(self, mode="align", block_size=BLOCK, dtypes=None):
        super().__init__(block_size)
        self.mamba_cache_mode = mode
        if dtypes is not None:
            self.dtypes = dtypes


class ChunkedLocalAttentionSpec(FullAttentionSpec):
    pass


def kv_config(*specs, layers=1):
    groups = [SimpleNamespace(kv_cache_spec=s, layer_names=[f"g{g}.l{j}" for j in range(layers)])
              for g, s in enumerate(specs)]
    tensors = [SimpleNamespace(size=layers * BLOCKS * PAGE, layers=list(g.layer_names), layer_stride=BLOCKS * PAGE,
                               block_stride=PAGE, offset=0) for g in groups]
    return SimpleNamespace(kv_cache_groups=groups, kv_cache_tensors=tensors, num_blocks=BLOCKS)


class TestKVGroups(unittest.TestCase):

    def test_one_full_attention_group_keeps_the_one_table_path(self):
        self.assertIsNone(KVGroups.of(kv_config(FullAttentionSpec()), BLOCK))
        self.assertIsNone(KVGroups.of(None, BLOCK))

    def test_kinds_and_what_a_hit_of_k_blocks_needs(self):
        g = KVGroups.of(kv_config(SlidingWindowSpec(9), FullAttentionSpec(), MambaSpec()), BLOCK)
        self.assertEqual(g.unsupported, "")
        self.assertEqual([x.kind for x in g.groups], ["window", "full", "state"])
        self.assertEqual(g.groups[0].window_blocks, 2)       # ceil((9 - 1) / 4): tokens k*4-8 .. k*4-1
        self.assertEqual(list(g.groups[0].needed(5)), [3, 4])
        self.assertEqual(list(g.groups[0].needed(1)), [0])
        self.assertEqual(list(g.groups[1].needed(3)), [0, 1, 2])
        self.assertEqual(list(g.groups[2].needed(3)), [2])   # the state after token 12 only
        self.assertEqual(g.layout_tag(), "groups:window2x1,fullx1,statex1")

    def test_a_group_orbitkv_cannot_serve_is_named(self):
        for specs, words in (
                ((FullAttentionSpec(), ChunkedLocalAttentionSpec()), "group 1 has a ChunkedLocalAttentionSpec"),
                ((FullAttentionSpec(), MambaSpec(mode="all")), "mamba_cache_mode 'all'"),
                ((FullAttentionSpec(), SlidingWindowSpec(8, block_size=8)), "group 1 (SlidingWindowSpec) has "
                                                                            "block size 8")):
            with self.subTest(words):
                self.assertIn(words, KVGroups.of(kv_config(*specs), BLOCK).unsupported)

    def test_pins_list_the_full_prefix_then_the_needs_at_k_and_shorten(self):
        g = KVGroups.of(kv_config(SlidingWindowSpec(5), FullAttentionSpec(), MambaSpec()), BLOCK)
        gh = [[bytes([grp, i]) * 8 for i in range(6)] for grp in range(3)]
        hashes, full = g.pin_hashes(gh, 4)
        self.assertEqual(full, 4)
        self.assertEqual(hashes, [gh[1][0], gh[1][1], gh[1][2], gh[1][3], gh[0][3], gh[2][3]])
        self.assertEqual(g.next_candidate(4, 2, full), 2)   # the full prefix ended at 2
        self.assertEqual(g.next_candidate(4, 5, full), 3)   # the state at 4 missing: one block less

    def test_group_keys_differ_per_group_and_from_the_chain(self):
        h = chain_block_hashes(list(range(8)), BLOCK)[1]
        keys = {group_hash(h, g) for g in range(4)}
        self.assertEqual(len(keys), 4)
        self.assertNotIn(h, keys)
        self.assertTrue(all(len(k) == 16 for k in keys))


class Tables:
    """vLLM's KVCacheBlocks: one block id list per group."""

    def __init__(self, *tables):
        self.tables = [list(t) for t in tables]

    def get_block_ids(self):
        return tuple(self.tables)


def new_step(rid, prompt, tables, computed, scheduled):
    nr = SimpleNamespace(req_id=rid, prompt_token_ids=prompt, block_ids=tuple(list(t) for t in tables),
                         num_computed_tokens=computed, lora_request=None)
    return SimpleNamespace(scheduled_new_reqs=[nr], num_scheduled_tokens={rid: scheduled}, finished_req_ids=set(),
                           scheduled_cached_reqs=SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                                 new_block_ids=[], num_computed_tokens=[]))


def no_requests():
    """A step that computes nothing (vLLM still runs the connector)."""
    return SimpleNamespace(scheduled_new_reqs=[], num_scheduled_tokens={}, finished_req_ids=set(),
                           scheduled_cached_reqs=SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                                 new_block_ids=[], num_computed_tokens=[]))


def cached_step(rid, computed, scheduled, new_tables):
    return SimpleNamespace(scheduled_new_reqs=[], num_scheduled_tokens={rid: scheduled}, finished_req_ids=set(),
                           scheduled_cached_reqs=SimpleNamespace(
                               req_ids=[rid], resumed_req_ids=set(), num_computed_tokens=[computed],
                               new_block_ids=[tuple(list(t) for t in new_tables)]))


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class HybridCase(unittest.TestCase):
    """A sliding-window (window 5 tokens: 1 block), a full-attention and a
    Mamba-state group over one backing of BLOCKS pages of PAGE bytes, as
    vLLM lays them out: each group's layer views the same bytes."""

    zero_copy = True

    def setUp(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        from orbitkv.vllm.kvbuffer import kv_cache_buffer, view_address
        if not os.access(support.MANAGER_BIN, os.X_OK):
            self.skipTest(f"{support.MANAGER_BIN} not built (run `make go`)")
        logging.getLogger("orbitkv").setLevel(logging.ERROR)
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "okv.sock")
        self.manager = ManagerProcess(support.MANAGER_BIN, self.sock, free_port(), ram="64MiB")
        self.addCleanup(lambda: self.manager.kill())
        if self.zero_copy:
            self.buf = kv_cache_buffer(1, PAGE, BLOCKS)
            self.backing = torch.frombuffer(self.buf.memoryview(), dtype=torch.uint8)
            self.assertEqual(self.backing.data_ptr(), view_address(self.buf))
        else:
            self.backing = torch.zeros(BLOCKS * PAGE, dtype=torch.uint8)
        torch.manual_seed(0)
        self.backing.copy_(torch.randint(0, 256, (BLOCKS * PAGE,), dtype=torch.uint8))
        attn = self.backing.view(torch.float32).view(BLOCKS, 2, BLOCK, 8)       # 256 B a block
        state = self.backing.view(BLOCKS, PAGE)[:, :200].view(BLOCKS, 1, 1, 200)  # padded, as vLLM's Mamba page
        self.kv = {"g0.l0": attn, "g1.l0": attn, "g2.l0": state}
        self.cfg = kv_config(SlidingWindowSpec(5), FullAttentionSpec(), MambaSpec())

    def connectors(self, cfg=None):
        cfg = cfg or self.cfg
        s = OrbitKVConnector(config(self.sock), KVConnectorRole.SCHEDULER, kv_cache_config=cfg)
        w = OrbitKVConnector(config(self.sock), KVConnectorRole.WORKER, kv_cache_config=cfg)
        w.register_kv_caches(self.kv)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        return s, w

    def page(self, b):
        return self.backing.view(BLOCKS, PAGE)[b].clone()

    def step(self, s, w, so):
        meta = s.build_connector_meta(so)
        w.bind_connector_metadata(meta)
        w.start_load_kv(SimpleNamespace())
        for name, t in self.kv.items():
            w.wait_for_layer_load(name)
            w.save_kv_layer(name, t, None)
        w.wait_for_save()
        r = w.get_transfer_results(set())
        self.results = (r.finished_recving, r.failed_recving)
        errors = w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        return meta, errors

    def save_a(self, s, w, prompt):
        """Request a in two chunks, 8 then 5 tokens: the state is stored
        after token 8 (a chunk ended at that block boundary), not after 12."""
        self.assertEqual(s.get_num_new_matched_tokens(request("a", prompt), 0), (0, False))
        m1, _ = self.step(s, w, new_step("a", prompt, ([1, 2], [5, 6], [0, 9]), 0, 8))
        m2, _ = self.step(s, w, cached_step("a", 8, 5, ([3, 4], [7, 8], [0, 10])))
        s.request_finished_all_groups(request("a", prompt), ([0, 0, 3, 4], [5, 6, 7, 8], [0, 0, 0, 10]))
        return m1, m2


class TestHybridZeroCopy(HybridCase):

    def test_every_group_saved_and_a_hit_restores_what_each_needs_byte_exact(self):
        s, w = self.connectors()
        self.assertEqual(w.kv_mode, "zero-copy" if self.zero_copy else "staging")
        prompt = list(range(13))   # 3 full blocks of 4 (+1 token)
        m1, m2 = self.save_a(s, w, prompt)
        self.assertEqual(sorted(m1.saves[0].block_ids), [1, 2, 5, 6, 9])   # window, full, the state after 8
        self.assertEqual(sorted(m2.saves[0].block_ids), [3, 7])            # no state after 12: step ended at 13
        self.assertEqual(w.stats["published_blocks"], 7)
        want = {b: self.page(src) for b, src in ((21, 2), (24, 5), (25, 6), (28, 9))}
        self.backing.view(BLOCKS, PAGE)[20:30] = 0
        req = request("b", prompt)
        # A hit of 3 blocks would need the state after 12 (not stored): the
        # hit shortens to 2 blocks, where a state is.
        # Loaded asynchronously: a failure is reported by request (vLLM
        # cannot map block ids of several groups back to requests).
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))   # side-effect free
        s.update_state_after_alloc(req, Tables([0, 21, 22], [24, 25, 26], [0, 28, 29]), 8)
        # The load's step (b waits for it), then b's first computed step.
        meta, errors = self.step(s, w, no_requests())
        self.assertEqual(sorted(meta.loads[0].block_ids), [21, 24, 25, 28])
        self.assertEqual((errors, self.results), (set(), ({"b"}, set())))
        meta, _ = self.step(s, w, new_step("b", prompt, ([0, 21, 22], [24, 25, 26], [0, 28, 29]), 8, 5))
        self.assertEqual(meta.saves[0].block_ids if meta.saves else [], [22, 26])   # block 2 of b: window, full
        for b, page in want.items():
            self.assertTrue(torch.equal(self.page(b), page), f"block {b}")
        self.assertTrue(torch.equal(self.page(20), torch.zeros(PAGE, dtype=torch.uint8)))   # a null: untouched

    def test_a_group_orbitkv_cannot_serve_makes_every_request_miss_and_saves_nothing(self):
        cfg = kv_config(FullAttentionSpec(), ChunkedLocalAttentionSpec())
        s, w = self.connectors(cfg)
        prompt = list(range(13))
        self.assertEqual(s.get_num_new_matched_tokens(request("a", prompt), 0), (0, False))
        meta, _ = self.step(s, w, new_step("a", prompt, ([1, 2, 3, 4], [5, 6, 7, 8]), 0, 13))
        self.assertEqual(meta.saves, [])
        self.assertEqual(w.stats["published_blocks"], 0)

    def test_a_later_ask_offers_what_was_saved_since(self):
        s, w = self.connectors()
        prompt = list(range(13))
        self.save_a(s, w, prompt)   # the state after 8 only
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, Tables([], [], []), 0)   # vLLM took none of it: the pin ends
        # Another request computes 12 tokens in one step: the state after 12 is stored now.
        self.assertEqual(s.get_num_new_matched_tokens(request("a2", prompt), 0), (8, True))
        s.update_state_after_alloc(request("a2", prompt), Tables([], [], []), 0)
        self.step(s, w, new_step("a2", prompt, ([11, 12, 13], [14, 15, 16], [0, 0, 17]), 0, 12))
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (12, True))

    def test_a_load_is_all_or_nothing(self):
        s, w = self.connectors()
        prompt = list(range(13))
        self.save_a(s, w, prompt)
        h = chain_block_hashes(prompt, BLOCK)
        present, missing = group_hash(h[0], 1), group_hash(h[2], 2)   # full block 0; the state after 12
        before = self.page(24)
        meta = OrbitKVConnectorMetadata(loads=[LoadSpec("c", [present, missing], 0, [24, 28], whole=True)])
        w.bind_connector_metadata(meta)
        w.start_load_kv(SimpleNamespace())
        r = w.get_transfer_results(set())
        self.assertEqual((r.finished_recving, r.failed_recving), ({"c"}, {"c"}))
        self.assertEqual(w.get_block_ids_with_load_errors(), set())
        self.assertTrue(torch.equal(self.page(24), before))   # nothing restored


class TestHybridStaging(TestHybridZeroCopy):
    """The same through staging pages (a backing that is not an OrbitKV buffer)."""

    zero_copy = False


def vllm_request(rid, prompt, unit):
    """A request as vLLM 0.32 makes it with several KV cache groups: its
    ``block_hashes`` a chain with one hash per ``unit`` tokens (vLLM's
    ``hash_block_size``: ``prefix_match_unit``, or the GCD of the groups'
    block sizes), finer than the scheduler's block when ``unit`` < BLOCK."""
    out, parent = [], b"vllm-root"
    for i in range(len(prompt) // unit):
        parent = hashlib.sha256(parent + bytes(prompt[i * unit:(i + 1) * unit])).digest()
        out.append(parent)
    return SimpleNamespace(request_id=rid, prompt_token_ids=prompt, lora_request=None, cache_salt=None,
                           mm_features=[], block_hashes=out)


class TestHybridEdges(HybridCase):
    """What a new user's configuration, a failing worker and odd KV tensors
    do to the groups' loads: a restore never lands bytes of another prefix,
    a load that failed is recomputed, not offered again."""

    zero_copy = False

    def manager2(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        sock = os.path.join(self.dir, "okv2.sock")
        m = ManagerProcess(support.MANAGER_BIN, sock, free_port(), ram="64MiB")
        self.addCleanup(lambda: m.kill())
        return sock

    def worker(self, cfg=None, sock=None, **extra):
        w = OrbitKVConnector(config(sock or self.sock, **extra), KVConnectorRole.WORKER,
                             kv_cache_config=cfg or self.cfg)
        w.register_kv_caches(self.kv)
        self.addCleanup(w.shutdown)
        return w

    def pair(self, cfg=None, **extra):
        s = OrbitKVConnector(config(self.sock, **extra), KVConnectorRole.SCHEDULER, kv_cache_config=cfg or self.cfg)
        self.addCleanup(s.shutdown)
        return s, self.worker(cfg, **extra)

    def report(self, s, w):
        """vLLM's hand-off of the workers' metadata to the scheduler."""
        s.update_connector_output(SimpleNamespace(kv_connector_worker_meta=w.build_connector_worker_meta()))

    def test_vllm_block_hashes_finer_than_the_block_never_restore_another_prefix(self):
        # prefix_match_unit 2 (vLLM's hash_block_size): Request.block_hashes
        # holds one hash per 2 tokens; prompt b differs from a in tokens 6
        # and 7, inside chain block 1.
        cfg = kv_config(SlidingWindowSpec(5), FullAttentionSpec(), MambaSpec())
        cfg.hash_block_size = 2
        s, w = self.pair(cfg, **{"orbitkv.block_hashes": "vllm"})
        a = list(range(13))
        b = a[:6] + [90, 91] + a[8:]
        self.assertEqual(s.get_num_new_matched_tokens(vllm_request("a", a, 2), 0), (0, False))
        self.step(s, w, new_step("a", a, ([1, 2], [5, 6], [0, 9]), 0, 8))   # a's state after 8 saved
        self.step(s, w, cached_step("a", 8, 5, ([3, 4], [7, 8], [0, 10])))
        self.assertEqual(s.get_num_new_matched_tokens(vllm_request("a2", a, 2), 0), (8, True))   # a hits
        # b shares only block 0 with a, and no state is stored after 4
        # tokens: a miss, never a's block 1.
        self.assertEqual(s.get_num_new_matched_tokens(vllm_request("b", b, 2), 0), (0, False))

    def held(self):
        h = self.manager.health()
        return {k: h.get(k) for k in ("tickets", "pins", "leases", "operations")}

    def test_repeated_asks_short_pins_and_requests_ended_mid_load_hold_nothing_at_the_manager(self):
        s, w = self.pair()
        prompt = list(range(13))
        self.save_a(s, w, prompt)
        idle = {"tickets": 0, "pins": 0, "leases": 0, "operations": 0}
        self.assertEqual(self.held(), idle)
        tables = Tables([0, 21, 22], [24, 25, 26], [0, 28, 29])
        # Asked three times, then vLLM's own cache covered it: nothing kept.
        req = request("b", prompt)
        for _ in range(3):
            self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, tables, 0)
        self.assertEqual(self.held(), idle)
        # The 3-block candidate comes back short (no state after 12): the
        # 2-block pin is the one kept, and it ends with the request.
        req = request("c", prompt + [99, 98, 97, 96])
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.request_finished_all_groups(req, ([], [], []))
        self.assertEqual(self.held(), idle)
        # Finished after its load was planned, before the step ran it: the
        # step still reports it (vLLM frees its blocks on that report).
        req = request("d", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, tables, 8)
        meta = s.build_connector_meta(no_requests())
        s.request_finished_all_groups(req, tables.get_block_ids())
        w.bind_connector_metadata(meta)
        w.start_load_kv(SimpleNamespace())
        w.wait_for_save()
        self.assertEqual(w.get_transfer_results(set()).finished_recving, {"d"})
        self.report(s, w)
        w.clear_connector_metadata()
        self.assertEqual(self.held(), idle)
        # A load run to the end and reported: its pins end too.
        req = request("e", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, tables, 8)
        self.step(s, w, no_requests())
        self.report(s, w)
        self.assertEqual(self.held(), idle)

    def test_vllm_block_hashes_of_a_unit_that_does_not_divide_the_block_are_refused_at_start(self):
        from orbitkv.vllm import OptionError
        cfg = kv_config(SlidingWindowSpec(5), FullAttentionSpec())
        cfg.hash_block_size = 3
        with self.assertRaisesRegex(OptionError, "every 3 tokens"):
            OrbitKVConnector(config(self.sock, **{"orbitkv.block_hashes": "vllm"}), KVConnectorRole.SCHEDULER,
                             kv_cache_config=cfg)

    def test_a_failed_load_is_recomputed_not_offered_again(self):
        # The worker cannot load what the scheduler pins (here: it talks to
        # another Manager; as when its buffer was refused after a Manager
        # restart): each load fails. Under kv_load_failure_policy
        # "recompute" vLLM asks again for the failed request.
        s, w = self.pair()
        prompt = list(range(13))
        self.save_a(s, w, prompt)
        w2 = self.worker(sock=self.manager2())
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, Tables([0, 21, 22], [24, 25, 26], [0, 28, 29]), 8)
        self.step(s, w2, no_requests())
        self.assertEqual(self.results, ({"b"}, {"b"}))
        self.report(s, w2)
        # vLLM freed b's blocks and asks again: recomputed from token 0.
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))

    def test_saves_larger_than_the_staging_pages_are_all_published(self):
        # 2 staging pages; a's first step saves 5 blocks (window, full and
        # state), its second 2.
        s, w = self.pair(**{"orbitkv.staging_blocks": 2})
        self.save_a(s, w, list(range(13)))
        self.assertEqual((w.stats["published_blocks"], w.stats["save_errors"]), (7, 0))
        req = request("b", list(range(13)))   # the state after 8 is there: a hit of 8
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))

    def test_a_load_larger_than_the_staging_pages_is_restored(self):
        # Staging (every hybrid engine on a GPU): 2 pages, a load of 4
        # blocks (2 full-attention, 1 window, 1 state).
        s, w = self.pair()
        prompt = list(range(13))
        self.save_a(s, w, prompt)
        w = self.worker(**{"orbitkv.staging_blocks": 2})
        want = {b: self.page(src) for b, src in ((21, 2), (24, 5), (25, 6), (28, 9))}
        self.backing.view(BLOCKS, PAGE)[20:30] = 0
        req = request("b", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (8, True))
        s.update_state_after_alloc(req, Tables([0, 21, 22], [24, 25, 26], [0, 28, 29]), 8)
        self.step(s, w, no_requests())
        self.assertEqual(self.results, ({"b"}, set()))
        for b, page in want.items():
            self.assertTrue(torch.equal(self.page(b), page), f"block {b}")


class UniformTypeKVCacheSpecs:
    """vLLM's spec of a group whose layers are of one type but not one spec
    (block-outermost packing of mixed page sizes, kv_cache_utils.py
    _get_packed_kv_cache_groups); the scheduler's copy of the config holds
    its first spec instead (generate_scheduler_kv_cache_config)."""

    def __init__(self, specs):
        self.kv_cache_specs = dict(specs)
        self.block_size = next(iter(self.kv_cache_specs.values())).block_size


class TestUniformTypeGroups(HybridCase):

    def test_a_group_of_uniform_type_specs_is_its_first_spec_on_both_sides(self):
        # The worker sees UniformTypeKVCacheSpecs, the scheduler its first
        # spec: both must plan the same groups and identity, or every step
        # raises (check_identity) in the worker.
        sched_cfg = self.cfg
        work_cfg = kv_config(SlidingWindowSpec(5), UniformTypeKVCacheSpecs({"g1.l0": FullAttentionSpec()}),
                             MambaSpec())
        s = OrbitKVConnector(config(self.sock), KVConnectorRole.SCHEDULER, kv_cache_config=sched_cfg)
        w = OrbitKVConnector(config(self.sock), KVConnectorRole.WORKER, kv_cache_config=work_cfg)
        w.register_kv_caches(self.kv)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        self.assertEqual((w.groups.layout_tag(), w.groups.unsupported), (s.groups.layout_tag(), ""))
        self.save_a(s, w, list(range(13)))
        self.assertEqual(w.stats["published_blocks"], 7)


class TestIdentityOfGroups(unittest.TestCase):
    """The groups' part of the cache identity: what makes a block's bytes
    mean something else must change the namespace."""

    def test_a_state_dtype_is_part_of_the_identity(self):
        # vLLM's mamba_ssm_cache_dtype / mamba_cache_dtype change a state
        # page's dtypes; with an explicit --block-size both plans get the
        # same block size and padded page (platforms/interface.py
        # _align_hybrid_block_size), so only the dtypes tell them apart.
        import torch as t
        bf16 = KVGroups.of(kv_config(FullAttentionSpec(), MambaSpec(dtypes=(t.bfloat16, t.bfloat16))), BLOCK)
        f32 = KVGroups.of(kv_config(FullAttentionSpec(), MambaSpec(dtypes=(t.bfloat16, t.float32))), BLOCK)
        self.assertNotEqual(bf16.layout_tag(), f32.layout_tag())
        self.assertEqual(f32.layout_tag(), "groups:fullx1,statex1[bfloat16,float32]")

    def test_vllms_physical_layout_is_part_of_the_identity(self):
        # A page is the slots' bytes as they lie in memory: LBHNC and LBNHC
        # (VLLM_KV_CACHE_LAYOUT; FlashInfer's and FlashAttention's first
        # choices) give the same page size, the bytes in another order.
        hnd, nhd = kv_config(SlidingWindowSpec(5), FullAttentionSpec()), kv_config(SlidingWindowSpec(5),
                                                                                 FullAttentionSpec())
        hnd.kv_cache_layout, nhd.kv_cache_layout = "LBHNC", "LBNHC"
        self.assertEqual(KVGroups.of(hnd, BLOCK).layout_tag(), "groups@LBHNC:window1x1,fullx1")
        self.assertNotEqual(KVGroups.of(hnd, BLOCK).layout_tag(), KVGroups.of(nhd, BLOCK).layout_tag())

    def test_an_attention_groups_dtype_is_part_of_the_identity(self):
        import torch as t
        a = KVGroups.of(kv_config(SlidingWindowSpec(5, dtype=t.float16), FullAttentionSpec(dtype=t.float16)), BLOCK)
        b = KVGroups.of(kv_config(SlidingWindowSpec(5, dtype=t.float16), FullAttentionSpec(dtype=t.float32)), BLOCK)
        self.assertNotEqual(a.layout_tag(), b.layout_tag())


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class TestSlotViews(unittest.TestCase):
    """kvbuffer.slot_views on layouts vLLM can plan and on bad ones: a page
    is one block of one slot, never bytes of another block."""

    def assert_pages_disjoint_and_cover(self, kv, views, nb):
        rows = sorted((v[b].data_ptr(), v[b].data_ptr() + v.shape[1], b) for v in views for b in range(nb))
        for (s0, e0, _), (s1, _, _) in zip(rows, rows[1:]):
            self.assertLessEqual(e0, s1, "two pages overlap: a restore into one writes the other")
        for name, t in kv.items():
            for b in range(nb):
                lo = t[b].data_ptr()
                hi = lo + (t[b].numel() - 1) * t.element_size() + t.element_size()
                self.assertTrue(any(s <= lo and hi <= e and rb == b for s, e, rb in rows),
                                f"{name} block {b} is in no page of block {b}")

    def test_a_block_outermost_layout_is_one_page_per_block(self):
        # vLLM's block-outermost layouts (BLHNC, BLNHC: VLLM_KV_CACHE_LAYOUT,
        # FlashInfer) interleave the layers inside each block:
        # | blk 0 [ l0 | l1 ] | blk 1 [ l0 | l1 ] | ... (kv_cache_utils.py).
        from orbitkv.vllm.kvbuffer import slot_views
        nb, page = 8, 128
        raw = torch.zeros(nb * 2 * page, dtype=torch.uint8)
        per_block = raw.view(nb, 2, page)
        l0, l1 = per_block[:, 0].view(torch.float32), per_block[:, 1].view(torch.float32)
        kv = {"g0.l0": l0, "g0.l1": l1, "g1.l0": l0, "g1.l1": l1}
        views, why = slot_views(kv, nb)
        self.assertIsNotNone(views, why)
        self.assertEqual([tuple(v.shape) for v in views], [(nb, 2 * page)])   # a page: the whole block
        self.assert_pages_disjoint_and_cover(kv, views, nb)

    def test_slots_whose_pages_overlap_otherwise_are_refused_by_name(self):
        from orbitkv.vllm.kvbuffer import slot_views
        nb, page = 8, 128
        raw = torch.zeros((nb + 1) * page, dtype=torch.uint8)
        a = raw[:nb * page].view(nb, page)
        b = raw[64:64 + nb * page].view(nb, page)   # 64 B after a: block b straddles a's blocks b and b+1
        views, why = slot_views({"g0.l0": a, "g1.l0": b}, nb)
        self.assertIsNone(views)
        self.assertIn("layers g0.l0 and g1.l0", why)
        self.assertIn("overlap", why)

    def test_a_slot_whose_memory_ends_inside_its_last_page_is_refused_by_name(self):
        from orbitkv.vllm.kvbuffer import slot_views
        nb, page = 8, 256
        raw = torch.zeros((nb - 1) * page + 200, dtype=torch.uint8)
        state = raw.as_strided((nb, 200), (page, 1), 0)
        views, why = slot_views({"g0.l0": state}, nb)
        self.assertIsNone(views)
        self.assertIn("g0.l0", why)


if __name__ == "__main__":
    unittest.main()
