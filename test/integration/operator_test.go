package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// ctl runs orbitkvctl with args (the operator socket derived from
// --socket sock) and stdin, and returns stdout, stderr and the exit
// status.
func ctl(t *testing.T, sock, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "orbitkvctl"), append(args, "--socket", sock)...)
	cmd.Stdin = strings.NewReader(stdin)
	return runCtl(t, cmd)
}

// runCtl runs the orbitkvctl command cmd and returns stdout, stderr and
// the exit status; it fails the test when cmd could not run at all.
func runCtl(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", cmd, err)
	}
	return o.String(), e.String(), code
}

// ctlJSON runs orbitkvctl -o json, which must succeed, and decodes its
// answer into a map (numbers stay json.Number, strings strings).
func ctlJSON(t *testing.T, sock string, args ...string) map[string]any {
	t.Helper()
	out, errOut, code := ctl(t, sock, "", append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("orbitkvctl %q: exit %d: %s", args, code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("orbitkvctl %q: %v in %q", args, err, out)
	}
	return m
}

// field walks m by path ("ram.blocks") and returns what is there.
func field(t *testing.T, m map[string]any, path string) any {
	t.Helper()
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", path, v)
		}
		v = mm[k]
	}
	return v
}

// u64 is a 64-bit field, which the JSON must carry as a string.
func u64(t *testing.T, m map[string]any, path string) string {
	t.Helper()
	s, ok := field(t, m, path).(string)
	if !ok {
		t.Fatalf("%s = %#v, want a 64-bit integer as a JSON string", path, field(t, m, path))
	}
	return s
}

// The operator commands against a real Manager: sessions and stats show
// what two engines did, evict and flush drop the unpinned blocks of a
// namespace or all and keep the leased ones, health carries the
// Manager-wide figures.
func TestOperatorCommandsShowAndDropTheCache(t *testing.T) {
	_, sock := startCacheManager(t, "16MiB")
	nsA, nsB := namespace(t, "op-a"), namespace(t, "op-b")
	a := newEngine(t, sock, "engine-a")
	b := newEngine(t, sock, "engine-b")
	a.publish(t, nsA, []uint64{1, 2, 3, 4, 5, 6}, []uint32{0, 1, 2, 3, 4, 5})
	b.publish(t, nsB, []uint64{1, 2}, []uint32{0, 1})
	l, err := a.c.Query(nsA, []client.BlockHash{bh(1), bh(2)})
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v", l, err)
	}

	sess := ctlJSON(t, sock, "sessions")
	list, _ := sess["sessions"].([]any)
	if len(list) != 2 {
		t.Fatalf("sessions: %v, want 2", sess)
	}
	leases := map[string]string{}
	for _, s := range list {
		m := s.(map[string]any)
		leases[m["instance"].(string)] = u64(t, m, "leases")
		if u64(t, m, "buffer_bytes") != "1048576" || m["role"] != "unspecified" { // the test engines name no role
			t.Errorf("session %v: want its 1 MiB buffer and role unspecified", m)
		}
	}
	if leases["engine-a"] != "1" || leases["engine-b"] != "0" {
		t.Fatalf("leases by instance %v, want engine-a 1 and engine-b 0", leases)
	}

	st := ctlJSON(t, sock, "stats")
	if u64(t, st, "ram.blocks") != "8" || u64(t, st, "ram.pins") != "2" || u64(t, st, "budgets.leases") != "1" {
		t.Fatalf("stats: %v, want 8 blocks, 2 pins, 1 lease", st)
	}
	// The one query found both blocks it looked up in RAM.
	if u64(t, st, "ram.hit_blocks") != "2" || u64(t, st, "ram.miss_blocks") != "0" || field(t, st, "ram.hit_ratio") != json.Number("1") {
		t.Fatalf("stats: ram %v, want 2 hits, 0 misses, hit ratio 1", st["ram"])
	}

	if _, errOut, code := ctl(t, sock, "n\n", "evict", "--namespace", nsA.String()); code != 1 || !strings.Contains(errOut, "aborted") {
		t.Fatalf("evict answered no: exit %d %q, want aborted", code, errOut)
	}
	ev := ctlJSON(t, sock, "evict", "--namespace", nsA.String(), "--yes")
	if u64(t, ev, "ram_blocks") != "4" || u64(t, ev, "pinned_kept") != "2" {
		t.Fatalf("evict namespace A: %v, want 4 removed and the 2 leased kept", ev)
	}
	if st := ctlJSON(t, sock, "stats"); u64(t, st, "ram.blocks") != "4" {
		t.Fatalf("blocks after evict %s, want 4", u64(t, st, "ram.blocks"))
	}
	if out, errOut, code := ctl(t, sock, "yes\n", "flush", "--all"); code != 0 || !strings.Contains(out, "ram blocks removed  2") {
		t.Fatalf("flush --all: exit %d\n%s%s", code, out, errOut)
	}
	if st := ctlJSON(t, sock, "stats"); u64(t, st, "ram.blocks") != "2" {
		t.Fatalf("blocks after flush %s, want the 2 leased", u64(t, st, "ram.blocks"))
	}
	// The kept blocks still restore; released, a flush removes them too.
	a.restore(t, l.ID, []client.RestoreEntry{{Block: 0, Page: 10}, {Block: 1, Page: 11}})
	a.check(t, 10, 1)
	if err := a.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	if fl := ctlJSON(t, sock, "flush", "--namespace", nsA.String(), "--yes"); u64(t, fl, "ram_blocks") != "2" || u64(t, fl, "pinned_kept") != "0" {
		t.Fatalf("flush after release: %v", fl)
	}

	h := ctlJSON(t, sock, "health")
	if h["status"] != "serving" || field(t, h, "sessions") != json.Number("2") || u64(t, h, "blocks") != "0" || u64(t, h, "epoch") == "0" {
		t.Fatalf("health: %v", h)
	}
	if out, _, code := ctl(t, sock, "", "health"); code != 0 || !strings.Contains(out, "sessions    2") {
		t.Fatalf("health table (exit %d):\n%s", code, out)
	}
}

