//go:build linux && amd64

package ebpf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// load loads the probes for managerPID or skips the test with the reason
// the host cannot (ErrUnavailable); any other error fails it.
func load(t testing.TB, managerPID int) *Probes {
	t.Helper()
	p, err := Load(Spec{ManagerPID: managerPID})
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("BPF unavailable here: %v", err)
	}
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// managerPID is 0 (this process is the Manager), or with other the pid of
// an idle child (sleep(1)) that sends and writes nothing while it lives.
func managerPID(t *testing.T, other bool) int {
	t.Helper()
	if !other {
		return 0
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// plausible fails unless h has n samples, each above 0 and below a second.
func plausible(t *testing.T, what string, h Histogram, n uint64) {
	t.Helper()
	plausibleWithin(t, what, h, n, n)
}

// plausibleWithin is plausible with a count anywhere in lo..n.
func plausibleWithin(t *testing.T, what string, h Histogram, lo, n uint64) {
	t.Helper()
	if got := h.Count(); got < lo || got > n {
		if lo == n {
			t.Errorf("%s: %d samples, want %d (log2 ns slots: %v)", what, got, n, h.Buckets)
		} else {
			t.Errorf("%s: %d samples, want %d..%d (log2 ns slots: %v)", what, got, lo, n, h.Buckets)
		}
	}
	if n == 0 {
		return
	}
	if h.Sum <= 0 {
		t.Errorf("%s: total latency %v, want > 0", what, h.Sum)
	}
	if m := h.Max(); m > time.Second {
		t.Errorf("%s: a sample in the slot below %v, want every one under 1s", what, m)
	}
}

// unixPingPong makes rounds round trips of one byte each way over a
// connected Unix stream socket pair whose listener this process owns: 2
// sends, each consumed by one receive, per round.
func unixPingPong(t testing.TB, rounds int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		for range rounds {
			if _, err := io.ReadFull(c, b); err != nil {
				done <- err
				return
			}
			if _, err := c.Write(b); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := []byte{7}
	for range rounds {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestUnixSocketProbe(t *testing.T) {
	const rounds = 100
	for _, tc := range []struct {
		name                string
		other               bool // the Manager is another (idle) process, not this one
		childClient         bool // the client end is a child process (python3), not this one
		toManager, toClient uint64
		// slack: samples a direction may lack. With the receiver on
		// another CPU, a receive can take the data before the send's
		// tracepoint (at the end of sendmsg) stamps it; that round's
		// sample then goes to the next receive, and one is lost (doc.go).
		slack uint64
	}{
		{"counts every send of the Manager's sockets once, as received by the Manager when both ends are its own", false, false, 2 * rounds, 0, rounds / 10},
		{"splits a client process's sends (to_manager) from the Manager's (to_client)", false, true, rounds, rounds, rounds / 10},
		{"ignores the sockets of a process that is not the Manager", true, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, managerPID(t, tc.other))
			if tc.childClient {
				unixPingPongWithChild(t, rounds)
			} else {
				unixPingPong(t, rounds)
			}
			for _, d := range []struct {
				dir  Direction
				want uint64
			}{{ToManager, tc.toManager}, {ToClient, tc.toClient}} {
				h, err := p.Unix(d.dir)
				if err != nil {
					t.Fatal(err)
				}
				plausibleWithin(t, "unix "+d.dir.String(), h, d.want-min(d.want, tc.slack), d.want)
			}
		})
	}
	t.Run("refuses a direction it does not have, naming it", func(t *testing.T) {
		p := load(t, managerPID(t, false))
		if _, err := p.Unix(Direction(2)); err == nil || !strings.Contains(err.Error(), "direction 2") {
			t.Errorf("Unix(2): %v, want an error naming direction 2", err)
		}
	})
}

// unixPingPongWithChild serves rounds round trips of one byte each way on
// a Unix stream listener of this process to a python3 child that connects,
// sends first and reads the echo: per round, one send received here and
// one received by the child.
func unixPingPongWithChild(t testing.TB, rounds int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("no python3 for the client process: %v", err)
	}
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	script := fmt.Sprintf(`import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(%q)
for _ in range(%d):
    s.sendall(b"x")
    assert s.recv(1) == b"x"
s.close()
`, path, rounds)
	cmd := exec.Command(py, "-c", script)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 1)
	for i := range rounds {
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client process: %v", err)
	}
}

func TestEventfdProbe(t *testing.T) {
	const writes = 50
	for _, tc := range []struct {
		name  string
		other bool
		fd    func(t *testing.T) (w, r int)
		want  uint64
	}{
		{"times each wake-up of a client blocked on the Manager's eventfd", false, newEventfd, writes},
		{"ignores eventfd writes of another process", true, newEventfd, 0},
		{"ignores a wake-up by an 8-byte write to a pipe", false, newPipe, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, managerPID(t, tc.other))
			w, r := tc.fd(t)
			wakeBlockedReader(t, w, r, writes)
			h, err := p.Eventfd()
			if err != nil {
				t.Fatal(err)
			}
			plausible(t, "eventfd", h, tc.want)
		})
	}
}

