package main

import (
	"io"
	"strings"
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
		{"a bad flag is a usage error", []string{"channel", "--round-trips", "0"}, 2},
		{"--version succeeds", []string{"--version"}, 0},
		{"-h succeeds", []string{"-h"}, 0},
		{"-help is refused, as orbitkv-manager refuses it", []string{"-help"}, 2},
		{"a suite's -help is refused too", []string{"copy", "-help"}, 2},
		{"a suite's -h succeeds", []string{"copy", "-h"}, 0},
		{"a Manager flag on a suite that starts none is a usage error", []string{"wake", "--manager-bin", "x"}, 2},
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

func TestVersionPrintsTheBuildInfoLines(t *testing.T) {
	var out strings.Builder
	if got := dispatch([]string{"--version"}, &out, io.Discard); got != 0 || !strings.HasPrefix(out.String(), "orbitkv-bench ") || !strings.Contains(out.String(), "\ncommit: ") || !strings.Contains(out.String(), "\ngo: ") {
		t.Errorf("--version = %d, %q; want buildinfo's lines", got, out.String())
	}
}