// Drain refuses a new session and new operations while a restore is in
// flight, waits for it, and then the Manager exits 0.
func TestDrainWaitsForOperationsThenTheManagerExits(t *testing.T) {
	m, sock := startCacheManager(t, "16MiB")
	ns := namespace(t, "drain")
	a := newEngine(t, sock, "drained")
	a.publish(t, ns, []uint64{1, 2}, []uint32{0, 1})
	l, err := a.c.Query(ns, []client.BlockHash{bh(1), bh(2)})
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v", l, err)
	}
	op, err := a.c.Restore(l.ID, a.id, []client.RestoreEntry{{Block: 0, Page: 8}, {Block: 1, Page: 9}})
	if err != nil {
		t.Fatal(err)
	}
	// The restore awaits its RestorePoll: one operation in flight.
	drain := start(t, "orbitkvctl", "--socket", sock, "drain", "--timeout", "20s")
	m.waitOutput(t, "draining: no new sessions or operations", 10*time.Second)
	if _, err := client.Connect(client.Options{SocketPath: sock, InstanceID: "late"}); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("a new session while draining: %v, want a refusal saying draining", err)
	}
	if _, err := a.c.Query(ns, []client.BlockHash{bh(1)}); err == nil {
		t.Fatal("a new query while draining was served")
	} else if ce := (*client.Error)(nil); !errors.As(err, &ce) || ce.Code != client.CodeUnadmitted {
		t.Fatalf("a new query while draining: %v, want Unadmitted", err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := drain.Wait(10 * time.Millisecond); !errors.Is(err, launch.ErrRunning) {
		t.Fatalf("drain returned (%v) while an operation was in flight:\n%s", err, drain.Output())
	}
	if err := a.c.RestoreWait(op, 10*time.Second); err != nil {
		t.Fatalf("restore wait while draining: %v", err)
	}
	a.check(t, 8, 1)
	if err := drain.wait(t, 15*time.Second); err != nil {
		t.Fatalf("drain: %v\n%s", err, drain.Output())
	}
	if !strings.Contains(drain.Output(), "no operations in flight") {
		t.Fatalf("drain printed:\n%s", drain.Output())
	}
	if err := m.wait(t, 15*time.Second); err != nil {
		t.Fatalf("the Manager after drain: %v, want exit 0\n%s", err, m.Output())
	}
}

// With an SSD tier, evict demotes the RAM blocks to it and flush removes
// them from both tiers.
func TestEvictDemotesToSSDAndFlushRemovesThemThere(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-op-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--hugepages", "off", "--ram-capacity", "16MiB",
		"--ssd-dir", dir, "--ssd-capacity", "128MiB", "--ssd-slot-bytes", "1MiB")
	ns := namespace(t, "op-ssd")
	e := newEngine(t, sock, "ssd-engine")
	e.publish(t, ns, []uint64{1, 2, 3, 4}, []uint32{0, 1, 2, 3})
	if ev := ctlJSON(t, sock, "evict", "--all", "--yes"); u64(t, ev, "ram_blocks") != "4" {
		t.Fatalf("evict --all: %v, want 4 blocks out of RAM", ev)
	}
	st := waitStats(t, sock, "ssd.blocks", "4")
	if st["ssd"].(map[string]any)["on"] != true || u64(t, st, "ram.blocks") != "0" || u64(t, st, "ram.evictions") != "0" {
		t.Fatalf("stats after evict: %v, want the SSD tier on, RAM empty, no policy evictions counted", st)
	}
	if fl := ctlJSON(t, sock, "flush", "--all", "--yes"); u64(t, fl, "ssd_blocks") != "4" || u64(t, fl, "ram_blocks") != "0" {
		t.Fatalf("flush --all: %v, want the 4 SSD blocks removed", fl)
	}
	waitStats(t, sock, "ssd.blocks", "0")
	if l, err := e.c.Query(ns, []client.BlockHash{bh(1)}); err != nil || l.Hits != 0 {
		t.Fatalf("query after flush: %+v %v, want a miss", l, err)
	}
}

