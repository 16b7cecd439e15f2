"""The serving benchmark's workloads: what vLLM's client sends, and how many
prompt tokens a cache could serve of it (the bound every hit ratio is read
against).

* ``trace``: whole conversations of the Mooncake conversation trace
  (``bench/traces/``), replayed by vLLM's ``timed_trace`` dataset. A
  conversation is a set of requests linked by a shared hash id other than
  0 (the one every request shares); every turn is kept. The trace's hash
  ids name 512-token blocks; ``--timed-trace-chunk-hash-size`` expands
  each into ``chunk`` tokens, so input lengths are scaled by ``chunk/512``
  and the reuse structure is kept. The sample is sent in one of two
  orders (``ORDERS``): ``turns`` (the default) interleaves the
  conversations turn by turn, so each turn follows the previous one of its
  conversation after every other conversation's turn of that round, as in
  the whole trace, where a median of 420 requests (123 s) separate two
  turns of one conversation; ``trace`` keeps the trace's order, in which a
  sample of a few dozen conversations puts about one request between two
  turns (and sends a turn before the previous one has been answered).
* ``vllm-client``: vLLM's ``prefix_repetition`` dataset: ``prefixes``
  random prefixes of ``prefix_len`` tokens, each with random suffixes.
* ``no-reuse``: vLLM's ``random`` dataset: distinct random prompts.

The bound (``servable tokens``) is the prefix-hit rule of an infinite cache
at vLLM's block granularity: a request can be served the leading full
blocks that some earlier request computed, never its last prompt token.
``lru_servable`` is the same rule for a cache of vLLM's size that evicts
the least recently used block: an estimate of what vLLM's own prefix cache
serves, and so of what is left for OrbitKV.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import random
from typing import Any, Iterable

TRACE_BLOCK_TOKENS = 512   # the Mooncake trace's hash-id granularity

#: Orders the trace sample can be sent in (module docstring).
ORDERS = ("turns", "trace")


@dataclasses.dataclass
class Workload:
    """One workload: its name, vLLM client arguments (without the server,
    rate and concurrency), its request count, servable prompt tokens, all
    prompt tokens and, for two servers taking requests in turn, the
    servable tokens that only the other server computed."""

    name: str
    client_args: list[str]
    requests: int
    prompt_tokens: int
    servable_tokens: int
    cross_servable_tokens: int = 0
    distinct_blocks: int = 0
    notes: dict = dataclasses.field(default_factory=dict)

    @property
    def servable_fraction(self) -> float:
        return self.servable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def best_ratios(self) -> dict[str, float]:
        """The best a cache can do on this workload if prefill dominates: TTFT
        at (1 - servable fraction) of a miss, throughput at its inverse."""
        f = self.servable_fraction
        return {"ttft": round(1 - f, 3), "throughput": round(1 / (1 - f), 3) if f < 1 else None}

    def best_ratios_over_engine(self) -> dict[str, float] | None:
        """The best ratios against vLLM alone when vLLM's own cache serves
        ``notes["engine_lru_servable_tokens"]`` (None without that
        estimate): prefill left with a cache over prefill left without."""
        e = self.notes.get("engine_lru_servable_tokens")
        if e is None or not self.prompt_tokens:
            return None
        left, base = self.prompt_tokens - self.servable_tokens, self.prompt_tokens - e
        return {"ttft": round(left / base, 3) if base else None,
                "throughput": round(base / left, 3) if left else None}


def read_trace(path: str) -> list[dict[str, Any]]:
    """The trace's records (jsonl, plain or gzip), in file order. Raises
    ``ValueError`` naming the line and field of a malformed record."""
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    n = 0
    try:
        with opener(path, "rt") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    out.append(_record(path, n, line))
    except (OSError, EOFError, UnicodeDecodeError) as e:   # unreadable, truncated gzip, not UTF-8
        raise ValueError(f"{path}: after line {n}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _record(path: str, n: int, line: str) -> dict[str, Any]:
    try:
        r = json.loads(line)
    except ValueError as e:
        raise ValueError(f"{path}:{n}: not JSON: {e}") from None
    if not isinstance(r, dict):
        raise ValueError(f"{path}:{n}: want a JSON object, got {type(r).__name__}")
    for k in ("timestamp", "input_length", "output_length", "hash_ids"):
        if k not in r:
            raise ValueError(f"{path}:{n}: record lacks {k!r}")
    if not isinstance(r["hash_ids"], list) or not all(_int(h) for h in r["hash_ids"]):
        raise ValueError(f"{path}:{n}: hash_ids: want a list of ints")
    if not _int(r["input_length"]) or r["input_length"] < 1:
        raise ValueError(f"{path}:{n}: input_length {r['input_length']!r}: want an int >= 1")
    if not _int(r["output_length"]) or r["output_length"] < 1:
        raise ValueError(f"{path}:{n}: output_length {r['output_length']!r}: want an int >= 1")
    if not isinstance(r["timestamp"], (int, float)) or isinstance(r["timestamp"], bool) or r["timestamp"] < 0:
        raise ValueError(f"{path}:{n}: timestamp {r['timestamp']!r}: want a number >= 0 (ms)")
    return r


def conversations(records: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of the records grouped into conversations (union of records
    sharing any hash id that is not shared by every record), each in file
    order, the groups in order of their first record."""
    if not records:
        return []
    common = set(records[0]["hash_ids"])
    for r in records[1:]:
        common &= set(r["hash_ids"])
    parent = list(range(len(records)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, r in enumerate(records):
        for h in r["hash_ids"]:
            if h in common:
                continue
            j = owner.setdefault(h, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(records)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _full_chunks(r: dict[str, Any], chunk: int) -> list[int]:
    return r["hash_ids"][:r["input_length"] // chunk]


def servable(records: Iterable[dict[str, Any]], chunk: int, servers: int = 1) -> tuple[int, int, int]:
    """(servable tokens, cross-server servable tokens, distinct full blocks)
    of scaled records (``input_length`` already in tokens of ``chunk``-token
    blocks) under the prefix-hit rule. With ``servers`` > 1, record i goes to
    server i % servers; cross-server tokens are those servable from what the
    whole fleet computed but not from the server's own history."""
    seen: set[int] = set()
    own: list[set[int]] = [set() for _ in range(servers)]
    total = cross = 0
    for i, r in enumerate(records):
        full = _full_chunks(r, chunk)
        cap = (r["input_length"] - 1) // chunk

        def lead(s: set[int]) -> int:
            n = 0
            for h in full[:cap]:
                if h not in s:
                    break
                n += 1
            return n

        g = lead(seen)
        total += g * chunk
        cross += max(0, g - lead(own[i % servers])) * chunk
        seen.update(full)
        own[i % servers].update(full)
    return total, cross, len(seen)


def lru_servable(records: Iterable[dict[str, Any]], chunk: int, capacity_blocks: int) -> int:
    """Prompt tokens of scaled records a prefix cache of ``capacity_blocks``
    blocks serves under the prefix-hit rule when it evicts the least
    recently used block. A request's full blocks are kept afterwards, its
    first block the most recent, as vLLM frees a request's blocks tail
    first. vLLM's own cache also holds running requests' blocks, so this
    estimates its hits, it does not bound them."""
    cache: collections.OrderedDict[int, None] = collections.OrderedDict()
    total = 0
    for r in records:
        full = _full_chunks(r, chunk)
        n = 0
        for h in full[:(r["input_length"] - 1) // chunk]:
            if h not in cache:
                break
            n += 1
        total += n * chunk
        for h in reversed(full):
            cache[h] = None
            cache.move_to_end(h)
        while len(cache) > capacity_blocks:
            cache.popitem(last=False)
    return total


def turn_order(picked: list[int], groups: list[list[int]]) -> list[int]:
    """``picked`` (record indices) interleaved turn by turn: every
    conversation's first turn in trace order, then every second turn, and
    so on. ``groups``: the conversations (``conversations`` of the whole
    trace, whose common hash is the one every request shares). A
    conversation's turns keep their order."""
    turn = {i: k for g in groups for k, i in enumerate(g)}
    return sorted(picked, key=lambda i: (turn[i], i))


#: A trace sample is taken when its servable fraction is within this of the
#: whole trace's (the first such seed from ``--seed`` on): a few dozen
#: conversations vary widely (0.2 to 0.66 here), and a sample should reuse
#: as the trace does.
REPRESENTATIVE = 0.05


def trace(path: str, out_path: str, *, chunk: int, max_prompt: int, min_distinct_blocks: int,
          max_output: int, seed: int, engine_blocks: int, order: str = "turns", tries: int = 100) -> Workload:
    """Sample whole conversations of the trace at ``path`` (seeded order)
    until their distinct full blocks reach ``min_distinct_blocks``; write
    them, scaled to ``chunk``-token blocks, in trace order to ``out_path``
    (jsonl, the ``timed_trace`` dataset's input). Conversations with a
    prompt over ``max_prompt`` tokens after scaling are skipped. The seed
    is the first from ``seed`` whose sample's servable fraction is within
    ``REPRESENTATIVE`` of the whole trace's (``notes["seed"]``); raises
    ``ValueError`` when none of ``tries`` seeds gives one. ``order`` is
    one of ``ORDERS``; ``engine_blocks`` is vLLM's KV space in blocks (for
    ``notes["engine_lru_servable_tokens"]``)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: want one of {', '.join(ORDERS)}")
    records = read_trace(path)
    whole = _whole_trace_fraction(records)
    for s in range(seed, seed + tries):
        w = _trace_sample(records, out_path, chunk=chunk, max_prompt=max_prompt,
                          min_distinct_blocks=min_distinct_blocks, max_output=max_output, seed=s,
                          engine_blocks=engine_blocks, order=order)
        if abs(w.servable_fraction - whole) <= REPRESENTATIVE:
            w.notes.update(seed=s, whole_trace_servable_fraction=whole)
            return w
    raise ValueError(f"{path}: no sample of {min_distinct_blocks} blocks within {REPRESENTATIVE} of the whole "
                     f"trace's servable fraction {whole} in seeds {seed}..{seed + tries - 1}")


def _trace_sample(records: list[dict[str, Any]], out_path: str, *, chunk: int, max_prompt: int,
                  min_distinct_blocks: int, max_output: int, seed: int, engine_blocks: int,
                  order: str) -> Workload:
    scale = chunk / TRACE_BLOCK_TOKENS
    groups = conversations(records)
    rng = random.Random(seed)
    rng.shuffle(groups)
    picked: list[int] = []
    distinct: set[int] = set()
    for g in groups:
        scaled = [max(1, round(records[i]["input_length"] * scale)) for i in g]
        if max(scaled) > max_prompt:
            continue
        picked.extend(g)
        for i, n in zip(g, scaled):
            distinct.update(records[i]["hash_ids"][:n // chunk])
        if len(distinct) >= min_distinct_blocks:
            break
    if not picked:
        raise ValueError(f"no conversation of the trace fits --max-model-len (every one has a prompt over "
                         f"{max_prompt} tokens at {chunk}-token blocks)")
    picked.sort()
    t0 = records[picked[0]]["timestamp"]
    if order == "turns":
        picked = turn_order(picked, groups)
    # "timestamp" is the send order (ms; the client runs --no-self-timed and
    # paces by its own rate), "trace_timestamp" the trace's, from the first.
    sample = [dict(timestamp=n, trace_timestamp=records[i]["timestamp"] - t0,
                   input_length=max(1, round(records[i]["input_length"] * scale)),
                   output_length=max(1, min(max_output, records[i]["output_length"])),
                   hash_ids=records[i]["hash_ids"]) for n, i in enumerate(picked)]
    with open(out_path, "w") as f:
        for r in sample:
            f.write(json.dumps(r) + "\n")
    total, cross, blocks = servable(sample, chunk, servers=2)
    convs = len({min(g) for g in groups if set(g) & set(picked)})
    return Workload("trace", ["--dataset-name", "timed_trace", "--dataset-path", out_path,
                              "--timed-trace-chunk-hash-size", str(chunk), "--timed-trace-sec-multiplier", "0.001",
                              "--no-self-timed", "--num-prompts", str(len(sample))],
                    requests=len(sample), prompt_tokens=sum(r["input_length"] for r in sample),
                    servable_tokens=total, cross_servable_tokens=cross, distinct_blocks=blocks,
                    notes=dict(conversations=convs, chunk_tokens=chunk, order=order,
                               engine_lru_servable_tokens=lru_servable(sample, chunk, engine_blocks)))


def _whole_trace_fraction(records: list[dict[str, Any]]) -> float:
    total, _, _ = servable(records, TRACE_BLOCK_TOKENS)
    return round(total / sum(r["input_length"] for r in records), 4)


def prefix_repetition(*, prefixes: int, prefix_len: int, suffix_len: int, output_len: int, requests: int,
                      block: int) -> Workload:
    """vLLM's ``prefix_repetition`` dataset: ``requests`` prompts over
    ``prefixes`` shared prefixes (each used requests/prefixes times)."""
    full = prefix_len // block
    cap = (prefix_len + suffix_len - 1) // block
    servable_tokens = max(0, requests - prefixes) * min(full, cap) * block
    return Workload("vllm-client", ["--dataset-name", "prefix_repetition",
                                    "--prefix-repetition-prefix-len", str(prefix_len),
                                    "--prefix-repetition-suffix-len", str(suffix_len),
                                    "--prefix-repetition-num-prefixes", str(prefixes),
                                    "--prefix-repetition-output-len", str(output_len),
                                    "--num-prompts", str(requests)],
                    requests=requests, prompt_tokens=requests * (prefix_len + suffix_len),
                    servable_tokens=servable_tokens, distinct_blocks=prefixes * full,
                    # round robin over two servers: a prefix's next use lands on the other
                    # server about half the time; an estimate, not a bound
                    cross_servable_tokens=servable_tokens // 2,
                    notes=dict(prefixes=prefixes, prefix_len=prefix_len, suffix_len=suffix_len))


def no_reuse(*, input_len: int, output_len: int, requests: int) -> Workload:
    """vLLM's ``random`` dataset: distinct random prompts (the seed varies
    per run so no run repeats another's prompts)."""
    return Workload("no-reuse", ["--dataset-name", "random", "--random-input-len", str(input_len),
                                 "--random-output-len", str(output_len), "--random-range-ratio", "0",
                                 "--num-prompts", str(requests)],
                    requests=requests, prompt_tokens=requests * input_len, servable_tokens=0)


def trace_stats(path: str) -> dict[str, Any]:
    """What bench/serve/README.md says about the whole trace: the requests
    and seconds between two turns of one conversation (p10, p50, p90), and
    the share of its servable tokens an LRU cache of 5, 10, 20 and 25% of
    its distinct blocks serves, replayed whole in trace order."""
    records = read_trace(path)
    between, gaps = [], []
    for g in conversations(records):
        for a, b in zip(g, g[1:]):
            between.append(b - a - 1)
            gaps.append((records[b]["timestamp"] - records[a]["timestamp"]) / 1000)

    def q(xs: list[float]) -> list[float]:
        xs = sorted(xs)
        return [xs[int(p * (len(xs) - 1))] for p in (0.1, 0.5, 0.9)]

    total, _, distinct = servable(records, TRACE_BLOCK_TOKENS)
    lru = {f"{f:.0%}": round(lru_servable(records, TRACE_BLOCK_TOKENS, int(distinct * f)) / total, 3) if total
           else None for f in (0.05, 0.10, 0.20, 0.25)}
    return {"turn_pairs": len(between), "requests_between_p10_p50_p90": q(between),
            "seconds_between_p10_p50_p90": q(gaps), "distinct_blocks": distinct,
            "lru_share_of_servable_by_capacity": lru}


if __name__ == "__main__":
    import sys
    try:
        print(json.dumps(trace_stats(sys.argv[1] if len(sys.argv) > 1
                                     else "bench/traces/mooncake-conversation.jsonl.gz"), indent=1))
    except ValueError as e:
        sys.exit(f"workloads.py: {e}")
