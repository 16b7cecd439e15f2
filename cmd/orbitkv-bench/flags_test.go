package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/channel"
)

// helpFlag matches a flag line of pflag's PrintDefaults: "      --clients N   ...".
var helpFlag = regexp.MustCompile(`(?m)^ {2,}(?:-[a-z], )?--([a-z0-9][a-z0-9-]*)`)

// suiteFlags runs `orbitkv-bench SUITE --help` and returns the flag names
// its help lists, failing the test unless the help went to stdout alone
// with exit 0.
func suiteFlags(t *testing.T, suite string) []string {
	t.Helper()
	var stdout, stderr strings.Builder
	if code := dispatch([]string{suite, "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("%s --help exits %d, want 0; stderr:\n%s", suite, code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "usage: orbitkv-bench "+suite) || stderr.Len() != 0 {
		t.Fatalf("%s --help: want the usage on stdout and nothing on stderr; stdout:\n%s\nstderr:\n%s", suite, stdout.String(), stderr.String())
	}
	var names []string
	for _, m := range helpFlag.FindAllStringSubmatch(stdout.String(), -1) {
		names = append(names, m[1])
	}
	return names
}

// visibleSuites are the suites `orbitkv-bench help` lists.
func visibleSuites() []string {
	var out []string
	for _, c := range commands() {
		if !c.hidden {
			out = append(out, c.name)
		}
	}
	return out
}

// A flag each suite's help must list: the lists read from the help are
// not empty by a parse that matched nothing.
var knownFlag = map[string]string{
	"replay": "clients", "copy": "sizes", "ssd": "io-workers", "query": "hashes",
	"discover": "load-time", "policy": "fractions", "transfer": "rails", "channel": "round-trips",
	"wake": "sleep", "peers": "lookups", "compare": "strict", "restart": "scenarios",
}

func TestEverySuitesHelpGoesToStdoutAndListsItsFlagsWithTwoDashes(t *testing.T) {
	for _, name := range visibleSuites() {
		t.Run(name, func(t *testing.T) {
			flags := suiteFlags(t, name)
			want, ok := knownFlag[name]
			if !ok {
				t.Fatalf("knownFlag has no flag of suite %s", name)
			}
			found := false
			for _, f := range flags {
				found = found || f == want
			}
			if !found {
				t.Errorf("%s --help lists %q, not --%s", name, flags, want)
			}
			// help SUITE prints the same text.
			var viaHelp, viaFlag, stderr strings.Builder
			dispatch([]string{"help", name}, &viaHelp, &stderr)
			dispatch([]string{name, "-h"}, &viaFlag, &stderr)
			if viaHelp.Len() == 0 || viaHelp.String() != viaFlag.String() {
				t.Errorf("help %s and %s -h differ:\n%s\n---\n%s", name, name, viaHelp.String(), viaFlag.String())
			}
		})
	}
}

// Go's flag package read -clients 4; pflag reads it as the shorthands
// c, l, i, ... . Every suite refuses each flag's single-dash spelling
// with exit 2 and a message naming the two-dash one.
func TestEverySuiteRefusesTheSingleDashSpellingOfEachFlag(t *testing.T) {
	for _, name := range visibleSuites() {
		for _, flag := range suiteFlags(t, name) {
			for _, args := range [][]string{{"-" + flag, "1"}, {"-" + flag + "=1"}} {
				var stdout, stderr strings.Builder
				code := dispatch(append([]string{name}, args...), &stdout, &stderr)
				wantMsg := "orbitkv-bench " + name + ": unknown flag " + args[0] + " (long flags start with --, as in -" + args[0] + ")"
				if code != 2 || !strings.Contains(stderr.String(), wantMsg) {
					t.Errorf("%s %q: exit %d, stderr %q; want 2 and %q", name, args, code, stderr.String(), wantMsg)
				}
			}
		}
	}
}

func TestAnUnknownFlagOrShorthandIsAUsageErrorNamingIt(t *testing.T) {
	for _, name := range visibleSuites() {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct{ arg, want string }{
				{"--no-such-flag", "unknown flag: --no-such-flag"},
				{"-q", "unknown shorthand flag: 'q' in -q (long flags start with --, as in --"},
			} {
				var stdout, stderr strings.Builder
				if code := dispatch([]string{name, tc.arg}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
					t.Errorf("%s %s: exit %d, stderr %q; want 2 and %q", name, tc.arg, code, stderr.String(), tc.want)
				}
			}
		})
	}
}

func TestTheOldSpellingOfTheMainJobIsRefusedWithTheNewOne(t *testing.T) {
	var stdout, stderr strings.Builder
	code := dispatch([]string{"replay", "-clients", "4", "-trace", "t.jsonl"}, &stdout, &stderr)
	if want := "orbitkv-bench replay: unknown flag -clients (long flags start with --, as in --clients)\n"; code != 2 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout.String(), stderr.String(), want)
	}
}

func TestThePeerRefusesASingleDashFlagAsTheSuitesDo(t *testing.T) {
	var stdout, stderr strings.Builder
	code := dispatch([]string{channel.PeerCommand, "uds", "-parent-pid", "1"}, &stdout, &stderr)
	if want := "unknown flag -parent-pid (long flags start with --, as in --parent-pid)"; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), want)
	}
}
