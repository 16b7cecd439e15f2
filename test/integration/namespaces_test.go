package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orbitkv/orbitkv/gocore/client"
)

// namespaceRow is the row of orbitkvctl namespaces -o json whose
// namespace is ns; it fails the test when there is none.
func namespaceRow(t *testing.T, sock, ns string) map[string]any {
	t.Helper()
	out := ctlJSON(t, sock, "namespaces")
	rows, _ := out["namespaces"].([]any)
	for _, r := range rows {
		if m := r.(map[string]any); m["namespace"] == ns {
			return m
		}
	}
	t.Fatalf("orbitkvctl namespaces: no row of namespace %s in %v", ns, out)
	return nil
}

// A client publishes and queries in a namespace: orbitkvctl namespaces
// shows its blocks, bytes, queries, hits and publishes (as JSON, YAML and
// a table), sessions shows the namespace, version shows the Manager's
// build, and evict --namespace of the listed value removes its blocks.
func TestNamespacesShowAClientsBlocksAndEvictTakesTheListedNamespace(t *testing.T) {
	_, sock := startCacheManager(t, "16MiB")
	ns, other := namespace(t, "ns-listed"), namespace(t, "ns-other")
	a := newEngine(t, sock, "engine-ns")
	a.publish(t, ns, []uint64{1, 2, 3, 4}, []uint32{0, 1, 2, 3})
	l, err := a.c.Query(ns, []client.BlockHash{bh(1), bh(2), bh(9)})
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v, want 2 hits", l, err)
	}
	if err := a.c.Release(l.ID); err != nil {
		t.Fatal(err)
	}
	b := newEngine(t, sock, "engine-other")
	b.publish(t, other, []uint64{1}, []uint32{0})

	const blockBytes = itLayers * itPageBytes
	row := namespaceRow(t, sock, ns.String())
	want := map[string]string{"ram_blocks": "4", "ram_bytes": fmt.Sprint(4 * blockBytes), "ssd_blocks": "0", "queries": "1",
		"hit_blocks": "2", "published_blocks": "4"}
	for k, v := range want {
		if got := u64(t, row, k); got != v {
			t.Errorf("namespaces: %s = %s, want %s (row %v)", k, got, v, row)
		}
	}
	if row["sessions"] != json.Number("1") || row["key"] != ns.String() || row["tenant"] != "" || row["other"] != false {
		t.Errorf("namespaces row %v: want 1 session, the key equal to the namespace (no tenants), no tenant", row)
	}
	if o := namespaceRow(t, sock, other.String()); u64(t, o, "ram_blocks") != "1" || u64(t, o, "queries") != "0" {
		t.Errorf("the other namespace's row %v: want its 1 block and no query", o)
	}

	// YAML carries the same row.
	out, errOut, code := ctl(t, sock, "", "namespaces", "-o", "yaml")
	var doc struct {
		Namespaces []map[string]any `yaml:"namespaces"`
	}
	if code != 0 || yaml.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("namespaces -o yaml: exit %d %s\n%s", code, errOut, out)
	}
	found := false
	for _, r := range doc.Namespaces {
		if r["namespace"] == ns.String() {
			found = r["ram_blocks"] == "4" && r["hit_blocks"] == "2" && r["sessions"] == 1
		}
	}
	if !found {
		t.Errorf("namespaces -o yaml lacks the row of %s with 4 blocks, 2 hits, 1 session:\n%s", ns, out)
	}
	// The table names it with its figures.
	if out, _, code := ctl(t, sock, "", "namespaces"); code != 0 || !strings.Contains(out, ns.String()) || !strings.Contains(out, "4 (256 KiB)") ||
		strings.Contains(out, "KEY") {
		t.Errorf("namespaces table (exit %d), want the namespace, 4 (256 KiB) and no KEY column without tenants:\n%s", code, out)
	}

	// sessions shows each session's last namespace.
	sess := ctlJSON(t, sock, "sessions")
	byInstance := map[string]any{}
	for _, s := range sess["sessions"].([]any) {
		m := s.(map[string]any)
		byInstance[m["instance"].(string)] = m["namespace"]
	}
	if byInstance["engine-ns"] != ns.String() || byInstance["engine-other"] != other.String() {
		t.Errorf("sessions' namespaces %v, want engine-ns in %s and engine-other in %s", byInstance, ns, other)
	}
	if out, _, _ := ctl(t, sock, "", "sessions"); !strings.Contains(out, "NAMESPACE") || !strings.Contains(out, ns.String()) {
		t.Errorf("sessions table lacks the NAMESPACE column or its value:\n%s", out)
	}

	// version: orbitkvctl's build and the Manager's.
	v := ctlJSON(t, sock, "version")
	h := ctlJSON(t, sock, "health")
	server, _ := v["server"].(map[string]any)
	if server == nil || server["version"] != h["version"] || server["commit"] == "" || v["server_error"] != "" ||
		server["abi_version"] == json.Number("0") {
		t.Errorf("version -o json %v: want the Manager's build (health says version %v)", v, h["version"])
	}
	if out, _, code := ctl(t, sock, "", "version"); code != 0 || !strings.Contains(out, "orbitkvctl ") || !strings.Contains(out, "\norbitkv-manager ") {
		t.Errorf("version (exit %d) lacks the client's or the Manager's build:\n%s", code, out)
	}

	// evict --namespace of the listed value removes those blocks only.
	ev := ctlJSON(t, sock, "evict", "--namespace", row["namespace"].(string), "--yes")
	if u64(t, ev, "ram_blocks") != "4" || u64(t, ev, "ram_bytes") != fmt.Sprint(4*blockBytes) {
		t.Fatalf("evict --namespace %s: %v, want its 4 blocks", ns, ev)
	}
	if row := namespaceRow(t, sock, ns.String()); u64(t, row, "ram_blocks") != "0" || u64(t, row, "queries") != "1" {
		t.Errorf("after evict: %v, want no blocks and the figures since start kept", row)
	}
	if o := namespaceRow(t, sock, other.String()); u64(t, o, "ram_blocks") != "1" {
		t.Errorf("after evict of another namespace: %v, want its block kept", o)
	}
}

