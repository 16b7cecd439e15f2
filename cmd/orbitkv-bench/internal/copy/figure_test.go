package copy

import (
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestMedianOverSetsEveryFieldAndNamesTheFigures(t *testing.T) {
	reps := []copySize{{BlockBytes: 1 << 20, PublishGBps: 10, MemcpyGBps: 12}, {BlockBytes: 1 << 20, PublishGBps: 14, MemcpyGBps: 11}, {BlockBytes: 1 << 20, PublishGBps: 12, MemcpyGBps: 13}}
	got, figs := suite.MedianOver("1.0 MiB", reps, copyFields)
	if got.PublishGBps != 12 || got.MemcpyGBps != 12 || got.BlockBytes != 1<<20 {
		t.Errorf("combined = %+v, want the medians and the first repeat's other fields", got)
	}
	if len(figs) != len(copyFields) || figs[1].Name != "1.0 MiB/publish_gbps" || figs[1].Min != 10 || figs[1].Max != 14 {
		t.Errorf("figures = %+v", figs)
	}
}
