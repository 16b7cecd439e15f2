package query

import (
	"testing"
)

func TestProbeTableFindsEveryKeyAndNoOther(t *testing.T) {
	for _, n := range []int{1, 2, 1000, 4097} {
		p := newProbeTable(n)
		if got := uint64(len(p.slots)); got < 2*uint64(n) || got&(got-1) != 0 {
			t.Fatalf("n=%d: %d slots, want a power of two ≥ %d", n, got, 2*n)
		}
		for i, k := range p.keys {
			if want := p.keys[(i+1)%n]; p.find(k) != want {
				t.Fatalf("n=%d: key %d finds %#x, want %#x", n, i, p.find(k), want)
			}
		}
		if v := p.find(splitmix64(uint64(n) + 1)); v != 0 {
			t.Errorf("n=%d: a key never inserted finds %#x, want 0", n, v)
		}
		if _, err := p.independentNs(2); err != nil {
			t.Errorf("n=%d: independent probe: %v", n, err)
		}
		if _, err := p.serialNs(2); err != nil {
			t.Errorf("n=%d: serial probe: %v", n, err)
		}
	}
}

// BenchmarkProbe is the query suite's yardstick over 1M keys (probeTable):
// ns/key of independent lookups and of the chase.
func BenchmarkProbe(b *testing.B) {
	p := newProbeTable(1 << 20)
	for _, mode := range []struct {
		name string
		f    func(int) (float64, error)
	}{{"mode=independent", p.independentNs}, {"mode=serial", p.serialNs}} {
		b.Run(mode.name, func(b *testing.B) {
			var ns float64
			for range b.N {
				v, err := mode.f(1)
				if err != nil {
					b.Fatal(err)
				}
				ns = v
			}
			b.ReportMetric(ns, "ns/key")
		})
	}
}
