package integration

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/launch"
)

// The Manager speaks systemd's notify protocol (Type=notify): STATUS= lines
// while it starts, READY=1 once it serves (after the RAM tier's pre-fault),
// STOPPING=1 when shutdown begins. The test is systemd here: it binds the
// NOTIFY_SOCKET datagram socket the Manager writes to.
func TestTheManagerNotifiesSystemdWhenReadyAndStopping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, launch.NoHTTP, 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off")
	var got []string
	recv := func(want string) {
		t.Helper()
		buf := make([]byte, 4096)
		for !strings.Contains(strings.Join(got, "\n"), want) {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q from the Manager: %v; got %q", want, err, got)
			}
			got = append(got, string(buf[:n]))
		}
	}
	recv("READY=1")
	if !strings.HasPrefix(got[0], "STATUS=") || !strings.Contains(strings.Join(got, "\n"), "STATUS=pre-faulting the RAM tier: 64 MiB of 64 MiB") {
		t.Errorf("before READY=1 the Manager sent %q, want STATUS= lines naming the pre-fault's progress", got)
	}
	if err := m.WaitOutput("orbitkv-manager serving", 5*time.Second); err != nil {
		t.Errorf("READY=1 but no serving line: %v; log:\n%s", err, m.Output())
	}
	m.Signal(syscall.SIGHUP)
	if err := m.WaitOutput("SIGHUP ignored", 5*time.Second); err != nil {
		t.Fatalf("SIGHUP: %v; log:\n%s", err, m.Output())
	}
	m.Signal(syscall.SIGTERM)
	recv("STOPPING=1")
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("the Manager exited with %v after SIGHUP then SIGTERM:\n%s", err, m.Output())
	}
}

// notifyListener is systemd's side of NOTIFY_SOCKET for one test: the
// datagram socket the Manager writes to, and every state it received.
type notifyListener struct {
	t    *testing.T
	conn *net.UnixConn
	got  []string // one entry per datagram, in arrival order
}

func listenNotify(t *testing.T) *notifyListener {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return &notifyListener{t: t, conn: conn}
}

// read waits up to timeout for the next datagram and appends it to got.
func (n *notifyListener) read(want string, timeout time.Duration) {
	n.t.Helper()
	buf := make([]byte, 4096)
	n.conn.SetReadDeadline(time.Now().Add(timeout))
	k, err := n.conn.Read(buf)
	if err != nil {
		n.t.Fatalf("waiting for %s from the Manager: %v; got %q", want, err, n.got)
	}
	n.got = append(n.got, string(buf[:k]))
}

// until reads datagrams until one contains want, each within timeout, and
// returns its index in got.
func (n *notifyListener) until(want string, timeout time.Duration) int {
	n.t.Helper()
	for {
		n.read(want, timeout)
		if strings.Contains(n.got[len(n.got)-1], want) {
			return len(n.got) - 1
		}
	}
}

// count is how many received datagrams are exactly state.
func (n *notifyListener) count(state string) int {
	c := 0
	for _, g := range n.got {
		if g == state {
			c++
		}
	}
	return c
}

// Started with WATCHDOG_USEC (systemd's WatchdogSec=), the Manager sends
// WATCHDOG=1 every quarter interval once serving, while its dispatcher runs;
// the stall side (no WATCHDOG=1 from a stuck dispatcher) is
// gocore/manager's TestWatchdogFollowsTheDispatchersHealth and
// TestWatchdogSurvivesAStallShorterThanWatchdogSecAndNotALongOne.
func TestTheManagerFeedsSystemdsWatchdog(t *testing.T) {
	n := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "400000") // 400 ms: WATCHDOG=1 every 100 ms
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, launch.NoHTTP, 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off")
	ready := n.until("READY=1", 10*time.Second)
	start := time.Now()
	for n.count("WATCHDOG=1") < 5 {
		n.read("5 WATCHDOG=1", 5*time.Second)
	}
	took := time.Since(start)
	if took > 5*time.Second {
		t.Errorf("5 WATCHDOG=1 took %v, want about 0.5 s at one per 100 ms", took)
	}
	for i, g := range n.got[:ready] {
		if g == "WATCHDOG=1" {
			t.Errorf("WATCHDOG=1 came before READY=1 (datagram %d of %q)", i, n.got)
		}
	}
	if err := m.WaitOutput("watchdog: sending WATCHDOG=1 while the dispatcher answers", time.Second); err != nil {
		t.Errorf("no log line names the watchdog: %v\n%s", err, m.Output())
	}
	m.Signal(syscall.SIGTERM)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, m.Output())
	}
}

