package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	hundred := make([]uint64, 100)
	for i := range hundred {
		hundred[i] = uint64(i + 1) // 1..100
	}
	thousand := make([]uint64, 1000)
	for i := range thousand {
		thousand[i] = uint64(i + 1)
	}
	tests := []struct {
		name     string
		sorted   []uint64
		perMille int
		want     uint64
	}{
		{"an empty set gives zero", nil, 500, 0},
		{"one sample is every percentile", []uint64{7}, 999, 7},
		{"p50 of 1..100 is the 50th value", hundred, 500, 50},
		{"p99 of 1..100 is the 99th value", hundred, 990, 99},
		{"p99.9 of 1..100 rounds the rank up to the 100th value", hundred, 999, 100},
		{"p99.9 of 1..1000 is the 999th value", thousand, 999, 999},
		{"p50 of two samples is the lower one", []uint64{3, 9}, 500, 3},
		{"p99 of two samples is the higher one", []uint64{3, 9}, 990, 9},
		{"p50 of three samples is the middle one", []uint64{1, 2, 3}, 500, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.perMille); got != tt.want {
				t.Errorf("percentile(%d per mille) = %d, want %d", tt.perMille, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndCounts(t *testing.T) {
	s := []uint64{500, 100, 300, 200, 400}
	got := summarize(s)
	want := Stats{P50: 300, P99: 500, P999: 500, N: 5}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if !slices.IsSorted(s) {
		t.Errorf("summarize left samples unsorted: %v", s)
	}
}

// The JSON shape is part of the suite's contract (bench/channel/README.md):
// {"back_to_back": {SUBJECT: {"p50_ns", "p99_ns","p999_ns","n"}},
// "per_ms": {...}, "idle_cpu_percent": X}.
func TestReportJSONHasExactlyTheIssuesKeys(t *testing.T) {
	idle := 0.25
	rep := Report{
		BackToBack:     map[string]Stats{subjectOrbitKV: {P50: 1, P99: 2, P999: 3, N: 4}, subjectGRPC: {N: 1}},
		PerMs:          map[string]Stats{subjectFutex: {P50: 5, P99: 6, P999: 7, N: 8}},
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
	if got, want := sortedKeys(top), []string{"back_to_back", "idle_cpu_percent", "per_ms"}; !slices.Equal(got, want) {
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
			if got, want := sortedKeys(fields), []string{"n", "p50_ns", "p999_ns", "p99_ns"}; !slices.Equal(got, want) {
				t.Errorf("%s.%s keys = %v, want %v", cadence, name, got, want)
			}
		}
	}
	var back map[string]Stats
	_ = json.Unmarshal(top["back_to_back"], &back)
	if back[subjectOrbitKV] != (Stats{P50: 1, P99: 2, P999: 3, N: 4}) {
		t.Errorf("back_to_back.orbitkv_ping round-tripped to %+v", back[subjectOrbitKV])
	}
}

func TestReportJSONIdleIsNullWhenNotMeasured(t *testing.T) {
	b, err := json.Marshal(Report{BackToBack: map[string]Stats{}, PerMs: map[string]Stats{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"back_to_back":{},"per_ms":{},"idle_cpu_percent":null}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestSubjectNamesAreTheIssues(t *testing.T) {
	want := []string{"orbitkv_ping", "shm_spin", "futex", "uds", "grpc"}
	if !slices.Equal(allSubjects, want) {
		t.Errorf("subjects = %v, want %v", allSubjects, want)
	}
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
	got, err := parseStatTicks(stat)
	if err != nil || got != 33 {
		t.Errorf("parseStatTicks = %d, %v; want 33, nil", got, err)
	}
	for _, bad := range []string{"", "1234 (x S 1", "1234 (x) S 1 2", "1234 (x) S 1 1 1 0 -1 0 0 0 0 0 u s"} {
		if _, err := parseStatTicks(bad); err == nil {
			t.Errorf("parseStatTicks(%q) succeeded, want an error", bad)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}
