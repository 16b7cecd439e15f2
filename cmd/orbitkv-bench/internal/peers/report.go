package peers

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/discover"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// The systems of the peers report, its second-level keys.
const (
	peerOrbitKV = "orbitkv"
	peerLMCache = "lmcache"
)

// peerQuantiles is one lookup row: nearest-rank p50 and p99 in ns.
type peerQuantiles struct {
	P50     int64 `json:"p50"`
	P99     int64 `json:"p99"`
	Samples int   `json:"samples"`
	// ManagerParks is OrbitKV's only: how often its dispatcher parked
	// over the chain's lookups (warm-up and untimed Releases included, two
	// round trips a lookup); each park makes one round trip pay a wake-up.
	ManagerParks *uint64 `json:"manager_parks,omitempty"`
}

// quantilesOf is the nearest-rank p50 and p99 of samples (sorted in
// place): the rank ceil(q·n), as the LMCache driver's quantile().
func quantilesOf(samples []int64) peerQuantiles {
	if len(samples) == 0 {
		return peerQuantiles{}
	}
	slices.Sort(samples)
	at := func(q float64) int64 {
		r := int(q*float64(len(samples)) + 0.999999)
		return samples[max(0, min(len(samples)-1, r-1))]
	}
	return peerQuantiles{P50: at(0.50), P99: at(0.99), Samples: len(samples)}
}

// peerTransfer is one system's store and retrieve figures for one block
// size; GB/s are 10^9 bytes per second, warm ones over the median batch.
type peerTransfer struct {
	BlockBytes        uint64  `json:"block_bytes"`
	Blocks            int     `json:"blocks"`
	BatchBytes        uint64  `json:"batch_bytes"`
	VerifiedRetrieves int     `json:"verified_retrieves"`
	StoreGBps         float64 `json:"store_gbps"`
	RetrieveGBps      float64 `json:"retrieve_gbps"`
	StoreColdGBps     float64 `json:"store_cold_gbps"`
	RetrieveColdGBps  float64 `json:"retrieve_cold_gbps"`
	// StoreReplyGBps is LMCache's only: over its STORE's reply, which
	// comes before the chunks are visible (StoreGBps is until visible).
	StoreReplyGBps float64 `json:"store_reply_gbps,omitempty"`
}

// peersConditions are the run's conditions, stated in the report.
type peersConditions struct {
	CPUs              int      `json:"cpus"`
	CPUModel          string   `json:"cpu_model,omitempty"`
	ManagerPid        int      `json:"manager_pid"`
	CacheGiB          float64  `json:"cache_gib"` // OrbitKV's RAM tier and LMCache's L1
	Lookups           int      `json:"lookups"`
	Iters             int      `json:"iters"`
	Warmup            int      `json:"warmup"`
	LookupBlockBytes  uint64   `json:"lookup_block_bytes"`
	LMCacheVersion    string   `json:"lmcache_version,omitempty"`
	LMCacheServerArgv []string `json:"lmcache_server_argv,omitempty"`
}

// peersReport is `orbitkv-bench peers`: per figure, system → key → value,
// keys being chain lengths (lookups) or block bytes (transfers). Ratios
// are OrbitKV's advantage: LMCache's latency / OrbitKV's, OrbitKV's GB/s /
// LMCache's; a ratio is absent where either side is.
type peersReport struct {
	Lookup       map[string]map[string]peerQuantiles `json:"lookup_rtt_ns"`
	Store        map[string]map[string]float64       `json:"store_gbps"`
	Retrieve     map[string]map[string]float64       `json:"retrieve_gbps"`
	StoreCold    map[string]map[string]float64       `json:"store_cold_gbps"`
	RetrieveCold map[string]map[string]float64       `json:"retrieve_cold_gbps"`
	// DiscoverLocal and DiscoverRTT are OrbitKV's discovery of chains of
	// 32 and 1,000 blocks (MeasureDiscover): from the mapped index, and
	// by a QueryBundle discovery round trip; absent with --discover-iters 0.
	DiscoverLocal map[string]discover.DiscoverQuantiles `json:"discover_local_ns,omitempty"`
	DiscoverRTT   map[string]discover.DiscoverQuantiles `json:"discover_rtt_ns,omitempty"`
	Ratios        peersRatios                           `json:"ratios"`
	Targets       []peersTarget                         `json:"targets"`
	Transfers     map[string][]peerTransfer             `json:"transfers"`
	LMCacheError  string                                `json:"lmcache_error,omitempty"`
	Conditions    peersConditions                       `json:"conditions"`
	chains, sizes []string                              // keys in report order
}

// peersRatios are the report's ratios, each key → OrbitKV's advantage.
type peersRatios struct {
	LookupP50    map[string]float64 `json:"lookup_p50"`
	LookupP99    map[string]float64 `json:"lookup_p99"`
	Store        map[string]float64 `json:"store"`
	Retrieve     map[string]float64 `json:"retrieve"`
	StoreCold    map[string]float64 `json:"store_cold"`
	RetrieveCold map[string]float64 `json:"retrieve_cold"`
	// DiscoverVsRTT is the round-trip discovery's p50 over the local one's;
	// DiscoverVsLMCache LMCache's lookup p50 over the local discovery's,
	// per chain both measured.
	DiscoverVsRTT     map[string]float64 `json:"discover_local_vs_rtt_p50"`
	DiscoverVsLMCache map[string]float64 `json:"discover_local_vs_lmcache_lookup_p50"`
}