// Under tenants a namespace is listed with its tenant and its key;
// evict --namespace needs the tenant, and --key takes the listed key.
func TestATenantsNamespaceIsEvictedByNamespaceAndTenantOrByKey(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "okv.sock")
	// The test's own uid is the tenant, so its engine is alpha's.
	startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--channel-transport", "shm", "--ram-capacity", "16MiB",
		"--hugepages", "off", "--tenant", fmt.Sprintf("alpha=uid:%d", os.Geteuid()))
	ns := namespace(t, "ns-tenant")
	e := newEngine(t, sock, "tenant-engine")
	e.publish(t, ns, []uint64{1, 2}, []uint32{0, 1})

	row := namespaceRow(t, sock, ns.String())
	key, _ := row["key"].(string)
	if row["tenant"] != "alpha" || len(key) != 32 || key == ns.String() || u64(t, row, "ram_blocks") != "2" || row["sessions"] != json.Number("1") {
		t.Fatalf("namespaces row %v: want tenant alpha, a key other than the namespace, 2 blocks, 1 session", row)
	}
	if out, _, _ := ctl(t, sock, "", "namespaces"); !strings.Contains(out, "KEY") || !strings.Contains(out, key) || !strings.Contains(out, "alpha") {
		t.Errorf("namespaces table under tenants lacks the KEY column, the key or the tenant:\n%s", out)
	}
	if s := ctlJSON(t, sock, "sessions")["sessions"].([]any)[0].(map[string]any); s["namespace"] != ns.String() || s["tenant"] != "alpha" {
		t.Errorf("sessions: %v, want the namespace as the client sent it and tenant alpha", s)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", ns.String()}, "name the tenant"},
		{[]string{"--namespace", ns.String(), "--tenant", "beta"}, `tenant "beta": no tenant or sharing group of that name`},
	} {
		if _, errOut, code := ctl(t, sock, "", append([]string{"evict", "--yes"}, tc.args...)...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("evict %q: exit %d %q, want exit 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if ev := ctlJSON(t, sock, "evict", "--namespace", ns.String(), "--tenant", "alpha", "--yes"); u64(t, ev, "ram_blocks") != "2" {
		t.Fatalf("evict --namespace --tenant alpha: %v, want its 2 blocks", ev)
	}
	e.publish(t, ns, []uint64{1, 2}, []uint32{0, 1})
	if ev := ctlJSON(t, sock, "evict", "--key", key, "--yes"); u64(t, ev, "ram_blocks") != "2" {
		t.Fatalf("evict --key %s: %v, want the 2 blocks published again", key, ev)
	}
}

// stats --watch writes a frame per interval until SIGINT, then exits 0;
// off a terminal it clears no screen.
func TestStatsWatchRefreshesUntilInterrupted(t *testing.T) {
	_, sock := startCacheManager(t, "16MiB")
	cmd := exec.Command(filepath.Join(binDir, "orbitkvctl"), "stats", "--watch", "100ms", "-o", "json", "--socket", sock)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stats --watch after SIGINT: %v, want exit 0; stderr %s", err, errOut.String())
	}
	dec := json.NewDecoder(&out)
	frames := 0
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("frame %d: %v", frames, err)
		}
		if m["cache"] != true {
			t.Fatalf("frame %d: %v, want a StatsReply", frames, m)
		}
		frames++
	}
	if frames < 3 || strings.Contains(out.String(), "\x1b[") {
		t.Errorf("%d frames in 1 s at 100ms (want at least 3), or a screen clear off a terminal:\n%s", frames, out.String())
	}
}
