package managerproc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// managerHealth is the part of the Manager's GET /health JSON the suites
// read (gocore/manager/http.go). Manager-wide figures come only from
// there: a session's own Health frame reports that session's figures, so
// that no tenant learns of another's traffic.
type managerHealth struct {
	Sessions         int    `json:"sessions"`
	Blocks           uint64 `json:"blocks"`
	RAMUsedBytes     uint64 `json:"ram_used_bytes"`
	RAMCapacityBytes uint64 `json:"ram_capacity_bytes"`
	Evictions        uint64 `json:"evictions"`
	Leases           uint64 `json:"leases"`
	Pins             uint64 `json:"pins"`
	ReservedBytes    uint64 `json:"reserved_bytes"`
	Operations       uint64 `json:"operations"`
}

// ReadHealth reads GET http://addr/health.
func ReadHealth(addr string) (managerHealth, error) {
	var h managerHealth
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/health")
	if err != nil {
		return h, fmt.Errorf("reading the Manager's /health: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("decoding the Manager's /health at %s: %w", addr, err)
	}
	return h, nil
}
