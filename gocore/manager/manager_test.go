package manager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// testSpec is a Manager with a 4 MiB RAM tier on a socket in dir.
func testSpec(t *testing.T, httpAddr string) Spec {
	return Spec{Epoch: 1, HTTPAddr: httpAddr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Session:   session.Spec{MaxSessions: 4, DescCapacity: 64 << 10},
		Cache:     &cache.Spec{CopyWorkers: 1, Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 4 << 20, ChunkBytes: 16 << 10}}},
		Bootstrap: bootstrap.Config{Path: filepath.Join(t.TempDir(), "okv.sock")},
	}
}

func TestValidateRefusesSessionAndChannelBoundsThatDisagree(t *testing.T) {
	s := testSpec(t, "")
	s.Channel.MaxSessions = 2
	err := s.Validate()
	fields, _ := limit.Split(err)
	if len(fields) != 1 || !strings.Contains(err.Error(), "manager.Channel.MaxSessions 2: want the session table's maximum, 4") {
		t.Fatalf("Validate = %v, want one error naming manager.Channel.MaxSessions", err)
	}
	s.Channel.MaxSessions = 4
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate with equal bounds = %v", err)
	}
}

// A busy HTTP port is refused before the RAM tier is made, naming the
// field, and leaves no socket file behind.
func TestNewRefusesABusyPortNamingTheField(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := testSpec(t, ln.Addr().String())
	_, err = New(s)
	var r *limit.Refused
	if !errors.As(err, &r) || r.Field != "manager.HTTPAddr" {
		t.Fatalf("New = %v, want a limit.Refused naming manager.HTTPAddr", err)
	}
	if _, err := net.Dial("unix", s.Bootstrap.Path); err == nil {
		t.Fatal("a socket is served after New failed")
	}
	s = testSpec(t, "")
	s.Bootstrap.Path = "/nonexistent-dir/okv.sock"
	if _, err = New(s); !errors.As(err, &r) || r.Field != "bootstrap.Path" {
		t.Fatalf("New = %v, want a limit.Refused naming bootstrap.Path", err)
	}
}

// Run serves /health on the port it bound (port 0 asks for any), turns it
// draining at shutdown, and returns nil; Close after Run, and Close after
// Close, do nothing.
func TestRunShutsDownAndCloseIsIdempotent(t *testing.T) {
	m, err := New(testSpec(t, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + m.http.addr + "/health"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	// /health answers 503 until Run marks the Manager serving, which it
	// does on its own goroutine: poll for the 200.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /health = %d, want 200 once Run serves", resp.StatusCode)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if m.Health().Status != "draining" {
		t.Errorf("Health after Run = %q, want draining", m.Health().Status)
	}
	m.Close()
	m.Close()
	if err := m.Run(context.Background()); err == nil {
		t.Error("Run after Close = nil, want an error")
	}
}

// While the RAM tier pre-faults, /livez answers 200, /readyz answers 503
// saying how far the pre-fault got, and /health answers 503; once serving,
// /readyz answers 200.
func TestProbesAnswerDuringThePrefault(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := testSpec(t, addr)
	s.Cache.Tiers.RAM.CapacityBytes, s.Cache.Tiers.RAM.Prefault = 512<<20, true
	inPrefault, release := make(chan struct{}), make(chan struct{})
	var once bool
	s.Cache.Tiers.RAM.Progress = func(done, total uint64) {
		if !once {
			once = true
			close(inPrefault)
			<-release
		}
	}
	made := make(chan *Manager, 1)
	go func() {
		m, err := New(s)
		if err != nil {
			t.Error(err)
		}
		made <- m
	}()
	<-inPrefault
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/livez"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/livez during the pre-fault = %d %q, want 200 ok", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "pre-faulting the RAM tier: 256 MiB of 512 MiB") {
		t.Errorf("/readyz during the pre-fault = %d %q, want 503 naming the progress", code, body)
	}
	if code, _ := get("/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health during the pre-fault = %d, want 503", code)
	}
	close(release)
	m := <-made
	if m == nil {
		return
	}
	defer m.Close()
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/readyz before Serve = %d %q, want 503 starting", code, body)
	}
	go m.Serve()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get("/readyz")
		if code == http.StatusOK && body == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while serving = %d %q, want 200 ready", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
