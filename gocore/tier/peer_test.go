package tier

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// remoteDouble is a test double of Remote: the other Managers (catalog,
// peer control and transfer engine, which gocore/cluster drives)
// reduced to a map of the blocks one peer holds, written into the frames
// place returns as the transfer engine would. It exists so that the peer
// tier's own part (the run it asks for, frames placed on the dispatcher,
// the CRC32C check, misses, frame accounting, replicas) is tested without
// a network or etcd; the real Remote is tested end to end in
// gocore/manager's cluster tests. mode picks how the fetch goes wrong.
type remoteDouble struct {
	mu     sync.Mutex
	owner  cluster.Owner
	blocks map[abi.BlockHash][]byte
	layers uint32 // Served.Layers (0: unknown)
	mode   fetchMode
	serve  int // > 0: the peer serves at most this many blocks of a run
	asked  [][]abi.BlockHash
}

type fetchMode int

const (
	fetchOK          fetchMode = iota
	fetchRefused               // the peer refuses before serving anything
	fetchBrokenAfter           // the connection breaks after the frames were placed, nothing landed
	fetchLate                  // the peer never answers: only the deadline ends it
	fetchCorrupt               // block corruptAt's bytes change on the way
)

var corruptAt = 2

func (d *remoteDouble) Owners(ns abi.Namespace, h abi.BlockHash) []cluster.Owner {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.blocks[h]; ok {
		return []cluster.Owner{d.owner}
	}
	return nil
}

func (d *remoteDouble) Fetch(ctx context.Context, o cluster.Owner, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64,
	place func([]cluster.Served) [][][]byte) (int, error) {
	d.mu.Lock()
	d.asked = append(d.asked, append([]abi.BlockHash(nil), hashes...))
	var run []cluster.Served
	var src [][]byte
	var total uint64
	for _, h := range hashes {
		b, ok := d.blocks[h]
		if !ok || total+uint64(len(b)) > maxBytes || (d.serve > 0 && len(run) == d.serve) {
			break
		}
		total += uint64(len(b))
		src = append(src, b)
		run = append(run, cluster.Served{Length: uint64(len(b)), Layers: d.layers, CRC32C: crc32.Checksum(b, castagnoli)})
	}
	mode := d.mode
	d.mu.Unlock()
	switch mode {
	case fetchRefused:
		return 0, errors.New("double: refused")
	case fetchLate:
		<-ctx.Done()
		return 0, ctx.Err()
	}
	dst := place(run)
	if mode == fetchBrokenAfter {
		return 0, errors.New("double: connection reset")
	}
	for i := range dst {
		off := 0
		for _, f := range dst[i] {
			off += copy(f, src[i][off:])
		}
		if mode == fetchCorrupt && i == corruptAt {
			dst[i][0][7] ^= 0x40
		}
	}
	return len(dst), nil
}

func (d *remoteDouble) calls() [][]abi.BlockHash {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]abi.BlockHash(nil), d.asked...)
}

// readerLog records ReadDone calls.
type readerLog struct{ got []*index.Block }

func (r *readerLog) ReadDone(blk *index.Block) { r.got = append(r.got, blk) }

// advertLog records an Advertiser's calls.
type advertLog struct{ adv, wd []abi.BlockHash }

func (a *advertLog) Advertise(_ abi.Namespace, h []abi.BlockHash) { a.adv = append(a.adv, h...) }
func (a *advertLog) Withdraw(_ abi.Namespace, h []abi.BlockHash)  { a.wd = append(a.wd, h...) }

const (
	pChunk  = 4096
	pBlock  = 3 * pChunk / 2 // 1.5 chunks: the last frame of a block is cut
	pLayers = 2
)

var pNS = abi.Namespace{9}

func pHash(i int) abi.BlockHash { return abi.BlockHash{byte(i), 0xaa} }

