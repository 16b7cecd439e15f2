package main

import "testing"

func TestQuoteCommand(t *testing.T) {
	got := quoteCommand("bin/orbitkv-manager", []string{"--http-addr", "", "--x", "a b", "--poll-mode", "spin"})
	want := `bin/orbitkv-manager --http-addr "" --x "a b" --poll-mode spin`
	if got != want {
		t.Errorf("quoteCommand = %s, want %s", got, want)
	}
}
