package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

// Manager-wide figures (sessions, blocks, evictions, the idle invariant)
// come only from the Manager's loopback GET /health: a session's own Health
// frame reports that session's figures. startManagerBin records each
// Manager's --http-addr by its bootstrap socket here, so helpers can take
// the socket path alone.

var managerHTTP sync.Map // socket path → --http-addr ("" = none)

// managerHealth is the JSON of GET /health (gocore/manager/http.go).
type managerHealth struct {
	Status        string `json:"status"`
	Sessions      int    `json:"sessions"`
	Blocks        uint64 `json:"blocks"`
	Evictions     uint64 `json:"evictions"`
	Leases        uint64 `json:"leases"`
	Pins          uint64 `json:"pins"`
	ReservedBytes uint64 `json:"reserved_bytes"`
	Operations    uint64 `json:"operations"`
	Tickets       uint64 `json:"tickets"`
	Lookups       uint64 `json:"lookups"`
}

// readHealth reads GET /health of the Manager serving sock.
func readHealth(sock string) (managerHealth, error) {
	var h managerHealth
	v, _ := managerHTTP.Load(sock)
	addr, _ := v.(string)
	if addr == "" {
		return h, fmt.Errorf("the Manager of %s has no --http-addr: Manager-wide figures come only from its GET /health (start it with --http-addr freeLoopbackAddr(t))", sock)
	}
	// No keep-alive: an idle connection would count as one more fd and
	// goroutine of the Manager in the tests that compare them.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/health")
	if err != nil {
		return h, fmt.Errorf("GET /health: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("GET /health: %w", err)
	}
	return h, nil
}

// healthOf is readHealth that fails the test on an error.
func healthOf(t *testing.T, sock string) managerHealth {
	t.Helper()
	h, err := readHealth(sock)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// assertIdle checks docs/design.md §6 rule 8 once every session has gone: no
// leases, pins, reserved bytes, operations or tickets (waiting up to 10 s
// for teardowns to finish). It returns the idle figures.
func assertIdle(t *testing.T, sock string) managerHealth {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := healthOf(t, sock)
		if h.Sessions == 0 && h.Leases == 0 && h.Pins == 0 && h.ReservedBytes == 0 && h.Operations == 0 && h.Tickets == 0 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle invariant broken: sessions %d (want 0) leases %d pins %d reserved %d operations %d tickets %d",
				h.Sessions, h.Leases, h.Pins, h.ReservedBytes, h.Operations, h.Tickets)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Health over the socket must not show Manager-wide counters (blocks,
// lookups, distinct lookups) to a session: from them a tenant could tell
// whether another tenant's publish was new and whether it repeated a
// lookup. A session sees its own figures and the Manager's liveness; the
// operator's GET /health sees the whole Manager.
func TestSessionHealthShowsOnlyItsOwnFigures(t *testing.T) {
	_, sock := startCacheManager(t, "64MiB")
	a := newEngine(t, sock, "tenant-a")
	b := newEngine(t, sock, "tenant-b")
	ns := namespace(t, "tenant-a-model")
	a.publish(t, ns, []uint64{1, 2, 3, 4}, []uint32{0, 1, 2, 3})
	if l, err := a.c.Query(ns, []client.BlockHash{bh(1), bh(2), bh(3), bh(4)}); err != nil || l.Hits != 4 {
		t.Fatalf("query: %+v %v", l, err)
	}
	hb, err := b.c.Health()
	if err != nil {
		t.Fatal(err)
	}
	if hb.Status != "serving" || hb.Epoch == 0 || hb.ManagerPID == 0 || hb.Version == "" {
		t.Fatalf("b's Health lacks the Manager's liveness: %+v", hb)
	}
	if hb.Sessions != 0 || hb.Blocks != 0 || hb.RAMUsedBytes != 0 || hb.Evictions != 0 || hb.Lookups != 0 || hb.DistinctLookups != 0 {
		t.Fatalf("b's Health shows Manager-wide figures (a's traffic): sessions %d blocks %d ram %d evictions %d lookups %d distinct %d",
			hb.Sessions, hb.Blocks, hb.RAMUsedBytes, hb.Evictions, hb.Lookups, hb.DistinctLookups)
	}
	if hb.Leases != 0 || hb.Pins != 0 || hb.ReservedBytes != 0 || hb.Operations != 0 {
		t.Fatalf("b holds nothing, its Health says leases %d pins %d reserved %d operations %d", hb.Leases, hb.Pins, hb.ReservedBytes, hb.Operations)
	}
	ha, err := a.c.Health()
	if err != nil {
		t.Fatal(err)
	}
	if ha.Leases != 1 || ha.Pins != 4 || ha.ReservedBytes == 0 || ha.Requests < 2 {
		t.Fatalf("a's own figures: leases %d pins %d reserved %d requests %d; want its 1 lease of 4 blocks and its requests",
			ha.Leases, ha.Pins, ha.ReservedBytes, ha.Requests)
	}
	if m := healthOf(t, sock); m.Sessions != 2 || m.Blocks != 4 || m.Leases != 1 || m.Lookups == 0 {
		t.Fatalf("the operator's /health: sessions %d blocks %d leases %d lookups %d; want the whole Manager", m.Sessions, m.Blocks, m.Leases, m.Lookups)
	}
}