// wakeBlockedReader writes 8 bytes to w n times, each once a reader (a
// child process: the test binary in reader mode, holding r as fd 3) is
// blocked in read(2) of r (its /proc/PID/task/TID/syscall says so) and its
// previous read has returned, so that every write wakes it once.
func wakeBlockedReader(t *testing.T, w, r, n int) {
	t.Helper()
	done, signal, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer done.Close()
	// A dup of r for the child, closed here once it started (an *os.File
	// of r itself would close r when collected).
	rdup, err := unix.FcntlInt(uintptr(r), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	rfile := os.NewFile(uintptr(rdup), "r")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", readerEnv, n))
	cmd.ExtraFiles = []*os.File{rfile, signal}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	rfile.Close()
	signal.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var tid int
	if _, err := fmt.Fscanln(done, &tid); err != nil {
		t.Fatalf("reading the reader's thread id: %v", err)
	}
	// /proc/.../syscall while blocked: "<nr> <arg0 hex> ...".
	want := fmt.Sprintf("%d 0x3 ", unix.SYS_READ)
	v := [8]byte{1}
	ack := make([]byte, 1)
	for range n {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Microsecond) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", cmd.Process.Pid, tid))
			if err != nil {
				t.Fatal(err)
			}
			// In read(2) of fd 3 and asleep (state S in stat), not still
			// on its way in: a write then wakes a blocked task.
			if strings.HasPrefix(string(b), want) && taskSleeping(cmd.Process.Pid, tid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reader never blocked in read(2) of its fd 3: %q", b)
			}
		}
		if _, err := unix.Write(w, v[:]); err != nil {
			t.Fatal(err)
		}
		// The woken reader's read returned before the next write, so that
		// writes never coalesce into one wake-up.
		if _, err := done.Read(ack); err != nil {
			t.Fatalf("the reader ended early: %v", err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reader: %v", err)
	}
}

// taskSleeping reports whether thread tid of pid is in interruptible sleep
// (state S, the third field of /proc/PID/task/TID/stat, after the
// parenthesised command name).
func taskSleeping(pid, tid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'S'
}

func newEventfd(t *testing.T) (w, r int) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, fd
}

func newPipe(t *testing.T) (w, r int) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[1], p[0]
}

// tcpPair is a connected loopback TCP pair.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, _ := ln.AcceptTCP()
		accepted <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestTransferProbe(t *testing.T) {
	const sends, size = 40, 4096
	p := load(t, 0)
	client, server := tcpPair(t)
	other, otherServer := tcpPair(t) // never registered: must not count
	if err := p.RegisterTransfer(client, "peer-a"); err != nil {
		t.Fatal(err)
	}
	if err := p.RegisterTransfer(server, "peer-b"); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, size)
	reply := make([]byte, 1)
	for _, conn := range []struct{ c, s *net.TCPConn }{{client, server}, {other, otherServer}} {
		for range sends {
			if _, err := conn.c.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn.s, msg); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.s.Write(reply); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn.c, reply); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		peer string
	}{
		{"times each send and receive of the client's registered connection", "peer-a"},
		{"times each send and receive of the server's registered connection", "peer-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The last reply's ACK may be a delayed one (40 ms or more on
			// loopback): wait for every send's ACK, up to 2 s.
			var send, recv Histogram
			var err error
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if send, recv, err = p.Transfer(tc.peer); err != nil {
					t.Fatal(err)
				}
				if send.Count() >= sends || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("%s: send %d samples, %v total; receive %d samples, %v total", tc.peer, send.Count(), send.Sum, recv.Count(), recv.Sum)
			plausible(t, tc.peer+" send", send, sends)
			plausible(t, tc.peer+" receive", recv, sends)
		})
	}
	t.Run("refuses an unknown peer", func(t *testing.T) {
		if _, _, err := p.Transfer("peer-c"); !errors.Is(err, ErrUnknownPeer) {
			t.Errorf("Transfer(peer-c): %v, want ErrUnknownPeer", err)
		}
	})
	t.Run("refuses a connection that is not TCP", func(t *testing.T) {
		f, err := os.CreateTemp(t.TempDir(), "x")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := p.RegisterTransfer(f, "peer-a"); err == nil {
			t.Error("RegisterTransfer of a file: nil error")
		}
	})
}

