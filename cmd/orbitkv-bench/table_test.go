package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// checkGolden compares got with testdata/name, which -update rewrites
// first.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}

func TestTableMatchesGolden(t *testing.T) {
	idle := 0.33
	rep := &Report{
		BackToBack: map[string]Stats{
			subjectOrbitKV: {P50: 1200, P99: 4800, P999: 9100, N: 100000},
			subjectShmSpin: {P50: 470, P99: 650, P999: 20190, N: 100000},
			subjectFutex:   {P50: 40410, P99: 68090, P999: 116760, N: 100000},
			subjectUDS:     {P50: 47480, P99: 65470, P999: 91030, N: 100000},
			subjectGRPC:    {P50: 166000, P99: 303990, P999: 874600, N: 100000},
		},
		PerMs: map[string]Stats{
			subjectOrbitKV: {P50: 7500, P99: 13000, P999: 20000, N: 2000},
			subjectFutex:   {P50: 7000, P99: 12630, P999: 20180, N: 2000},
		},
		IdleCPUPercent: &idle,
	}
	var got bytes.Buffer
	if err := writeTable(&got, "orbitkv-bench channel: fixture", rep, allSubjects); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "channel_table.golden", got.Bytes())
}

func TestTableWithoutOrbitKVHasNoRatios(t *testing.T) {
	rep := &Report{BackToBack: map[string]Stats{subjectUDS: {P50: 1000, N: 1}}, PerMs: map[string]Stats{}}
	var got bytes.Buffer
	if err := writeTable(&got, "", rep, []string{subjectUDS}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got.Bytes(), []byte("x ")) || bytes.Contains(got.Bytes(), []byte("targets")) {
		t.Errorf("table without orbitkv_ping shows ratios or targets:\n%s", got.String())
	}
}
