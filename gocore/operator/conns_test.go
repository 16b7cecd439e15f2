package operator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/syncbuf"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// closedSoon reports whether the server closed c within d: reading what
// it sent (its HTTP/2 settings) ends in EOF or a reset rather than the
// deadline.
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// health calls Health on sock with a fresh connection.
func health(t *testing.T, sock string) error {
	t.Helper()
	c, err := Dial(sock, NoTrust)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Health(ctx, &operatorpb.HealthRequest{})
	return err
}

// Connections beyond MaxConnsPerUID (or MaxConns) are closed at once and
// logged; those within stay open; closing one makes room for a client.
func TestConnectionsBeyondTheLimitsAreClosedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		widen  bool // raise the per-uid limit over the total one
		limit  int
		reason string
	}{
		{"one uid gets at most MaxConnsPerUID", false, MaxConnsPerUID, "MaxConnsPerUID"},
		{"all peers together get at most MaxConns", true, MaxConns, "(MaxConns)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var log syncbuf.Buffer
			s := listenIn(t, dir, -1, &log)
			if tc.widen {
				s.lim.mu.Lock()
				s.lim.perUID = MaxConns + 10
				s.lim.mu.Unlock()
			}
			sock := filepath.Join(dir, "op.sock")
			const extra = 4
			var conns []net.Conn
			for range tc.limit + extra {
				c, err := net.Dial("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			closed := 0
			for i, c := range conns {
				d := 20 * time.Millisecond
				if i >= tc.limit {
					d = 2 * time.Second
				}
				if closedSoon(c, d) {
					closed++
				}
			}
			if closed != extra || s.Open() != tc.limit {
				t.Fatalf("%d connections closed, %d open; want %d closed and %d open", closed, s.Open(), extra, tc.limit)
			}
			if !strings.Contains(log.String(), "beyond its limit") || !strings.Contains(log.String(), tc.reason) {
				t.Fatalf("log does not say why connections were closed:\n%s", log.String())
			}
			conns[0].Close()
			for start := time.Now(); s.Open() >= tc.limit && time.Since(start) < 5*time.Second; {
				time.Sleep(time.Millisecond)
			}
			if err := health(t, sock); err != nil {
				t.Fatalf("Health with room for one connection = %v", err)
			}
		})
	}
}

// An idle connection (no HTTP/2 preface), or one that made a call and then
// idles, does not hold Close up.
func TestCloseDoesNotWaitForIdleConnections(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "op.sock")
	s, err := Listen(Config{Path: sock, GID: -1, Service: healthService{}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, err := Dial(sock, NoTrust)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Health(ctx, &operatorpb.HealthRequest{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v with idle connections open, want well under 1s", d)
	}
	if !closedSoon(raw, time.Second) {
		t.Fatal("the idle raw connection is still open after Close")
	}
}

// A refused peer's connection is closed right after its call's reply, or
// after refusedLinger when it makes none.
func TestARefusedPeersConnectionIsClosed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a child as uid 65534 needs root")
	}
	// The child's side: see TestPeersOfAnotherUIDAreRefused; here the
	// connection itself is watched, from the server's counter.
	dir := worldDir(t)
	var log syncbuf.Buffer
	s := listenIn(t, dir, -1, &log)
	sock := filepath.Join(dir, "op.sock")
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	done := runChildAsNobody(t, sock)
	deadline := time.Now().Add(10 * time.Second)
	for s.Open() == 0 && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("child ended before it connected: %v", err)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for s.Open() != 0 && time.Since(start) < 5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Open() != 0 {
		t.Fatalf("a refused connection is still open after %v", time.Since(start))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// runChildAsNobody starts a copy of the test binary as uid 65534 that
// connects to sock, sends nothing and waits (at most 10s) for the server
// to close the connection; done reports how it ended.
func runChildAsNobody(t *testing.T, sock string) <-chan error {
	t.Helper()
	cmd := exec.Command(childBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), childHoldEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	done := make(chan error, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		if err == nil && !strings.Contains(string(out), "closed by the server") {
			err = errors.New("child: " + string(out))
		}
		done <- err
	}()
	return done
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
