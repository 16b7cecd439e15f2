package cache

import (
	"context"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// peerDouble is a test double of tier.Remote: one peer reduced to the
// bytes it holds, written into the frames the peer tier places as the
// transfer engine would (gocore/tier's tests cover its failure modes; the
// real Remote, gocore/cluster's Fetcher over etcd, gRPC and TCP, is tested
// by gocore/manager's cluster tests). It
// lets the cache's tests check the lookup path (RAM, then SSD, then peer),
// tickets and restores of fetched blocks without a network.
type peerDouble struct {
	mu     sync.Mutex
	blocks map[abi.BlockHash][]byte
	fail   bool
	asked  [][]abi.BlockHash
}

func (d *peerDouble) Owners(_ abi.Namespace, h abi.BlockHash) []cluster.Owner {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.blocks[h]; ok {
		return []cluster.Owner{{NodeID: "peer", Addr: "127.0.0.2:1", Epoch: 1}}
	}
	return nil
}

func (d *peerDouble) Fetch(ctx context.Context, _ cluster.Owner, _ abi.Namespace, hashes []abi.BlockHash, maxBytes uint64,
	place func([]cluster.Served) [][][]byte) (int, error) {
	d.mu.Lock()
	d.asked = append(d.asked, append([]abi.BlockHash(nil), hashes...))
	var run []cluster.Served
	var src [][]byte
	for _, h := range hashes {
		b, ok := d.blocks[h]
		if !ok {
			break
		}
		src = append(src, b)
		run = append(run, cluster.Served{Length: uint64(len(b)), Layers: tLayers, CRC32C: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))})
	}
	fail := d.fail
	d.mu.Unlock()
	dst := place(run)
	if fail {
		return 0, errors.New("double: connection reset")
	}
	for i := range dst {
		off := 0
		for _, f := range dst[i] {
			off += copy(f, src[i][off:])
		}
	}
	return len(dst), nil
}

// peerBlock is the block bytes a publish of a page filled with tag holds
// (layer-major: layer l's page at l × tPageBytes).
func peerBlock(tag byte) []byte {
	b := make([]byte, tLayers*tPageBytes)
	for l := 0; l < tLayers; l++ {
		for i := 0; i < tPageBytes; i++ {
			b[l*tPageBytes+i] = tag ^ byte(l*31) ^ byte(i*7)
		}
	}
	return b
}

// peerRig is 6 blocks of RAM over an SSD tier, with hash(0..3) demoted to
// SSD (published, then pushed out by hash(4..9)), and a peer that holds
// hash(20..23).
func peerRig(t *testing.T) (*rig, *peerDouble) {
	t.Helper()
	blockBytes := uint64(tLayers * tPageBytes)
	d := &peerDouble{blocks: map[abi.BlockHash][]byte{}}
	for i := 20; i < 24; i++ {
		d.blocks[hash(i)] = peerBlock(byte(60 + i))
	}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ramSpec(6 * blockBytes), Remote: d, PeerTimeout: time.Second,
		SSD: &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}}})
	a, amem := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 4), pg(4)), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(4, 6), []uint32{4, 5, 6, 7, 4, 5}), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		if time.Now().After(deadline) {
			t.Fatal("demotions not durable")
		}
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 4; i++ {
		if r.svc.idx.Contains(keyOf(ns1, hash(i))) || !r.svc.tiers.OnSSD(keyOf(ns1, hash(i))) {
			t.Fatalf("premise: hash %d should be on SSD only", i)
		}
	}
	r.close(a)
	return r, d
}

// drainAll completes SSD reads and peer fetches until none is in flight.
func drainAll(t *testing.T, r *rig) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Loading() > 0 || r.svc.tiers.PeerLoading() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("reads or fetches never completed")
		}
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
}