func pBytes(i int) []byte {
	b := make([]byte, pBlock)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

// newPeerRig is Tiers of chunks RAM chunks over d, and a ring counter.
func newPeerRig(t *testing.T, chunks int, d *remoteDouble, adv Advertiser, timeout time.Duration) (*Tiers, chan struct{}) {
	t.Helper()
	ring := make(chan struct{}, 1024)
	spec := Spec{RAM: ram.Spec{CapacityBytes: uint64(chunks) * pChunk, ChunkBytes: pChunk}, Remote: d, Advertiser: adv,
		PeerTimeout: timeout, Ring: func() { ring <- struct{}{} }}
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	return ts, ring
}

// settle applies peer events until no fetch is in flight.
func settle(t *testing.T, ts *Tiers, ring chan struct{}) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for ts.PeerLoading() > 0 {
		select {
		case <-ring:
			ts.Complete(64)
		case <-deadline:
			t.Fatalf("%d peer fetches still in flight after 10 s", ts.PeerLoading())
		}
	}
}

func newDouble(n int, layers uint32) *remoteDouble {
	d := &remoteDouble{owner: cluster.Owner{NodeID: "b", Addr: "127.0.0.2:1", Epoch: 5}, blocks: map[abi.BlockHash][]byte{}, layers: layers}
	for i := 0; i < n; i++ {
		d.blocks[pHash(i)] = pBytes(i)
	}
	return d
}

// checkFrames fails unless the arena's used chunks are exactly the
// sealed blocks' and the index holds nothing else: a failed fetch leaks
// no frame and leaves no Publishing block.
func checkFrames(t *testing.T, ts *Tiers) {
	t.Helper()
	st := ts.idx.Stats()
	want := uint32(st.Blocks) * ts.arena.ChunksFor(pBlock)
	if used := ts.arena.Chunks() - ts.arena.Free(); used != want {
		t.Fatalf("%d chunks in use, want %d (%d sealed blocks)", used, want, st.Blocks)
	}
	if st.Entries != st.Blocks {
		t.Fatalf("%d index entries for %d sealed blocks: a fetch left a Publishing block", st.Entries, st.Blocks)
	}
}

