package index

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// BenchmarkPrefix looks up chains of 10,000 hashes among 1M sealed blocks
// (each chain elsewhere in the set, so lookups miss the CPU caches as a
// query for an arbitrary chain would); ns/op divided by 10,000 is the cost
// per hash. BenchmarkPrefixPin adds what a lease adds: PinAll and UnpinAll
// over the blocks (the pin count and the deferred access, in the block's first
// cache line; the policy is not called).
func BenchmarkPrefix(b *testing.B)    { benchPrefix(b, false) }
func BenchmarkPrefixPin(b *testing.B) { benchPrefix(b, true) }

func benchPrefix(b *testing.B, pin bool) {
	const resident, chain = 1 << 20, 10000
	pol, _ := evict.New(evict.Default, resident)
	x := New(pol)
	ns := abi.Namespace{1}
	h := func(i int) abi.BlockHash {
		var k abi.BlockHash
		binary.LittleEndian.PutUint64(k[:], uint64(i%resident)*0x9e3779b97f4a7c15)
		return k
	}
	for i := 0; i < resident; i++ {
		x.Seal(x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, nil))
	}
	// The hash list of every chain: the resident keys in insertion order,
	// then the first chain's again, so each chain is one slice of it.
	hashes := chainBytes(resident+chain, h)
	out := make([]*Block, 0, chain)
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
}

// BenchmarkPrefixScattered is BenchmarkPrefix with the resident blocks
// inserted in a shuffled order, so no two consecutive hashes of a chain
// share a slab and every hash goes through the table (Prefix's follow
// never matches): the cost of a chain whose blocks were published apart.
func BenchmarkPrefixScattered(b *testing.B) {
	const resident, chain = 1 << 20, 10000
	pol, _ := evict.New(evict.Default, resident)
	x := New(pol)
	ns := abi.Namespace{1}
	h := func(i int) abi.BlockHash {
		var k abi.BlockHash
		binary.LittleEndian.PutUint64(k[:], uint64(i%resident)*0x9e3779b97f4a7c15)
		return k
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(resident)
	for _, i := range order {
		x.Seal(x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, nil))
	}
	hashes := chainBytes(resident+chain, h)
	out := make([]*Block, 0, chain)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		base := (it * chain) % resident
		out = x.Prefix(ns, hashes[base*abi.HashSize:(base+chain)*abi.HashSize], out[:0])
		if len(out) != chain {
			b.Fatalf("prefix %d", len(out))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chain), "ns/hash")
}
