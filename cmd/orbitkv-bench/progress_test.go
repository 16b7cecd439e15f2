package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/replay"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/ssd"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestAnUnknownProgressModeIsRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func([]string, io.Writer) error
	}{
		{"policy", func(a []string, w io.Writer) error { _, err := policy.ParsePolicyFlags(a, w); return err }},
		{"ssd", func(a []string, w io.Writer) error { _, err := ssd.ParseSSDFlags(a, w); return err }},
		{"replay", func(a []string, w io.Writer) error { _, err := replay.ParseReplayFlags(a, w); return err }},
	} {
		t.Run("the "+tc.name+" suite refuses --progress fancy", func(t *testing.T) {
			err := tc.parse([]string{"--progress", "fancy"}, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), `-progress`) || !strings.Contains(err.Error(), "want auto, bar, lines or off") {
				t.Fatalf("err = %v, want a usage error naming --progress and its values", err)
			}
		})
	}
}