// With an SSD tier the start's STATUS= lines name the SSD tier's open steps
// with percentages, each with EXTEND_TIMEOUT_USEC, and READY=1 comes only
// after the last of them; the log has the same steps.
func TestTheSSDOpenReportsProgressBeforeReady(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	defer os.RemoveAll(dir)
	n := listenNotify(t)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, launch.NoHTTP, 20*time.Second, "--ram-capacity", "16MiB", "--hugepages", "off",
		"--ssd-dir", dir, "--ssd-capacity", "128MiB", "--ssd-slot-bytes", "1MiB")
	ready := n.until("READY=1", 20*time.Second)
	before := n.got[:ready]
	find := func(want ...string) int {
	next:
		for i, g := range before {
			for _, w := range want {
				if !strings.Contains(g, w) {
					continue next
				}
			}
			return i
		}
		t.Errorf("no datagram before READY=1 contains all of %q; got %q", want, before)
		return -1
	}
	// 127 slots of 1 MiB and a 4 KiB header: a data file of 127 MiB.
	pre0 := find("STATUS=opening the SSD tier: preallocating the data file: 0 B of 127 MiB (0%)")
	pre100 := find("STATUS=opening the SSD tier: preallocating the data file: 127 MiB of 127 MiB (100%)")
	verify := find("STATUS=opening the SSD tier: verifying recovered blocks: 0 of 0 blocks (100%)")
	if pre0 >= 0 && pre100 >= 0 && verify >= 0 && !(pre0 < pre100 && pre100 < verify) {
		t.Errorf("the SSD steps came out of order (%d, %d, %d): %q", pre0, pre100, verify, before)
	}
	for _, i := range []int{pre0, pre100, verify} {
		if i >= 0 && !strings.Contains(before[i], "\nEXTEND_TIMEOUT_USEC=60000000") {
			t.Errorf("datagram %q does not extend the start timeout (EXTEND_TIMEOUT_USEC=60000000)", before[i])
		}
	}
	if err := m.WaitOutput(`msg="start: opening the SSD tier" step="preallocating the data file"`, time.Second); err != nil {
		t.Errorf("no log line for the SSD open's progress: %v\n%s", err, m.Output())
	} else if !strings.Contains(m.Output(), `percent=100%`) {
		t.Errorf("the SSD open's log lines carry no percentage:\n%s", m.Output())
	}
	m.Signal(syscall.SIGTERM)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, m.Output())
	}
}

