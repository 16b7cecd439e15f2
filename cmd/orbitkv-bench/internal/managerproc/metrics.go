package managerproc

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ScrapeMetrics reads GET http://addr/metrics (within 5 s) through parse;
// a failed request or a status other than 200 is an error naming it.
func ScrapeMetrics[T any](addr string, parse func(io.Reader) (T, error)) (T, error) {
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

// metricParks counts the times the Manager's dispatcher slept for lack of
// requests (gocore/manager/metrics.go); a hot phase should not move it.
const metricParks = "orbitkv_channel_parks_total"

// ScrapeParks reads the Manager's park counter from GET http://addr/metrics.
func ScrapeParks(addr string) (uint64, error) {
	return ScrapeMetrics(addr, func(r io.Reader) (uint64, error) { return ParseCounter(r, metricParks) })
}

// ParseCounter finds the unlabelled counter name in the Prometheus text
// format and returns its value, which must be a whole number.
func ParseCounter(r io.Reader, name string) (uint64, error) {
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
