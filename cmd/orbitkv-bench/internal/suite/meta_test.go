package suite

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
)

func TestParseCPUInfoFindsTheModelAndCountsProcessors(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		wantModel string
		wantCores int
	}{
		{"two x86 processors", "processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n", "AMD EPYC", 2},
		{"an arm64 text without a model name", "processor\t: 0\nBogoMIPS\t: 50.00\n", "", 1},
		{"an empty text", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, cores := parseCPUInfo(tt.text)
			if model != tt.wantModel || cores != tt.wantCores {
				t.Errorf("parseCPUInfo = %q, %d; want %q, %d", model, cores, tt.wantModel, tt.wantCores)
			}
		})
	}
}

func TestReportMetaCarriesTheRunsFacts(t *testing.T) {
	start := time.Date(2026, 12, 1, 17, 30, 5, 999, time.FixedZone("CET", 3600))
	args := []string{"--n", "10", "--json"}
	m := newMeta("channel", args, 3, start)
	args[0] = "changed"
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"commit", "cores", "cpu_model", "flags", "go_version", "kernel", "repeats", "schema", "suite", "timestamp", "version"}
	if keys := benchtest.SortedKeys(got); !slices.Equal(keys, want) {
		t.Errorf("meta keys = %v, want %v", keys, want)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"the schema is the current one", m.Schema == Schema},
		{"the suite is named", m.Suite == "channel"},
		{"the flags are a copy of the arguments as given", slices.Equal(m.Flags, []string{"--n", "10", "--json"})},
		{"the timestamp is RFC 3339 UTC in whole seconds", m.Timestamp == "2026-12-01T16:30:05Z"},
		{"the kernel is uname's, starting with Linux", strings.HasPrefix(m.Kernel, "Linux ")},
		{"the cores are counted", m.Cores >= 1},
		{"the version and commit are filled", m.Version != "" && m.Commit != ""},
		{"the repeats are recorded", m.Repeats == 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("meta = %+v", m)
			}
		})
	}
}
