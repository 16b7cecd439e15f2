package cache

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// demoteFour is a rig with 4 blocks of RAM over an SSD tier.
func demoteFour(t *testing.T) (*rig, any) {
	blockBytes := uint64(tLayers * tPageBytes)
	spec := &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
	r := newRigSSD(t, 4*blockBytes, spec)
	return r, nil
}

// A query chain with a repeated hash whose block is on SSD only must not
// make the prefetch insert a block twice (it panicked the Manager).
func TestAChainRepeatingAnSSDHashIsPrefetchedOnce(t *testing.T) {
	r, _ := demoteFour(t)
	a, amem := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(4), hash(5), hash(6), hash(7)}, []uint32{4, 5, 6, 7}), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		if time.Now().After(deadline) {
			t.Fatal("not durable")
		}
		time.Sleep(time.Millisecond)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("PANIC reachable by a client query: %v", p)
		}
	}()
	resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(0)), 0)
	if status(resp) != abi.StatusLoading {
		t.Fatalf("status %v, want Loading", status(resp))
	}
	for r.svc.tiers.Loading() > 0 {
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
	resp = r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(0)), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 2 {
		t.Fatalf("after the prefetch: %v hits %d, want Ok 2", status(resp), resp.Arg0)
	}
	r.call(a, abi.CmdRelease, nil, resp.Arg1)
	r.close(a)
	r.idle()
}

// A session closing with prefetch reads in flight leaves nothing pinned.
func TestClosingWithAPrefetchInFlightLeavesNothingPinned(t *testing.T) {
	r, _ := demoteFour(t)
	a, amem := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(4), hash(5), hash(6), hash(7)}, []uint32{4, 5, 6, 7}), 0)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		time.Sleep(time.Millisecond)
	}
	resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1), hash(2), hash(3)), 0)
	t.Logf("status %v ops %d", status(resp), r.svc.tiers.Loading())
	r.close(a)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Loading() > 0 && time.Now().Before(deadline) {
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
	r.idle()
}

func hs(base, n int) []abi.BlockHash {
	var h []abi.BlockHash
	for i := 0; i < n; i++ {
		h = append(h, hash(base+i))
	}
	return h
}

func pg(n int) []uint32 {
	var p []uint32
	for i := 0; i < n; i++ {
		p = append(p, uint32(i))
	}
	return p
}

// Two clients whose SSD runs each need most of RAM, querying in turn, both
// get their chains leased: a prefetched run is held for the session that
// asked until its next query (without that they starved each other).
func TestAlternatingPrefetchesDoNotStarveEachOther(t *testing.T) {
	blockBytes := uint64(tLayers * tPageBytes)
	spec := &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
	r := newRigSSD(t, 8*blockBytes, spec)
	a, amem := r.open()
	b, _ := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 6), pg(6)), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(10, 6), pg(6)), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(20, 8), pg(8)), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 12 {
		if time.Now().After(deadline) {
			t.Fatalf("not durable: %+v", r.svc.tiers.Counters().SSD)
		}
		time.Sleep(time.Millisecond)
	}
	qa := queryDesc(ns1, hs(0, 6)...)
	qb := queryDesc(ns1, hs(10, 6)...)
	settle := func() {
		for r.svc.tiers.Loading() > 0 {
			r.svc.Complete(64, func(uint32, abi.Message) {})
			time.Sleep(100 * time.Microsecond)
		}
	}
	okA, okB := false, false
	for i := 0; i < 50 && !(okA && okB); i++ {
		ra := r.call(a, abi.CmdQueryBundle, qa, 0)
		if status(ra) == abi.StatusOK && ra.Arg0 == 6 {
			okA = true
			r.call(a, abi.CmdRelease, nil, ra.Arg1)
		} else if status(ra) == abi.StatusOK {
			r.call(a, abi.CmdRelease, nil, ra.Arg1)
		}
		settle()
		rb := r.call(b, abi.CmdQueryBundle, qb, 0)
		if status(rb) == abi.StatusOK && rb.Arg0 == 6 {
			okB = true
			r.call(b, abi.CmdRelease, nil, rb.Arg1)
		} else if status(rb) == abi.StatusOK {
			r.call(b, abi.CmdRelease, nil, rb.Arg1)
		}
		settle()
		if i < 4 {
			t.Logf("round %d: a %v/%d b %v/%d", i, status(ra), ra.Arg0, status(rb), rb.Arg0)
		}
	}
	st := r.svc.Stats()
	t.Logf("okA=%v okB=%v prefetches=%d", okA, okB, st.SSD.Prefetches)
	if !okA || !okB {
		t.Errorf("livelock: after 50 alternating rounds a got its 6-block chain: %v, b: %v (prefetched %d blocks)", okA, okB, st.SSD.Prefetches)
	}
	r.close(a)
	r.close(b)
	r.idle()
}