// waitStats polls orbitkvctl stats until the 64-bit field at path reads
// want (demotions are written behind), failing after 10 s.
func waitStats(t *testing.T, sock, path, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := ctlJSON(t, sock, "stats")
		if got := u64(t, st, path); got == want {
			return st
		} else if time.Now().After(deadline) {
			t.Fatalf("stats %s = %s after 10 s, want %s: %v", path, got, want, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A drain whose orbitkvctl is killed still runs to its end in the Manager:
// it waits out its --timeout for the restore in flight and only then does
// the Manager shut down (exit 0).
func TestDrainRunsOnWhenItsClientIsKilled(t *testing.T) {
	m, sock := startCacheManager(t, "16MiB")
	ns := namespace(t, "drain-killed")
	a := newEngine(t, sock, "drained")
	a.publish(t, ns, []uint64{1, 2}, []uint32{0, 1})
	l, err := a.c.Query(ns, []client.BlockHash{bh(1), bh(2)})
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v", l, err)
	}
	if _, err := a.c.Restore(l.ID, a.id, []client.RestoreEntry{{Block: 0, Page: 8}, {Block: 1, Page: 9}}); err != nil {
		t.Fatal(err)
	}
	// The restore is never polled: one operation in flight until the
	// drain's timeout.
	const wait = 3 * time.Second
	drain := start(t, "orbitkvctl", "--socket", sock, "drain", "--timeout", wait.String())
	m.waitOutput(t, "draining: no new sessions or operations", 10*time.Second)
	begun := time.Now()
	if err := drain.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	drain.Wait(5 * time.Second)
	if err := m.Wait(wait / 2); !errors.Is(err, launch.ErrRunning) {
		t.Fatalf("the Manager ended (%v) %v after its drain's client was killed, before the drain's %v:\n%s", err, time.Since(begun), wait, m.Output())
	}
	if err := m.wait(t, 20*time.Second); err != nil {
		t.Fatalf("the Manager after the drain: %v, want exit 0\n%s", err, m.Output())
	}
	if d := time.Since(begun); d < wait-500*time.Millisecond {
		t.Fatalf("the Manager exited %v after the drain began, before its %v timeout", d, wait)
	}
	if !strings.Contains(m.Output(), "timed_out=true") {
		t.Fatalf("the drain did not end at its timeout:\n%s", m.Output())
	}
}

// Operator connections beyond the limits are closed at once; the Manager
// still opens bootstrap sessions meanwhile, and once the held connections
// close orbitkvctl answers again.
func TestOperatorConnectionsBeyondTheLimitAreClosed(t *testing.T) {
	_, sock := startCacheManager(t, "16MiB")
	var held []net.Conn
	closed := 0
	for range 40 {
		c, err := net.Dial("unix", sock+".operator")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	for _, c := range held { // 16 held x 50 ms: well within the 5 s handshake bound
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); !os.IsTimeout(err) {
			closed++
		}
	}
	if closed != 40-16 {
		t.Fatalf("%d of 40 operator connections of one uid closed, want 24 (16 per uid)", closed)
	}
	newEngine(t, sock, "beside-a-flood") // a bootstrap session opens beside the held connections
	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, stderr, code := ctl(t, sock, "", "health")
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orbitkvctl health after the held connections closed: exit %d: %s", code, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ctlEnv runs orbitkvctl with args and exactly the environment env (PATH
// aside), and returns stdout, stderr and the exit status.
func ctlEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "orbitkvctl"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return runCtl(t, cmd)
}

// TestTheSocketsFollowTheEnvironment: a Manager given RUNTIME_DIRECTORY
// (as systemd gives a unit with RuntimeDirectory=) and
// ORBITKV_OPERATOR_SOCKET, and no socket flag, binds
// $RUNTIME_DIRECTORY/manager.sock and that operator socket; orbitkvctl
// given only ORBITKV_OPERATOR_SOCKET dials it, given only
// ORBITKV_BOOTSTRAP_SOCKET dials that path plus .operator, and ping (the
// C client) reaches the Manager through ORBITKV_BOOTSTRAP_SOCKET.
func TestTheSocketsFollowTheEnvironment(t *testing.T) {
	dir, err := os.MkdirTemp("", "okvenv") // short: the paths stay under 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, op := filepath.Join(dir, "manager.sock"), filepath.Join(dir, "ops.sock")
	t.Setenv("RUNTIME_DIRECTORY", dir+":"+filepath.Join(dir, "second"))
	t.Setenv("ORBITKV_OPERATOR_SOCKET", op)
	t.Setenv("ORBITKV_BOOTSTRAP_SOCKET", "")
	m := start(t, "orbitkv-manager", "--http-addr", "", "--ram-capacity", "64MiB", "--hugepages", "off")

	deadline := time.Now().Add(10 * time.Second)
	for {
		out, errOut, code := ctlEnv(t, []string{"ORBITKV_OPERATOR_SOCKET=" + op}, "health", "-o", "json")
		if code == 0 {
			if !strings.Contains(out, `"status": "serving"`) {
				t.Fatalf("health through ORBITKV_OPERATOR_SOCKET: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orbitkvctl health with ORBITKV_OPERATOR_SOCKET=%s: exit %d: %s\nManager output:\n%s", op, code, errOut, m.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, err := os.Stat(sock); err != nil || st.Mode().Type() != os.ModeSocket {
		t.Fatalf("the Manager did not bind $RUNTIME_DIRECTORY/manager.sock: %v", err)
	}
	// The operator socket is not at sock.operator: a command following only
	// ORBITKV_BOOTSTRAP_SOCKET dials that path and says so.
	if _, errOut, code := ctlEnv(t, []string{"ORBITKV_BOOTSTRAP_SOCKET=" + sock}, "health"); code != 1 ||
		!strings.Contains(errOut, sock+".operator: no Manager there") {
		t.Fatalf("health with ORBITKV_BOOTSTRAP_SOCKET: exit %d, %s; want it to dial %s.operator", code, errOut, sock)
	}
	if out, errOut, code := ctlEnv(t, []string{"ORBITKV_BOOTSTRAP_SOCKET=" + sock}, "ping", "--count", "2", "--interval", "0"); code != 0 ||
		!strings.Contains(out, "summary n=2 ") {
		t.Fatalf("ping with ORBITKV_BOOTSTRAP_SOCKET: exit %d: %s%s", code, out, errOut)
	}
}
