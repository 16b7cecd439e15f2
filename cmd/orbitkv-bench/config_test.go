package main

import (
	"io"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/channel"
)

func TestDispatchExitStatus(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no suite is a usage error", nil, 2},
		{"an unknown suite is a usage error", []string{"replay-all"}, 2},
		{"help succeeds", []string{"help"}, 0},
		{"help for a suite succeeds", []string{"help", "channel"}, 0},
		{"a suite's --help succeeds", []string{"channel", "--help"}, 0},
		{"a bad flag is a usage error", []string{"channel", "--n", "0"}, 2},
		{"a peer without its parent is a usage error", []string{channel.PeerCommand, "uds"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dispatch(tt.args, io.Discard, io.Discard); got != tt.want {
				t.Errorf("dispatch(%q) = %d, want %d", tt.args, got, tt.want)
			}
		})
	}
}
