package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tenant uids of these tests: numbers no account uses, so nothing of a
// real user is touched; root starts the clients as them.
const (
	tenantA, tenantB, stranger = 61001, 61002, 61003
)

// tenantEnv is a Manager with tenants and a copy of testclient that every
// uid may run, in a directory every uid may enter (t.TempDir's parent is
// root's 0700).
type tenantEnv struct {
	dir, sock, client string
}

func newTenantEnv(t *testing.T, args ...string) *tenantEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting clients as other uids needs root")
	}
	dir, err := os.MkdirTemp("", "orbitkv-tenant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(binDir, "testclient"))
	if err != nil {
		t.Fatal(err)
	}
	e := &tenantEnv{dir: dir, sock: filepath.Join(dir, "okv.sock"), client: filepath.Join(dir, "testclient")}
	if err := os.WriteFile(e.client, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	startManagerBin(t, "orbitkv-manager", e.sock, "", 10*time.Second,
		// shm whatever -channel-transport says: the iceoryx2 transport serves
		// one uid and is refused with tenants.
		append([]string{"--channel-transport", "shm", "--ram-capacity", "64MiB", "--hugepages", "off"}, args...)...)
	return e
}

// run runs testclient MODE SOCK 0 16 as uid with env, and returns its
// output and whether it exited 0.
func (e *tenantEnv) run(t *testing.T, uid uint32, mode string, env ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(e.client, mode, e.sock, "0", "16")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	t.Logf("uid %d %s: %s", uid, mode, strings.TrimSpace(string(out)))
	return string(out), err == nil
}

// trustRoot is the environment that makes a client trust the Manager,
// which runs as root here.
var trustRoot = "ORBITKV_MANAGER_UID=" + strconv.Itoa(os.Geteuid())

// TestTenantsOfOtherUIDsGetTheirOwnCache: the Manager (root) serves two
// tenants of other uids. Tenant A publishes 16 blocks; A restores all 16
// with the right bytes, B sending the very same namespace and block
// hashes gets none; a uid no tenant selects is refused at bootstrap, as is
// the Manager's own uid, which no tenant selects; a client that was not
// told to trust the Manager's uid refuses it before sending anything.
func TestTenantsOfOtherUIDsGetTheirOwnCache(t *testing.T) {
	e := newTenantEnv(t, "--tenant", "a=uid:"+strconv.Itoa(tenantA), "--tenant", "b=uid:"+strconv.Itoa(tenantB))
	if fi, err := os.Stat(e.sock); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket with tenants: %v, mode %v; want 0666 (admission by SO_PEERCRED)", err, fi.Mode())
	}
	if out, ok := e.run(t, tenantA, "publish", trustRoot); !ok || !strings.Contains(out, "published 16") {
		t.Fatalf("tenant A could not publish: %s", out)
	}
	if out, ok := e.run(t, tenantA, "verify", trustRoot); !ok || !strings.Contains(out, "visible 16 mismatched 0") {
		t.Fatalf("tenant A does not get its own 16 blocks back: %s", out)
	}
	if out, ok := e.run(t, tenantB, "verify", trustRoot); !ok || !strings.Contains(out, "visible 0 mismatched 0") {
		t.Fatalf("tenant B, sending tenant A's namespace and hashes, must get misses: %s", out)
	}
	if out, ok := e.run(t, stranger, "verify", trustRoot); ok || !strings.Contains(out, "matches no --tenant selector") {
		t.Fatalf("a uid no tenant selects must be refused naming why: %s", out)
	}
	if out, ok := e.run(t, uint32(os.Geteuid()), "verify"); ok || !strings.Contains(out, "matches no --tenant selector") {
		t.Fatalf("the Manager's own uid, selected by no tenant, must be refused: %s", out)
	}
	if out, ok := e.run(t, tenantA, "verify"); ok || !strings.Contains(out, "refusing the Manager") || !strings.Contains(out, "ORBITKV_MANAGER_UID") {
		t.Fatalf("a client not told to trust the Manager's uid must refuse it: %s", out)
	}
	if out, ok := e.run(t, tenantA, "verify", "ORBITKV_MANAGER_UID=12345"); ok || !strings.Contains(out, "trusts its own uid") {
		t.Fatalf("a client trusting another uid must refuse this Manager: %s", out)
	}
}