// peersTarget is one target of the peers suite: what is promised, the ratio
// measured (absent when LMCache did not run) and whether it holds.
type peersTarget struct {
	Name  string   `json:"name"`
	Want  float64  `json:"want"`
	Ratio *float64 `json:"ratio"`
	Met   bool     `json:"met"`
}

func newPeersReport(cfg *peersConfig) *peersReport {
	two := func() map[string]map[string]float64 {
		return map[string]map[string]float64{peerOrbitKV: {}, peerLMCache: {}}
	}
	r := &peersReport{
		Lookup: map[string]map[string]peerQuantiles{peerOrbitKV: {}, peerLMCache: {}},
		Store:  two(), Retrieve: two(), StoreCold: two(), RetrieveCold: two(),
		Transfers: map[string][]peerTransfer{},
		Conditions: peersConditions{CacheGiB: cfg.l1GiB, Lookups: cfg.lookups, Iters: cfg.iters,
			Warmup: cfg.warmup, LookupBlockBytes: peersLookupBlock},
	}
	for _, n := range cfg.chains {
		r.chains = append(r.chains, strconv.Itoa(n))
	}
	for _, s := range cfg.sizes {
		r.sizes = append(r.sizes, strconv.FormatUint(s, 10))
	}
	return r
}

// addTransfer files one system's figures for one block size.
func (r *peersReport) addTransfer(system string, t peerTransfer) {
	k := strconv.FormatUint(t.BlockBytes, 10)
	r.Store[system][k], r.Retrieve[system][k] = t.StoreGBps, t.RetrieveGBps
	r.StoreCold[system][k], r.RetrieveCold[system][k] = t.StoreColdGBps, t.RetrieveColdGBps
	r.Transfers[system] = append(r.Transfers[system], t)
}

// addDiscover files OrbitKV's discovery figures.
func (r *peersReport) addDiscover(d *discover.DiscoverFigures) {
	r.DiscoverLocal, r.DiscoverRTT = d.Local, d.RTT
}

// addLMCache files the LMCache driver's figures.
func (r *peersReport) addLMCache(lm *lmcacheResult) {
	for k, q := range lm.Lookup {
		r.Lookup[peerLMCache][k] = q
	}
	for _, t := range lm.Sizes {
		r.addTransfer(peerLMCache, t)
	}
	r.Conditions.LMCacheVersion, r.Conditions.LMCacheServerArgv = lm.Version, lm.ServerArgv
}

// peerRatio is num / den, or false when either is absent or not positive.
func peerRatio(num, den float64, okNum, okDen bool) (float64, bool) {
	if !okNum || !okDen || num <= 0 || den <= 0 {
		return 0, false
	}
	return num / den, true
}

// finish computes the ratios and the targets from the figures filed.
func (r *peersReport) finish() {
	r.Ratios = peersRatios{LookupP50: map[string]float64{}, LookupP99: map[string]float64{},
		Store: map[string]float64{}, Retrieve: map[string]float64{},
		StoreCold: map[string]float64{}, RetrieveCold: map[string]float64{},
		DiscoverVsRTT: map[string]float64{}, DiscoverVsLMCache: map[string]float64{}}
	for k, loc := range r.DiscoverLocal {
		rtt, okR := r.DiscoverRTT[k]
		if v, ok := peerRatio(rtt.P50, loc.P50, okR, true); ok {
			r.Ratios.DiscoverVsRTT[k] = v
		}
		l, okL := r.Lookup[peerLMCache][k]
		if v, ok := peerRatio(float64(l.P50), loc.P50, okL, true); ok {
			r.Ratios.DiscoverVsLMCache[k] = v
		}
	}
	for _, k := range r.chains {
		o, okO := r.Lookup[peerOrbitKV][k]
		l, okL := r.Lookup[peerLMCache][k]
		if v, ok := peerRatio(float64(l.P50), float64(o.P50), okL, okO); ok {
			r.Ratios.LookupP50[k] = v
		}
		if v, ok := peerRatio(float64(l.P99), float64(o.P99), okL, okO); ok {
			r.Ratios.LookupP99[k] = v
		}
	}
	faster := func(into map[string]float64, fig map[string]map[string]float64) {
		for _, k := range r.sizes {
			o, okO := fig[peerOrbitKV][k]
			l, okL := fig[peerLMCache][k]
			if v, ok := peerRatio(o, l, okO, okL); ok {
				into[k] = v
			}
		}
	}
	faster(r.Ratios.Store, r.Store)
	faster(r.Ratios.Retrieve, r.Retrieve)
	faster(r.Ratios.StoreCold, r.StoreCold)
	faster(r.Ratios.RetrieveCold, r.RetrieveCold)
	r.Targets = nil
	add := func(name string, want float64, v float64, ok bool) {
		t := peersTarget{Name: name, Want: want}
		if ok {
			t.Ratio, t.Met = &v, v >= want
		}
		r.Targets = append(r.Targets, t)
	}
	v, ok := r.Ratios.LookupP50["32"]
	add("lookup of 32 blocks, p50: LMCache / OrbitKV", peersLookupTarget, v, ok)
	for _, k := range r.sizes {
		v, ok := r.Ratios.Store[k]
		add("store of "+sizeName(k)+" blocks, warm: OrbitKV / LMCache GB/s", peersTransferTarget, v, ok)
		v, ok = r.Ratios.Retrieve[k]
		add("retrieve of "+sizeName(k)+" blocks, warm: OrbitKV / LMCache GB/s", peersTransferTarget, v, ok)
	}
}

