package integration

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// shmObjects lists the names under /dev/shm.
func shmObjects(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatalf("reading /dev/shm: %v", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// newShmObjects returns the names under /dev/shm not in before.
func newShmObjects(t *testing.T, before []string) []string {
	var out []string
	for _, n := range shmObjects(t) {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}

// waitShmBack waits until /dev/shm holds nothing beyond before but the
// objects of the live runtime (those whose name starts with its prefix:
// the running Manager's own, its global node counter among them; "" for
// none).
func waitShmBack(t *testing.T, before []string, live iox2Runtime, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, n := range newShmObjects(t, before) {
			if live.prefix == "" || !strings.HasPrefix(n, live.prefix) {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d objects left under /dev/shm: %v", what, len(left), left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// iox2Runtime is where a Manager's iceoryx2 objects live: its root
// directory and its /dev/shm prefix (okv_iox2_runtime_new, orbitkv/iox2.h).
type iox2Runtime struct{ root, prefix string }

// managerRuntime finds the runtime of the process pid by the owner record
// in its root ("orbitkv-iox2-*/owner" under $XDG_RUNTIME_DIR or /tmp:
// lines "pid N", "prefix P", ...).
func managerRuntime(t *testing.T, pid int) iox2Runtime {
	t.Helper()
	var roots []string
	for _, base := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/tmp"} {
		if base != "" {
			m, _ := filepath.Glob(filepath.Join(base, "orbitkv-iox2-*"))
			roots = append(roots, m...)
		}
	}
	for _, root := range roots {
		b, err := os.ReadFile(filepath.Join(root, "owner"))
		if err != nil {
			continue
		}
		rec := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				rec[k] = v
			}
		}
		if rec["pid"] == strconv.Itoa(pid) && rec["prefix"] != "" {
			return iox2Runtime{root: root, prefix: rec["prefix"]}
		}
	}
	t.Fatalf("no iceoryx2 runtime with an owner record of pid %d among %d roots under $XDG_RUNTIME_DIR and /tmp", pid, len(roots))
	return iox2Runtime{}
}

// startIox2Manager starts a Manager serving the channel over iceoryx2 on
// sock, whatever -channel-transport says.
func startIox2Manager(t *testing.T, sock string) *proc {
	t.Helper()
	if !channel.Iceoryx2Built {
		t.Skip("this build has no iceoryx2 transport (no Rust toolchain >= 1.89 when make ran)")
	}
	return startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off",
		"--channel-transport", "iceoryx2", "--channel-service", "orbitkv-test-"+filepath.Base(t.TempDir()))
}

func TestIceoryx2SIGKILLOfTheManagerOrAClient(t *testing.T) {
	before := shmObjects(t)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	m := startIox2Manager(t, sock)
	// The running Manager's own objects (its node, its prefix's global
	// node counter) live until it stops; a session's must not.
	rt := managerRuntime(t, m.Pid())

	t.Run("a session's service objects are 0600 and this user's", func(t *testing.T) {
		c := start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "3", "--interval", "1ms", "--hold")
		c.waitOutput(t, "holding session", 10*time.Second)
		fresh := newShmObjects(t, before)
		if len(fresh) == 0 {
			t.Fatalf("a session over iceoryx2 made no object under /dev/shm")
		}
		for _, n := range fresh {
			st, err := os.Stat(filepath.Join("/dev/shm", n))
			if err != nil {
				continue // gone meanwhile
			}
			sys := st.Sys().(*syscall.Stat_t)
			if st.Mode().Perm()&0o077 != 0 || int(sys.Uid) != os.Geteuid() {
				t.Errorf("/dev/shm/%s: mode %v uid %d, want the Manager's uid %d only", n, st.Mode().Perm(), sys.Uid, os.Geteuid())
			}
		}
		c.Signal(syscall.SIGTERM)
		c.wait(t, 5*time.Second)
		waitSessions(t, sock, 0)
		waitShmBack(t, before, rt, 5*time.Second, "after the session closed")
	})

	t.Run("a SIGKILLed client's session and objects go, and the next client is served", func(t *testing.T) {
		victim := start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "1", "--hold")
		victim.waitOutput(t, "holding session", 10*time.Second)
		waitSessions(t, sock, 1)
		victim.Signal(syscall.SIGKILL)
		victim.wait(t, 5*time.Second)
		waitSessions(t, sock, 0)
		waitShmBack(t, before, rt, 5*time.Second, "after the client's SIGKILL")
		next := start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "3", "--interval", "1ms")
		if err := next.wait(t, 10*time.Second); err != nil {
			t.Fatalf("a client after the SIGKILLed one failed: %v\n%s", err, next.Output())
		}
	})

	t.Run("after the Manager's SIGKILL an old client fails clearly, a restarted Manager serves, the dead one's objects go", func(t *testing.T) {
		old := start(t, "orbitkvctl", "--socket", sock, "--timeout", "30s", "ping", "--count", "1", "--hold")
		old.waitOutput(t, "holding session", 10*time.Second)
		m.Signal(syscall.SIGKILL)
		m.wait(t, 5*time.Second)
		if left := newShmObjects(t, before); len(left) == 0 {
			t.Logf("note: no object of the killed Manager's session left under /dev/shm")
		}
		t0 := time.Now()
		old.Signal(syscall.SIGUSR1)
		if err := old.wait(t, 10*time.Second); err == nil {
			t.Fatalf("the old client survived its Manager's SIGKILL:\n%s", old.Output())
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("the old client took %v to notice the dead Manager", d)
		}
		if !strings.Contains(old.Output(), "exited") {
			t.Errorf("the old client's error does not say the Manager exited:\n%s", old.Output())
		}
		// The same socket path, a new incarnation: it serves new clients,
		// and making its runtime swept the dead one's (its root and every
		// object of its prefix).
		m2 := startIox2Manager(t, sock)
		rt2 := managerRuntime(t, m2.Pid())
		if rt2.prefix == rt.prefix {
			t.Fatalf("the restarted Manager has the dead one's prefix %s", rt.prefix)
		}
		c := start(t, "orbitkvctl", "--socket", sock, "ping", "--count", "3", "--interval", "1ms")
		if err := c.wait(t, 10*time.Second); err != nil {
			t.Fatalf("a client of the restarted Manager failed: %v\n%s\nManager:\n%s", err, c.Output(), m2.Output())
		}
		if _, err := os.Lstat(rt.root); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the dead Manager's iceoryx2 root %s is still there after the restart (lstat: %v)", rt.root, err)
		}
		waitShmBack(t, before, rt2, 5*time.Second, "after the restart and the old client's exit")
		m2.Signal(syscall.SIGTERM)
		if err := m2.wait(t, 10*time.Second); err != nil {
			t.Errorf("the restarted Manager exited with %v", err)
		}
		waitShmBack(t, before, iox2Runtime{}, 5*time.Second, "after the restarted Manager stopped")
		if _, err := os.Lstat(rt2.root); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the stopped Manager's iceoryx2 root %s is still there (lstat: %v)", rt2.root, err)
		}
	})
}

func TestIceoryx2ManagerRefusesAnUnusableServicePrefix(t *testing.T) {
	if !channel.Iceoryx2Built {
		t.Skip("this build has no iceoryx2 transport")
	}
	tests := []struct{ name, prefix, want string }{
		{"a prefix with a space", "a b", "--channel-service"},
		{"a prefix over 190 bytes", strings.Repeat("x", 191), "1..190"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := launch.Run(launch.Spec{Bin: filepath.Join(binDir, "orbitkv-manager"), Dir: t.TempDir(),
				Socket: filepath.Join(t.TempDir(), "okv.sock"), HTTPAddr: launch.NoHTTP,
				Args: []string{"--ram-capacity", "16MiB", "--hugepages", "off", "--channel-transport", "iceoryx2", "--channel-service", tc.prefix}}, time.Minute)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("Manager with --channel-service %q: err %v, output lacks %q:\n%s", tc.prefix, err, tc.want, out)
			}
		})
	}
}
