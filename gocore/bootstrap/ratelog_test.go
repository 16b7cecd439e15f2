package bootstrap

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestAFloodOfRefusalsLogsABoundedNumberOfLinesPerField(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r refusalLog
	now := time.Now()
	for i := 0; i < 1000; i++ {
		r.warnAt(now, log, "hello", slog.Int("i", i))
	}
	r.warnAt(now, log, "magic") // another field has its own budget
	lines := strings.Count(buf.String(), "bootstrap refused")
	if lines != refusalBurst+1 {
		t.Fatalf("logged %d lines for 1000 hello refusals and 1 magic refusal, want %d", lines, refusalBurst+1)
	}
	if !strings.Contains(buf.String(), "field=magic") {
		t.Error("the magic refusal was suppressed by the hello flood")
	}
	// A new window reports what was suppressed.
	buf.Reset()
	r.warnAt(now.Add(time.Second), log, "hello")
	if !strings.Contains(buf.String(), "suppressed=980") {
		t.Errorf("next line does not report the 980 suppressed refusals: %s", buf.String())
	}
}
