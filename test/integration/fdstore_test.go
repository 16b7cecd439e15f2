package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/launch"
	"github.com/orbitkv/orbitkv/internal/sdstub"
)

// startUnderStub starts a Manager as systemd would under sdstub: with
// NOTIFY_SOCKET, and with the stub's stored fds as LISTEN_FDS when it
// holds any (a restart after a crash).
func startUnderStub(t *testing.T, stub *sdstub.Stub, sock, httpAddr string, args ...string) *proc {
	t.Helper()
	files, names, err := stub.Files()
	if err != nil {
		t.Fatal(err)
	}
	spec := launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(), Socket: sock, HTTPAddr: httpAddr,
		Args: append([]string{"--channel-transport", *channelTransport}, args...), ReadyTimeout: 20 * time.Second,
		Env: []string{stub.Env()}}
	if len(files) > 0 {
		spec.Env, spec.ExtraFiles, spec.ListenFDs = append(spec.Env, names), files, true
	}
	m, err := launch.Start(spec)
	for _, f := range files {
		f.Close() // the child has its own
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Kill() })
	managerHTTP.Store(m.Socket(), m.HTTPAddr())
	return &proc{m.Process}
}

func verifyRange(t *testing.T, sock string, first, count int) (visible, bad int) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "testclient"), "verify", sock, fmt.Sprint(first), fmt.Sprint(count)).CombinedOutput()
	if err != nil {
		t.Fatalf("verify %d..%d: %v\n%s", first, first+count, err, out)
	}
	s := string(out)
	fmt.Sscanf(s[strings.LastIndex(s, "visible"):], "visible %d mismatched %d", &visible, &bad)
	return visible, bad
}

// A Manager under a service manager keeps its RAM tier's memfds in the fd
// store; SIGKILLed while clients publish and restore, it is restarted with
// them (LISTEN_FDS) and serves every block it had sealed, byte for byte,
// once each passed its checksum; blocks whose copies the kill cut short
// are not served. A clean stop then removes the memfds from the store.
func TestAKilledManagerAdoptsItsRAMTierFromTheFDStore(t *testing.T) {
	stub, err := sdstub.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	if d, err := sdstub.Dumpable(); err != nil || d != 0 {
		t.Fatalf("the process holding the fd store is dumpable (%d, %v): any process of its uid could read the RAM tier", d, err)
	}
	sock := filepath.Join(t.TempDir(), "okv.sock")
	args := []string{"--ram-capacity", "256MiB", "--hugepages", "off"}
	httpAddr := freeLoopbackAddr(t)
	m := startUnderStub(t, stub, sock, httpAddr, args...)
	tier := []string{"orbitkv-ram-tier", "orbitkv-ram-ledger"}
	hasTier := func(_, names []string) bool { return slices.Equal(names, tier) }
	if err := stub.Wait(10*time.Second, "the RAM tier's memfds in the store", hasTier); err != nil {
		t.Fatalf("%v\n%s", err, m.Output())
	}
	const sealed = 64 // 1 MiB blocks
	out, err := exec.Command(filepath.Join(binDir, "testclient"), "publish", sock, "0", fmt.Sprint(sealed)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("published %d", sealed)) {
		t.Fatalf("publish: %v\n%s", err, out)
	}
	loop := start(t, "testclient", "loop", sock, "1000", "64")
	loop.waitOutput(t, "running", 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	m.Signal(syscall.SIGKILL) // copies in flight, most likely
	m.wait(t, 5*time.Second)
	loop.wait(t, 10*time.Second)

	m2 := startUnderStub(t, stub, sock, httpAddr, args...)
	m2.waitOutput(t, "ram tier: verified the adopted blocks", 10*time.Second)
	if strings.Contains(m2.Output(), "refused") {
		t.Fatalf("the restarted Manager refused the tier:\n%s", m2.Output())
	}
	if v, bad := verifyRange(t, sock, 0, sealed); v != sealed || bad != 0 {
		t.Fatalf("after the restart %d of the %d sealed blocks visible, %d mismatched:\n%s", v, sealed, bad, m2.Output())
	}
	if _, bad := verifyRange(t, sock, 1000, 64); bad != 0 {
		t.Fatalf("after the restart %d blocks the kill interrupted were served with wrong bytes", bad)
	}
	if err := stub.Wait(5*time.Second, "the adopted tier stored again", hasTier); err != nil {
		t.Fatal(err)
	}
	assertIdle(t, sock)
	m2.Signal(syscall.SIGTERM)
	if err := m2.wait(t, 15*time.Second); err != nil {
		t.Fatalf("clean stop: %v\n%s", err, m2.Output())
	}
	// The stub reads its datagrams on its own goroutine: those the Manager
	// sent before it exited may still be queued.
	if err := stub.Wait(5*time.Second, "an empty store after a clean stop", func(_, names []string) bool { return len(names) == 0 }); err != nil {
		t.Fatalf("%v: the RAM tier's memory is never freed", err)
	}
}
