package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/syncbuf"
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
	args              []string // the Manager's
	m                 *proc
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
	ctlBin, err := os.ReadFile(filepath.Join(binDir, "orbitkvctl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "orbitkvctl"), ctlBin, 0o755); err != nil {
		t.Fatal(err)
	}
	// shm whatever -channel-transport says: the iceoryx2 transport serves
	// one uid and is refused with tenants.
	e.args = append([]string{"--channel-transport", "shm", "--ram-capacity", "64MiB", "--hugepages", "off"}, args...)
	e.m = startManagerBin(t, "orbitkv-manager", e.sock, "", 10*time.Second, e.args...)
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
// hashes gets none, and the discovery index B maps for that namespace is
// B's own and lists none of A's blocks; a tenant cannot use the operator
// socket; a uid no tenant selects is refused at bootstrap, as is the
// Manager's own uid, which no tenant selects; a client that was not told
// to trust the Manager's uid refuses it before sending anything.
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
	if out, ok := e.run(t, tenantA, "discover", trustRoot); !ok || !strings.Contains(out, "local 16") {
		t.Fatalf("tenant A's discovery index must list its 16 blocks: %s", out)
	}
	if out, ok := e.run(t, tenantB, "discover", trustRoot); !ok || !strings.Contains(out, "local 0") {
		t.Fatalf("tenant B mapping tenant A's namespace must get an index of its own, empty: %s", out)
	}
	ctlCmd := exec.Command(filepath.Join(e.dir, "orbitkvctl"), "stats", "--socket", e.sock)
	ctlCmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tenantA, Gid: tenantA}}
	if out, err := ctlCmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("a tenant must not reach the operator socket (per-tenant figures, flush, drain): %v %s", err, out)
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

// tenantFigures are one tenant's figures from orbitkvctl stats.
type tenantFigures struct {
	sessions, sessionsShare, tables, tablesShare, ops, opsShare int64
	leased, leasedShare, answered, waitNs                       int64
	queued, queueNs                                             int64
	buffers                                                     int64
}

func figuresOf(t *testing.T, sock, name string) tenantFigures {
	t.Helper()
	st := ctlJSON(t, sock, "stats")
	list, _ := st["tenants"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		if m["name"] != name {
			continue
		}
		n := func(k string) int64 {
			switch v := m[k].(type) {
			case string:
				i, _ := strconv.ParseInt(v, 10, 64)
				return i
			case json.Number:
				i, _ := v.Int64()
				return i
			}
			return 0
		}
		return tenantFigures{n("sessions"), n("sessions_share"), n("tables"), n("tables_share"), n("operations"), n("operations_share"),
			n("leased_bytes"), n("leased_bytes_share"), n("tickets_answered"), n("ticket_wait_ns"), n("tickets_queued"), n("ticket_queue_ns"), n("buffers")}
	}
	t.Fatalf("orbitkvctl stats lists no tenant %q: %v", name, st["tenants"])
	return tenantFigures{}
}

var honestLine = regexp.MustCompile(`honest queried (\d+) hit (\d+) unadmitted (\d+) mismatched (\d+)`)

// honestFigures are one run of the honest workload: its hit ratio (from
// the client) and, from the Manager's per-tenant figures, its tickets
// answered, the mean time from submission to answer, the tickets that
// queued (answered Loading first: they waited for SSD reads, the byte
// budget or permits) and their mean time.
type honestFigures struct {
	hitRatio              float64
	answered, queued      int64
	meanAnswer, meanQueue time.Duration
}

