package manager

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Recording a sample runs on the dispatcher goroutine for every request:
// it must not allocate (its histograms are resolved once, at start).
func TestRecordingAnOpDurationAllocatesNothing(t *testing.T) {
	d := newOpDurations()
	took := []time.Duration{700 * time.Nanosecond, 3 * time.Microsecond, 80 * time.Microsecond, 4 * time.Millisecond, 2 * time.Second}
	for op := range cache.NumOps {
		t.Run(op.String()+" records without allocating", func(t *testing.T) {
			allocs := testing.AllocsPerRun(1000, func() {
				for _, x := range took {
					d.ObserveOp(op, x)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per sample run, want 0", allocs)
			}
		})
	}
}

// newMetricsManager starts a Manager in process with an SSD tier (so
// every series is exposed) and serves HTTP on a free loopback port.
func newMetricsManager(t *testing.T, epoch uint64) *Manager {
	t.Helper()
	s := testSpec(t, "127.0.0.1:0")
	s.Epoch = epoch
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-manager-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	slot := uint64(16 << 10)
	s.Cache.Tiers.SSD = &ssd.Spec{Dir: dir, CapacityBytes: 64 * (ssd.HeaderBytes + slot), SlotBytes: slot}
	// The KV events on, so that their series (and the dashboard's panels
	// of them) are exposed.
	s.Events = kvevents.Spec{Endpoint: "tcp://127.0.0.1:0"}
	return serving(t, s)
}

// scrape parses the Manager's GET /metrics.
func scrape(t *testing.T, m *Manager) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + m.http.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestMetricsExposeTheOperatorSeries(t *testing.T) {
	m := newMetricsManager(t, 1)
	fams := scrape(t, m)
	t.Run("no series counts nanoseconds", func(t *testing.T) {
		for name := range fams {
			if strings.Contains(name, "nanoseconds") {
				t.Errorf("%s: durations are in seconds", name)
			}
		}
	})
	t.Run("the ready gauge is 1 while the Manager serves", func(t *testing.T) {
		f := fams["orbitkv_ready"]
		if f == nil || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("orbitkv_ready = %v, want 1", f)
		}
	})
	t.Run("build_info names the version, commit, Go version and failpoint tag", func(t *testing.T) {
		f := fams["orbitkv_build_info"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("orbitkv_build_info = %v, want one series", f)
		}
		l := labels(f.GetMetric()[0])
		for _, k := range []string{"version", "commit", "go", "failpoints"} {
			if l[k] == "" {
				t.Errorf("label %s empty (labels %v)", k, l)
			}
		}
		if f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Errorf("value %v, want 1", f.GetMetric()[0].GetGauge().GetValue())
		}
	})
	t.Run("blocks found by address are a counter", func(t *testing.T) {
		f := fams["orbitkv_index_blocks_by_address_total"]
		if f == nil || f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
			t.Fatalf("orbitkv_index_blocks_by_address_total = %v, want one counter series", f)
		}
	})
	t.Run("lookups have one series per tier and result", func(t *testing.T) {
		f := fams["orbitkv_lookup_blocks_total"]
		var got []string
		for _, s := range f.GetMetric() {
			l := labels(s)
			got = append(got, l["tier"]+"/"+l["result"])
		}
		sort.Strings(got)
		want := []string{"peer/hit", "peer/miss", "ram/hit", "ram/miss", "ssd/hit", "ssd/miss"}
		if !slices.Equal(got, want) {
			t.Fatalf("series %v, want %v", got, want)
		}
	})
	t.Run("op durations are histograms for the six operations", func(t *testing.T) {
		f := fams["orbitkv_op_duration_seconds"]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("orbitkv_op_duration_seconds = %v, want a histogram", f)
		}
		var ops []string
		for _, s := range f.GetMetric() {
			ops = append(ops, labels(s)["op"])
			if n := len(s.GetHistogram().GetBucket()); n != len(opDurationBuckets)+1 { // and +Inf
				t.Errorf("op %s: %d classic buckets, want %d and +Inf", labels(s)["op"], n, len(opDurationBuckets))
			}
		}
		sort.Strings(ops)
		if want := []string{"claim", "poll", "publish", "query", "release", "restore"}; !slices.Equal(ops, want) {
			t.Fatalf("ops %v, want %v", ops, want)
		}
	})
	t.Run("SSD I/O durations are histograms for read and write", func(t *testing.T) {
		f := fams["orbitkv_ssd_io_duration_seconds"]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("orbitkv_ssd_io_duration_seconds = %v, want a histogram", f)
		}
		var ops []string
		for _, s := range f.GetMetric() {
			ops = append(ops, labels(s)["op"])
			b := s.GetHistogram().GetBucket()
			if len(b) != len(ssdDurationBuckets)+1 || b[0].GetUpperBound() != 10e-6 || b[len(b)-2].GetUpperBound() != 1 { // and +Inf
				t.Errorf("op %s: buckets %v, want 10 µs .. 1 s and +Inf", labels(s)["op"], b)
			}
		}
		sort.Strings(ops)
		if want := []string{"read", "write"}; !slices.Equal(ops, want) {
			t.Fatalf("ops %v, want %v", ops, want)
		}
	})
	t.Run("the lease budget's capacity is in bytes beside the bytes in use", func(t *testing.T) {
		f := fams["orbitkv_lease_budget_capacity_bytes"]
		if f == nil || len(f.GetMetric()) != 1 || fams["orbitkv_reserved_bytes"] == nil {
			t.Fatalf("orbitkv_lease_budget_capacity_bytes = %v, orbitkv_reserved_bytes = %v; want one series each", f, fams["orbitkv_reserved_bytes"])
		}
		if got, want := f.GetMetric()[0].GetGauge().GetValue(), float64(m.Cache.LeaseBudget()); got != want || want == 0 {
			t.Fatalf("orbitkv_lease_budget_capacity_bytes = %v, want the cache's budget %v", got, want)
		}
	})
	t.Run("the hugepages label is a short reason code", func(t *testing.T) {
		f := fams["orbitkv_ram_hugepages"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("orbitkv_ram_hugepages = %v, want one series", f)
		}
		if r := labels(f.GetMetric()[0])["fallback"]; !slices.Contains(hugepageReasons, r) {
			t.Fatalf("fallback %q, want one of %v", r, hugepageReasons)
		}
	})
}

