package ssd

import (
	"fmt"
	"slices"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
)

// ssdCharts is ssd-throughput-KIND.png for each destination memory kind
// measured: Store.Read and Store.Write GB/s against block size beside the
// two O_DIRECT baselines.
func ssdCharts(rep *ssdReport) []chart.Line {
	var kinds []string
	for _, s := range rep.Sizes {
		if !slices.Contains(kinds, s.Memory) {
			kinds = append(kinds, s.Memory)
		}
	}
	var charts []chart.Line
	for _, kind := range kinds {
		var sizes []uint64
		read, write := chart.ThroughputSubject{Name: "Store.Read"}, chart.ThroughputSubject{Name: "Store.Write (demotion)"}
		base := chart.ThroughputSubject{Name: "O_DIRECT sequential read (baseline)", Reference: true}
		reused := chart.ThroughputSubject{Name: "O_DIRECT into one reused buffer (dd-style)", Reference: true}
		for _, s := range rep.Sizes {
			if s.Memory != kind {
				continue
			}
			sizes = append(sizes, s.BlockBytes)
			read.GBps, write.GBps = append(read.GBps, s.ReadGBps), append(write.GBps, s.WriteGBps)
			base.GBps, reused.GBps = append(base.GBps, s.BaselineGBps), append(reused.GBps, s.ReusedBufferGBps)
		}
		subjects := []chart.ThroughputSubject{read, write, base, reused}
		note := chart.WithSpread(&rep.Head, subjects, []string{"read_gbps", "write_gbps", "baseline_gbps", "reused_buffer_gbps"}, len(sizes),
			func(i int) string { return humanize.IBytes(sizes[i]) + "/" + kind })
		title := fmt.Sprintf("orbitkv-bench ssd: into %s memory, %d I/O workers, median of %d passes%s", kind, rep.IOWorkers, rep.Iters, note)
		charts = append(charts, chart.Throughput("ssd-throughput-"+kind+".png", title, sizes, subjects))
	}
	return charts
}
