package profiling_test

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/internal/pyroscopetest"
	"github.com/orbitkv/orbitkv/internal/syncbuf"
)

// every profile type the push sends, as pyroscopetest.Push.Types names them.
var allTypes = []string{"cpu", "alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "goroutine",
	"mutex_count", "mutex_duration", "block_count", "block_duration"}

func TestEveryProfileTypeArrivesTaggedAndAuthenticated(t *testing.T) {
	rcv := pyroscopetest.New(t)
	spec := profiling.Spec{URL: rcv.URL(), UploadInterval: time.Second, TenantID: "team-a",
		BasicAuthUser: "123456", BasicAuthPassword: "glc_token", NodeID: "node-7", Epoch: 99, Version: "v1.2.3"}
	p, err := profiling.Start(spec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if got := runtime.SetMutexProfileFraction(-1); got != profiling.MutexFraction {
		t.Errorf("mutex profile fraction while pushing = %d, want %d", got, profiling.MutexFraction)
	}
	seen := map[string]bool{}
	ok := rcv.Wait(20*time.Second, func(ps []pyroscopetest.Push) bool {
		for _, push := range ps {
			for _, typ := range push.Types() {
				seen[typ] = true
			}
		}
		return len(seen) >= len(allTypes)
	})
	if !ok {
		t.Fatalf("after 20 s the receiver saw the types %v, want %v", seen, allTypes)
	}
	for _, typ := range allTypes {
		if !seen[typ] {
			t.Errorf("no %s profile arrived", typ)
		}
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("123456:glc_token"))
	for _, push := range rcv.Pushes() {
		t.Run("a push of "+strings.Join(push.Types(), ",")+" names the app and carries the tags", func(t *testing.T) {
			if push.App != profiling.DefaultAppName {
				t.Errorf("app %q, want %q", push.App, profiling.DefaultAppName)
			}
			for k, v := range map[string]string{"node_id": "node-7", "epoch": "99", "version": "v1.2.3"} {
				if push.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, push.Labels[k], v, push.Labels)
				}
			}
			if got := push.Header.Get("X-Scope-OrgID"); got != "team-a" {
				t.Errorf("X-Scope-OrgID %q, want team-a", got)
			}
			if got := push.Header.Get("Authorization"); got != wantAuth {
				t.Errorf("Authorization %q, want %q", got, wantAuth)
			}
			if push.SpyName != "gospy" {
				t.Errorf("spyName %q, want gospy", push.SpyName)
			}
		})
	}
	if ok, failed := p.Uploads(); ok == 0 || failed != 0 {
		t.Errorf("Uploads = %d ok, %d failed; want some ok and none failed", ok, failed)
	}
	p.Stop()
	if got := runtime.SetMutexProfileFraction(-1); got != 0 {
		t.Errorf("mutex profile fraction after Stop = %d, want 0 as before Start", got)
	}
}

// A server that refuses uploads costs one warning, not one per upload, and
// its recovery one information line.
func TestFailingUploadsAreLoggedOnceAndTheirRecoveryOnce(t *testing.T) {
	rcv := pyroscopetest.New(t)
	rcv.Answer(http.StatusServiceUnavailable)
	var logs syncbuf.Buffer
	p, err := profiling.Start(profiling.Spec{URL: rcv.URL(), UploadInterval: time.Second}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitFor(t, "three failed uploads", func() bool { _, failed := p.Uploads(); return failed >= 3 })
	if n := strings.Count(logs.String(), "upload to pyroscope failed"); n != 1 {
		t.Fatalf("%d failure lines after 3 failed uploads, want 1:\n%s", n, logs.String())
	}
	if strings.Count(logs.String(), "503") == 0 {
		t.Errorf("the failure line does not give the status:\n%s", logs.String())
	}
	rcv.Answer(http.StatusOK)
	waitFor(t, "an accepted push", func() bool { return len(rcv.Pushes()) > 0 })
	waitFor(t, "the recovery line", func() bool { return strings.Count(logs.String(), "uploads to pyroscope succeed again") == 1 })
	if n := strings.Count(logs.String(), "upload to pyroscope failed"); n != 1 {
		t.Errorf("%d failure lines, want still 1", n)
	}
}

func TestStartRefusesAnInvalidOrDisabledSpec(t *testing.T) {
	tests := []struct {
		name string
		spec profiling.Spec
		want string
	}{
		{"no URL means the push is off", profiling.Spec{}, "the push is off"},
		{"a bad URL is refused naming the field", profiling.Spec{URL: "ftp://x"}, "profiling.URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := profiling.Start(tc.spec, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				if p != nil {
					p.Stop()
				}
				t.Fatalf("Start = %v, want an error containing %q", err, tc.want)
			}
			if got := runtime.SetMutexProfileFraction(-1); got != 0 {
				t.Errorf("a refused Start left the mutex profile fraction at %d", got)
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s within 20 s", what)
		}
	}
}