// The 64-bit epoch is above 2^53 in practice; jq and JavaScript would
// round it as a number.
func TestHealthWritesTheEpochAsAString(t *testing.T) {
	const epoch = 1<<60 + 3 // not representable as a float64
	m := newMetricsManager(t, epoch)
	resp, err := http.Get("http://" + m.http.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ field, want string }{
		{"epoch", strconv.FormatUint(epoch, 10)},
		{"service_id", strings.Repeat("0", 32)},
	}
	for _, c := range cases {
		t.Run(c.field+" is a JSON string", func(t *testing.T) {
			if got, ok := h[c.field].(string); !ok || got != c.want {
				t.Fatalf("%s = %#v, want the string %q", c.field, h[c.field], c.want)
			}
		})
	}
}

// metricName matches a metric name the Manager exposes inside a PromQL
// expression: its own (orbitkv_), and the Go and process collectors'.
var metricName = regexp.MustCompile(`\b(orbitkv|process|go)_[a-z0-9_]+`)

// queried returns every metric name metricName finds in exprs, sorted.
func queried(exprs []string) []string {
	var names []string
	for _, e := range exprs {
		names = append(names, metricName.FindAllString(e, -1)...)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Query any `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T, path string) dashboard {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// dashboardExprs returns every target expression of the Grafana dashboard
// (panels[].targets[].expr and templating queries).
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	d := readDashboard(t, path)
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q queries nothing", path, p.Title)
		}
		for _, x := range p.Targets {
			exprs = append(exprs, x.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	return exprs
}

// Quantities a dashboard expression yields (exprQuantity) and the Grafana
// units that display each (panelQuantity).
const (
	qCount     = "a count"
	qSeconds   = "seconds"
	qBytes     = "bytes"
	qRatio     = "a ratio"
	qPerSecond = "events per second"
	qBytesRate = "bytes per second"
)

// panelQuantity maps a Grafana unit id to the quantity it displays.
var panelQuantity = map[string]string{
	"none": qCount, "short": qCount,
	"s":     qSeconds,
	"bytes": qBytes, "decbytes": qBytes,
	"percentunit": qRatio,
	"ops":         qPerSecond, "reqps": qPerSecond,
	"Bps": qBytesRate, "binBps": qBytesRate,
}

// nameQuantity is what a metric name's unit suffix says it counts
// (Prometheus naming: base units, _total for counters), and whether it is
// a counter.
func nameQuantity(name string) (q string, counter bool) {
	name, counter = strings.CutSuffix(name, "_total")
	switch {
	case strings.HasSuffix(name, "_seconds"):
		return qSeconds, counter
	case strings.HasSuffix(name, "_bytes"):
		return qBytes, counter
	case strings.HasSuffix(name, "_ratio"):
		return qRatio, counter
	}
	return qCount, counter
}

// trailingFilter is a comparison with a constant ending an expression
// ("... > 0"): it drops series, not units.
var trailingFilter = regexp.MustCompile(`\s*(>|<|>=|<=|==|!=)\s*[0-9.]+\s*$`)

// splitTopLevel splits expr at each sep outside parentheses and braces.
func splitTopLevel(expr, sep string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		}
		if depth == 0 && strings.HasPrefix(expr[i:], sep) {
			parts = append(parts, expr[start:i])
			start = i + len(sep)
		}
	}
	return append(parts, expr[start:])
}

// exprQuantity is the quantity a dashboard expression yields, from the
// unit suffixes of the metrics it reads and the functions around them: a
// quotient of two equal quantities is a ratio; histogram_quantile of a
// _seconds histogram is seconds; rate() of a counter of things is per
// second (of seconds: a ratio; of bytes: bytes per second), increase()
// the thing itself; a gauge its suffix's quantity. A counter read without
// rate or increase, or metrics of different quantities mixed otherwise,
// is an error.
func exprQuantity(expr string) (string, error) {
	expr = trailingFilter.ReplaceAllString(expr, "")
	if parts := splitTopLevel(expr, " / "); len(parts) == 2 {
		a, err := exprQuantity(parts[0])
		if err != nil {
			return "", err
		}
		b, err := exprQuantity(parts[1])
		if err != nil {
			return "", err
		}
		if a != b {
			return "", fmt.Errorf("divides %s by %s", a, b)
		}
		return qRatio, nil
	} else if len(parts) > 2 {
		return "", fmt.Errorf("more than one division")
	}
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		return "", fmt.Errorf("reads no metric")
	}
	var out string
	for _, n := range names {
		var q string
		switch base, isBucket := strings.CutSuffix(n, "_bucket"); {
		case strings.Contains(expr, "histogram_quantile("):
			if !isBucket {
				return "", fmt.Errorf("histogram_quantile of %s, not a _bucket series", n)
			}
			q, _ = nameQuantity(base)
		default:
			what, counter := nameQuantity(n)
			switch {
			case strings.Contains(expr, "rate("):
				if !counter {
					return "", fmt.Errorf("rate of %s, which is not a counter (_total)", n)
				}
				q = map[string]string{qCount: qPerSecond, qSeconds: qRatio, qBytes: qBytesRate}[what]
			case strings.Contains(expr, "increase("):
				q = what
			case counter:
				return "", fmt.Errorf("graphs the counter %s without rate or increase", n)
			default:
				q = what
			}
		}
		if out != "" && q != out {
			return "", fmt.Errorf("mixes %s and %s", out, q)
		}
		out = q
	}
	return out, nil
}

// ruleExprs returns every rule's expression of the Prometheus rules file.
func ruleExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name string `yaml:"name"`
			// A rule's fields (Prometheus' rule file format); an unknown key
			// (a misspelt "annotations") is an error.
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: group %s has a rule without alert, expr or summary: %+v", path, g.Name, r)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: alert %s: for %q: %v", path, r.Alert, r.For, err)
				}
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// exposedName reports whether the scraped families expose name: a family,
// or a histogram's _bucket, _sum or _count series.
func exposedName(fams map[string]*dto.MetricFamily, name string) bool {
	if fams[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && fams[base].GetType() == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// addEBPFFamilies adds to fams the histograms a Manager started with
// --ebpf exposes, from the ebpf package's Describe (which needs no loaded
// probes), so that the dashboard may graph them though the test's
// Manager runs without them; it fails the test where the package
// describes none (a platform without the probes).
func addEBPFFamilies(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	(&ebpf.Probes{}).Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		fams[m[1]] = &dto.MetricFamily{Name: &m[1], Type: dto.MetricType_HISTOGRAM.Enum()}
		n++
	}
	if n == 0 {
		t.Skipf("the ebpf package describes no metrics on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
}

// Every metric the dashboard and the alert rules query is exposed by a
// live Manager under the type its name promises (a _total name is a
// counter, any other a gauge or a histogram's series), and each dashboard
// panel's unit is the quantity every one of its expressions yields.
func TestDashboardAndAlertsQueryOnlyExposedMetrics(t *testing.T) {
	m := newMetricsManager(t, 1)
	fams := scrape(t, m)
	addEBPFFamilies(t, fams)
	files := []struct {
		path  string
		exprs func(*testing.T, string) []string
		min   int // names the file is known to query: fewer means the extraction broke
	}{
		{"../../deploy/grafana/orbitkv.json", dashboardExprs, 20},
		{"../../deploy/prometheus/orbitkv-alerts.yml", ruleExprs, 5},
	}
	for _, f := range files {
		t.Run(f.path+" queries only metrics /metrics exposes", func(t *testing.T) {
			names := queried(f.exprs(t, f.path))
			if len(names) < f.min {
				t.Fatalf("found %d metric names (%v), want at least %d", len(names), names, f.min)
			}
			for _, n := range names {
				if !exposedName(fams, n) {
					t.Errorf("%s queries %s, which the Manager's /metrics does not expose", f.path, n)
					continue
				}
				if f := fams[n]; f != nil {
					_, counter := nameQuantity(n)
					if isCounter := f.GetType() == dto.MetricType_COUNTER; counter != isCounter {
						t.Errorf("%s is a %v: a name ends in _total exactly when it is a counter", n, f.GetType())
					}
				}
			}
		})
	}
	const path = "../../deploy/grafana/orbitkv.json"
	for _, p := range readDashboard(t, path).Panels {
		t.Run(fmt.Sprintf("panel %q shows its queries' unit", p.Title), func(t *testing.T) {
			unit := p.FieldConfig.Defaults.Unit
			want, ok := panelQuantity[unit]
			if !ok {
				t.Fatalf("unit %q is not one the test knows (%v)", unit, slices.Sorted(maps.Keys(panelQuantity)))
			}
			for _, x := range p.Targets {
				got, err := exprQuantity(x.Expr)
				if err != nil {
					t.Errorf("%s: %v", x.Expr, err)
				} else if got != want {
					t.Errorf("%s yields %s; the panel's unit %q shows %s", x.Expr, got, unit, want)
				}
			}
		})
	}
}

// exprQuantity tells the quantities apart and refuses mixtures, so that a
// panel of the wrong unit fails TestDashboardAndAlertsQueryOnlyExposedMetrics.
func TestExprQuantity(t *testing.T) {
	cases := []struct {
		expr, want, err string
	}{
		{`orbitkv_ram_used_bytes{instance=~"$instance"}`, qBytes, ""},
		{`orbitkv_leases`, qCount, ""},
		{`orbitkv_ram_used_bytes / orbitkv_ram_capacity_bytes`, qRatio, ""},
		{`sum by (op) (rate(orbitkv_operations_total[5m]))`, qPerSecond, ""},
		{`rate(orbitkv_published_bytes_total[5m])`, qBytesRate, ""},
		{`rate(orbitkv_query_server_seconds_total[5m])`, qRatio, ""},
		{`increase(orbitkv_ssd_corrupt_total[5m])`, qCount, ""},
		{`histogram_quantile(0.99, sum by (le) (rate(orbitkv_ssd_io_duration_seconds_bucket[5m])))`, qSeconds, ""},
		{`sum by (reason) (rate(orbitkv_sessions_refused_total[5m])) > 0`, qPerSecond, ""},
		{`orbitkv_operations_total`, "", "without rate or increase"},
		{`rate(orbitkv_leases[5m])`, "", "not a counter"},
		{`orbitkv_reserved_bytes or orbitkv_leases`, "", "mixes"},
		{`orbitkv_ram_used_bytes / orbitkv_leases`, "", "divides"},
		{`histogram_quantile(0.5, orbitkv_op_duration_seconds_count)`, "", "not a _bucket"},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			got, err := exprQuantity(c.expr)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("= %q, %v; want an error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("= %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestHugepageFallbackSentencesMapToShortCodes(t *testing.T) {
	cases := []struct {
		name     string
		huge     bool
		fallback string
		want     string
	}{
		{"a hugetlb-backed tier has none", true, "", "none"},
		{"mode off is off", false, "mode off", "off"},
		{"no pool is no_pool", false, "hugetlb unavailable: no 2 MiB hugepage pool (open /proc/meminfo: no such file); shmem memfd with MADV_HUGEPAGE, transparent_hugepage/shmem_enabled is never: 4 KiB pages", "no_pool"},
		{"too few free pages is no_free_pages", false, "hugetlb unavailable: 0 free 2 MiB hugepages, 2 needed (HugePages_Free 0, HugePages_Rsvd 0, overcommit 0); reserve them: echo 2 > /proc/sys/vm/nr_hugepages; shmem memfd with MADV_HUGEPAGE", "no_free_pages"},
		{"a refused memfd is memfd_refused", false, "hugetlb unavailable: memfd_create(MFD_HUGETLB|MFD_HUGE_2MB): EINVAL (invalid argument)", "memfd_refused"},
		{"a failed fallocate is allocation_failed", false, "hugetlb unavailable: allocating 2 2 MiB hugepages (fallocate): ENOSPC (no space left on device); the pool shrank", "allocation_failed"},
		{"an unknown sentence is other", false, "something new", "other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := hugepageReason(c.huge, c.fallback)
			if got != c.want {
				t.Fatalf("hugepageReason(%v, %q) = %q, want %q", c.huge, c.fallback, got, c.want)
			}
			if !slices.Contains(hugepageReasons, got) {
				t.Fatalf("%q is not in hugepageReasons %v", got, hugepageReasons)
			}
		})
	}
}

// serving builds a Manager from s, serves it until the test ends (Close
// at cleanup) and returns it once it reports PhaseServing, failing the
// test after 5 s.
func serving(t testing.TB, s Spec) *Manager {
	t.Helper()
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	go m.Serve()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if phase, _ := m.ready.get(); phase == PhaseServing {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatal("the Manager did not start serving within 5 s")
		}
	}
}
