package index

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// ByNamespace counts the sealed blocks of each namespace and their bytes,
// leaves publishing blocks out, names each namespace's domain, and stops
// counting a block once it is removed.
func TestByNamespaceCountsSealedBlocksPerNamespace(t *testing.T) {
	x := New(evict.NewLRU())
	a, b := abi.Namespace{1}, abi.Namespace{2}
	key := func(ns abi.Namespace, i uint64) Key {
		k := Key{NS: ns}
		binary.LittleEndian.PutUint64(k.Hash[:], i)
		return k
	}
	var first *Block
	for i := range uint64(3) {
		blk := x.Insert(key(a, i), 100, 1, 0, nil)
		x.Seal(blk)
		if i == 0 {
			first = blk
		}
	}
	blk := x.Insert(key(b, 0), 7, 1, 0, nil)
	x.Assign(blk, 3)
	x.Seal(blk)
	x.Insert(key(b, 1), 1000, 1, 0, nil) // publishing: not resident yet

	got := x.ByNamespace()
	if len(got) != 2 {
		t.Fatalf("ByNamespace = %d namespaces, want 2", len(got))
	}
	if u := got[a]; *u != (NamespaceUse{Blocks: 3, Bytes: 300}) {
		t.Errorf("namespace a: %+v, want 3 blocks of 300 bytes, no domain", *u)
	}
	if u := got[b]; *u != (NamespaceUse{Blocks: 1, Bytes: 7, Domain: 3}) {
		t.Errorf("namespace b: %+v, want the 1 sealed block of 7 bytes in domain 3", *u)
	}
	x.Remove(first)
	if u := x.ByNamespace()[a]; u.Blocks != 2 || u.Bytes != 200 {
		t.Errorf("namespace a after a removal: %+v, want 2 blocks of 200 bytes", *u)
	}
}

// BenchmarkByNamespace walks 1M sealed blocks of 64 random namespaces, inserted
// interleaved (the table's order mixes namespaces anyway): ns/op is the
// cost of one operator namespace listing's RAM part, which the
// dispatcher spends between requests.
func BenchmarkByNamespace(b *testing.B) {
	const resident, namespaces = 1 << 20, 64
	pol, _ := evict.New(evict.Default, resident)
	x := New(pol)
	rng := rand.New(rand.NewPCG(1, 2))
	var nss [namespaces]abi.Namespace
	for i := range nss {
		binary.LittleEndian.PutUint64(nss[i][:], rng.Uint64())
		binary.LittleEndian.PutUint64(nss[i][8:], rng.Uint64())
	}
	for i := range resident {
		k := Key{NS: nss[i%namespaces]}
		binary.LittleEndian.PutUint64(k.Hash[:], uint64(i)*0x9e3779b97f4a7c15)
		x.Seal(x.Insert(k, 64, 1, 0, nil))
	}
	b.ResetTimer()
	for range b.N {
		if got := x.ByNamespace(); len(got) != namespaces {
			b.Fatalf("ByNamespace = %d namespaces, want %d", len(got), namespaces)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*resident), "ns/block")
}
