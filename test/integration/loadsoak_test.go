package integration

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The load soak: SOAK_SESSIONS sessions at one Manager
// on a Unix socket of a temporary directory, spread over soak.procs
// testclient processes (testclient soak: one goroutine and one okv_client
// per session) running pings, publishes, ticketed queries, restores with a
// check of every byte, and releases for soak.duration, while a random
// client process is SIGKILLed every soak.kill-every (about) and started
// again. The Manager's RSS and fds (/proc/<pid>/status, /proc/<pid>/fd) and
// its goroutines, sessions, leases, pins, reserved bytes and operations
// (loopback /metrics) are sampled every soak.sample into a TSV file under
// soak.out. At the end the clients get SIGTERM (each closes its sessions
// after its last release), and the test asserts: no byte mismatch and no
// client error; 256 sessions reached at the Manager; the idle invariant
// (assertIdle); fds and goroutines back at their starting values; RSS
// within soak.rss-limit. It prints a summary table (also written beside the
// samples). Skipped unless -soak.duration is given (make soak: 10m).
var (
	soakDuration    = flag.Duration("soak.duration", 0, "run the load soak for this long (0: skip it); make soak uses 10m")
	soakSessions    = flag.Int("soak.sessions", 256, "sessions at the Manager during the load soak")
	soakProcs       = flag.Int("soak.procs", 32, "client processes carrying the soak sessions (must divide soak.sessions)")
	soakKillEvery   = flag.Duration("soak.kill-every", 3*time.Second, "mean interval between client SIGKILLs (0: none)")
	soakSampleEvery = flag.Duration("soak.sample", 2*time.Second, "interval between samples of the Manager")
	soakOut         = flag.String("soak.out", "../../build/soak", "directory for the samples and summary (git-ignored build/)")
	soakRSSLimit    = flag.Int64("soak.rss-limit", 1<<30, "largest Manager RSS in bytes the soak accepts")
)

// managerSample is one observation of the Manager.
type managerSample struct {
	at                                             time.Duration // since the clients started
	rssKiB, fds                                    int64
	goroutines, sessions, leases, pins, reserved   int64
	operations, blocks, evictions, publishedBlocks int64
}

// soakCounts are the per-kind operation counts a testclient soak prints.
type soakCounts map[string]uint64

var soakKinds = []string{"ping", "publish", "published_blocks", "query", "hits", "restore", "restored_blocks", "release", "unadmitted", "mismatch"}

// lastSoakStats parses the last "soak stats" line of a client's output.
func lastSoakStats(out string) (soakCounts, bool) {
	i := strings.LastIndex(out, "soak stats ")
	if i < 0 {
		return soakCounts{}, false
	}
	line, _, _ := strings.Cut(out[i:], "\n")
	c := soakCounts{}
	for _, f := range strings.Fields(line)[2:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			c[k] = n
		}
	}
	return c, strings.HasSuffix(line, " final")
}

// soakClient is one client process slot: its current incarnation and the
// counts of the ones before it.
type soakClient struct {
	name  string
	gen   int
	p     *proc
	total soakCounts
}

func (c *soakClient) add(s soakCounts) {
	for k, v := range s {
		c.total[k] += v
	}
}

func readManager(pid int, metricsURL string, hc *http.Client) (managerSample, error) {
	var s managerSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			s.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = int64(len(fds))
	resp, err := hc.Get(metricsURL)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: %s", metricsURL, resp.Status)
	}
	vals := map[string]*int64{
		"go_goroutines": &s.goroutines, "orbitkv_sessions": &s.sessions, "orbitkv_leases": &s.leases,
		"orbitkv_block_pins": &s.pins, "orbitkv_reserved_bytes": &s.reserved, "orbitkv_operations_in_progress": &s.operations,
		"orbitkv_ram_blocks": &s.blocks, "orbitkv_evictions_total": &s.evictions, "orbitkv_published_blocks_total": &s.publishedBlocks,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if p, ok := vals[f[0]]; ok {
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				*p = int64(v)
			}
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return s, sc.Err()
}

func TestLoadSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("the load soak runs only with -soak.duration (make soak runs it for 10m)")
	}
	if *soakProcs < 1 || *soakSessions%*soakProcs != 0 {
		t.Fatalf("-soak.procs %d must divide -soak.sessions %d", *soakProcs, *soakSessions)
	}
	perProc := *soakSessions / *soakProcs
	outDir, err := filepath.Abs(filepath.Join(*soakOut, time.Now().Format("loadsoak-20060102-150405")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(t.TempDir(), "okv.sock")
	addr := freeLoopbackAddr(t)
	m := startManagerBin(t, "orbitkv-manager", sock, addr, 30*time.Second, "--ram-capacity", "64MiB", "--hugepages", "off")
	pid := m.Pid()
	// No keep-alive: a kept connection would be a goroutine and an fd of
	// the Manager's that the end-of-run comparison would count.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	metricsURL := "http://" + addr + "/metrics"
	first, err := readManager(pid, metricsURL, hc)
	if err != nil {
		t.Fatalf("sampling the Manager: %v", err)
	}

	// Sampler: every soak.sample until stopped; errors are kept, not fatal
	// off the test goroutine.
	var (
		mu        sync.Mutex
		samples   []managerSample
		sampleErr error
	)
	t0 := time.Now()
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(*soakSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s, err := readManager(pid, metricsURL, hc)
			s.at = time.Since(t0)
			mu.Lock()
			if err != nil && sampleErr == nil {
				sampleErr = fmt.Errorf("at %v: %w", s.at.Round(time.Second), err)
			} else if err == nil {
				samples = append(samples, s)
			}
			mu.Unlock()
		}
	}()

	clients := make([]*soakClient, *soakProcs)
	launch := func(c *soakClient) {
		c.gen++
		c.p = start(t, "testclient", "soak", sock, strconv.Itoa(perProc), fmt.Sprintf("%s.%d", c.name, c.gen))
	}
	for i := range clients {
		clients[i] = &soakClient{name: fmt.Sprintf("p%02d", i), total: soakCounts{}}
		launch(clients[i])
	}
	for _, c := range clients {
		c.p.waitOutput(t, "soak ready", 60*time.Second)
	}
	t.Logf("%d client processes × %d sessions connected in %v", *soakProcs, perProc, time.Since(t0).Round(time.Millisecond))

	// checkAlive fails the test if a client ended on its own.
	checkAlive := func() {
		for _, c := range clients {
			select {
			case <-c.p.Done():
				err := c.p.Err()
				t.Fatalf("client %s.%d exited by itself (%v):\n%s", c.name, c.gen, err, c.p.Output())
			default:
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	killed := 0
	deadline := t0.Add(*soakDuration)
	nextKill := time.Now().Add(jitter(rng, *soakKillEvery))
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		checkAlive()
		if *soakKillEvery <= 0 || time.Now().Before(nextKill) {
			continue
		}
		c := clients[rng.IntN(len(clients))]
		c.p.Signal(syscall.SIGKILL)
		c.p.wait(t, 10*time.Second)
		out := c.p.Output()
		if strings.Contains(out, "testclient:") || strings.Contains(out, "MISMATCH") {
			t.Fatalf("client %s.%d failed before it was killed:\n%s", c.name, c.gen, out)
		}
		s, _ := lastSoakStats(out)
		c.add(s)
		killed++
		launch(c)
		c.p.waitOutput(t, "soak ready", 60*time.Second)
		nextKill = time.Now().Add(jitter(rng, *soakKillEvery))
	}
	ran := time.Since(t0)

	// The end: SIGTERM every client; each releases, closes and prints its
	// final counts.
	for _, c := range clients {
		c.p.Signal(syscall.SIGTERM)
	}
	for _, c := range clients {
		err := c.p.wait(t, 60*time.Second)
		out := c.p.Output()
		s, final := lastSoakStats(out)
		if err != nil || !final {
			t.Errorf("client %s.%d at the end: exit %v, final stats %v:\n%s", c.name, c.gen, err, final, tail(out, 40))
		}
		c.add(s)
	}
	h := assertIdle(t, sock)

	// Settle: the Manager tears sessions down asynchronously; give fds and
	// goroutines up to 15 s to come back before the last sample.
	var last managerSample
	for settle := time.Now().Add(15 * time.Second); ; {
		last, err = readManager(pid, metricsURL, hc)
		if err != nil {
			t.Fatalf("sampling the Manager at the end: %v", err)
		}
		if (last.fds <= first.fds && last.goroutines <= first.goroutines) || time.Now().After(settle) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	last.at = time.Since(t0)
	close(stopSampling)
	<-sampled
	mu.Lock()
	all := append(append([]managerSample{first}, samples...), last)
	errSampling := sampleErr
	mu.Unlock()
	if errSampling != nil {
		t.Errorf("sampling the Manager: %v", errSampling)
	}

	total := soakCounts{}
	for _, c := range clients {
		for k, v := range c.total {
			total[k] += v
		}
	}
	samplesPath := filepath.Join(outDir, "samples.tsv")
	if err := writeSoakSamples(samplesPath, all); err != nil {
		t.Errorf("writing samples: %v", err)
	}
	rssMin, rssMax, fdsMax, grMax, sessMax, at256 := all[0].rssKiB, all[0].rssKiB, int64(0), int64(0), int64(0), 0
	for _, s := range all {
		rssMin, rssMax = min(rssMin, s.rssKiB), max(rssMax, s.rssKiB)
		fdsMax, grMax, sessMax = max(fdsMax, s.fds), max(grMax, s.goroutines), max(sessMax, s.sessions)
		if s.sessions == int64(*soakSessions) {
			at256++
		}
	}
	var b strings.Builder
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "| %-18s | %s |\n", k, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(&b, "load soak summary (%s)\n", outDir)
	fmt.Fprintf(&b, "| %-18s | %s |\n|---|---|\n", "what", "value")
	row("duration", "%v (asked %v)", ran.Round(time.Second), *soakDuration)
	row("sessions", "%d (%d processes × %d); at the Manager max %d, exactly %d in %d of %d samples",
		*soakSessions, *soakProcs, perProc, sessMax, *soakSessions, at256, len(all))
	row("ping", "%d", total["ping"])
	row("publish", "%d (%d blocks stored)", total["publish"], total["published_blocks"])
	row("query (ticket)", "%d (%d blocks hit)", total["query"], total["hits"])
	row("restore", "%d (%d blocks, every byte checked)", total["restore"], total["restored_blocks"])
	row("release", "%d", total["release"])
	row("unadmitted", "%d (retried)", total["unadmitted"])
	row("clients killed", "%d (SIGKILL, each restarted)", killed)
	row("byte mismatches", "%d", total["mismatch"])
	row("manager RSS", "min %.1f MiB, max %.1f MiB, end %.1f MiB", float64(rssMin)/1024, float64(rssMax)/1024, float64(last.rssKiB)/1024)
	row("manager fds", "start %d, end %d (max %d)", first.fds, last.fds, fdsMax)
	row("manager goroutines", "start %d, end %d (max %d)", first.goroutines, last.goroutines, grMax)
	row("idle at the end", "leases %d pins %d reserved %d operations %d (sessions %d)", h.Leases, h.Pins, h.ReservedBytes, h.Operations, h.Sessions)
	row("cache", "%d blocks resident, %d evictions", last.blocks, last.evictions)
	row("samples", "%d, every %v: %s", len(all), *soakSampleEvery, samplesPath)
	b.WriteString("(operation counts of killed clients are those of their last report, at most 250 ms before the kill)\n")
	summary := b.String()
	fmt.Print(summary)
	if err := os.WriteFile(filepath.Join(outDir, "summary.md"), []byte(summary), 0o644); err != nil {
		t.Errorf("writing the summary: %v", err)
	}

	if total["mismatch"] != 0 {
		t.Errorf("%d restored blocks had mismatched bytes", total["mismatch"])
	}
	if total["restore"] == 0 || total["publish"] == 0 {
		t.Errorf("the soak did no restores or publishes: %v", total)
	}
	if sessMax != int64(*soakSessions) {
		t.Errorf("sessions at the Manager peaked at %d, want %d", sessMax, *soakSessions)
	}
	if last.fds > first.fds {
		t.Errorf("Manager fds grew from %d to %d", first.fds, last.fds)
	}
	if last.goroutines > first.goroutines {
		t.Errorf("Manager goroutines grew from %d to %d", first.goroutines, last.goroutines)
	}
	if rssMax*1024 > *soakRSSLimit {
		t.Errorf("Manager RSS peaked at %d KiB, over -soak.rss-limit %d bytes", rssMax, *soakRSSLimit)
	}
	if out := m.Output(); strings.Contains(out, "panic") || strings.Contains(out, "WARNING: DATA RACE") {
		t.Errorf("Manager output has a panic or race:\n%s", tail(out, 80))
	}
}

// jitter is d scaled by a uniform factor in [0.5, 1.5).
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rng.Float64()))
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

func writeSoakSamples(path string, all []managerSample) error {
	var b strings.Builder
	b.WriteString("elapsed_s\trss_kib\tfds\tgoroutines\tsessions\tleases\tpins\treserved_bytes\toperations\tblocks\tevictions\tpublished_blocks\n")
	for _, s := range all {
		fmt.Fprintf(&b, "%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.at.Seconds(), s.rssKiB, s.fds, s.goroutines,
			s.sessions, s.leases, s.pins, s.reserved, s.operations, s.blocks, s.evictions, s.publishedBlocks)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
