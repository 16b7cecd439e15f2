package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/launch"
	"github.com/orbitkv/orbitkv/internal/sdstub"
)

// installManager copies the Manager binary to path (an install step: a
// new file, renamed over the old one).
func installManager(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "orbitkv-manager"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// startInstalled starts the Manager installed at bin; the successors an
// upgrade starts are killed at the end of the test (they are the old
// Manager's children, not the test's).
func startInstalled(t *testing.T, bin, sock, httpAddr string, env []string, args ...string) *proc {
	t.Helper()
	m, err := launch.Start(launch.Spec{Bin: bin, Dir: t.TempDir(), Socket: sock, HTTPAddr: httpAddr,
		Args: append([]string{"--channel-transport", *channelTransport}, args...), ReadyTimeout: 20 * time.Second, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Kill() })
	managerHTTP.Store(m.Socket(), m.HTTPAddr())
	return &proc{m.Process}
}

// The successor's pid in orbitkvctl upgrade's output: on stderr when the
// Upgrade reply came, and on stdout, as the Manager that serves, in every
// case (an idle Manager may close the socket before its reply is out).
var (
	successorPid = regexp.MustCompile(`successor pid (\d+)`)
	servingPid   = regexp.MustCompile(`upgraded in \S+: pid (\d+) `)
)

// upgrade runs orbitkvctl upgrade and registers the successor for killing.
func upgrade(t *testing.T, sock string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code = ctl(t, sock, "", "upgrade", "--timeout", "10s")
	m := successorPid.FindStringSubmatch(stderr)
	if m == nil {
		m = servingPid.FindStringSubmatch(stdout)
	}
	if m != nil {
		pid, _ := strconv.Atoi(m[1])
		t.Cleanup(func() {
			syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		})
	}
	return stdout, stderr, code
}

// orbitkvctl upgrade while a client publishes and restores: the binary at
// the Manager's path is replaced first, as a package upgrade does; the new
// Manager adopts every sealed block and serves it byte for byte under a
// new epoch, and the old one exits 0. A client of the old epoch sees its
// session end (it reconnects on its own; this one exits).
func TestUpgradeHandsTheRAMTierToTheNewBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "orbitkv-manager")
	installManager(t, bin)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	httpAddr := freeLoopbackAddr(t)
	stub, err := sdstub.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	m := startInstalled(t, bin, sock, httpAddr, []string{stub.Env()}, "--ram-capacity", "256MiB", "--hugepages", "off")
	const sealed = 64
	if out, err := exec.Command(filepath.Join(binDir, "testclient"), "publish", sock, "0", fmt.Sprint(sealed)).CombinedOutput(); err != nil {
		t.Fatalf("publish: %v\n%s", err, out)
	}
	loop := start(t, "testclient", "loop", sock, "1000", "64")
	loop.waitOutput(t, "running", 20*time.Second)
	installManager(t, bin) // the new version
	stdout, stderr, code := upgrade(t, sock)
	if code != 0 || !strings.Contains(stdout, "upgraded in") {
		t.Fatalf("orbitkvctl upgrade: status %d\nstdout: %s\nstderr: %s\nManager log:\n%s", code, stdout, stderr, m.Output())
	}
	t.Logf("%s%s", stderr, stdout)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Fatalf("the old Manager exited with %v:\n%s", err, m.Output())
	}
	loop.wait(t, 20*time.Second)
	waitLog(t, m, "ram tier: verified the adopted blocks", 20*time.Second) // the successor's log is the old one's
	for _, want := range []string{"upgrade: the successor adopted the RAM tier; exiting", "ram tier: adopted the blocks a predecessor sealed"} {
		if !strings.Contains(m.Output(), want) {
			t.Fatalf("no %q in the log:\n%s", want, m.Output())
		}
	}
	if v, bad := verifyRange(t, sock, 0, sealed); v != sealed || bad != 0 {
		t.Fatalf("after the upgrade %d of the %d sealed blocks visible, %d mismatched:\n%s", v, sealed, bad, m.Output())
	}
	// Toward systemd (NotifyAccess=main): no STOPPING=1 (a stop would kill
	// the successor), MAINPID= naming the successor, and only after it the
	// successor's fd store and READY=1, which systemd takes from the main
	// process only.
	succ := servingPid.FindStringSubmatch(stdout)[1] // "upgraded in" was checked above
	if err := stub.Wait(5*time.Second, "the successor's READY=1 after MAINPID=", func(lines, names []string) bool {
		i := slices.Index(lines, "MAINPID="+succ)
		return i >= 0 && slices.Contains(lines[i:], "READY=1") && slices.Contains(lines[i:], "FDSTORE=1")
	}); err != nil {
		t.Fatalf("%v; the service manager heard %q", err, stub.Lines())
	}
	if slices.Contains(stub.Lines(), "STOPPING=1") {
		t.Fatalf("the old Manager sent STOPPING=1 during the upgrade: %q", stub.Lines())
	}
	if _, bad := verifyRange(t, sock, 1000, 64); bad != 0 {
		t.Fatalf("after the upgrade %d blocks of the client's loop were served with wrong bytes", bad)
	}
	assertIdle(t, sock)
}

// A successor that fails after its configuration was accepted (here its
// bootstrap socket cannot be bound) is killed and reaped, and the old
// Manager serves the same RAM tier again under a new epoch: the blocks
// stay, byte for byte.
func TestAFailedUpgradeLeavesTheOldManagerServingTheSameTier(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "orbitkv-manager")
	installManager(t, bin)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	httpAddr := freeLoopbackAddr(t)
	m := startInstalled(t, bin, sock, httpAddr, nil, "--ram-capacity", "128MiB", "--hugepages", "off")
	if out, err := exec.Command(filepath.Join(binDir, "testclient"), "publish", sock, "0", "32").CombinedOutput(); err != nil {
		t.Fatalf("publish: %v\n%s", err, out)
	}
	// The new "version" is valid but cannot bind its socket.
	real := filepath.Join(dir, "orbitkv-manager.real")
	installManager(t, real)
	script := "#!/bin/sh\nexec " + real + ` "$@" --bootstrap-socket ` + filepath.Join(dir, "missing", "okv.sock") + "\n"
	if err := os.WriteFile(bin+".new", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := upgrade(t, sock)
	if code == 0 || !strings.Contains(stderr, "serves the same RAM tier again") {
		t.Fatalf("orbitkvctl upgrade of a failing successor: status %d\nstdout: %s\nstderr: %s\nlog:\n%s", code, stdout, stderr, m.Output())
	}
	if !strings.Contains(m.Output(), "upgrade: serving the RAM tier again") {
		t.Fatalf("no resumption in the log:\n%s", m.Output())
	}
	m.waitOutput(t, "ram tier: verified the adopted blocks", 10*time.Second)
	if v, bad := verifyRange(t, sock, 0, 32); v != 32 || bad != 0 {
		t.Fatalf("after the failed upgrade %d of 32 blocks visible, %d mismatched:\n%s", v, bad, m.Output())
	}
	assertIdle(t, sock)
}

// waitLog waits until p's log file holds want, whether or not p still
// runs: after an upgrade the successor writes to the old process's log.
func waitLog(t *testing.T, p *proc, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.Output(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %v:\n%s", want, d, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
