package catalog

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

func BenchmarkAdvertise(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("hashes=%d", n), func(b *testing.B) {
			c := offline("self")
			c.budget = 1 << 30
			hs := randomHashes(rand.New(rand.NewPCG(1, 1)), n)
			ns := abi.Namespace{1}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Advertise(ns, hs)
				c.Withdraw(ns, hs)
			}
		})
	}
}

func BenchmarkOwners(b *testing.B) {
	const entries = 1 << 18
	c := offline("self")
	ns := abi.Namespace{1}
	hs := randomHashes(rand.New(rand.NewPCG(2, 2)), entries)
	for _, node := range []string{"a", "b"} {
		putMember(c, node, 1)
		byShard := map[int][]abi.BlockHash{}
		for _, h := range hs {
			byShard[shardOf(ns, h, 64)] = append(byShard[shardOf(ns, h, 64)], h)
		}
		for s, l := range byShard {
			putShard(c, node, 1, 64, s, groupsOf(entriesOf(ns, l))...)
		}
	}
	miss := randomHashes(rand.New(rand.NewPCG(3, 3)), 1024)
	b.Run(fmt.Sprintf("hit/entries=%d", entries), func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if len(c.Owners(ns, hs[i%entries])) != 2 {
				b.Fatal("not two owners")
			}
		}
	})
	b.Run(fmt.Sprintf("miss/entries=%d", entries), func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if c.Owners(ns, miss[i%len(miss)]) != nil {
				b.Fatal("an owner")
			}
		}
	})
}

func entriesOf(ns abi.Namespace, hs []abi.BlockHash) []entry {
	es := make([]entry, len(hs))
	for i, h := range hs {
		es[i] = entry{ns, h}
	}
	return es
}
