package index

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// BenchmarkPrefix looks up chains of 10,000 hashes among 1M sealed blocks
// inserted in chain order, as publishes of whole chains store them (each
// chain elsewhere in the set, so lookups miss the CPU caches as a query
// for an arbitrary chain would); ns/op divided by 10,000 is the cost per
// hash. BenchmarkPrefixPin adds what a lease adds: PinAll and UnpinAll
// over the blocks (the pin count and the deferred access, in the block's
// first cache line; the policy is not called).
func BenchmarkPrefix(b *testing.B)    { benchPrefix(b, inOrder, false) }
func BenchmarkPrefixPin(b *testing.B) { benchPrefix(b, inOrder, true) }

// BenchmarkPrefixScattered is BenchmarkPrefix with the resident blocks
// inserted one at a time in a shuffled order, so a chain's next block is
// almost never its slab-mate and nearly every hash goes through the table:
// the cost of a chain whose blocks were published apart.
func BenchmarkPrefixScattered(b *testing.B) { benchPrefix(b, runsOf(1, 1), false) }

// BenchmarkPrefixShortRuns inserts the resident blocks in runs of 1 to 8
// consecutive chain positions (random lengths), the runs shuffled: a
// chain published a few blocks at a time between other publishes, as
// conversation turns are.
func BenchmarkPrefixShortRuns(b *testing.B) { benchPrefix(b, runsOf(1, 8), false) }

// inOrder is the insertion order 0..n-1.
func inOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// runsOf returns an insertion order of 0..n-1 in runs of lo..hi
// consecutive positions (uniform lengths, a fixed seed), the runs
// shuffled.
func runsOf(lo, hi int) func(n int) []int {
	return func(n int) []int {
		rng := rand.New(rand.NewPCG(1, 2))
		var runs [][2]int
		for i := 0; i < n; {
			l := min(lo+rng.IntN(hi-lo+1), n-i)
			runs = append(runs, [2]int{i, l})
			i += l
		}
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		order := make([]int, 0, n)
		for _, r := range runs {
			for j := range r[1] {
				order = append(order, r[0]+j)
			}
		}
		return order
	}
}

func benchPrefix(b *testing.B, insertOrder func(n int) []int, pin bool) {
	const resident, chain = 1 << 20, 10000
	pol, _ := evict.New(evict.Default, resident)
	x := New(pol)
	ns := abi.Namespace{1}
	h := func(i int) abi.BlockHash {
		var k abi.BlockHash
		binary.LittleEndian.PutUint64(k[:], uint64(i%resident)*0x9e3779b97f4a7c15)
		return k
	}
	for _, i := range insertOrder(resident) {
		x.Seal(x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, nil))
	}
	// The hash list of every chain: the resident keys in chain order,
	// then the first chain's again, so each chain is one slice of it.
	hashes := chainBytes(resident+chain, h)
	out := make([]*Block, 0, chain)
	byAddress := x.Stats().ByAddress
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		base := (it * chain) % resident
		out = x.Prefix(ns, hashes[base*abi.HashSize:(base+chain)*abi.HashSize], out[:0])
		if len(out) != chain {
			b.Fatalf("prefix %d", len(out))
		}
		if pin {
			x.PinAll(out)
			x.UnpinAll(out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chain), "ns/hash")
	b.ReportMetric(float64(x.Stats().ByAddress-byAddress)/float64(b.N*chain), "by-address/hash")
}

// BenchmarkPinUnpin is the lease path alone: PinAll then UnpinAll over
// chains of 10,000 of 1M sealed blocks of no domain (no tenants), and Pin
// then Unpin of each block one at a time; ns/hash is per block and pair.
func BenchmarkPinUnpin(b *testing.B) {
	const resident, chain = 1 << 20, 10000
	pol, _ := evict.New(evict.Default, resident)
	x := New(pol)
	all := make([]*Block, resident)
	for i := range all {
		var k Key
		binary.LittleEndian.PutUint64(k.Hash[:], uint64(i))
		all[i] = x.Insert(k, 64, 1, 0, nil)
		x.Seal(all[i])
	}
	b.Run("All", func(b *testing.B) {
		for it := 0; it < b.N; it++ {
			bs := all[(it*chain)%(resident-chain):][:chain]
			x.PinAll(bs)
			x.UnpinAll(bs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chain), "ns/hash")
	})
	b.Run("One", func(b *testing.B) {
		for it := 0; it < b.N; it++ {
			for _, blk := range all[(it*chain)%(resident-chain):][:chain] {
				x.Pin(blk)
				x.Unpin(blk)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chain), "ns/hash")
	})
}
