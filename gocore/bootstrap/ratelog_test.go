package bootstrap

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestAFloodOfRefusalsLogsABoundedNumberOfLinesPerField(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r refusalLog
	for i := 0; i < 1000; i++ {
		r.warn(log, "hello", slog.Int("i", i))
	}
	r.warn(log, "magic") // another field has its own budget
	lines := strings.Count(buf.String(), "bootstrap refused")
	if lines != refusalBurst+1 {
		t.Fatalf("logged %d lines for 1000 hello refusals and 1 magic refusal, want %d", lines, refusalBurst+1)
	}
	if !strings.Contains(buf.String(), "field=magic") {
		t.Error("the magic refusal was suppressed by the hello flood")
	}
	// A new window reports what was suppressed.
	r.window["hello"].start = r.window["hello"].start.Add(-2e9)
	buf.Reset()
	r.warn(log, "hello")
	if !strings.Contains(buf.String(), "suppressed_last_second=980") {
		t.Errorf("next line does not report the 980 suppressed refusals: %s", buf.String())
	}
}
