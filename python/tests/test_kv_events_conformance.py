"""OrbitKV's KV events read by code OrbitKV did not write (docs/events.md,
"Conformance").

A real orbitkv-manager (bin/orbitkv-manager) publishes its KV events on
ipc:// sockets in a private temporary directory, with a RAM tier of 16
blocks and an SSD tier (64 KiB slots), so that publishing more evicts and
demotes blocks to SSD. Python clients publish chains with block records,
read some back, publish one chain without records; then the Manager is
restarted on the same SSD directory. A second case does less over
tcp://127.0.0.1 on free ports. What reads the events:

* real libzmq through pyzmq: a SUB socket on the event endpoint, a
  DEALER on the replay endpoint (vLLM's replay protocol, and OrbitKV's
  ``orbitkv.snapshot`` extension);
* vLLM 0.32's own decoder, ``msgspec.msgpack.Decoder(type=
  vllm.distributed.kv_events.KVEventBatch)``, for every payload;
* NVIDIA Dynamo's standalone KV indexer (``python -m dynamo.indexer`` of
  ai-dynamo-runtime, build/venv/dynamo from engines/dynamo.lock): its own
  ZMQ listener subscribes to the event endpoint and replays gaps from
  the replay endpoint, its radix tree takes the events as vLLM's wire
  format without any conversion here, and its ``/query`` overlap scores
  are compared with what the Manager holds.

Runs in build/venv/vllm (pyzmq, msgspec, vLLM): ``make
kv-events-conformance``. Elsewhere (``make test-python``'s
/usr/bin/python3) it skips naming what is missing; the Dynamo case skips,
with the command to install it, where build/venv/dynamo is absent.
Nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from tests import support

try:
    import msgspec
    import zmq
    from vllm.distributed.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch
except ImportError as e:  # /usr/bin/python3 of make test-python
    raise unittest.SkipTest(f"needs pyzmq, msgspec and vLLM (build/venv/vllm; make kv-events-conformance): {e}")

orbitkv = support.import_orbitkv()
from orbitkv.testing.manager import terminate  # noqa: E402

DYNAMO_PYTHON = os.path.join(support.REPO, "build", "venv", "dynamo", "bin", "python")

BLOCK_TOKENS = 16  # tokens per block: the events' block_size, Dynamo's --block-size
LAYERS, PAGE = 2, 8192  # a block is 16 KiB: one RAM chunk, within a 64 KiB SSD slot
PAGES = 8
RAM = "256KiB"  # 16 blocks of 16 KiB
NS = hashlib.sha256(b"kv-events-conformance").digest()[:16]
END = b"\xff" * 8  # the replay's end marker: sequence -1
TIMEOUT_S = 30


def engine_hash(parent: int | None, tokens: list[int]) -> int:
    """A vLLM-style engine block hash: the low 64 bits, read big-endian, of
    a SHA-256 over the parent's hash and the block's tokens."""
    d = hashlib.sha256(repr((parent, tokens)).encode()).digest()
    return int.from_bytes(d, "big") & (2**64 - 1)


class Chain:
    """n blocks of BLOCK_TOKENS token ids each, chained by engine hash
    from ``parent`` (a Chain whose blocks come first, or None): the
    OrbitKV block hashes, the records, and the token ids of the whole
    sequence (the parent's first)."""

    def __init__(self, name: str, n: int, parent: "Chain | None" = None):
        self.name = name
        prev = parent.records[-1].engine_hash if parent else None
        self.prefix_tokens = list(parent.tokens) if parent else []
        self.prefix_hashes = list(parent.engine_hashes) if parent else []
        self.hashes, self.records = [], []
        for i in range(n):
            toks = [int.from_bytes(hashlib.sha256(f"{name}/{i}/{j}".encode()).digest()[:2], "big")
                    for j in range(BLOCK_TOKENS)]
            r = orbitkv.BlockRecord(engine_hash(prev, toks), prev, toks)
            self.records.append(r)
            self.hashes.append(hashlib.sha256(f"orbitkv/{name}/{i}".encode()).digest()[:16])
            prev = r.engine_hash

    @property
    def own_tokens(self) -> list[int]:
        return [t for r in self.records for t in r.token_ids]

    @property
    def tokens(self) -> list[int]:
        return self.prefix_tokens + self.own_tokens

    @property
    def engine_hashes(self) -> list[int]:
        return self.prefix_hashes + [r.engine_hash for r in self.records]


class Stream:
    """One epoch's event stream as a real libzmq SUB and DEALER see it.
    ``live``: (topic, seq, payload) received on the SUB; ``replay(start)``
    and ``snapshot()`` ask the replay socket."""

    def __init__(self, ctx, pub: str, rep: str):
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(pub)
        self.req = ctx.socket(zmq.DEALER)
        self.req.setsockopt(zmq.RCVTIMEO, TIMEOUT_S * 1000)
        self.req.connect(rep)
        self.live: list[tuple[bytes, int, bytes]] = []

    def drain(self, wait_s: float = 0.0) -> None:
        """Take every message the SUB has, waiting up to wait_s for the first."""
        while self.sub.poll(int(wait_s * 1000)):
            frames = self.sub.recv_multipart()
            assert len(frames) == 3, f"a PUB message has {len(frames)} frames, want 3 (topic, seq, payload)"
            topic, seq, payload = frames
            assert len(seq) == 8, f"sequence frame of {len(seq)} bytes, want 8"
            self.live.append((topic, int.from_bytes(seq, "big", signed=True), payload))
            wait_s = 0.0

    def _ask(self, request: bytes) -> list[tuple[bytes, int, bytes]]:
        """Send ["", request]; the replies up to the end marker."""
        self.req.send_multipart([b"", request])
        out = []
        while True:
            frames = self.req.recv_multipart()
            assert len(frames) == 4 and frames[0] == b"", f"a replay reply of {len(frames)} frames: {frames[:3]!r}"
            if frames[2] == END:
                assert frames[3] == b"", "the end marker carries a payload"
                return out
            out.append((frames[1], int.from_bytes(frames[2], "big", signed=True), frames[3]))

    def replay(self, start: int = 0) -> list[tuple[bytes, int, bytes]]:
        return self._ask(start.to_bytes(8, "big"))

    def snapshot(self) -> list[tuple[bytes, int, bytes]]:
        return self._ask(b"orbitkv.snapshot")

    def close(self) -> None:
        self.sub.close(0)
        self.req.close(0)


DECODER = msgspec.msgpack.Decoder(type=KVEventBatch)


def decode(payload: bytes) -> KVEventBatch:
    return DECODER.decode(payload)


def apply(state: dict[int, set[str]], events) -> None:
    """Apply KV events to {engine hash: media held}."""
    for ev in events:
        if isinstance(ev, AllBlocksCleared):
            state.clear()
        elif isinstance(ev, BlockStored):
            for h in ev.block_hashes:
                state.setdefault(h, set()).add(ev.medium)
        elif isinstance(ev, BlockRemoved):
            for h in ev.block_hashes:
                media = state.get(h, set())
                media.discard(ev.medium)
                if not media:
                    state.pop(h, None)


def leading(state: dict[int, set[str]], hashes: list[int], media: set[str]) -> int:
    """How many leading blocks of a chain are held on one of media."""
    n = 0
    for h in hashes:
        if not state.get(h, set()) & media:
            break
        n += 1
    return n


def tiered(state: dict[int, set[str]], hashes: list[int]) -> tuple[int, int]:
    """A chain's overlap as Dynamo's tiered walk counts it: the leading
    blocks on CPU (its host tier), then the blocks after those on STORAGE
    (its disk tier, extending the host match and never handing back to
    it). Returns (longest, cpu) in blocks. OrbitKV's own lookup counts
    blocks on either medium at every position (``leading`` of both), so
    a chain that goes CPU, STORAGE, CPU scores more there."""
    cpu = leading(state, hashes, {"CPU"})
    return cpu + leading(state, hashes[cpu:], {"STORAGE"}), cpu


class DynamoIndexer:
    """Dynamo's standalone KV indexer (``python -m dynamo.indexer``) on a
    free loopback port, its log in ``log_path``; ``register`` points its
    ZMQ listener at an event endpoint and a replay endpoint."""

    def __init__(self, log_path: str):
        self.port = support.free_port()
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [DYNAMO_PYTHON, "-m", "dynamo.indexer", "--port", str(self.port), "--threads", "1"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                self.http("GET", "/workers")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"dynamo.indexer did not serve: {self.log()}")
                time.sleep(0.1)

    def http(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def register(self, pub: str, rep: str) -> None:
        code, body = self.http("POST", "/register", {
            "instance_id": 1, "endpoint": pub, "replay_endpoint": rep, "model_name": "orbitkv",
            "block_size": BLOCK_TOKENS})
        if code != 201:
            raise RuntimeError(f"dynamo.indexer /register: HTTP {code}: {body}")

    def unregister(self) -> None:
        code, body = self.http("POST", "/unregister", {"instance_id": 1, "model_name": "orbitkv"})
        if code != 200:
            raise RuntimeError(f"dynamo.indexer /unregister: HTTP {code}: {body}")

    def query(self, tokens: list[int]) -> dict:
        """Worker 1's overlap of a token sequence, in tokens: longest_matched
        (any tier), cpu (device or host), disk (any), ... ({} when none)."""
        code, body = self.http("POST", "/query", {"token_ids": tokens, "model_name": "orbitkv"})
        if code != 200:
            raise RuntimeError(f"dynamo.indexer /query: HTTP {code}: {body}")
        return body.get("instances", {}).get("1", {})

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self) -> None:
        terminate(self.proc)
        self._log.close()


class Epoch:
    """What one Manager run published and what the readers saw."""

    def __init__(self):
        self.stream: list[tuple[bytes, int, bytes]] = []  # the replay from 0
        self.live: list[tuple[bytes, int, bytes]] = []  # the SUB's
        self.batches: list[tuple[int, KVEventBatch]] = []
        self.snapshot_seq = -1
        self.snapshot_batches: list[KVEventBatch] = []
        self.applied: dict[int, set[str]] = {}
        self.held: dict[int, set[str]] = {}  # per the snapshot
        # chain → (Dynamo's /query overlap, longest, cpu): blocks by tiered() of the snapshot
        self.dynamo: dict[str, tuple[dict, int, int]] = {}


class KVEventsConformanceTest(unittest.TestCase):
    """One scenario (setUpClass), checked property by property."""

    @classmethod
    def setUpClass(cls):
        started = time.monotonic()
        build = os.path.join(support.REPO, "build")
        os.makedirs(build, exist_ok=True)
        cls.dir = tempfile.mkdtemp(prefix="okv-kvevents-")  # mode 0700: the sockets
        # Under build/ (ignored, on the checkout's filesystem): /tmp may be a
        # tmpfs, which O_DIRECT refuses.
        cls.ssd = tempfile.mkdtemp(prefix="kvevents-ssd-", dir=build)
        cls.pub, cls.rep = f"ipc://{cls.dir}/events.sock", f"ipc://{cls.dir}/replay.sock"
        cls.flags = ("--kv-events", cls.pub, "--kv-events-replay", cls.rep, "--ssd-dir", cls.ssd,
                     "--ssd-capacity", "8MiB", "--ssd-slot-bytes", "64KiB")
        cls.ctx = zmq.Context()
        cls.dyn = None
        cls.dynamo_skip = ""
        if not os.access(DYNAMO_PYTHON, os.X_OK):
            cls.dynamo_skip = f"{DYNAMO_PYTHON} missing: install it with `engines/deps.sh dynamo`"
        else:
            try:
                cls.dyn = DynamoIndexer(os.path.join(cls.dir, "dynamo-indexer.log"))
            except Exception as e:  # recorded: the Dynamo test fails with it
                cls.dynamo_skip = f"FAILED: {e}"
        cls.records: dict[int, orbitkv.BlockRecord] = {}
        cls.content: dict[bytes, list[bytes]] = {}
        a = Chain("a", 4)
        cls.chains = {"a": a, "b": Chain("b", 4), "c": Chain("c", 4), "d": Chain("d", 4),
                      "e": Chain("e", 4), "a+f": Chain("a+f", 2, parent=a),
                      "g": Chain("g", 2)}  # g: published after the restart
        cls.plain = Chain("plain", 2)  # published without records
        cls.names: dict[int, str] = {}
        for ch in cls.chains.values():
            for i, r in enumerate(ch.records):
                cls.records[r.engine_hash] = r
                cls.names[r.engine_hash] = f"{ch.name}{i}"
        try:
            cls.one = cls.run_epoch(first=True)
            cls.two = cls.run_epoch(first=False)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.took = time.monotonic() - started

    @classmethod
    def tearDownClass(cls):
        if cls.dyn is not None:
            cls.dyn.stop()
            cls.dyn = None
        cls.ctx.destroy(0)
        shutil.rmtree(cls.dir, ignore_errors=True)
        shutil.rmtree(cls.ssd, ignore_errors=True)

    @classmethod
    def name_of(cls, h: int) -> str:
        """A published block's name in messages: chain and index ("a+f1")."""
        return cls.names.get(h, hex(h))

    # ---- the scenario ----

    @classmethod
    def run_epoch(cls, first: bool) -> Epoch:
        ep = Epoch()
        m = support.Manager(*cls.flags, ram=RAM)
        s = Stream(cls.ctx, cls.pub, cls.rep)
        try:
            if cls.dyn is not None:
                if not first:
                    cls.dyn.unregister()  # a restarted engine is registered anew
                cls.dyn.register(cls.pub, cls.rep)
            if first:
                cls.publish_and_read(m)
            else:
                # Something to publish once the readers are connected: a
                # subscriber that joins after the start-up announcements
                # learns of them from the replay when a later message shows
                # it the gap (vLLM's protocol; Dynamo's listener does so).
                time.sleep(0.5)
                cls.publish_g(m)
            cls.settle(s, ep)
            if cls.dyn is not None:
                cls.ask_dynamo(ep)
            ep.live = list(s.live)
            ep.stream = s.replay(0)
            ep.batches = [(seq, decode(p)) for _, seq, p in ep.stream]
        finally:
            s.close()
            m.stop()
        return ep

    @classmethod
    def publish_and_read(cls, m) -> None:
        buf = orbitkv.EngineBuffer(layers=LAYERS, page_bytes=PAGE, page_count=PAGES)
        with orbitkv.CacheManagerClient(socket_path=m.socket) as c:
            bid = c.register_buffer(buf)

            def publish(ch: Chain, records: bool) -> None:
                n = len(ch.hashes)
                for p, h in enumerate(ch.hashes):
                    cls.content[h] = [os.urandom(PAGE) for _ in range(LAYERS)]
                    for layer in range(LAYERS):
                        buf.page(layer, p)[:] = cls.content[h][layer]
                got = c.publish(NS, bid, ch.hashes, list(range(n)), records=ch.records if records else None)
                assert got == (n, 0), f"publish {ch.name}: {got}, want ({n}, 0)"

            def read_back(ch: Chain) -> int:
                """Lookup, restore the hits into pages 4.. and compare them
                with what was published (a difference is recorded in
                cls.differ); the blocks read."""
                a = c.lookup(NS, ch.hashes, timeout_s=TIMEOUT_S)
                if a.status != "Ok":
                    return 0
                try:
                    n = min(a.hit_count, PAGES // 2)
                    op = c.start_restore(a.lease_id, bid, [(i, PAGES // 2 + i) for i in range(n)])
                    c.wait_restore(op, TIMEOUT_S)
                    for i in range(n):
                        for layer in range(LAYERS):
                            if bytes(buf.page(layer, PAGES // 2 + i)) != cls.content[ch.hashes[i]][layer]:
                                cls.differ.append(f"{ch.name} block {i} layer {layer}")
                finally:
                    c.release(a.lease_id)
                return n

            for name in ("a", "b", "c", "d", "e", "a+f"):
                publish(cls.chains[name], records=True)
            publish(cls.plain, records=False)
            cls.plain_lookup = c.lookup(NS, cls.plain.hashes, timeout_s=TIMEOUT_S)
            if cls.plain_lookup.lease_id:
                c.release(cls.plain_lookup.lease_id)
            # "a" went to SSD (its tail first): a lookup hits its head in
            # RAM and starts reading the rest back from SSD; ask until two
            # or more blocks come back. "e" was published last: in RAM.
            deadline = time.monotonic() + TIMEOUT_S
            cls.read, cls.differ = {}, []
            for name, want in (("a", 2), ("e", 1)):
                cls.read[name] = 0
                while cls.read[name] < want and time.monotonic() < deadline:
                    cls.read[name] = max(cls.read[name], read_back(cls.chains[name]))
                    time.sleep(0.2)
        buf.close()

    @classmethod
    def publish_g(cls, m) -> None:
        """Chain g, one block per publish a second apart: a reader that
        joined too late for the first message learns of it (and of the
        start-up announcements) from the gap the second one shows."""
        g = cls.chains["g"]
        buf = orbitkv.EngineBuffer(layers=LAYERS, page_bytes=PAGE, page_count=PAGES)
        with orbitkv.CacheManagerClient(socket_path=m.socket) as c:
            bid = c.register_buffer(buf)
            for i in range(len(g.hashes)):
                if i:
                    time.sleep(1)
                got = c.publish(NS, bid, g.hashes[i:i + 1], [i], records=g.records[i:i + 1])
                assert got == (1, 0), f"publish g{i}: {got}"
        buf.close()

    @classmethod
    def settle(cls, s: Stream, ep: Epoch) -> None:
        """Wait until the events applied in order give what a snapshot
        says, and record both."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            s.drain(0.3)
            snap = s.snapshot()
            seq = snap[0][1] if snap else -1
            s.drain(0.1)
            stream = s.replay(0)
            state: dict[int, set[str]] = {}
            for _, q, p in stream:
                if q <= seq:
                    apply(state, decode(p).events)
            held: dict[int, set[str]] = {}
            batches = [decode(p) for _, _, p in snap]
            for b in batches:
                apply(held, b.events)
            if (state == held and stream and stream[-1][1] == seq) or time.monotonic() > deadline:
                ep.snapshot_seq, ep.snapshot_batches, ep.applied, ep.held = seq, batches, state, held
                return
            time.sleep(0.3)

    @classmethod
    def ask_dynamo(cls, ep: Epoch) -> None:
        """Dynamo's overlap for every chain once it agrees with the
        snapshot or TIMEOUT_S has passed (its listener runs on its own)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            ep.dynamo = {}
            for name, ch in cls.chains.items():
                longest, cpu = tiered(ep.held, ch.engine_hashes)
                ep.dynamo[name] = (cls.dyn.query(ch.tokens), longest, cpu)
            ep.dynamo["plain"] = (cls.dyn.query(cls.plain.own_tokens), 0, 0)
            if all(got.get("longest_matched", 0) == BLOCK_TOKENS * a and got.get("cpu", 0) == BLOCK_TOKENS * c
                   for got, a, c in ep.dynamo.values()) or time.monotonic() > deadline:
                return
            time.sleep(0.3)

    # ---- the checks ----

    def test_every_payload_decodes_with_vllms_own_decoder(self):
        for ep in (self.one, self.two):
            for topic, seq, p in ep.stream + ep.live:
                decode(p)  # raises msgspec.ValidationError naming the field
            for b in ep.snapshot_batches:
                self.assertIsInstance(b, KVEventBatch)
        print(f"\n  scenario: {self.took:.1f} s; epoch 1: {len(self.one.stream)} batches, "
              f"epoch 2: {len(self.two.stream)}", end=" ")

    def test_sequence_numbers_run_from_zero_without_gaps_in_each_epoch(self):
        for name, ep in (("epoch 1", self.one), ("epoch 2", self.two)):
            with self.subTest(name):
                seqs = [q for _, q, _ in ep.stream]
                self.assertEqual(seqs, list(range(len(seqs))))
                self.assertGreater(len(seqs), 1)
                live = [q for _, q, _ in ep.live]
                self.assertTrue(live, "the SUB received nothing")
                self.assertEqual(live, list(range(live[0], live[0] + len(live))), "the SUB saw a gap")
                by_seq = {q: (t, p) for t, q, p in ep.stream}
                for t, q, p in ep.live:
                    self.assertEqual(by_seq[q], (t, p), f"seq {q}: the replay differs from what was published")

    def test_each_epoch_starts_with_all_blocks_cleared(self):
        for name, ep in (("epoch 1", self.one), ("epoch 2", self.two)):
            with self.subTest(name):
                seq, first = ep.batches[0]
                self.assertEqual(seq, 0)
                self.assertEqual(len(first.events), 1)
                self.assertIsInstance(first.events[0], AllBlocksCleared)
                self.assertIsNone(first.data_parallel_rank)

    def test_block_stored_carries_the_published_records(self):
        n = 0
        for ep in (self.one, self.two):
            for _, b in ep.batches:
                for ev in b.events:
                    if not isinstance(ev, BlockStored):
                        continue
                    n += 1
                    self.assertIn(ev.medium, ("CPU", "STORAGE"))
                    self.assertEqual(ev.block_size, BLOCK_TOKENS)
                    self.assertEqual(len(ev.token_ids), BLOCK_TOKENS * len(ev.block_hashes))
                    self.assertIsNone(ev.lora_id)
                    self.assertIsNone(ev.lora_name)
                    for i, h in enumerate(ev.block_hashes):
                        self.assertIsInstance(h, int)
                        self.assertIn(h, self.records, "an engine hash nobody published")
                        r = self.records[h]
                        parent = ev.parent_block_hash if i == 0 else ev.block_hashes[i - 1]
                        self.assertEqual(parent, r.parent_hash)
                        self.assertEqual(ev.token_ids[i * BLOCK_TOKENS:(i + 1) * BLOCK_TOKENS], list(r.token_ids))
        self.assertGreater(n, 0)

    def test_a_demoted_block_is_removed_from_cpu_then_stored_on_storage(self):
        seen: dict[int, list[tuple[str, str]]] = {}
        for _, b in self.one.batches:
            for ev in b.events:
                if isinstance(ev, (BlockStored, BlockRemoved)):
                    for h in ev.block_hashes:
                        seen.setdefault(h, []).append((type(ev).__name__, ev.medium))
        demoted = [h for h, evs in seen.items() if ("BlockStored", "STORAGE") in evs]
        self.assertTrue(demoted, "publishing 22 blocks into a RAM tier of 16 demoted none to SSD")
        for h in demoted:
            evs = seen[h]
            self.assertEqual(evs[:3], [("BlockStored", "CPU"), ("BlockRemoved", "CPU"), ("BlockStored", "STORAGE")],
                             evs)
        print(f"\n  {len(demoted)} blocks demoted to SSD", end=" ")

    def test_read_back_blocks_are_the_published_bytes(self):
        self.assertGreaterEqual(self.read["a"], 2, self.read)
        self.assertGreaterEqual(self.read["e"], 1, self.read)
        self.assertEqual(self.differ, [])

    def test_a_block_read_back_from_ssd_is_stored_on_cpu_again(self):
        back = []
        seen: dict[int, list[tuple[str, str]]] = {}
        for _, b in self.one.batches:
            for ev in b.events:
                if isinstance(ev, (BlockStored, BlockRemoved)):
                    for h in ev.block_hashes:
                        evs = seen.setdefault(h, [])
                        evs.append((type(ev).__name__, ev.medium))
                        if evs[-2:] == [("BlockStored", "STORAGE"), ("BlockStored", "CPU")]:
                            back.append(self.name_of(h))
        self.assertTrue(back, "no block read back from SSD was announced on CPU")

    def test_the_events_applied_in_order_give_the_snapshot(self):
        for name, ep in (("epoch 1", self.one), ("epoch 2", self.two)):
            with self.subTest(name):
                self.assertGreaterEqual(ep.snapshot_seq, 0)
                self.assertIsInstance(ep.snapshot_batches[0].events[0], AllBlocksCleared)
                self.assertEqual(ep.applied, ep.held)
                self.assertTrue(ep.held)

    def test_after_a_restart_the_ssd_blocks_are_announced_again_on_storage(self):
        on_ssd = {h for h, media in self.one.held.items() if "STORAGE" in media}
        self.assertTrue(on_ssd)
        g = set(self.chains["g"].engine_hashes)
        self.assertEqual(self.two.held, {**{h: {"STORAGE"} for h in on_ssd}, **{h: {"CPU"} for h in g}})
        stored = [ev for _, b in self.two.batches for ev in b.events if isinstance(ev, BlockStored)]
        self.assertEqual({h for ev in stored if ev.medium == "STORAGE" for h in ev.block_hashes}, on_ssd)
        self.assertEqual({h for ev in stored if ev.medium == "CPU" for h in ev.block_hashes}, g)

    def test_blocks_published_without_records_work_and_are_not_announced(self):
        self.assertEqual((self.plain_lookup.status, self.plain_lookup.hit_count), ("Ok", 2))
        # Every announced hash is one of the published records (checked
        # above); the record-less chain's blocks have none, so its tokens
        # appear nowhere.
        plain = self.plain.own_tokens
        for ep in (self.one, self.two):
            for _, b in ep.batches:
                for ev in b.events:
                    if isinstance(ev, BlockStored):
                        self.assertNotEqual(ev.token_ids[:BLOCK_TOKENS], plain[:BLOCK_TOKENS])

    def test_dynamos_indexer_scores_what_the_manager_holds(self):
        if self.dynamo_skip:
            if self.dynamo_skip.startswith("FAILED"):
                self.fail(self.dynamo_skip)
            self.skipTest(self.dynamo_skip)
        for name, ep in (("epoch 1", self.one), ("epoch 2 (registered anew)", self.two)):
            for chain, (got, longest, cpu) in ep.dynamo.items():
                with self.subTest(f"{name}: chain {chain}"):
                    # /query answers in tokens: longest_matched over every
                    # tier, cpu the device+host part, disk = longest.
                    self.assertEqual(got.get("longest_matched", 0), BLOCK_TOKENS * longest, (got, self.dyn.log()))
                    self.assertEqual(got.get("cpu", 0), BLOCK_TOKENS * cpu, got)
                    self.assertEqual(got.get("disk", 0), BLOCK_TOKENS * longest, got)
                    self.assertEqual(got.get("gpu", 0), 0, got)
        self.assertTrue(any(a for _, a, _ in self.one.dynamo.values()))
        self.assertTrue(any(a for _, a, _ in self.two.dynamo.values()))
        # Where OrbitKV's own lookup (a hit on either medium at every
        # position) counts more than Dynamo's tiered walk: said, not failed.
        more = [f"{name} {leading(self.one.held, ch.engine_hashes, {'CPU', 'STORAGE'})} > {self.one.dynamo[name][1]}"
                for name, ch in self.chains.items()
                if leading(self.one.held, ch.engine_hashes, {"CPU", "STORAGE"}) != self.one.dynamo[name][1]]
        if more:
            print(f"\n  chains OrbitKV holds more of than Dynamo's tiered walk counts (blocks): {', '.join(more)}", end=" ")



class KVEventsOverTCPTest(unittest.TestCase):
    """The same readers over tcp://127.0.0.1 (free ports picked here: the
    Manager binds what it is given), RAM tier only: one chain published a
    block at a time, read by the SUB, the replay, the snapshot and
    Dynamo's indexer."""

    @classmethod
    def setUpClass(cls):
        cls.pub = f"tcp://127.0.0.1:{support.free_port()}"
        cls.rep = f"tcp://127.0.0.1:{support.free_port()}"
        cls.dir = tempfile.mkdtemp(prefix="okv-kvevents-tcp-")
        cls.ctx = zmq.Context()
        cls.chain = Chain("tcp", 3)
        cls.dyn, cls.dynamo_skip, cls.dynamo = None, "", {}
        m = support.Manager("--kv-events", cls.pub, "--kv-events-replay", cls.rep)
        s = Stream(cls.ctx, cls.pub, cls.rep)
        try:
            if not os.access(DYNAMO_PYTHON, os.X_OK):
                cls.dynamo_skip = f"{DYNAMO_PYTHON} missing: install it with `engines/deps.sh dynamo`"
            else:
                try:
                    cls.dyn = DynamoIndexer(os.path.join(cls.dir, "dynamo-indexer.log"))
                    cls.dyn.register(cls.pub, cls.rep)
                except Exception as e:
                    cls.dynamo_skip = f"FAILED: {e}"
            time.sleep(0.5)
            buf = orbitkv.EngineBuffer(layers=LAYERS, page_bytes=PAGE, page_count=PAGES)
            with orbitkv.CacheManagerClient(socket_path=m.socket) as c:
                bid = c.register_buffer(buf)
                for i in range(len(cls.chain.hashes)):
                    time.sleep(0.3 if i else 0)
                    got = c.publish(NS, bid, cls.chain.hashes[i:i + 1], [i], records=cls.chain.records[i:i + 1])
                    assert got == (1, 0), f"publish tcp{i}: {got}"
            buf.close()
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                s.drain(0.3)
                snap = s.snapshot()
                cls.stream = s.replay(0)
                cls.applied, cls.held = {}, {}
                for _, _, p in cls.stream:
                    apply(cls.applied, decode(p).events)
                for _, _, p in snap:
                    apply(cls.held, decode(p).events)
                cls.snapshot_seq = snap[0][1] if snap else -1
                if (cls.applied == cls.held and len(cls.held) == 3) or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            cls.live = list(s.live)
            if cls.dyn is not None:
                while True:
                    cls.dynamo = cls.dyn.query(cls.chain.tokens)
                    if cls.dynamo.get("longest_matched") == 3 * BLOCK_TOKENS or time.monotonic() > deadline:
                        break
                    time.sleep(0.3)
        finally:
            s.close()
            m.stop()
            if cls.dyn is not None:
                cls.dyn.stop()
            cls.ctx.destroy(0)
            shutil.rmtree(cls.dir, ignore_errors=True)

    def test_the_stream_over_tcp_is_what_vllms_reader_expects(self):
        seqs = [q for _, q, _ in self.stream]
        self.assertEqual(seqs, list(range(len(seqs))))
        self.assertIsInstance(decode(self.stream[0][2]).events[0], AllBlocksCleared)
        self.assertTrue(self.live)
        by_seq = {q: (t, p) for t, q, p in self.stream}
        for t, q, p in self.live:
            self.assertEqual(by_seq[q], (t, p))
        stored = [ev for _, _, p in self.stream for ev in decode(p).events if isinstance(ev, BlockStored)]
        self.assertEqual([h for ev in stored for h in ev.block_hashes], self.chain.engine_hashes)
        self.assertEqual([t for ev in stored for t in ev.token_ids], self.chain.tokens)
        self.assertEqual({ev.medium for ev in stored}, {"CPU"})

    def test_the_snapshot_over_tcp_is_the_applied_stream(self):
        # The snapshot is tagged with the last batch published when it was
        # taken (docs/events.md "Snapshot"); the replay, taken after it,
        # may hold a batch more, whose changes the snapshot already has.
        self.assertGreaterEqual(self.snapshot_seq, 0)
        self.assertLessEqual(self.snapshot_seq, len(self.stream) - 1)
        self.assertEqual(self.held, {h: {"CPU"} for h in self.chain.engine_hashes})
        self.assertEqual(self.applied, self.held)

    def test_dynamos_indexer_over_tcp_scores_the_chain(self):
        if self.dynamo_skip:
            if self.dynamo_skip.startswith("FAILED"):
                self.fail(self.dynamo_skip)
            self.skipTest(self.dynamo_skip)
        self.assertEqual((self.dynamo.get("longest_matched"), self.dynamo.get("cpu")),
                         (3 * BLOCK_TOKENS, 3 * BLOCK_TOKENS), self.dynamo)


if __name__ == "__main__":
    unittest.main()