// A chain a peer holds answers Loading, then its blocks are sealed as
// replicas holding the peer's bytes; any failure is a miss for the blocks
// it touches, with their frames freed.
func TestAPeerFetchSealsTheRunOrMissesWithItsFramesFreed(t *testing.T) {
	cases := []struct {
		name      string
		mode      fetchMode
		serve     int
		layers    uint32
		learn     bool // this node once held a block of the namespace and length
		wantHits  int
		wantFails uint64
		// wantLayers of the replicas
		wantLayers uint32
	}{
		{"a run the peer serves whole is sealed with the peer's bytes", fetchOK, 0, pLayers, false, 4, 0, pLayers},
		{"a run the peer serves with unknown layers uses this node's layout of the namespace", fetchOK, 0, 0, true, 4, 0, pLayers},
		{"a run of unknown layers and layout is sealed with layers unknown", fetchOK, 0, 0, false, 4, 0, 0},
		{"a peer that serves a shorter run leaves the rest a miss", fetchOK, 2, pLayers, false, 2, 1, pLayers},
		{"a refused fetch is a miss for the whole run", fetchRefused, 0, pLayers, false, 0, 1, pLayers},
		{"a connection broken after the frames were placed frees them", fetchBrokenAfter, 0, pLayers, false, 0, 1, pLayers},
		{"a peer that never answers is a miss at the deadline", fetchLate, 0, pLayers, false, 0, 1, pLayers},
		{"a block failing its CRC32C check is a miss and so is the rest of the run", fetchCorrupt, 0, pLayers, false, corruptAt, 1, pLayers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDouble(4, tc.layers)
			d.mode, d.serve = tc.mode, tc.serve
			ts, ring := newPeerRig(t, 64, d, nil, 50*time.Millisecond)
			if tc.learn {
				blk := ts.Insert(index.Key{NS: pNS, Hash: abi.BlockHash{0xee}}, pBlock, pLayers, 0, index.NoDomain)
				ts.Discard(blk)
			}
			r := &readerLog{}
			start := time.Now()
			loading, started := ts.PeerFetch(r, index.NoDomain, pNS, pHash, 0, 5) // position 4: no owner
			if !loading || started != 4 {
				t.Fatalf("PeerFetch = %v, %d; want Loading with 4 blocks asked", loading, started)
			}
			if again, n := ts.PeerFetch(&readerLog{}, index.NoDomain, pNS, pHash, 0, 5); !again || n != 0 {
				t.Fatalf("a second lookup of the chain being fetched = %v, %d; want Loading, nothing started", again, n)
			}
			settle(t, ts, ring)
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("the fetch took %v", el)
			}
			if len(r.got) != 4 {
				t.Fatalf("the reader heard %d blocks, want 4 (one per block asked)", len(r.got))
			}
			for i, blk := range r.got {
				if (blk != nil) != (i < tc.wantHits) {
					t.Fatalf("block %d: sealed %v, want %v", i, blk != nil, i < tc.wantHits)
				}
				if blk == nil {
					if ts.idx.Contains(index.Key{NS: pNS, Hash: pHash(i)}) {
						t.Fatalf("missed block %d is in the index", i)
					}
					continue
				}
				if got := ts.idx.Lookup(index.Key{NS: pNS, Hash: pHash(i)}); got != blk || !blk.Replica() || blk.Layers != tc.wantLayers {
					t.Fatalf("block %d: lookup %p (sealed %p), replica %v, layers %d", i, got, blk, blk.Replica(), blk.Layers)
				}
				var got []byte
				for _, c := range blk.Chunks {
					got = append(got, ts.arena.Chunk(c)...)
				}
				if !bytes.Equal(got[:pBlock], pBytes(i)) {
					t.Fatalf("block %d holds other bytes than the peer's", i)
				}
			}
			checkFrames(t, ts)
			ps := ts.Counters().Peer
			if ps.LookupHit != uint64(tc.wantHits) || ps.LookupMiss != uint64(5-tc.wantHits) || ps.Fails != tc.wantFails || ps.Blocks != uint64(tc.wantHits) {
				t.Fatalf("peer stats %+v, want %d hits, %d misses, %d failed fetches", ps, tc.wantHits, 5-tc.wantHits, tc.wantFails)
			}
			if tc.mode == fetchCorrupt && ps.Corrupt != 1 {
				t.Fatalf("corrupt blocks %d, want 1", ps.Corrupt)
			}
		})
	}
}

// What a lookup asks a peer for: only blocks no local state holds, from
// the first one, and only while the same owner advertises them.
func TestAPeerFetchAsksOnlyForBlocksNoLocalStateHolds(t *testing.T) {
	cases := []struct {
		name     string
		resident []int // sealed locally (own blocks) before the lookup
		advert   int   // blocks the peer advertises
		from     int
		want     int // blocks asked for (0: not consulted)
	}{
		{"an own block in RAM ends the run asked for", []int{2}, 4, 0, 2},
		{"a chain whose next block is resident is not fetched", []int{0}, 4, 0, 0},
		{"the run ends where the owner stops advertising", nil, 3, 0, 3},
		{"a lookup past the RAM prefix asks from there", []int{0, 1}, 4, 2, 2},
		{"a chain no peer advertises is not fetched", nil, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDouble(tc.advert, pLayers)
			ts, ring := newPeerRig(t, 64, d, nil, time.Second)
			for _, i := range tc.resident {
				ts.Seal(ts.Insert(index.Key{NS: pNS, Hash: pHash(i)}, pBlock, pLayers, 0, index.NoDomain))
			}
			loading, started := ts.PeerFetch(&readerLog{}, index.NoDomain, pNS, pHash, tc.from, 4)
			settle(t, ts, ring)
			if loading != (tc.want > 0) || started != tc.want {
				t.Fatalf("PeerFetch = %v, %d; want %d blocks asked", loading, started, tc.want)
			}
			calls := d.calls()
			if tc.want == 0 {
				if len(calls) != 0 {
					t.Fatalf("the peer was asked %v", calls)
				}
				return
			}
			if len(calls) != 1 || len(calls[0]) != tc.want || calls[0][0] != pHash(tc.from) {
				t.Fatalf("the peer was asked %v, want %d hashes from %d", calls, tc.want, tc.from)
			}
			checkFrames(t, ts)
		})
	}
}

