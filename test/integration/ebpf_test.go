package integration

import (
	"bufio"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// ebpfSeries reads every <name>_count and <name>_sum of the orbitkv_ebpf_
// histograms on httpAddr's /metrics, and all their lines.
func ebpfSeries(t *testing.T, httpAddr string) (map[string]float64, []string) {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	values := map[string]float64{}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "orbitkv_ebpf_") {
			continue
		}
		lines = append(lines, line)
		f := strings.Fields(line)
		if len(f) == 2 && (strings.Contains(f[0], "_count") || strings.Contains(f[0], "_sum")) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			values[f[0]] = v
		}
	}
	return values, lines
}

// A Manager started with --ebpf, under known traffic from another process
// (this test's clients): every connection's hello and reply are measured
// Unix messages, and a restore completion wakes its waiting client at most
// once (a client that finds its copy done before waiting is not woken).
func TestEBPFProbesOfAManagerUnderKnownTraffic(t *testing.T) {
	if err := ebpf.Check(); err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	const engines, restores = 4, 20
	sock := filepath.Join(t.TempDir(), "okv.sock")
	addr := freeLoopbackAddr(t)
	startManagerBin(t, "orbitkv-manager", sock, addr, 10*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off", "--ebpf")
	ns := namespace(t, "model-ebpf")
	a := newEngine(t, sock, "engine-0")
	if r := a.publish(t, ns, []uint64{1, 2, 3, 4}, []uint32{0, 1, 2, 3}); r.Stored != 4 {
		t.Fatalf("publish stored %d", r.Stored)
	}
	chain := []client.BlockHash{bh(1), bh(2), bh(3), bh(4)}
	for i := 1; i < engines; i++ {
		e := newEngine(t, sock, "engine-"+strconv.Itoa(i))
		for range restores / (engines - 1) {
			l, err := e.c.Query(ns, chain)
			if err != nil || l.Hits != 4 {
				t.Fatalf("query: %+v %v", l, err)
			}
			e.restore(t, l.ID, []client.RestoreEntry{{Block: 0, Page: 10}, {Block: 1, Page: 11}, {Block: 2, Page: 12}, {Block: 3, Page: 13}})
			if err := e.c.Release(l.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	values, lines := ebpfSeries(t, addr)
	t.Logf("/metrics, eBPF series:\n%s", strings.Join(lines, "\n"))
	for _, tc := range []struct {
		name     string
		series   string
		min, max float64
	}{
		{"every engine's connection sent measured Unix messages to the Manager", `orbitkv_ebpf_unix_socket_seconds_count{direction="to_manager"}`, engines, 1e9},
		{"the Manager answered every engine's connection with measured Unix messages", `orbitkv_ebpf_unix_socket_seconds_count{direction="to_client"}`, engines, 1e9},
		{"no restore completion wakes a client twice", "orbitkv_ebpf_eventfd_wakeup_seconds_count", 0, restores},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := values[tc.series]
			if !ok {
				t.Fatalf("/metrics has no %s", tc.series)
			}
			if v < tc.min || v > tc.max {
				t.Errorf("%s = %v, want %v..%v", tc.series, v, tc.min, tc.max)
			}
			sum := values[strings.Replace(tc.series, "_count", "_sum", 1)]
			if v > 0 && (sum <= 0 || sum/v >= 1) {
				t.Errorf("%s: mean %v s, want in (0, 1 s)", tc.series, sum/v)
			}
		})
	}
}

// The unit keeps no capabilities; its --ebpf drop-in (deploy/systemd/
// ebpf.conf) adds the same list to CapabilityBoundingSet= and
// AmbientCapabilities=. A Manager of another uid (nobody) holding exactly
// that list passes --check's eBPF check, which loads and attaches the
// probes as a start does; holding none, as the unit alone leaves it, the
// check fails naming --ebpf with the resource status (4).
func TestTheEBPFDropInGivesTheProbesWhatTheyNeed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs the Manager as another uid with chosen capabilities")
	}
	if err := ebpf.Check(); err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux): %v", err)
	}
	b, err := os.ReadFile("../../deploy/systemd/ebpf.conf")
	if err != nil {
		t.Fatal(err)
	}
	var bounding, ambient string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			bounding = v
		}
		if v, ok := strings.CutPrefix(l, "AmbientCapabilities="); ok {
			ambient = v
		}
	}
	if bounding == "" || bounding != ambient {
		t.Fatalf("ebpf.conf: CapabilityBoundingSet=%q and AmbientCapabilities=%q must name the same capabilities", bounding, ambient)
	}
	var caps string
	for _, c := range strings.Fields(bounding) {
		caps += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	// A directory of nobody's own, off t.TempDir's 0700 parents, with a
	// copy of the binary (the tree's directories may be closed to nobody).
	dir, err := os.MkdirTemp("", "orbitkv-ebpf-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const nobody = 65534
	bin := filepath.Join(dir, "orbitkv-manager")
	src, err := os.ReadFile(filepath.Join(binDir, "orbitkv-manager"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	check := func(capList string) (string, int) {
		args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all" + capList,
			"--ambient-caps=-all" + capList, "--bounding-set=-all" + capList, "--",
			bin, "--check", "--ebpf", "--ram-capacity", "64MiB", "--hugepages", "off",
			"--bootstrap-socket", filepath.Join(dir, "okv.sock"), "--http-addr", freeLoopbackAddr(t)}
		out, err := exec.Command(setpriv, args...).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("setpriv: %v\n%s", err, out)
		return "", -1
	}
	out, code := check(caps)
	if code != 0 || !strings.Contains(out, "ok      ebpf") {
		t.Fatalf("with the drop-in's capabilities (%s): exit %d, want 0 and the ebpf check ok:\n%s", bounding, code, out)
	}
	out, code = check("")
	if code != 4 || !strings.Contains(out, "failed  ebpf") || !strings.Contains(out, "--ebpf") {
		t.Fatalf("with no capabilities: exit %d, want 4 and the ebpf check failed naming --ebpf:\n%s", code, out)
	}
}
