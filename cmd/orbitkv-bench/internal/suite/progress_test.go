package suite

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
)

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
			clock := &benchtest.FakeClock{T: time.Unix(1000, 0)}
			var out bytes.Buffer
			p := NewProgress(&out, "replay", "requests", tc.total, clock.Now)
			var want []string
			for _, s := range tc.steps {
				clock.T = time.Unix(1000, 0).Add(s.at)
				p.Add(s.done - p.Done.Load())
				p.tick()
				if s.want != "" {
					want = append(want, s.want)
				}
			}
			p.Finish()
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
			p := StartProgress(tc.mode, &out, "policy", "simulations", tc.total)
			p.Add(tc.total)
			p.Finish()
			if got := strings.HasPrefix(out.String(), "policy: 100% (10/10 simulations) in "); got != tc.shown {
				t.Fatalf("shown %v, want %v: %q", got, tc.shown, out.String())
			}
			if tc.shown && p.bar != nil {
				t.Fatal("a bar on a stderr that is not a terminal")
			}
		})
	}
}
