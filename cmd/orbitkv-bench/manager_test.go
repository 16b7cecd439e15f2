package main

import (
	"strings"
	"testing"
)

func TestQuoteCommand(t *testing.T) {
	got := quoteCommand("bin/orbitkv-manager", []string{"--http-addr", "", "--x", "a b", "--poll-mode", "spin"})
	want := `bin/orbitkv-manager --http-addr "" --x "a b" --poll-mode spin`
	if got != want {
		t.Errorf("quoteCommand = %s, want %s", got, want)
	}
}

func TestStderrTailKeepsLastWholeLines(t *testing.T) {
	m := &manager{stderr: &tailBuffer{max: 16}}
	if got := m.stderrTail(); got != "" {
		t.Errorf("empty stderr: tail %q, want empty", got)
	}
	m.stderr.Write([]byte("first line that is long\n"))
	m.stderr.Write([]byte("err: bad\n"))
	got := m.stderrTail()
	if !strings.HasSuffix(got, "\nerr: bad") || strings.Contains(got, "long") {
		t.Errorf("tail = %q, want only the last whole line", got)
	}
}