// honestRun runs the honest workload as tenant A.
func (e *tenantEnv) honestRun(t *testing.T, first int) (honestFigures, bool) {
	t.Helper()
	before := figuresOf(t, e.sock, "honest")
	cmd := exec.Command(e.client, "honest", e.sock, strconv.Itoa(first), "16")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), trustRoot)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tenantA, Gid: tenantA}}
	out, err := cmd.CombinedOutput()
	t.Logf("honest: %s", strings.TrimSpace(string(out)))
	m := honestLine.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		return honestFigures{}, false
	}
	q, _ := strconv.Atoi(m[1])
	h, _ := strconv.Atoi(m[2])
	if m[4] != "0" {
		t.Fatalf("the honest tenant restored wrong bytes: %s", out)
	}
	after := figuresOf(t, e.sock, "honest")
	f := honestFigures{hitRatio: float64(h) / float64(q), answered: after.answered - before.answered, queued: after.queued - before.queued}
	if f.answered > 0 {
		f.meanAnswer = time.Duration((after.waitNs - before.waitNs) / f.answered)
	}
	if f.queued > 0 {
		f.meanQueue = time.Duration((after.queueNs - before.queueNs) / f.queued)
	}
	return f, true
}

// startHostile starts the hostile workload as tenant B and waits until it
// holds all it was given.
func (e *tenantEnv) startHostile(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(e.client, "hostile", e.sock, "5000", "16")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), trustRoot)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tenantB, Gid: tenantB}}
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "saturated"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the hostile tenant did not saturate within 60 s: %s", out.String())
		}
	}
	t.Logf("hostile: %s", strings.TrimSpace(out.String()))
	return cmd
}

// TestAHostileTenantDoesNotStarveAnHonestOne: tenant "hostile" takes every
// session, discovery table, leased byte and operation permit the Manager
// grants it and holds them; tenant "honest" then runs the same workload
// as alone (50 tickets for its 16 blocks, each restored, checked and
// released) with the same hit ratio, and its tickets queue inside the
// Manager (answered Loading first, waiting for budget, permits or SSD
// reads) no more than alone: none when none did alone, else a mean
// within 1.2×. Then the control: a hostile tenant allowed
// every operation permit and the whole lease budget (--tenant-quota)
// does starve it, so the shares are what keeps it working.
func TestAHostileTenantDoesNotStarveAnHonestOne(t *testing.T) {
	base := []string{"--tenant", "honest=uid:" + strconv.Itoa(tenantA), "--tenant", "hostile=uid:" + strconv.Itoa(tenantB),
		"--max-sessions", "16", "--max-ops", "32", "--lease-budget", "32MiB", "--discover-bytes", "4MiB"}
	e := newTenantEnv(t, base...)
	alone, ok := e.honestRun(t, 0)
	if !ok || alone.hitRatio != 1 {
		t.Fatalf("alone, the honest tenant's hit ratio is %.3f (ran: %v), want 1", alone.hitRatio, ok)
	}
	hostile := e.startHostile(t)
	f := figuresOf(t, e.sock, "hostile")
	t.Logf("hostile holds: sessions %d/%d, tables %d/%d, operations %d/%d, leased %d/%d bytes",
		f.sessions, f.sessionsShare, f.tables, f.tablesShare, f.ops, f.opsShare, f.leased, f.leasedShare)
	if f.sessions != f.sessionsShare || f.tables != f.tablesShare || f.ops != f.opsShare || f.leased != f.leasedShare {
		t.Fatalf("the hostile tenant must hold its whole share of each resource: %+v", f)
	}
	beside, ok := e.honestRun(t, 100)
	t.Logf("honest tenant, alone and beside the hostile one: hit ratio %.3f and %.3f; tickets queued inside the Manager %d of %d (mean %v) and %d of %d (mean %v); mean submission to answer %v and %v",
		alone.hitRatio, beside.hitRatio, alone.queued, alone.answered, alone.meanQueue, beside.queued, beside.answered, beside.meanQueue,
		alone.meanAnswer, beside.meanAnswer)
	if !ok || beside.hitRatio != alone.hitRatio {
		t.Fatalf("beside the hostile tenant the honest one's hit ratio is %.3f (ran: %v), alone %.3f", beside.hitRatio, ok, alone.hitRatio)
	}
	switch {
	case alone.queued == 0 && beside.queued != 0:
		t.Fatalf("beside the hostile tenant %d of the honest one's tickets queued inside the Manager (mean %v), alone none", beside.queued, beside.meanQueue)
	case alone.queued != 0 && beside.meanQueue > alone.meanQueue*12/10:
		t.Fatalf("the honest tenant's tickets queued %v inside the Manager beside the hostile one, %v alone: more than 1.2×", beside.meanQueue, alone.meanQueue)
	}

	// Killed, the hostile tenant holds nothing: every per-tenant count
	// returns to 0 (its blocks stay: they are the cache).
	hostile.Process.Kill()
	hostile.Wait()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		f = figuresOf(t, e.sock, "hostile")
		if f.sessions == 0 && f.tables == 0 && f.ops == 0 && f.leased == 0 && f.buffers == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("10 s after the hostile tenant was killed it still holds %+v", f)
		}
	}

	// Control: the hostile tenant may take every operation permit and
	// the whole lease budget (sessions and tables keep their halves, so
	// the honest tenant still connects).
	c := newTenantEnv(t, append(base, "--tenant-quota", "hostile:ops=32,pinned=1")...)
	c.startHostile(t)
	starved, ok := c.honestRun(t, 0)
	t.Logf("control, hostile allowed every permit and byte: the honest tenant ran: %v, hit ratio %.3f", ok, starved.hitRatio)
	if ok && starved.hitRatio == alone.hitRatio {
		t.Fatal("a hostile tenant allowed the whole Manager did not starve the honest one: the test cannot tell shares from none")
	}
}

