"""Tests of the serving benchmark (``make test-bench-serve``, in
build/venv/vllm): the workloads' bounds on hand-made records, the trace
sample's rules on the real trace, and one smoke run of the whole harness on
the tiny model (real vLLM servers, a real Manager, vLLM's own client; its
figures mean nothing, only that every part runs and reports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import workloads  # noqa: E402
from procs import REPO  # noqa: E402

TRACE = os.path.join(REPO, "bench", "traces", "mooncake-conversation.jsonl.gz")


def rec(ts: int, n: int, hashes: list[int]) -> dict:
    return {"timestamp": ts, "input_length": n, "output_length": 4, "hash_ids": hashes}


def test_servable_counts_leading_full_blocks_seen_before_never_the_last_token():
    recs = [rec(0, 40, [0, 1, 2]),       # 2 full blocks of 16 (+8 tokens): computes 0, 1
            rec(1, 48, [0, 1, 2]),       # 3 full; 0, 1 seen; 2 was partial before: 32 servable
            rec(2, 48, [0, 1, 2]),       # 0, 1, 2 seen, but the last token is never served: 2 blocks
            rec(3, 33, [0, 9, 1])]       # 0 seen, 9 not: 16
    total, cross, distinct = workloads.servable(recs, 16)
    assert (total, distinct) == (32 + 32 + 16, 4)
    assert cross == 0


def test_cross_server_tokens_are_those_only_the_other_server_computed():
    recs = [rec(0, 33, [0, 1, 2]), rec(1, 33, [0, 1, 3]), rec(2, 33, [0, 1, 4])]
    total, cross, _ = workloads.servable(recs, 16, servers=2)
    # server 0 takes records 0 and 2, server 1 record 1: record 1's 32 tokens
    # come only from server 0; record 2 finds its prefix on server 0 itself
    assert (total, cross) == (64, 32)


def test_conversations_link_requests_by_any_hash_but_the_common_one():
    recs = [rec(0, 8, [0, 1, 2]), rec(1, 8, [0, 5]), rec(2, 8, [0, 1, 2, 3]), rec(3, 8, [0, 5, 6]),
            rec(4, 8, [0, 7])]
    assert workloads.conversations(recs) == [[0, 2], [1, 3], [4]]


@pytest.mark.parametrize("content, want", [
    (b"", "no records"),
    (b"NaN\n", ":1: want a JSON object, got float"),
    (b'{"timestamp": "x", "input_length": 8, "output_length": 4, "hash_ids": [1]}\n', ":1: timestamp 'x'"),
    (b'{"timestamp": 0, "input_length": true, "output_length": 4, "hash_ids": [1]}\n', ":1: input_length True"),
    (b"\xff\xfe\n", "after line 0"),
])
def test_a_bad_trace_file_is_a_value_error_naming_what(tmp_path, content, want):
    p = tmp_path / "t.jsonl"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=want):
        workloads.read_trace(str(p))


def test_a_truncated_gzip_trace_is_a_value_error(tmp_path):
    import gzip
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"timestamp": 0}\n' * 100)[:20])
    with pytest.raises(ValueError, match="t.jsonl.gz"):
        workloads.read_trace(str(p))


def test_a_malformed_trace_line_is_refused_naming_line_and_field():
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps(rec(0, 8, [0])) + "\n" + json.dumps({"timestamp": 1, "input_length": 3}) + "\n")
    try:
        with pytest.raises(ValueError, match=r":2: record lacks 'output_length'"):
            workloads.read_trace(f.name)
    finally:
        os.unlink(f.name)


def test_the_trace_sample_is_whole_conversations_that_reuse_as_the_trace_does(tmp_path):
    out = tmp_path / "sample.jsonl"
    w = workloads.trace(TRACE, str(out), chunk=64, max_prompt=1984, min_distinct_blocks=240, max_output=32, seed=1,
                        engine_blocks=48)
    sample = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(sample) == w.requests and w.distinct_blocks >= 240
    assert abs(w.servable_fraction - w.notes["whole_trace_servable_fraction"]) <= workloads.REPRESENTATIVE
    assert all(r["input_length"] <= 1984 and r["output_length"] <= 32 for r in sample)
    # whole conversations: every sampled request's conversation is entirely in the sample
    by_hash: dict[int, int] = {}
    for i, r in enumerate(sample):
        for h in r["hash_ids"][1:]:
            by_hash.setdefault(h, i)
    full = workloads.read_trace(TRACE)
    picked = {tuple(r["hash_ids"]) for r in sample}
    for g in workloads.conversations(full):
        members = [tuple(full[i]["hash_ids"]) in picked for i in g]
        assert all(members) or not any(members)
    # sent turn by turn: within each conversation the trace's order is kept
    assert [r["timestamp"] for r in sample] == list(range(len(sample)))
    for g in workloads.conversations(sample):
        assert [sample[i]["trace_timestamp"] for i in g] == sorted(sample[i]["trace_timestamp"] for i in g)


def test_an_lru_cache_serves_what_it_still_holds():
    recs = [rec(0, 33, [0, 1, 2]),      # computes 0, 1
            rec(1, 33, [5, 6, 7]),      # computes 5, 6: with room for 2 blocks, 0 and 1 are gone
            rec(2, 33, [0, 1, 9]),      # 0 evicted: nothing served; computes 0, 1 again
            rec(3, 33, [5, 6, 8])]      # 5 was evicted by 0, 1: nothing served
    assert workloads.lru_servable(recs, 16, capacity_blocks=2) == 0
    assert workloads.lru_servable(recs, 16, capacity_blocks=4) == 32 + 32
    # a request's first block is kept longest (vLLM frees tail first): with 3
    # blocks records 2 and 3 each still find their first block (16 + 16)
    assert workloads.lru_servable(recs, 16, capacity_blocks=3) == 32
    assert workloads.lru_servable(recs, 16, capacity_blocks=100) == workloads.servable(recs, 16)[0]


def test_turn_order_interleaves_conversations_and_keeps_each_ones_turns_in_order():
    recs = [rec(0, 8, [0, 1]), rec(1, 8, [0, 1, 2]), rec(2, 8, [0, 5]), rec(3, 8, [0, 1, 2, 3]),
            rec(4, 8, [0, 5, 6]), rec(5, 8, [0, 7])]
    groups = workloads.conversations(recs)
    assert groups == [[0, 1, 3], [2, 4], [5]]
    # first turns, then second turns, then third
    assert workloads.turn_order(list(range(6)), groups) == [0, 2, 5, 1, 4, 3]
    # a subset keeps the whole trace's turn numbers: 3 is a third turn
    assert workloads.turn_order([3, 2, 4], groups) == [2, 4, 3]


def test_the_trace_sample_in_turn_order_leaves_vllm_sized_cache_less_to_serve(tmp_path):
    kw = dict(chunk=64, max_prompt=1984, min_distinct_blocks=240, max_output=32, seed=1, engine_blocks=48)
    by_trace = workloads.trace(TRACE, str(tmp_path / "a.jsonl"), order="trace", **kw)
    by_turns = workloads.trace(TRACE, str(tmp_path / "b.jsonl"), **kw)
    assert by_turns.notes["order"] == "turns"
    # the same requests and bound, a different order
    assert (by_turns.requests, by_turns.servable_tokens) == (by_trace.requests, by_trace.servable_tokens)
    assert by_turns.notes["engine_lru_servable_tokens"] < by_trace.notes["engine_lru_servable_tokens"]
    assert by_turns.best_ratios_over_engine()["throughput"] > 1.0
    with pytest.raises(ValueError, match="order 'random'"):
        workloads.trace(TRACE, str(tmp_path / "c.jsonl"), order="random", **kw)


def test_prefix_repetition_bound():
    w = workloads.prefix_repetition(prefixes=4, prefix_len=512, suffix_len=32, output_len=8, requests=12, block=64)
    assert (w.servable_tokens, w.prompt_tokens, w.distinct_blocks) == (8 * 512, 12 * 544, 32)


def test_smoke_every_part_runs_and_reports(tmp_path):
    """bench_serve.py on the tiny model: vllm and orbitkv-ram, the
    vllm-client workload, two rounds of closed loop and one open loop (no stall check: the tiny
    runs end before a stop could fall inside their traffic). stdout is exactly one JSON
    object; every request completes; OrbitKV serves what vLLM evicted."""
    cmd = [sys.executable, os.path.join(HERE, "bench_serve.py"), "--json", "--shape", "tiny",
           "--subjects", "vllm,orbitkv-ram", "--workloads", "vllm-client", "--prefixes", "4", "--client-requests", "8",
           "--gpu-blocks", "17", "--max-model-len", "1024", "--concurrency", "2", "--stall-s", "0",
           "--rounds", "2", "--out-dir", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout)   # exactly one JSON object: anything else fails to parse
    assert "[bench-serve" in r.stderr   # progress goes to stderr
    assert set(out["subjects"]) == {"vllm", "orbitkv-ram"}
    for subj, ws in out["subjects"].items():
        f = ws["vllm-client"]
        for mode in ("closed", "open"):
            assert (f[mode]["completed"], f[mode]["failed"]) == (8, 0), (subj, mode, f[mode])
        for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "throughput_rps", "output_tok_s", "engine_hit_tokens",
                  "connector_hit_tokens", "preemptions", "manager_cpu_s", "manager_rss_bytes", "engine_cpu_s",
                  "connector_sched_s"):
            assert k in f, (subj, k)
        assert f["throughput_rps"] > 0 and f["ttft_p50_s"] > 0 and f["engine_cpu_s"] > 0
    ram = out["subjects"]["orbitkv-ram"]["vllm-client"]
    assert ram["connector_hit_tokens"] > 0 and ram["restored_blocks"] > 0 and ram["published_blocks"] > 0
    assert ram["connector_sched_s"] > 0 and ram["manager_rss_bytes"] > 0
    assert out["subjects"]["vllm"]["vllm-client"]["connector_hit_tokens"] == 0
    assert out["bounds"]["vllm-client"]["servable_prompt_tokens"] == 4 * 512
    names = {t["name"]: t for t in out["targets"]}
    hit = names["vllm-client: orbitkv-ram connector hits / (servable - engine hits)"]
    assert hit["ratio"] is not None and hit["met"] is not None
    pair = out["pair_ratios"]["vllm-client"]["orbitkv-ram/vllm"]
    assert (len(pair["throughput"]), len(pair["ttft_p50"])) == (2, 1)   # closed every round, open once
    assert len(out["subjects"]["vllm"]["vllm-client"]["rounds"]["closed"]) == 2
    assert os.path.exists(tmp_path / "results.json")