func TestTheGoMirrorOfTheHistogramHasSlotsSlots(t *testing.T) {
	if n := len(probesHist{}.Slots); n != Slots {
		t.Fatalf("bpf/probes.c HIST_SLOTS is %d, ebpf.Slots %d", n, Slots)
	}
}

func TestRegisterTransferRefusesBadPeers(t *testing.T) {
	p := load(t, 0)
	client, _ := tcpPair(t)
	for _, tc := range []struct {
		name string
		peer string
	}{
		{"an empty peer label is refused", ""},
		{"a peer label over 128 bytes is refused", strings.Repeat("p", 129)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.RegisterTransfer(client, tc.peer)
			if err == nil || !strings.Contains(err.Error(), "ebpf.peer") {
				t.Errorf("RegisterTransfer(%q): %v, want an error naming ebpf.peer", tc.peer, err)
			}
		})
	}
	t.Run("a peer past MaxPeers is refused", func(t *testing.T) {
		for i := range MaxPeers {
			if err := p.RegisterTransfer(client, fmt.Sprintf("peer-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.RegisterTransfer(client, "one-too-many"); !errors.Is(err, ErrTooManyPeers) {
			t.Errorf("RegisterTransfer of peer %d: %v, want ErrTooManyPeers", MaxPeers+1, err)
		}
	})
}

// Run as nobody (setpriv drops every capability with the uid change),
// Check names the privilege and both missing capabilities.
func TestCheckNamesTheMissingCapabilities(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and setpriv (util-linux) to run a process without privileges")
	}
	// A copy of the test binary that nobody may run (go test's own
	// directory is 0700).
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "ebpf.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe)
	cmd.Env = append(os.Environ(), checkEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	for _, want := range []string{"eBPF probes unavailable", "not privileged", "CAP_BPF and CAP_PERFMON"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Check as nobody: %q, want it to say %q", out, want)
		}
	}
}

func TestAnUnregisteredTransferConnectionIsNotMeasured(t *testing.T) {
	p := load(t, 0)
	client, server := tcpPair(t)
	if err := p.RegisterTransfer(client, "peer-gone"); err != nil {
		t.Fatal(err)
	}
	if err := p.UnregisterTransfer(client); err != nil {
		t.Fatal(err)
	}
	if err := p.UnregisterTransfer(client); err != nil {
		t.Errorf("unregistering twice: %v, want nil", err)
	}
	b := make([]byte, 64)
	for range 10 {
		if _, err := client.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(server, b); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, b); err != nil {
			t.Fatal(err)
		}
	}
	send, recv, err := p.Transfer("peer-gone")
	if err != nil {
		t.Fatal(err)
	}
	plausible(t, "send", send, 0)
	plausible(t, "receive", recv, 0)
}

// A scrape still running when the Manager closes the probes (its HTTP
// shutdown gives requests 2 s, then closes them anyway) must get errors,
// not a panic.
func TestProbesAfterCloseAnswerErrors(t *testing.T) {
	p := load(t, 0)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	conn, _ := tcpPair(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"Unix after Close is an error", func() error { _, err := p.Unix(ToManager); return err }},
		{"Eventfd after Close is an error", func() error { _, err := p.Eventfd(); return err }},
		{"RegisterTransfer after Close is an error", func() error { return p.RegisterTransfer(conn, "peer-a") }},
		{"Transfer after Close is an error", func() error { _, _, err := p.Transfer("peer-a"); return err }},
		{"UnregisterTransfer after Close is an error", func() error { return p.UnregisterTransfer(conn) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrClosed) {
				t.Errorf("err = %v, want ErrClosed", err)
			}
		})
	}
	t.Run("Collect after Close yields invalid metrics and no panic", func(t *testing.T) {
		ch := make(chan prometheus.Metric, 16)
		p.Collect(ch)
		close(ch)
		n := 0
		for m := range ch {
			n++
			var out dto.Metric
			if err := m.Write(&out); !errors.Is(err, ErrClosed) {
				t.Errorf("metric %v: Write = %v, want ErrClosed", m.Desc(), err)
			}
		}
		if n == 0 {
			t.Error("Collect sent nothing, want an invalid metric per histogram")
		}
	})
}

// A Manager in a pid namespace of its own (a container without the host's
// pids) knows itself by a pid the probes never see: Load must refuse it,
// not load probes that measure nothing.
func TestLoadRefusesAManagerInAnotherPidNamespace(t *testing.T) {
	load(t, 0) // skips where BPF is unavailable
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) to make a pid namespace")
	}
	if probe, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid cannot run here: %v: %s", err, probe)
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0])
	cmd.Env = append(os.Environ(), loadEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	for _, want := range []string{"eBPF probes unavailable", "pid namespace", "Spec.ManagerPID"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Load in a pid namespace of its own: %q, want it to say %q", out, want)
		}
	}
}