// TestATenantsSSDBlocksStayItsOwnAcrossARestart: with the SSD tier,
// tenant A's blocks demoted to SSD (orbitkvctl evict --all) come back to
// A and not to B sending the same namespace and hashes, and so again
// after the Manager is SIGKILLed and a new one starts on the same
// --ssd-dir (the SSD keys are the mixed namespaces, and each record's
// MAC is checked).
func TestATenantsSSDBlocksStayItsOwnAcrossARestart(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-tenant-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := newTenantEnv(t, "--tenant", "a=uid:"+strconv.Itoa(tenantA), "--tenant", "b=uid:"+strconv.Itoa(tenantB),
		"--ssd-dir", dir, "--ssd-capacity", "128MiB", "--ssd-slot-bytes", "1MiB")
	if out, ok := e.run(t, tenantA, "publish", trustRoot); !ok {
		t.Fatalf("tenant A could not publish: %s", out)
	}
	if ev := ctlJSON(t, e.sock, "evict", "--all", "--yes"); u64(t, ev, "ram_blocks") != "16" {
		t.Fatalf("evict --all: %v, want A's 16 blocks demoted", ev)
	}
	check := func(when string) {
		t.Helper()
		// Demotions are written behind the evict: wait for the 16 blocks
		// to be on SSD (a block whose write is in flight is found nowhere).
		for end := time.Now().Add(20 * time.Second); u64(t, ctlJSON(t, e.sock, "stats"), "ssd.blocks") != "16"; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: A's 16 blocks are not on SSD after 20 s: %v", when, ctlJSON(t, e.sock, "stats")["ssd"])
			}
		}
		if out, ok := e.run(t, tenantA, "verify", trustRoot); !ok || !strings.Contains(out, "visible 16 mismatched 0") {
			t.Fatalf("%s: tenant A does not get its 16 blocks back from SSD: %s", when, out)
		}
		if out, ok := e.run(t, tenantB, "verify", trustRoot); !ok || !strings.Contains(out, "visible 0 mismatched 0") {
			t.Fatalf("%s: tenant B must not get tenant A's SSD blocks: %s", when, out)
		}
	}
	check("demoted")
	if ev := ctlJSON(t, e.sock, "evict", "--all", "--yes"); u64(t, ev, "ram_blocks") != "16" {
		t.Fatalf("evict --all again: %v, want 16", ev)
	}
	e.m.Signal(syscall.SIGKILL)
	e.m.wait(t, 5*time.Second)
	e.m = startManagerBin(t, "orbitkv-manager", e.sock, "", 10*time.Second, e.args...)
	check("after a SIGKILL and a restart")
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
