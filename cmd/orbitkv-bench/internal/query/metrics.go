package query

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
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
	return managerproc.ScrapeMetrics(addr, parseQueryCounters)
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