// A chain that continues past RAM and SSD into a peer's blocks: the SSD
// run is read first (the peer is not asked for it), then the peer's run,
// and the lease restores the peer's bytes exactly.
func TestAChainIsLookedUpInRAMThenSSDThenAPeer(t *testing.T) {
	cases := []struct {
		name   string
		ticket bool
	}{
		{"an untracked query answers Loading until both runs landed", false},
		{"a ticket waiting for the full prefix resolves after both runs landed", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, d := peerRig(t)
			b, bmem := r.open()
			chain := append(hs(0, 4), hash(20), hash(21))
			query := func() abi.Message {
				if tc.ticket {
					return r.call2(b, abi.CmdPoll, make([]byte, 64), 1, 1)
				}
				return r.call(b, abi.CmdQueryBundle, queryDesc(ns1, chain...), 0)
			}
			var resp abi.Message
			if tc.ticket {
				resp = r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWaitFullPref, 7, 0, 0, 0, chain...), 0)
			} else {
				resp = query()
			}
			if status(resp) != abi.StatusLoading {
				t.Fatalf("first answer %v, want Loading (hash 0..3 on SSD)", status(resp))
			}
			if n := len(d.asked); n != 0 {
				t.Fatalf("the peer was asked %d times while the SSD run was read", n)
			}
			drainAll(t, r)
			if !tc.ticket {
				if resp = query(); status(resp) != abi.StatusLoading {
					t.Fatalf("after the SSD run: %v, want Loading (hash 20, 21 at the peer)", status(resp))
				}
				drainAll(t, r)
			}
			if len(d.asked) != 1 || len(d.asked[0]) != 2 || d.asked[0][0] != hash(20) || d.asked[0][1] != hash(21) {
				t.Fatalf("the peer was asked %v, want hash 20 and 21 only", d.asked)
			}
			resp = query()
			if status(resp) != abi.StatusOK || resp.Arg0 != 6 {
				t.Fatalf("after both runs: %v hits %d, want Ok 6", status(resp), resp.Arg0)
			}
			op := r.call(b, abi.CmdRestore, restoreDesc(resp.Arg1, []uint32{0, 4, 5}, []uint32{0, 6, 7}), 0)
			if done := r.wait(b, op.Arg0); status(done) != abi.StatusOK {
				t.Fatalf("restore: %v", status(done))
			}
			check(t, bmem, 0, 40)
			check(t, bmem, 6, 80)
			check(t, bmem, 7, 81)
			st := r.svc.Stats()
			if st.Peer.LookupHit != 2 || st.LookupBlocks.SSDHit != 4 || st.Replicas != 2 {
				t.Fatalf("peer hits %d, ssd hits %d, replicas %d; want 2, 4, 2", st.Peer.LookupHit, st.LookupBlocks.SSDHit, st.Replicas)
			}
			r.call(b, abi.CmdRelease, nil, resp.Arg1)
			r.close(b)
			r.idle()
		})
	}
}

// A peer fetch that fails is a miss: the query answers with what is
// local, and nothing stays pinned or allocated.
func TestAFailedPeerFetchIsAMiss(t *testing.T) {
	r, d := peerRig(t)
	d.fail = true
	b, _ := r.open()
	if resp := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(20), hash(21)), 0); status(resp) != abi.StatusLoading {
		t.Fatalf("first answer %v, want Loading", status(resp))
	}
	drainAll(t, r)
	if resp := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(20), hash(21)), 0); status(resp) != abi.StatusLoading {
		// the lookup asks again (the peer still advertises them): Loading, then a miss once it failed again
		t.Logf("second answer %v", status(resp))
	}
	drainAll(t, r)
	st := r.svc.Stats()
	if st.Peer.LookupHit != 0 || st.Peer.Fails == 0 || st.Replicas != 0 {
		t.Fatalf("peer stats %+v, replicas %d", st.Peer, st.Replicas)
	}
	r.close(b)
	r.idle()
	if blocks, _, used := r.svc.tiers.Resident(); used != blocks*r.svc.arena.ChunkBytes()*uint64(r.svc.arena.ChunksFor(tLayers*tPageBytes)) {
		t.Fatalf("%d bytes of chunks in use for %d sealed blocks: a failed fetch leaked frames", used, blocks)
	}
}

func ramSpec(capacity uint64) ram.Spec { return ram.Spec{CapacityBytes: capacity} }

func keyOf(ns abi.Namespace, h abi.BlockHash) index.Key { return index.Key{NS: ns, Hash: h} }