// sizeName is a block-bytes key as IEC bytes ("65536" → "64 KiB").
func sizeName(k string) string {
	n, err := strconv.ParseUint(k, 10, 64)
	if err != nil {
		return k
	}
	return humanize.IBytes(n)
}

// writePeersJSON prints the report as one JSON object.
func writePeersJSON(w io.Writer, r *peersReport) error {
	enc := json.NewEncoder(w)
	return enc.Encode(r)
}

// writePeersTable prints the report as tables: lookups, transfers, targets.
func writePeersTable(w io.Writer, r *peersReport) error {
	c := r.Conditions
	fmt.Fprintf(w, "orbitkv-bench peers: %d CPUs %s; OrbitKV Manager pid %d and LMCache %s server, %.0f GiB of cache each; %d lookups, %d+%d batches\n",
		c.CPUs, c.CPUModel, c.ManagerPid, c.LMCacheVersion, c.CacheGiB, c.Lookups, c.Warmup, c.Iters)
	if r.LMCacheError != "" {
		fmt.Fprintf(w, "LMCache did not run: %s\n", r.LMCacheError)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lookup of\tOrbitKV p50\tp99\tManager parks\tLMCache p50\tp99\tp50 ratio\tp99 ratio\t")
	us := func(ns int64) string { return fmt.Sprintf("%.1f µs", float64(ns)/1e3) }
	opt := func(m map[string]float64, k, f string) string {
		if v, ok := m[k]; ok {
			return fmt.Sprintf(f, v)
		}
		return "-"
	}
	for _, k := range r.chains {
		o, l := r.Lookup[peerOrbitKV][k], r.Lookup[peerLMCache][k]
		lp50, lp99 := "-", "-"
		if _, ok := r.Lookup[peerLMCache][k]; ok {
			lp50, lp99 = us(l.P50), us(l.P99)
		}
		parks := "-"
		if o.ManagerParks != nil {
			parks = fmt.Sprint(*o.ManagerParks)
		}
		fmt.Fprintf(tw, "%s blocks\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k, us(o.P50), us(o.P99), parks, lp50, lp99,
			opt(r.Ratios.LookupP50, k, "%.0fx"), opt(r.Ratios.LookupP99, k, "%.0fx"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.DiscoverLocal) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "discovery of\tlocal p50\tp99\tround trip p50\tp99\tround trip / local\tLMCache lookup / local\t")
		fus := func(ns float64) string { return fmt.Sprintf("%.2f µs", ns/1e3) }
		keys := make([]string, 0, len(r.DiscoverLocal))
		for k := range r.DiscoverLocal {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return len(a) - len(b) })
		for _, k := range keys {
			loc, rtt := r.DiscoverLocal[k], r.DiscoverRTT[k]
			fmt.Fprintf(tw, "%s blocks\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k, fus(loc.P50), fus(loc.P99), fus(rtt.P50), fus(rtt.P99),
				opt(r.Ratios.DiscoverVsRTT, k, "%.1fx"), opt(r.Ratios.DiscoverVsLMCache, k, "%.0fx"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "block\tstore OrbitKV\tLMCache\tratio\tcold ratio\tretrieve OrbitKV\tLMCache\tratio\tcold ratio\t")
	for _, k := range r.sizes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", sizeName(k),
			opt(r.Store[peerOrbitKV], k, "%.2f GB/s"), opt(r.Store[peerLMCache], k, "%.2f GB/s"),
			opt(r.Ratios.Store, k, "%.1fx"), opt(r.Ratios.StoreCold, k, "%.1fx"),
			opt(r.Retrieve[peerOrbitKV], k, "%.2f GB/s"), opt(r.Retrieve[peerLMCache], k, "%.2f GB/s"),
			opt(r.Ratios.Retrieve, k, "%.1fx"), opt(r.Ratios.RetrieveCold, k, "%.1fx"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var ts []suite.Target
	for _, t := range r.Targets {
		m := "LMCache did not run"
		if t.Ratio != nil {
			m = fmt.Sprintf("%.1fx", *t.Ratio)
		}
		ts = append(ts, suite.Target{Name: fmt.Sprintf("%s ≥ %.0fx", t.Name, t.Want), Measured: m, Ok: t.Met})
	}
	return suite.WriteTargets(w, "bench/peers/README.md", suite.TargetsInformational, ts)
}
