package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressLinesComeEveryFiveSecondsWithTheTimeLeft(t *testing.T) {
	type step struct {
		at   time.Duration // since the start
		done int64         // units done by then
		want string        // the line tick writes then; "" = none
	}
	tests := []struct {
		name  string
		total int64
		steps []step
		final string // finish's line at the last step's time
	}{
		{"the replay's lines scale the time so far by the requests left", 12031, []step{
			{3 * time.Second, 2000, ""},
			{5 * time.Second, 4950, "replay: 41% (4,950/12,031 requests), 7.2 s left"},
			{7 * time.Second, 6000, ""},
			{10 * time.Second, 9000, "replay: 74% (9,000/12,031 requests), 3.4 s left"},
		}, "replay: 74% (9,000/12,031 requests) in 10.0 s"},
		{"nothing done yet gives no estimate", 100, []step{
			{5 * time.Second, 0, "replay: 0% (0/100 requests), time left not known yet"},
		}, "replay: 0% (0/100 requests) in 5.0 s"},
		{"a time left over a minute reads in minutes and seconds", 100, []step{
			{6 * time.Second, 4, "replay: 4% (4/100 requests), 2m24s left"},
		}, "replay: 4% (4/100 requests) in 6.0 s"},
		{"a finished run says how long it took", 10, []step{
			{5 * time.Second, 5, "replay: 50% (5/10 requests), 5.0 s left"},
			{12 * time.Second, 10, "replay: 100% (10/10 requests), 0.0 s left"},
		}, "replay: 100% (10/10 requests) in 12.0 s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			var out bytes.Buffer
			p := newProgress(&out, "replay", "requests", tc.total, clock.now)
			var want []string
			for _, s := range tc.steps {
				clock.t = time.Unix(1000, 0).Add(s.at)
				p.add(s.done - p.done.Load())
				p.tick()
				if s.want != "" {
					want = append(want, s.want)
				}
			}
			p.finish()
			want = append(want, tc.final)
			if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestProgressModes(t *testing.T) {
	tests := []struct {
		name  string
		mode  progressMode
		total int64
		shown bool
	}{
		{"auto on a stderr that is not a terminal writes lines", progressAuto, 10, true},
		{"the default is auto", "", 10, true},
		{"lines writes lines", progressLines, 10, true},
		{"off shows nothing", progressOff, 10, false},
		{"nothing to count shows nothing", progressLines, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := startProgress(tc.mode, &out, "policy", "simulations", tc.total)
			p.add(tc.total)
			p.finish()
			if got := strings.HasPrefix(out.String(), "policy: 100% (10/10 simulations) in "); got != tc.shown {
				t.Fatalf("shown %v, want %v: %q", got, tc.shown, out.String())
			}
			if tc.shown && p.bar != nil {
				t.Fatal("a bar on a stderr that is not a terminal")
			}
		})
	}
}

func TestAnUnknownProgressModeIsRefusedNamingTheFlag(t *testing.T) {
	for _, suite := range []struct {
		name  string
		parse func([]string, io.Writer) error
	}{
		{"policy", func(a []string, w io.Writer) error { _, err := parsePolicyFlags(a, w); return err }},
		{"ssd", func(a []string, w io.Writer) error { _, err := parseSSDFlags(a, w); return err }},
		{"replay", func(a []string, w io.Writer) error { _, err := parseReplayFlags(a, w); return err }},
	} {
		t.Run("the "+suite.name+" suite refuses --progress fancy", func(t *testing.T) {
			err := suite.parse([]string{"--progress", "fancy"}, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), `-progress`) || !strings.Contains(err.Error(), "want auto, bar, lines or off") {
				t.Fatalf("err = %v, want a usage error naming --progress and its values", err)
			}
		})
	}
}

// Progress goes to stderr: with --json, stdout holds one JSON object and
// nothing else, while stderr has the progress.
func TestProgressLeavesTheJSONReportAlone(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--trace", testTrace, "--limit", "200", "--fractions", "0.1,0.5", "--policies", "lru,slru", "--json", "--progress", "lines"}
	if err := runPolicy(args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&stdout)
	var rep map[string]any
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON object")
	}
	// 3 repeats (the default --repeats) × 2 capacities × (lru, slru and the optimum).
	if !strings.Contains(stderr.String(), "policy: 100% (18/18 simulations) in ") {
		t.Fatalf("stderr lacks the final progress line:\n%s", stderr.String())
	}
}

// A worker's progress pipe carries its counts to the parent, which adds
// the differences up; the pipe's end stops the reader.
func TestWorkerProgressReachesTheParentsCount(t *testing.T) {
	w := &workerProc{cmd: &exec.Cmd{}}
	pw, err := w.progressPipe()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.cmd.ExtraFiles) != 1 || w.cmd.ExtraFiles[0] != pw || workerProgressFD != 3 {
		t.Fatalf("the pipe is not the worker's first extra file (fd 3)")
	}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	var to atomic.Pointer[progress]
	to.Store(newProgress(&out, "replay", "requests", 50, clock.now))
	read := make(chan struct{})
	go func() { w.readProgress(&to); close(read) }()
	wp := &workerProgress{f: pw}
	for i := 1; i <= 30; i++ {
		wp.last = time.Now().Add(-time.Second) // due for a write each time
		wp.report(i)
	}
	wp.report(31) // not due (30 was just written): close writes it
	wp.close()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("readProgress did not return after the pipe closed")
	}
	if got := to.Load().done.Load(); got != 31 {
		t.Fatalf("the parent counted %d requests, want 31", got)
	}
	if _, err := w.progress.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the read end is still open after the worker's end closed: %v", err)
	}
}
