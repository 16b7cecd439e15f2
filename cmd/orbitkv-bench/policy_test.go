package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

func TestPolicyRunsThroughTheDispatcher(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"policy", "--trace", benchtest.TestTrace, "--limit", "300", "--fractions", "0.1"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, s := range []string{"orbitkv-bench policy: " + benchtest.TestTrace + ", 300 requests", "capacity", "optimum", evict.Default + " gap closed"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	errOut.Reset()
	if code := dispatch([]string{"policy", "--policies", "fifo"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown policy") {
		t.Errorf("unknown policy: exit %d, %q; want 2 and the reason", code, errOut.String())
	}
	errOut.Reset()
	if code := dispatch([]string{"policy", "--trace", "/nonexistent/trace.jsonl"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--trace /nonexistent/trace.jsonl") {
		t.Errorf("missing trace: exit %d, %q; want 1 naming the flag", code, errOut.String())
	}
}
