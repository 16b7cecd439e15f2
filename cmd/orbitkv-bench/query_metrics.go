package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Manager's own time in untracked QueryBundles, read from its
// Prometheus counters (gocore/manager/metrics.go): dispatcher seconds
// spent serving them (decode, lookups, lease) and the hashes they carried.
const (
	metricQuerySeconds = "orbitkv_query_server_seconds_total"
	metricQueryHashes  = "orbitkv_query_hashes_total"
)

// queryCounters is one reading of the two counters; nanos is the seconds
// counter in nanoseconds, the unit the report prints per hash.
type queryCounters struct {
	nanos, hashes float64
}

// sub is the change from before to c.
func (c queryCounters) sub(before queryCounters) queryCounters {
	return queryCounters{c.nanos - before.nanos, c.hashes - before.hashes}
}

// scrapeQueryCounters reads GET http://addr/metrics.
func scrapeQueryCounters(addr string) (queryCounters, error) {
	return scrapeMetrics(addr, parseQueryCounters)
}

// scrapeMetrics reads GET http://addr/metrics (within 5 s) through parse;
// a failed request or a status other than 200 is an error naming it.
func scrapeMetrics[T any](addr string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return zero, fmt.Errorf("reading the Manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return zero, fmt.Errorf("reading the Manager's metrics at %s: HTTP %s", addr, resp.Status)
	}
	return parse(resp.Body)
}

// parseQueryCounters finds the two counters in the Prometheus text format:
// a line "name value" each (they carry no labels); comments are skipped.
func parseQueryCounters(r io.Reader) (queryCounters, error) {
	var c queryCounters
	var seen int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var dst *float64
		switch name {
		case metricQuerySeconds:
			dst = &c.nanos
		case metricQueryHashes:
			dst = &c.hashes
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return c, fmt.Errorf("metric %s: value %q is not a number", name, value)
		}
		if dst == &c.nanos {
			v *= 1e9
		}
		*dst = v
		seen++
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading the Manager's metrics: %w", err)
	}
	if seen != 2 {
		return c, fmt.Errorf("the Manager's /metrics lacks %s or %s (a Manager built before they were added?)", metricQuerySeconds, metricQueryHashes)
	}
	return c, nil
}

// metricParks counts the times the Manager's dispatcher slept for lack of
// requests (gocore/manager/metrics.go); a hot phase should not move it.
const metricParks = "orbitkv_channel_parks_total"

// scrapeParks reads the Manager's park counter from GET http://addr/metrics.
func scrapeParks(addr string) (uint64, error) {
	return scrapeMetrics(addr, func(r io.Reader) (uint64, error) { return parseCounter(r, metricParks) })
}

// parseCounter finds the unlabelled counter name in the Prometheus text
// format and returns its value, which must be a whole number.
func parseCounter(r io.Reader, name string) (uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || k != name {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f != float64(uint64(f)) {
			return 0, fmt.Errorf("metric %s: value %q is not a count", name, v)
		}
		return uint64(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the Manager's metrics: %w", err)
	}
	return 0, fmt.Errorf("the Manager's /metrics lacks %s", name)
}
