"""The vLLM connector's block records: each saved block carries vLLM's own
block hash as vLLM's KV events give it (the low 64 bits, big-endian, of
``Request.block_hashes``' entry for that block), its parent's and its token
ids, whichever hashes key OrbitKV's blocks; with KV cache groups only the
first full-attention group's blocks carry them. Driven the way vLLM's
scheduler and worker call the connector, publishing to a real Manager
(which decodes and keeps the records). That the Manager's KV events then
equal vLLM's own is the real-engine check of `make e2e-vllm`."""

from __future__ import annotations

import hashlib
import unittest
from array import array
from types import SimpleNamespace

from . import support

orbitkv = support.import_orbitkv()

from orbitkv.vllm import KVConnectorRole, OrbitKVConnector  # noqa: E402
from orbitkv.vllm.metadata import BlockRecords, engine_hash  # noqa: E402

from .test_vllm_adapter import BLOCK, ConnectorCase, cached_step, config, new_step  # noqa: E402
from .test_vllm_groups import HybridCase  # noqa: E402
from .test_vllm_groups import cached_step as groups_cached_step  # noqa: E402
from .test_vllm_groups import new_step as groups_new_step  # noqa: E402

MASK = (1 << 64) - 1


def vllm_hashes(prompt: list[int], unit: int) -> list[bytes]:
    """A chain of 32-byte hashes, one per ``unit`` tokens, as vLLM's
    ``Request.block_hashes`` (sha256 over the parent and the tokens)."""
    out, parent = [], b"vllm-none-hash"
    for i in range(len(prompt) // unit):
        parent = hashlib.sha256(parent + repr(prompt[i * unit:(i + 1) * unit]).encode()).digest()
        out.append(parent)
    return out


def vllm_request(rid: str, prompt: list[int], unit: int = BLOCK, hashed: bool = True) -> SimpleNamespace:
    return SimpleNamespace(request_id=rid, prompt_token_ids=prompt, lora_request=None, cache_salt=None,
                           mm_features=[], block_hashes=vllm_hashes(prompt, unit) if hashed else [])


def as_records(spec) -> list[tuple]:
    """spec's records as (engine hash, parent, token ids) per recorded block."""
    return [(r.engine_hash, r.parent_hash, list(r.token_ids)) for r in spec.records.per_block(len(spec.hashes))
            if r is not None]


class TestEngineHash(unittest.TestCase):
    def test_vllms_int_form_is_the_low_64_bits_read_big_endian(self):
        h = bytes(range(32))
        self.assertEqual(engine_hash(h), int.from_bytes(h[24:], "big"))
        self.assertEqual(engine_hash(h), int.from_bytes(h, "big") & MASK)
        self.assertEqual(engine_hash(-1), MASK)

    def test_packed_records_that_do_not_fit_their_save_are_refused(self):
        ok = BlockRecords(array("Q", [7, 8]), 6, array("I", range(8)), array("I", [0, 2]))
        self.assertEqual([r and (r.engine_hash, r.parent_hash, list(r.token_ids)) for r in ok.per_block(3)],
                         [(7, 6, [0, 1, 2, 3]), None, (8, 7, [4, 5, 6, 7])])
        for bad, n in ((BlockRecords(array("Q", [7, 8]), None, array("I", range(7))), 2),      # tokens not 2 x B
                       (BlockRecords(array("Q", [7]), None, array("I", range(4)), array("I", [3])), 3),  # past n
                       (BlockRecords(array("Q", [7, 8]), None, array("I", range(8)), array("I", [0])), 2)):
            with self.assertRaisesRegex(ValueError, "hashes"):
                bad.per_block(n)


class TestRecords(ConnectorCase):
    """One full-attention table (the connector's default)."""

    def save_in_two_chunks(self, s, w, req, blocks):
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        m1, _ = self.step(s, w, new_step(req.request_id, req.prompt_token_ids, blocks, 0, 4))
        m2, _ = self.step(s, w, cached_step(req.request_id, 4, len(req.prompt_token_ids) - 4))
        return m1.saves + m2.saves

    def test_each_saved_block_carries_vllms_hash_its_parent_and_its_tokens(self):
        s, w = self.connectors()
        prompt = list(range(100, 111))   # 2 full blocks of 4 (+3 tokens)
        req = vllm_request("a", prompt)
        saves = self.save_in_two_chunks(s, w, req, [5, 6, 7])
        e = [int.from_bytes(h, "big") & MASK for h in req.block_hashes]
        self.assertEqual([as_records(sv) for sv in saves],
                         [[(e[0], None, prompt[0:4])], [(e[1], e[0], prompt[4:8])]])
        self.assertEqual((w.stats["published_blocks"], w.stats["recorded_blocks"], w.stats["save_errors"]), (2, 2, 0))

    def test_vllms_hashes_finer_than_the_block_give_the_hash_of_its_last_unit(self):
        # orbitkv.block_hashes "vllm" with vLLM hashing every 2 tokens: block
        # i is Request.block_hashes[2i + 1] (it covers tokens 0 .. 4i + 3).
        s = OrbitKVConnector(config(self.sock, **{"orbitkv.block_hashes": "vllm"}), KVConnectorRole.SCHEDULER,
                             kv_cache_config=SimpleNamespace(hash_block_size=2))
        self.addCleanup(s.shutdown)
        prompt = list(range(9))
        req = vllm_request("a", prompt, unit=2)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        meta = s.build_connector_meta(new_step("a", prompt, [1, 2, 3], 0, 9))
        h = [engine_hash(x) for x in req.block_hashes]
        self.assertEqual(as_records(meta.saves[0]), [(h[1], None, prompt[0:4]), (h[3], h[1], prompt[4:8])])

    def test_blocks_vllm_did_not_hash_are_published_without_records(self):
        # vLLM's prefix caching off: Request.block_hashes is empty.
        s, w = self.connectors()
        prompt = list(range(11))
        req = vllm_request("a", prompt, hashed=False)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        meta, _ = self.step(s, w, new_step("a", prompt, [5, 6, 7], 0, 11))
        self.assertIsNone(meta.saves[0].records)
        self.assertEqual((w.stats["published_blocks"], w.stats["recorded_blocks"]), (2, 0))

    def test_blocks_of_more_tokens_than_a_record_holds_carry_none(self):
        cfg = config(self.sock)
        cfg.cache_config.block_size = orbitkv.RECORD_MAX_TOKENS + 8
        with self.assertLogs("orbitkv.vllm", level="WARNING") as cm:
            s = OrbitKVConnector(cfg, KVConnectorRole.SCHEDULER)
        self.addCleanup(s.shutdown)
        self.assertIn(f"at most {orbitkv.RECORD_MAX_TOKENS} token ids", "\n".join(cm.output))
        prompt = list(range(cfg.cache_config.block_size + 1))
        req = vllm_request("a", prompt, unit=cfg.cache_config.block_size)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        meta = s.build_connector_meta(new_step("a", prompt, [1, 2], 0, len(prompt)))
        self.assertEqual((len(meta.saves[0].hashes), meta.saves[0].records), (1, None))


class TestGroupRecords(HybridCase):
    """KV cache groups: a sliding window (group 0), full attention (group
    1) and a Mamba state (group 2) over one backing."""

    zero_copy = False

    def test_only_the_first_full_attention_groups_blocks_carry_records(self):
        s, w = self.connectors()
        prompt = list(range(50, 63))   # 3 full blocks of 4 (+1 token)
        req = vllm_request("a", prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (0, False))
        m1, _ = self.step(s, w, groups_new_step("a", prompt, ([1, 2], [5, 6], [0, 9]), 0, 8))
        m2, _ = self.step(s, w, groups_cached_step("a", 8, 5, ([3, 4], [7, 8], [0, 10])))
        e = [engine_hash(h) for h in req.block_hashes]
        for meta, want in ((m1, [(5, e[0], None, prompt[0:4]), (6, e[1], e[0], prompt[4:8])]),
                           (m2, [(7, e[2], e[1], prompt[8:12])])):
            spec = meta.saves[0]
            got = [(spec.block_ids[i], r.engine_hash, r.parent_hash, list(r.token_ids))
                   for i, r in enumerate(spec.records.per_block(len(spec.hashes))) if r is not None]
            self.assertEqual(got, want)
        # 7 blocks published (window, full, the state after 8; then window
        # and full), the full group's 3 with records.
        self.assertEqual((w.stats["published_blocks"], w.stats["recorded_blocks"], w.stats["save_errors"]), (7, 3, 0))


if __name__ == "__main__":
    unittest.main()
