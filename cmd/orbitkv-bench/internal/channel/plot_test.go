package channel

import (
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

func TestALatencyChartRefusesASubjectWithoutItsHistogram(t *testing.T) {
	c := ChannelCharts(&Report{Hists: map[string]*latency.Hist{"back_to_back/uds": latency.Of(1000)}}, &ChannelConfig{N: 1, Subjects: []string{"uds", "futex"}})[0]
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), `--plot: channel-cdf-back-to-back.png: series "futex" has no points`) {
		t.Errorf("err = %v, want the subject named", err)
	}
}