// TestTenantsOfOneShareGroupShareTheirCache: with --tenant-share, B gets
// the blocks A published under the same namespace bytes.
func TestTenantsOfOneShareGroupShareTheirCache(t *testing.T) {
	e := newTenantEnv(t, "--tenant", "a=uid:"+strconv.Itoa(tenantA), "--tenant", "b=uid:"+strconv.Itoa(tenantB),
		"--tenant-share", "ab=a,b")
	if out, ok := e.run(t, tenantA, "publish", trustRoot); !ok {
		t.Fatalf("tenant A could not publish: %s", out)
	}
	if out, ok := e.run(t, tenantB, "verify", trustRoot); !ok || !strings.Contains(out, "visible 16 mismatched 0") {
		t.Fatalf("tenant B shares A's group and must get its 16 blocks: %s", out)
	}
}

// TestATenantHoldsAtMostItsShareOfSessions: with two tenants and
// --max-sessions 4, tenant A holds 2 sessions (half), a third is refused
// naming its tenant and the quota flag, and tenant B still connects and
// works.
func TestATenantHoldsAtMostItsShareOfSessions(t *testing.T) {
	e := newTenantEnv(t, "--tenant", "a=uid:"+strconv.Itoa(tenantA), "--tenant", "b=uid:"+strconv.Itoa(tenantB),
		"--max-sessions", "4")
	for i := range 2 {
		cmd := exec.Command(e.client, "loop", e.sock, strconv.Itoa(1000*(i+1)), "16")
		cmd.Dir = e.dir
		cmd.Env = append(os.Environ(), trustRoot)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tenantA, Gid: tenantA}}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		line := make([]byte, 8)
		if n, err := out.Read(line); err != nil || !strings.HasPrefix(string(line[:n]), "running") {
			t.Fatalf("tenant A's session %d did not start: %q %v", i, line[:n], err)
		}
	}
	if out, ok := e.run(t, tenantA, "verify", trustRoot); ok || !strings.Contains(out, `tenant "a" holds 2 sessions`) || !strings.Contains(out, "--tenant-quota a:sessions=N") {
		t.Fatalf("tenant A's third session must be refused naming its share: %s", out)
	}
	if out, ok := e.run(t, tenantB, "publish", trustRoot); !ok || !strings.Contains(out, "published 16") {
		t.Fatalf("tenant B must still connect while A holds its share: %s", out)
	}
}

// TestATenantsRAMQuotaEvictsItsOwnBlocksOnly: tenant A's ram quota is 4
// blocks (testclient's blocks are 1 MiB, the RAM tier 64 MiB, so nothing
// else presses on it). B publishes 16 blocks; A publishes 16, one per
// Publish: A keeps its 4 newest, every one of B's 16 stays visible to B,
// and A's batch of 16, more than its whole quota, is refused.
func TestATenantsRAMQuotaEvictsItsOwnBlocksOnly(t *testing.T) {
	e := newTenantEnv(t, "--tenant", "a=uid:"+strconv.Itoa(tenantA), "--tenant", "b=uid:"+strconv.Itoa(tenantB),
		"--tenant-quota", "a:ram=4MiB")
	if out, ok := e.run(t, tenantB, "publish", trustRoot); !ok || !strings.Contains(out, "published 16") {
		t.Fatalf("tenant B could not publish: %s", out)
	}
	if out, ok := e.run(t, tenantA, "publish1", trustRoot); !ok || !strings.Contains(out, "published 16") {
		t.Fatalf("tenant A's publishes within its quota were refused: %s", out)
	}
	if out, ok := e.run(t, tenantB, "verify", trustRoot); !ok || !strings.Contains(out, "visible 16 mismatched 0") {
		t.Fatalf("tenant B must keep all 16 blocks while A publishes past its quota: %s", out)
	}
	if out, ok := e.run(t, tenantA, "verify", trustRoot); !ok || !strings.Contains(out, "visible 4 mismatched 0") {
		t.Fatalf("tenant A must keep its quota's 4 blocks, no more: %s", out)
	}
	if out, ok := e.run(t, tenantA, "publish", trustRoot); ok {
		t.Fatalf("tenant A's batch of 16 blocks, more than its quota, was stored: %s", out)
	}
}
