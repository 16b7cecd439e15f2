package discover

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/spf13/pflag"
)

func TestDiscoverFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of the usage error; "" = valid
	}{
		{"the defaults are valid", nil, ""},
		{"a negative load time is refused naming the flag", []string{"--load-time", "-1s"}, "--load-time must be between 100ms and 10m0s, got -1s"},
		{"a load time too short for one 10 kHz period is refused", []string{"--load-time", "50us"}, "--load-time must be between"},
		{"an overlong load time is refused", []string{"--load-time", "1h"}, "--load-time must be between"},
		{"too few iterations are refused naming the flag", []string{"--iters", "99"}, "--iters must be between 100 and 10000000, got 99"},
		{"a negative iteration count is refused", []string{"--iters", "-5"}, "--iters must be between"},
		{"too many iterations are refused", []string{"--iters", "20000000"}, "--iters must be between"},
		{"a load time that is not a duration names the flag", []string{"--load-time", "soon"}, "-load-time"},
		{"a stray argument is refused", []string{"extra"}, `unexpected argument "extra"`},
		{"the limits themselves are valid", []string{"--iters", "100", "--load-time", "100ms"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg, err := parseDiscoverFlags(tc.args, &out)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				return
			}
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (config %+v), want a usage error containing %q", err, cfg, tc.want)
			}
		})
	}
	t.Run("--help prints the method and every flag with its limits", func(t *testing.T) {
		var out bytes.Buffer
		if _, err := parseDiscoverFlags([]string{"--help"}, &out); !errors.Is(err, pflag.ErrHelp) {
			t.Fatalf("err %v, want pflag.ErrHelp", err)
		}
		for _, want := range []string{"usage: orbitkv-bench discover [flags]", "okv_discover_local", "bench/README.md",
			"--iters N", "100..10000000", "--load-time duration", "100ms..10m0s", "--manager-bin binary", "--manager-args arguments", "--json", "--output file"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("help lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("Measure refuses a load time no phase can run", func(t *testing.T) {
		_, err := measureDiscover(DiscoverOptions{Load: true, LoadTime: -time.Second, ManagerBin: "/nonexistent"})
		if err == nil || !strings.Contains(err.Error(), "LoadTime -1s") {
			t.Fatalf("err %v, want LoadTime named before anything starts", err)
		}
	})
}
