package hugepages_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/hugepages"
	"github.com/orbitkv/orbitkv/hugepages/hugepagestest"
)

// BenchmarkGather copies chunks at random chunk-aligned offsets of a
// 256 MiB arena into a 4 MiB buffer, the access pattern of a Restore whose
// block frames are scattered over the RAM tier; both backings run in one
// process, hugetlb first only when the pool can be lent (root).
func BenchmarkGather(b *testing.B) {
	const arenaBytes = 256 << 20
	for _, chunk := range []int{4 << 10, 16 << 10, 256 << 10} {
		for _, mode := range []hugepages.Mode{hugepages.Require, hugepages.Off} {
			name := map[hugepages.Mode]string{hugepages.Require: "hugetlb", hugepages.Off: "4KiB"}[mode]
			b.Run(fmt.Sprintf("chunk=%dKiB/pages=%s", chunk>>10, name), func(b *testing.B) {
				if mode == hugepages.Require {
					hugepagestest.Reserve(b, arenaBytes/hugepages.HugePageSize)
				}
				a, err := hugepages.New(hugepages.Spec{Bytes: arenaBytes, Mode: mode, Name: "okv-test-bench", Prefault: true})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				src, dst := a.Bytes(), make([]byte, 4<<20)
				for i := range src {
					src[i] = byte(i)
				}
				r := rand.New(rand.NewPCG(1, 2))
				offs := make([]int, 1<<16)
				for i := range offs {
					offs[i] = r.IntN(arenaBytes/chunk) * chunk
				}
				per := len(dst) / chunk
				b.SetBytes(int64(len(dst)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					for j := range per {
						o := offs[(i*per+j)&(len(offs)-1)]
						copy(dst[j*chunk:(j+1)*chunk], src[o:o+chunk])
					}
				}
			})
		}
	}
}
