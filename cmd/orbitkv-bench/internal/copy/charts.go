package copy

import (
	"fmt"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
)

// copyCharts is copy-throughput.png: Publish and Restore GB/s against
// block size beside the memcpy baseline, each point the median of the
// repeats with a bar over their range.
func copyCharts(rep *copyReport) []chart.Line {
	var sizes []uint64
	pub, res, mem := chart.ThroughputSubject{Name: "Publish"}, chart.ThroughputSubject{Name: "Restore"},
		chart.ThroughputSubject{Name: "memcpy (baseline)", Reference: true}
	for _, s := range rep.Sizes {
		sizes = append(sizes, s.BlockBytes)
		pub.GBps, res.GBps, mem.GBps = append(pub.GBps, s.PublishGBps), append(res.GBps, s.RestoreGBps), append(mem.GBps, s.MemcpyGBps)
	}
	subjects := []chart.ThroughputSubject{pub, res, mem}
	note := chart.WithSpread(&rep.Head, subjects, []string{"publish_gbps", "restore_gbps", "memcpy_gbps"}, len(sizes),
		func(i int) string { return humanize.IBytes(sizes[i]) })
	title := fmt.Sprintf("orbitkv-bench copy: %d blocks per batch over %d layers, median of %d batches%s", rep.Blocks, rep.Layers, rep.Iters, note)
	return []chart.Line{chart.Throughput("copy-throughput.png", title, sizes, subjects)}
}