// Where systemd is the init system, the Manager started by systemd-run as
// a transient Type=notify service reaches "active" (systemd saw READY=1).
func TestTheUnitStartsUnderSystemd(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skipf("systemd is not the init system here (/run/systemd/system: %v)", err)
	}
	if _, err := exec.LookPath("systemd-run"); err != nil {
		t.Skipf("no systemd-run: %v", err)
	}
	unit := "orbitkv-it-" + strings.ReplaceAll(filepath.Base(t.TempDir()), "_", "-")
	sock := filepath.Join(t.TempDir(), "okv.sock")
	out, err := exec.Command("systemd-run", "--unit", unit, "--property=Type=notify", "--wait", "--no-block",
		filepath.Join(binDir, "orbitkv-manager"), "--ram-capacity", "64MiB", "--hugepages", "off", "--http-addr", "",
		"--bootstrap-socket", sock).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-run: %v: %s", err, out)
	}
	defer exec.Command("systemctl", "stop", unit).Run()
	deadline := time.Now().Add(20 * time.Second)
	for {
		state, _ := exec.Command("systemctl", "is-active", unit).Output()
		if strings.TrimSpace(string(state)) == "active" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("unit %s is %q after 20 s, want active", unit, strings.TrimSpace(string(state)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deploy/orbitkv-manager.service passes systemd-analyze verify with its
// ExecStart and ExecReload pointed at the built binaries (the Documentation line is dropped:
// the man pages are not installed here; make test-install verifies the
// installed unit with them).
func TestTheUnitFileVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("no systemd-analyze: %v", err)
	}
	b, err := os.ReadFile("../../deploy/orbitkv-manager.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nExecStart=/usr/bin/orbitkv-manager ") {
		t.Fatal("the unit's ExecStart does not name /usr/bin/orbitkv-manager (the path make install rewrites)")
	}
	text := strings.ReplaceAll(string(b), "/usr/bin/orbitkv-manager", filepath.Join(binDir, "orbitkv-manager"))
	text = strings.ReplaceAll(text, "/usr/bin/orbitkvctl", filepath.Join(binDir, "orbitkvctl"))
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "Documentation=") {
			lines = append(lines, l)
		}
	}
	if !strings.Contains(text, "Type=notify") {
		t.Fatal("the unit is not Type=notify")
	}
	unit := filepath.Join(t.TempDir(), "orbitkv-manager.service")
	if err := os.WriteFile(unit, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// SIGHUP and SIGTERM during the RAM pre-fault: SIGHUP is ignored, SIGTERM
// stops the Manager cleanly once the step finishes (exit 0, socket gone).
func TestSignalsDuringTheStartAreHandled(t *testing.T) {
	addr := freeLoopbackAddr(t)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	cmd := exec.Command(filepath.Join(binDir, "orbitkv-manager"), "--ram-capacity", "2GiB", "--hugepages", "off",
		"--http-addr", addr, "--bootstrap-socket", sock)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	caught := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "pre-faulting") {
			caught = true
			break
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	if !caught {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		t.Skip("the pre-fault of 2 GiB finished before /readyz was read: no window to signal in")
	}
	cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(20 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit %v after SIGHUP and SIGTERM during the pre-fault; log:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the Manager did not exit within 30 s of SIGTERM; log:\n%s", out.String())
	}
	for _, want := range []string{"SIGHUP ignored", "shutdown requested during the start"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s left after the stop (stat: %v)", sock, err)
	}
}

// A crash of the Manager (here SIGABRT, the signal systemd's watchdog and
// the CUDA backend's fail-stop send) ends it by a signal, never with an
// exit status the unit's RestartPreventExitStatus= lists: a crashed
// Manager is restarted, only a configuration error keeps it down.
func TestACrashIsRestartedNotTakenForAConfigurationError(t *testing.T) {
	b, err := os.ReadFile("../../deploy/orbitkv-manager.service")
	if err != nil {
		t.Fatal(err)
	}
	var prevent []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RestartPreventExitStatus="); ok {
			prevent = append(prevent, strings.Fields(v)...)
		}
	}
	if len(prevent) == 0 {
		t.Fatal("the unit has no RestartPreventExitStatus= (a configuration error would be restarted in a loop)")
	}
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startManagerBin(t, "orbitkv-manager", sock, freeLoopbackAddr(t), 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off")
	if err := m.Signal(syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	err = m.wait(t, 30*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("after SIGABRT the Manager ended with %v, want death by SIGABRT:\n%s", err, m.Output())
	}
	// Go's crash traceback ends the process by SIGABRT, or by the SIGQUIT
	// it relays among its threads to dump each one's stack; systemd counts
	// neither as a clean exit (those are SIGHUP, SIGINT, SIGTERM, SIGPIPE).
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || (ws.Signal() != syscall.SIGABRT && ws.Signal() != syscall.SIGQUIT) {
		t.Fatalf("after SIGABRT the Manager exited with status %d (signal %v), want death by SIGABRT or SIGQUIT; the unit's RestartPreventExitStatus=%s:\n%s",
			ws.ExitStatus(), ws.Signal(), strings.Join(prevent, " "), m.Output())
	}
	if !strings.Contains(m.Output(), "SIGABRT") {
		t.Errorf("the Manager's output does not name the SIGABRT:\n%s", m.Output())
	}
}
