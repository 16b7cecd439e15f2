package launch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

func TestMain(m *testing.M) {
	os.Exit(fdcheck.Run(m, "launch", time.Second, nil))
}

func TestLastFlagValueReadsAsGoFlagDoes(t *testing.T) {
	args := []string{"--copy-workers", "2", "-http-addr", "a", "--http-addr=b", "--ram-capacity", "1GiB"}
	if v, ok := LastFlagValue(args, "http-addr"); !ok || v != "b" {
		t.Errorf("got %q, %v; want the last value b", v, ok)
	}
	if _, ok := LastFlagValue(args, "desc-bytes"); ok {
		t.Error("found a flag that is not there")
	}
}

func TestQuoteCommand(t *testing.T) {
	got := QuoteCommand("bin/orbitkv-manager", []string{"--http-addr", "", "--x", "a b", "--poll-mode", "spin"})
	want := `bin/orbitkv-manager --http-addr "" --x "a b" --poll-mode spin`
	if got != want {
		t.Errorf("QuoteCommand = %s, want %s", got, want)
	}
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func TestProcess(t *testing.T) {
	t.Run("output and exit status are kept", func(t *testing.T) {
		p, err := StartProcess(ProcessSpec{Path: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitOutput("err", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(5 * time.Second); exitStatus(err) != 3 {
			t.Errorf("Wait = %v, want exit status 3", err)
		}
		if out := p.Output(); out != "out\nerr\n" {
			t.Errorf("Output = %q", out)
		}
		if err := p.Signal(os.Interrupt); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Signal after the exit = %v, want os.ErrProcessDone", err)
		}
	})
	t.Run("a process that ignores SIGTERM is killed after the grace", func(t *testing.T) {
		p, err := StartProcess(ProcessSpec{Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo up; exec sleep 30`}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitOutput("up", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(10 * time.Millisecond); !errors.Is(err, ErrRunning) {
			t.Errorf("Wait of a running process = %v, want ErrRunning", err)
		}
		t0 := time.Now()
		err = p.Stop(100 * time.Millisecond)
		if !strings.Contains(err.Error(), "killed") || time.Since(t0) > 5*time.Second {
			t.Errorf("Stop = %v after %v, want killed after the grace", err, time.Since(t0))
		}
		if err2 := p.Stop(time.Second); err2 != err {
			t.Errorf("second Stop = %v, want the same %v", err2, err)
		}
	})
	t.Run("stdin is a pipe when asked for", func(t *testing.T) {
		p, err := StartProcess(ProcessSpec{Path: "/bin/sh", Args: []string{"-c", "read x; echo got $x"}, Dir: t.TempDir(), Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Write([]byte("go\n"))
		if err := p.WaitOutput("got go", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("waiting for output a process never prints names its exit", func(t *testing.T) {
		p, err := StartProcess(ProcessSpec{Path: "/bin/sh", Args: []string{"-c", "exit 1"}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitOutput("never", 5*time.Second); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Errorf("WaitOutput = %v, want an error saying it exited", err)
		}
	})
}

// fakeManager writes a script that behaves as a Manager would at start:
// it prints body's output (ReadyLine with its arguments, say).
func fakeManager(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orbitkv-manager")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestManager(t *testing.T) {
	t.Run("a ready Manager gets a socket in its own directory and a free HTTP port", func(t *testing.T) {
		bin := fakeManager(t, `echo "`+ReadyLine+` $*"; exec sleep 30`)
		m, err := Start(Spec{Bin: bin, Args: []string{"--ram-capacity", "64MiB"}})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(m.Socket())
		want := "--bootstrap-socket " + m.Socket() + " --http-addr " + m.HTTPAddr() + " --ram-capacity 64MiB"
		if !strings.HasPrefix(m.HTTPAddr(), "127.0.0.1:") || !strings.Contains(m.Output(), want) {
			t.Errorf("HTTP %q, output %q; want a loopback port and %q", m.HTTPAddr(), m.Output(), want)
		}
		m.Stop(time.Second)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the Manager's own directory %s is left after Stop (%v)", dir, err)
		}
	})
	t.Run("HTTP and socket given in Args win and are reported", func(t *testing.T) {
		bin := fakeManager(t, `echo "`+ReadyLine+`"; exec sleep 30`)
		dir := t.TempDir()
		m, err := Start(Spec{Bin: bin, Dir: dir, HTTPAddr: NoHTTP, Args: []string{"--bootstrap-socket", "/tmp/x.sock", "--http-addr=127.0.0.1:9"}})
		if err != nil {
			t.Fatal(err)
		}
		if m.Socket() != "/tmp/x.sock" || m.HTTPAddr() != "127.0.0.1:9" {
			t.Errorf("socket %q HTTP %q; want the values of Args", m.Socket(), m.HTTPAddr())
		}
		m.Kill()
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("a given Dir was removed: %v", err)
		}
	})
	t.Run("a Manager that exits before it serves is an error with its log", func(t *testing.T) {
		bin := fakeManager(t, `echo "--shutdown-timeout: bad" >&2; exit 2`)
		if _, err := Start(Spec{Bin: bin, HTTPAddr: NoHTTP}); err == nil || !strings.Contains(err.Error(), "--shutdown-timeout: bad") {
			t.Errorf("Start = %v, want an error with the log", err)
		}
		out, err := Run(Spec{Bin: bin, Dir: t.TempDir(), HTTPAddr: NoHTTP}, 5*time.Second)
		if exitStatus(err) != 2 || !strings.Contains(out, "--shutdown-timeout: bad") {
			t.Errorf("Run = %q, %v; want exit status 2 and the output", out, err)
		}
	})
	t.Run("a silent Manager times out", func(t *testing.T) {
		bin := fakeManager(t, `exec sleep 30`)
		if _, err := Start(Spec{Bin: bin, ReadyTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrRunning) {
			t.Errorf("Start = %v, want ErrRunning", err)
		}
	})
	t.Run("a missing binary is named", func(t *testing.T) {
		if _, err := Start(Spec{Bin: "/nonexistent/orbitkv-manager"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/orbitkv-manager") {
			t.Errorf("Start = %v, want an error naming the binary", err)
		}
	})
}
