package ram

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/hugepages"
)

// BenchmarkAdopt adopts a RAM tier whose every chunk holds a sealed block
// of 64 KiB (4 chunks of 16 KiB), as a successor does after an upgrade or
// a crash: mapping both memfds and scanning the ledger (scan_s, before
// the Manager serves), then verifying every block's checksum on GOMAXPROCS
// goroutines, which faults the blocks' pages in (verify_s, while it
// serves); on 4 KiB pages and, where the 2 MiB pool has the pages
// (vm.nr_hugepages), on hugetlb pages.
func BenchmarkAdopt(b *testing.B) {
	for _, pages := range []hugepages.Mode{hugepages.Off, hugepages.Require} {
		for _, size := range []uint64{256 << 20, 1 << 30, 4 << 30} {
			benchAdopt(b, pages, size)
		}
	}
}

func benchAdopt(b *testing.B, pages hugepages.Mode, size uint64) {
	name := map[hugepages.Mode]string{hugepages.Off: "4KiB", hugepages.Require: "hugetlb"}[pages]
	{
		b.Run(fmt.Sprintf("pages=%s/tier=%dMiB", name, size>>20), func(b *testing.B) {
			s := Spec{CapacityBytes: size, ChunkBytes: 16 << 10, Prefault: true, Hugepages: pages}
			a, err := New(s)
			if err != nil {
				b.Skipf("no %d MiB here: %v", size>>20, err)
			}
			defer a.Close()
			const block = 64 << 10
			for i := uint64(0); i < size/block; i++ {
				ids, err := a.Alloc(nil, 4)
				if err != nil {
					b.Fatal(err)
				}
				for _, id := range ids {
					c := a.Chunk(id)
					for j := 0; j < len(c); j += 4096 {
						c[j] = byte(i + uint64(j))
					}
				}
				m := BlockMeta{Bytes: block, Layers: 4}
				m.Hash[0], m.Hash[1], m.Hash[2] = byte(i), byte(i>>8), byte(i>>16)
				a.Seal(ids, m)
			}
			b.ResetTimer()
			var took, verify float64
			for range b.N {
				h, err := a.Dup()
				if err != nil {
					b.Fatal(err)
				}
				s.Handed = &h
				c, err := New(s)
				if err != nil {
					b.Fatal(err)
				}
				ad := c.Adoption()
				if ad.Refused != nil || ad.Count != int(size/block) {
					b.Fatalf("adopted %d blocks of %d: %v", ad.Count, size/block, ad.Refused)
				}
				took += ad.Took.Seconds()
				// The tiers verify on GOMAXPROCS goroutines (gocore/tier, adopt.go).
				start := time.Now()
				var wg sync.WaitGroup
				var bad atomic.Int64
				workers := runtime.GOMAXPROCS(0)
				for w := range workers {
					wg.Go(func() {
						for i := w; i < len(ad.Blocks); i += workers {
							if !c.Verify(&ad.Blocks[i]) {
								bad.Add(1)
							}
						}
					})
				}
				wg.Wait()
				verify += time.Since(start).Seconds()
				if bad.Load() != 0 {
					b.Fatalf("%d blocks failed their checksum", bad.Load())
				}
				c.Close()
			}
			b.ReportMetric(took/float64(b.N), "scan_s")
			b.ReportMetric(verify/float64(b.N), "verify_s")
			b.SetBytes(int64(size))
		})
	}
}
