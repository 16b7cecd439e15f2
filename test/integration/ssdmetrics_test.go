package integration

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrapeLines returns every sample line of the Manager's /metrics whose
// name (with its labels, as written) starts with prefix, by that name.
func scrapeLines(t *testing.T, httpAddr, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasPrefix(f[0], prefix) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", f[0], err)
			}
			out[f[0]] = v
		}
	}
	return out
}

// The built Manager with an SSD tier reports it on GET /health (configured,
// open, blocks and bytes once blocks were demoted, no errors), times each
// pwritev of a demotion in orbitkv_ssd_io_duration_seconds, and counts each
// Publish once in orbitkv_operations_total.
func TestHealthAndMetricsReportTheSSDTier(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-it-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	defer os.RemoveAll(dir)
	httpAddr := freeLoopbackAddr(t)
	sock := filepath.Join(t.TempDir(), "okv.sock")
	startManagerBin(t, "orbitkv-manager", sock, httpAddr, 10*time.Second, "--hugepages", "off", "--ram-capacity", "8MiB",
		"--ssd-dir", dir, "--ssd-capacity", "64MiB", "--ssd-slot-bytes", "64KiB")
	e := newEngine(t, sock, "demoter")
	ns := namespace(t, "ssd-metrics")
	const publishes = 24 // 24 × 16 blocks of 64 KiB: 24 MiB through an 8 MiB RAM tier
	pages := make([]uint32, itPages)
	for i := range pages {
		pages[i] = uint32(i)
	}
	for p := range publishes {
		tags := make([]uint64, itPages)
		for i := range tags {
			tags[i] = uint64(p*itPages + i)
		}
		e.publish(t, ns, tags, pages)
	}
	ops := scrapeLines(t, httpAddr, "orbitkv_operations_total{")
	if got := ops[`orbitkv_operations_total{op="publish",result="ok"}`]; got != publishes {
		t.Errorf("orbitkv_operations_total publish/ok = %v, want %d (one per Publish sent)", got, publishes)
	}
	// Demotions are asynchronous: wait until every pwritev timed is a
	// block written (or failed) and some were.
	var ssd map[string]any
	var writes, timed float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrapeLines(t, httpAddr, "orbitkv_ssd_")
		writes, timed = m["orbitkv_ssd_writes_total"], m[`orbitkv_ssd_io_duration_seconds_count{op="write"}`]
		resp, err := http.Get("http://" + httpAddr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			SSD map[string]any `json:"ssd"`
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		ssd = h.SSD
		if writes > 0 && timed == writes+ssd["write_errors"].(float64) && ssd["blocks"].(float64) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: orbitkv_ssd_writes_total %v, write durations timed %v, /health ssd %v; want some writes, each timed once", writes, timed, ssd)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ssd["configured"] != true || ssd["open"] != true || ssd["used_bytes"].(float64) == 0 ||
		ssd["capacity_bytes"].(float64) < 64<<20-64<<10 || ssd["read_errors"] != float64(0) || ssd["write_errors"] != float64(0) ||
		ssd["corrupt_blocks"] != float64(0) {
		t.Errorf("/health ssd = %v; want configured, open, blocks and bytes in use, a 64 MiB file and no errors", ssd)
	}
	t.Logf("%v blocks demoted, each pwritev timed; /health ssd %v", writes, ssd)
}
