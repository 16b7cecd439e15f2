package channel

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

// The JSON shape is part of the suite's contract (bench/channel/README.md):
// {"meta": {...}, "back_to_back": {SUBJECT: {"p50_ns", "p99_ns","p999_ns","n"}},
// "per_ms": {...}, "idle_cpu_percent": X}.
func TestReportJSONHasExactlyTheIssuesKeys(t *testing.T) {
	idle := 0.25
	rep := Report{
		BackToBack:     map[string]latency.Stats{subjectOrbitKV: {P50: 1, P99: 2, P999: 3, N: 4}, subjectGRPC: {N: 1}},
		PerMs:          map[string]latency.Stats{subjectFutex: {P50: 5, P99: 6, P999: 7, N: 8}},
		IdleCPUPercent: &idle,
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got, want := benchtest.SortedKeys(top), []string{"back_to_back", "figures", "idle_cpu_percent", "meta", "per_ms", "per_ms_vs_futex", "validity"}; !slices.Equal(got, want) {
		t.Fatalf("top-level keys = %v, want %v", got, want)
	}
	var idleGot float64
	if err := json.Unmarshal(top["idle_cpu_percent"], &idleGot); err != nil || idleGot != idle {
		t.Errorf("idle_cpu_percent = %s, want %v", top["idle_cpu_percent"], idle)
	}
	for _, cadence := range []string{"back_to_back", "per_ms"} {
		var subjects map[string]map[string]json.RawMessage
		if err := json.Unmarshal(top[cadence], &subjects); err != nil {
			t.Fatalf("%s: %v", cadence, err)
		}
		for name, fields := range subjects {
			if got, want := benchtest.SortedKeys(fields), []string{"n", "p50_ns", "p999_ns", "p99_ns"}; !slices.Equal(got, want) {
				t.Errorf("%s.%s keys = %v, want %v", cadence, name, got, want)
			}
		}
	}
	var back map[string]latency.Stats
	_ = json.Unmarshal(top["back_to_back"], &back)
	if back[subjectOrbitKV] != (latency.Stats{P50: 1, P99: 2, P999: 3, N: 4}) {
		t.Errorf("back_to_back.orbitkv_ping round-tripped to %+v", back[subjectOrbitKV])
	}
}

func TestReportJSONIdleIsNullWhenNotMeasured(t *testing.T) {
	b, err := json.Marshal(Report{BackToBack: map[string]latency.Stats{}, PerMs: map[string]latency.Stats{}})
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got := string(top["idle_cpu_percent"]); got != "null" {
		t.Errorf("idle_cpu_percent = %s, want null", got)
	}
	delete(top, "meta")
	delete(top, "validity")
	delete(top, "figures")
	b, _ = json.Marshal(top)
	if want := `{"back_to_back":{},"idle_cpu_percent":null,"per_ms":{},"per_ms_vs_futex":null}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestSubjectNamesAreTheIssues(t *testing.T) {
	want := []string{"orbitkv_ping", "orbitkv_ping_iceoryx2", "shm_spin", "futex", "uds", "iceoryx2_raw", "grpc"}
	if !slices.Equal(allSubjects, want) {
		t.Errorf("subjects = %v, want %v", allSubjects, want)
	}
	t.Run("the default runs the iceoryx2 subjects only in a build that has them", func(t *testing.T) {
		got := defaultSubjects()
		for _, s := range iox2Subjects {
			if slices.Contains(got, s) != pingpong.Iceoryx2Built {
				t.Errorf("default subjects %v: %s present = %v, build has iceoryx2 = %v", got, s, !pingpong.Iceoryx2Built, pingpong.Iceoryx2Built)
			}
		}
	})
	t.Run("an iceoryx2 subject in a build without it is refused naming the reason", func(t *testing.T) {
		if pingpong.Iceoryx2Built {
			t.Skip("this build has the iceoryx2 transport")
		}
		_, err := parseChannelFlags([]string{"--subjects", subjectIox2Raw}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "iceoryx2_raw") || !strings.Contains(err.Error(), "Rust") {
			t.Errorf("parse = %v, want a refusal naming iceoryx2_raw and the Rust toolchain", err)
		}
	})
}

func TestCPUPercentIsShareOfOneCore(t *testing.T) {
	tests := []struct {
		name  string
		ticks uint64
		hz    int
		wall  time.Duration
		want  float64
	}{
		{"3 ticks at 100 Hz over 3 s is 1%", 3, 100, 3 * time.Second, 1},
		{"no ticks is 0%", 0, 100, 3 * time.Second, 0},
		{"a full core is 100%", 300, 100, 3 * time.Second, 100},
		{"a zero window reports 0 rather than dividing by zero", 5, 100, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpuPercent(tt.ticks, tt.hz, tt.wall); got != tt.want {
				t.Errorf("cpuPercent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseStatTicksCountsFieldsAfterTheName(t *testing.T) {
	// Field 14 utime = 11, field 15 stime = 22; the name holds ") (".
	stat := "1234 (orbit) (kv) S 1 1234 1234 0 -1 4194560 100 0 0 0 11 22 0 0 20 0 8 0 1000 0 0"
	got, err := managerproc.ParseStatTicks(stat)
	if err != nil || got != 33 {
		t.Errorf("parseStatTicks = %d, %v; want 33, nil", got, err)
	}
	for _, bad := range []string{"", "1234 (x S 1", "1234 (x) S 1 2", "1234 (x) S 1 1 1 0 -1 0 0 0 0 0 u s"} {
		if _, err := managerproc.ParseStatTicks(bad); err == nil {
			t.Errorf("parseStatTicks(%q) succeeded, want an error", bad)
		}
	}
}