// Replicas are evicted before blocks this node produced and are never
// advertised; own blocks are advertised when sealed and withdrawn when
// evicted.
func TestReplicasAreEvictedFirstAndNeverAdvertised(t *testing.T) {
	d := newDouble(4, pLayers)
	adv := &advertLog{}
	per := 2 // chunks per block
	ts, ring := newPeerRig(t, 8*per, d, adv, time.Second)
	own := func(i int) {
		ts.Seal(ts.Insert(index.Key{NS: pNS, Hash: pHash(100 + i)}, pBlock, pLayers, 0, index.NoDomain))
	}
	for i := 0; i < 4; i++ {
		own(i)
	}
	if loading, n := ts.PeerFetch(nil, index.NoDomain, pNS, pHash, 0, 4); !loading || n != 4 {
		t.Fatalf("PeerFetch = %v, %d", loading, n)
	}
	settle(t, ts, ring)
	if st := ts.idx.Stats(); st.Blocks != 8 || st.Replicas != 4 {
		t.Fatalf("index %+v, want 8 blocks, 4 replicas", st)
	}
	// Two more own blocks need four chunks: two blocks go, both replicas.
	if !ts.MakeRoom(uint64(2 * per)) {
		t.Fatal("no room")
	}
	own(4)
	own(5)
	ts.FlushAdverts()
	if st := ts.idx.Stats(); st.Blocks != 8 || st.Replicas != 2 {
		t.Fatalf("index %+v after eviction, want 8 blocks, 2 replicas", st)
	}
	for i := 0; i < 6; i++ {
		if ts.idx.Lookup(index.Key{NS: pNS, Hash: pHash(100 + i)}) == nil {
			t.Fatalf("own block %d was evicted while replicas remained", i)
		}
	}
	if len(adv.adv) != 6 {
		t.Fatalf("advertised %d blocks, want the 6 own ones", len(adv.adv))
	}
	for _, h := range adv.adv {
		if h[1] == 0xaa && h[0] < 100 {
			t.Fatalf("replica %x advertised", h)
		}
	}
	if len(adv.wd) != 0 {
		t.Fatalf("withdrew %d blocks, but only replicas were evicted", len(adv.wd))
	}
	// Four more: the two replicas left, then the two oldest own blocks,
	// which are withdrawn.
	if !ts.MakeRoom(uint64(4 * per)) {
		t.Fatal("no room")
	}
	ts.FlushAdverts()
	if st := ts.idx.Stats(); st.Replicas != 0 || st.Blocks != 4 {
		t.Fatalf("index %+v, want 4 own blocks left", st)
	}
	if len(adv.wd) != 2 || adv.wd[0] != pHash(100) || adv.wd[1] != pHash(101) {
		t.Fatalf("withdrew %x, want own blocks 100 and 101", adv.wd)
	}
}

// Close ends fetches in flight (a peer that never answers) and waits for
// them: no goroutine writes frames after it.
func TestClosingTheTiersEndsFetchesInFlight(t *testing.T) {
	d := newDouble(4, pLayers)
	d.mode = fetchLate
	ts, err := New(Spec{RAM: ram.Spec{CapacityBytes: 64 * pChunk, ChunkBytes: pChunk}, Remote: d, PeerTimeout: time.Minute, Ring: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	if loading, _ := ts.PeerFetch(nil, index.NoDomain, pNS, pHash, 0, 4); !loading {
		t.Fatal("not fetching")
	}
	done := make(chan struct{})
	go func() { ts.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waits for a fetch after 5 s")
	}
}
