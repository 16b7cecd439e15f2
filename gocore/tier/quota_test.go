package tier

import (
	"os"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Domains of the quota tests: qA has the quotas, qB none.
const (
	qA, qB = index.Domain(1), index.Domain(2)
	qBlock = 2 * pChunk // bytes of a block
	qQuota = 4 * qBlock // qA's RAM quota: 4 blocks
)

var (
	nsA = abi.Namespace{0xa}
	nsB = abi.Namespace{0xb}
)

func qKey(ns abi.Namespace, i int) index.Key {
	return index.Key{NS: ns, Hash: abi.BlockHash{byte(i), byte(i >> 8), 0x51}}
}

// newQuotaTiers is a RAM tier of 64 blocks (and an SSD tier of ssdBlocks
// slots when ssdBlocks > 0) with qA's RAM quota qQuota and SSD quota
// ssdQuota.
func newQuotaTiers(t *testing.T, ssdBlocks int, ssdQuota uint64) *Tiers {
	t.Helper()
	spec := Spec{RAM: ram.Spec{CapacityBytes: 64 * qBlock, ChunkBytes: pChunk}, Ring: func() {}}
	if ssdBlocks > 0 {
		dir, err := os.MkdirTemp("/var/tmp", "orbitkv-tier-quota-")
		if err != nil {
			t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		spec.SSD = &ssd.Spec{Dir: dir, CapacityBytes: uint64(ssdBlocks) * (ssd.HeaderBytes + qBlock), SlotBytes: qBlock,
			Admission: ssd.AdmitAll}
	}
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	ts.SetQuota(qA, qQuota, ssdQuota)
	return ts
}

// publish places blocks [from, to) of ns for domain d in one batch and
// seals them; false when Place refused.
func publish(ts *Tiers, d index.Domain, ns abi.Namespace, from, to int) bool {
	fresh, _, ok := ts.Place(to-from, func(i int) index.Key { return qKey(ns, from+i) }, qBlock, 1, d, nil)
	for _, b := range fresh {
		if b != nil {
			ts.Seal(b)
		}
	}
	return ok
}

func TestARAMQuotaKeepsATenantsBlocksWithinItAndLeavesAnothersResident(t *testing.T) {
	ts := newQuotaTiers(t, 0, 0)
	if !publish(ts, qB, nsB, 0, 16) {
		t.Fatal("B's publish refused")
	}
	// A publishes 3 quotas' worth, in batches of 1 and 2 blocks.
	for i, b := 0, 0; i < 12; b++ {
		n := 1 + b%2
		if !publish(ts, qA, nsA, i, i+n) {
			t.Fatalf("A's publish of blocks %d..%d refused", i, i+n)
		}
		if got := ts.DomainStats(qA).RAMBytes; got > qQuota {
			t.Fatalf("after A's block %d: A holds %d bytes in RAM, over its quota %d", i+n-1, got, qQuota)
		}
		i += n
	}
	for i := 0; i < 16; i++ {
		if ts.Index().Lookup(qKey(nsB, i)) == nil {
			t.Fatalf("B's block %d was evicted by A's quota", i)
		}
	}
	for i := 0; i < 12; i++ {
		if resident := ts.Index().Lookup(qKey(nsA, i)) != nil; resident != (i >= 8) {
			t.Fatalf("A's block %d resident %v; want A's 4 newest resident, the rest evicted oldest first", i, resident)
		}
	}
	st := ts.DomainStats(qA)
	if st.RAMBytes != qQuota || st.RAMQuota != qQuota || st.RAMRefused != 0 {
		t.Fatalf("A's stats %+v, want %d bytes of quota %d, nothing refused", st, qQuota, qQuota)
	}
	if got := ts.DomainStats(qB); got.RAMBytes != 16*qBlock || got.RAMQuota != 0 {
		t.Fatalf("B's stats %+v, want %d bytes and no quota", got, 16*qBlock)
	}
	if ts.Counters().Evictions != 8 {
		t.Fatalf("%d evictions, want A's 8 oldest", ts.Counters().Evictions)
	}
	if publish(ts, qA, nsA, 100, 105) || ts.DomainStats(qA).RAMRefused != 1 {
		t.Fatal("a publish of 5 blocks, more than the whole quota, was not refused and counted")
	}
}

func TestTheRAMQuotaNeverEvictsPinnedBlocks(t *testing.T) {
	ts := newQuotaTiers(t, 0, 0)
	publish(ts, qA, nsA, 0, 4)
	var pinned []*index.Block
	for i := 0; i < 4; i++ {
		pinned = append(pinned, ts.Index().Lookup(qKey(nsA, i)))
	}
	ts.Index().PinAll(pinned)
	if publish(ts, qA, nsA, 4, 5) {
		t.Fatal("a publish over the quota with every block of A pinned was stored")
	}
	for i := 0; i < 4; i++ {
		if ts.Index().Lookup(qKey(nsA, i)) == nil {
			t.Fatalf("pinned block %d was evicted", i)
		}
	}
	if ts.Index().Contains(qKey(nsA, 4)) || ts.DomainStats(qA).RAMRefused != 1 || ts.DomainStats(qA).RAMBytes != qQuota {
		t.Fatalf("refused publish: stats %+v, want nothing stored and 1 refusal", ts.DomainStats(qA))
	}
	// Two pinned, two not: a publish of 3 blocks needs 3 evictable, finds
	// 2, and evicts nothing.
	ts.Index().UnpinAll(pinned[2:])
	if publish(ts, qA, nsA, 4, 7) || ts.Index().Lookup(qKey(nsA, 2)) == nil || ts.Index().Lookup(qKey(nsA, 3)) == nil {
		t.Fatal("a publish that could not fit evicted blocks or was stored")
	}
	// A publish of 2 evicts the two unpinned ones, never the pinned.
	if !publish(ts, qA, nsA, 4, 6) {
		t.Fatal("a publish that fits after evicting A's unpinned blocks was refused")
	}
	for i, want := range []bool{true, true, false, false, true, true} {
		if got := ts.Index().Lookup(qKey(nsA, i)) != nil; got != want {
			t.Fatalf("block %d resident %v, want %v", i, got, want)
		}
	}
	ts.Index().UnpinAll(pinned[:2])
}

func TestAnSSDQuotaKeepsATenantsDemotedBlocksWithinIt(t *testing.T) {
	const ssdQuota = 3 * (ssd.HeaderBytes + qBlock) // 3 slots
	ts := newQuotaTiers(t, 48, ssdQuota)
	store := ts.ssd.store
	durable := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for store.Stats().PendingWrites > 0 || store.Stats().Writes < want {
			if time.Now().After(deadline) {
				t.Fatalf("SSD writes: %+v, want %d durable", store.Stats(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// B's 8 blocks go to SSD (an operator drop demotes them).
	publish(ts, qB, nsB, 0, 8)
	ts.Drop(func(ns abi.Namespace) bool { return ns == nsB }, false)
	durable(8)
	// A publishes 16 blocks: its RAM quota evicts (and demotes) 12. Each
	// demotion is let become durable before the next: a block still being
	// written cannot be deleted for the quota (see the end of the test).
	for i := 0; i < 16; i++ {
		publish(ts, qA, nsA, i, i+1)
		if got := ts.DomainStats(qA).SSDBytes; got > ssdQuota {
			t.Fatalf("after A's block %d: A holds %d bytes on SSD, over its quota %d", i, got, ssdQuota)
		}
		durable(8 + uint64(max(i-3, 0)))
	}
	for i := 0; i < 8; i++ {
		if _, ok := store.Contains(ssdKey(qKey(nsB, i))); !ok {
			t.Fatalf("B's SSD block %d was dropped by A's quota", i)
		}
	}
	for i := 0; i < 12; i++ {
		_, ok := store.Contains(ssdKey(qKey(nsA, i)))
		if ok != (i >= 9) {
			t.Fatalf("A's block %d on SSD %v; want its 3 newest demoted there, the older deleted oldest first", i, ok)
		}
	}
	if st := ts.DomainStats(qA); st.SSDBytes != ssdQuota || st.SSDQuota != ssdQuota || st.SSDRefused != 0 {
		t.Fatalf("A's stats %+v, want %d SSD bytes of quota %d", st, ssdQuota, ssdQuota)
	}
	if got := store.Stats().ClassEvictions; got != 9 {
		t.Fatalf("%d SSD blocks deleted for the quota, want 9", got)
	}
}

func TestARAMQuotaCountsTheChunksABlockOccupiesNotItsBytes(t *testing.T) {
	ts := newQuotaTiers(t, 0, 0)
	if !publish(ts, qB, nsB, 0, 16) {
		t.Fatal("B's publish refused")
	}
	// 64-byte blocks: each occupies a whole chunk, so A's quota of
	// qQuota/pChunk chunks holds that many of them, however few bytes.
	const tiny, fit = 64, qQuota / pChunk
	for i := range 4 * fit {
		fresh, _, ok := ts.Place(1, func(int) index.Key { return qKey(nsA, i) }, tiny, 1, qA, nil)
		if !ok {
			t.Fatalf("A's tiny block %d refused", i)
		}
		ts.Seal(fresh[0])
		if got := ts.DomainStats(qA).RAMBytes; got > qQuota {
			t.Fatalf("after A's tiny block %d: A occupies %d bytes of RAM, over its quota %d", i, got, qQuota)
		}
	}
	resident := 0
	for i := range 4 * fit {
		if ts.Index().Lookup(qKey(nsA, i)) != nil {
			resident++
		}
	}
	if resident != fit || ts.DomainStats(qA).RAMBytes != fit*pChunk {
		t.Fatalf("%d of A's tiny blocks resident, occupying %d bytes; want %d, one chunk each", resident, ts.DomainStats(qA).RAMBytes, fit)
	}
	for i := range 16 {
		if ts.Index().Lookup(qKey(nsB, i)) == nil {
			t.Fatalf("B's block %d was evicted by A's tiny blocks", i)
		}
	}
}
