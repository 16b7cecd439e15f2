package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name  string
		burst int
		every time.Duration
		at    []time.Duration // offsets from t0 of successive lines
		ok    []bool
		quiet []int // suppressed, for lines admitted
	}{
		{
			name:  "the zero value admits one line a second and counts the rest",
			at:    []time.Duration{0, 100 * time.Millisecond, 900 * time.Millisecond, time.Second, 1500 * time.Millisecond},
			ok:    []bool{true, false, false, true, false},
			quiet: []int{0, 0, 0, 2, 0},
		},
		{
			name:  "a burst of three is admitted, the fourth in the window is not",
			burst: 3, every: time.Second,
			at:    []time.Duration{0, 1, 2, 3, 4, time.Second + 5},
			ok:    []bool{true, true, true, false, false, true},
			quiet: []int{0, 0, 0, 0, 0, 2},
		},
		{
			name:  "a window starts at the first line after the last one ended",
			burst: 1, every: 10 * time.Second,
			at:    []time.Duration{0, 9 * time.Second, 10 * time.Second, 19 * time.Second, 25 * time.Second},
			ok:    []bool{true, false, true, false, true},
			quiet: []int{0, 0, 1, 0, 1},
		},
		{
			name:  "a quiet window reports nothing suppressed",
			burst: 2,
			at:    []time.Duration{0, 5 * time.Second},
			ok:    []bool{true, true},
			quiet: []int{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Limiter{Burst: tt.burst, Every: tt.every}
			for i, d := range tt.at {
				ok, q := l.Allow(t0.Add(d))
				if ok != tt.ok[i] || q != tt.quiet[i] {
					t.Fatalf("line %d at +%v: Allow = %v, %d; want %v, %d", i, d, ok, q, tt.ok[i], tt.quiet[i])
				}
			}
		})
	}
}

func TestLimiterAdmitsBurstLinesAcrossGoroutines(t *testing.T) {
	l := Limiter{Burst: 20, Every: time.Hour}
	now := time.Now()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if ok, _ := l.Allow(now); ok {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if admitted != 20 {
		t.Fatalf("%d lines admitted of 8000 in one window, want the burst of 20", admitted)
	}
	if ok, q := l.Allow(now.Add(time.Hour)); !ok || q != 8000-20 {
		t.Fatalf("first line of the next window: Allow = %v, %d; want true, %d", ok, q, 8000-20)
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	var l Limiter
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { l.Allow(now) }); n != 0 {
		t.Fatalf("Allow allocates %v times a call, want 0", n)
	}
}

func TestLogCountsTheLinesItRefusedInTheNextOne(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var l Limiter // one line a second
	for i := 0; i < 5; i++ {
		l.Log(log, slog.LevelWarn, "refused", slog.Int("i", i))
	}
	if got := strings.Count(buf.String(), "msg=refused"); got != 1 {
		t.Fatalf("%d lines logged within one second, want 1:\n%s", got, buf.String())
	}
	if strings.Contains(buf.String(), SuppressedKey) {
		t.Fatalf("the first line names suppressed lines: %s", buf.String())
	}
	l.mu.Lock()
	l.start = l.start.Add(-2 * time.Second) // the window ended
	l.mu.Unlock()
	l.Log(log, slog.LevelWarn, "refused", slog.Int("i", 5))
	if !strings.Contains(buf.String(), "i=5 suppressed=4") {
		t.Fatalf("the line after the window does not count the 4 refused:\n%s", buf.String())
	}
}
