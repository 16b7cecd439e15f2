package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
)

// Progress goes to stderr: with --json, stdout holds one JSON object and
// nothing else, while stderr has the progress.
func TestProgressLeavesTheJSONReportAlone(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--trace", benchtest.TestTrace, "--limit", "200", "--fractions", "0.1,0.5", "--policies", "lru,slru", "--json", "--progress", "lines"}
	if err := Run(args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&stdout)
	var rep map[string]any
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON object")
	}
	// 3 repeats (the default --repeats) × 2 capacities × (lru, slru and the optimum).
	if !strings.Contains(stderr.String(), "policy: 100% (18/18 simulations) in ") {
		t.Fatalf("stderr lacks the final progress line:\n%s", stderr.String())
	}
}
