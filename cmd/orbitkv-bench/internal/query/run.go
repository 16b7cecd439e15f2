package query

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// queryRun is one run of the query suite against a Manager the bench
// started with cfg.queryManagerArgs.
type queryRun struct {
	cfg         *QueryConfig
	c           *client.Client
	m           *managerproc.Manager
	metricsAddr string
	progress    io.Writer // one line per phase; io.Discard with --json

	buf    *client.Buffer // registered: free only after c is closed
	ns     client.Namespace
	hashes []client.BlockHash // hash i = blockHash(i), all resident
	next   int                // start of the next query window (moving chains)

	repeats map[string][]*latency.Hist // "query N/hot", "ping/cold", … → one histogram per repeat
	server  map[int][]queryCounters    // per row: the Manager's counters over each repeat's hot queries
	hot     []suite.HotPhase           // every hot phase and the Manager's parks in it

	probe       *probeTable // the machine yardstick over --resident-blocks keys
	probeNs     []float64   // per repeat: the probe's ns per key (independent lookups)
	probeSerial []float64   // per repeat: the chase's ns per key
}

// keep files one repeat's hot and cold histograms of subject.
func (r *queryRun) keep(subject string, hot, cold *latency.Hist) {
	r.repeats[subject+"/hot"] = append(r.repeats[subject+"/hot"], hot)
	r.repeats[subject+"/cold"] = append(r.repeats[subject+"/cold"], cold)
}

// merged is the histogram of key over all repeats.
func (r *queryRun) merged(key string) *latency.Hist {
	h := latency.NewHist()
	for _, rh := range r.repeats[key] {
		h.Merge(rh)
	}
	return h
}

// warmupOf is the untimed calls timeRoundTrips and timeAlternating make
// before n timed ones.
func warmupOf(n int) int { return min(n/10+1, 1000) }

// watchHot runs a hot phase of roundTrips calls (f) between two readings
// of the Manager's park counter and files it as name.
func (r *queryRun) watchHot(name string, roundTrips int, f func() error) error {
	before, err := managerproc.ScrapeParks(r.metricsAddr)
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	after, err := managerproc.ScrapeParks(r.metricsAddr)
	if err != nil {
		return err
	}
	r.hot = append(r.hot, suite.HotPhase{Name: name, Parks: after - before, RoundTrips: roundTrips})
	return nil
}

// freeBuffer frees the engine buffer; call it after closing the client.
func (r *queryRun) freeBuffer() {
	if r.buf != nil {
		r.buf.Free()
	}
}

func (r *queryRun) run() (*QueryReport, error) {
	largest := r.cfg.hashes[len(r.cfg.hashes)-1]
	if max := r.c.MaxQueryHashes(); max < largest {
		return nil, fmt.Errorf("the session carries at most %d hashes per query, the largest row needs %d (the Manager's --desc-bytes)", max, largest)
	}
	spec := content.Namespace
	spec.KVLayout = "orbitkv-bench-query"
	var err error
	if r.ns, err = client.Fingerprint(spec); err != nil {
		return nil, err
	}
	r.repeats, r.server = map[string][]*latency.Hist{}, map[int][]queryCounters{}
	rep := &QueryReport{ResidentBlocks: r.cfg.residentBlocks, BlockBytes: QueryLayers * QueryPageBytes, SameChain: r.cfg.sameChain, Scattered: r.cfg.scattered}
	if rep.PublishS, err = r.publish(); err != nil {
		return nil, err
	}
	h, err := managerproc.ReadHealth(r.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("health after publishing: %w", err)
	}
	if h.Blocks != uint64(r.cfg.residentBlocks) || h.Evictions != 0 {
		return nil, fmt.Errorf("after publishing %d blocks the Manager holds %d (%d evicted); want all resident", r.cfg.residentBlocks, h.Blocks, h.Evictions)
	}
	rep.ManagerBlocks = h.Blocks
	r.probe = newProbeTable(r.cfg.residentBlocks)
	for repeat := range r.cfg.Repeats {
		for _, n := range r.cfg.hashes {
			fmt.Fprintf(r.progress, "repeat %d of %d: measuring QueryBundle of %d hashes ...\n", repeat+1, r.cfg.Repeats, n)
			if err := r.measureRow(n, repeat); err != nil {
				return nil, fmt.Errorf("QueryBundle of %d hashes: %w", n, err)
			}
		}
		fmt.Fprintf(r.progress, "repeat %d of %d: measuring the bare open-addressing probe over %d keys ...\n", repeat+1, r.cfg.Repeats, r.cfg.residentBlocks)
		if err := r.measureProbe(); err != nil {
			return nil, err
		}
		fmt.Fprintf(r.progress, "repeat %d of %d: measuring Poll of a pending ticket beside Ping ...\n", repeat+1, r.cfg.Repeats)
		if err := r.measurePoll(repeat); err != nil {
			return nil, fmt.Errorf("poll of a pending ticket: %w", err)
		}
	}
	r.assemble(rep)
	return rep, nil
}

// assemble fills the report from every repeat: each round-trip summary
// from the histogram merged over the repeats, each row's server time from
// the Manager's counters summed over them.
func (r *queryRun) assemble(rep *QueryReport) {
	rep.Hists = map[string]*latency.Hist{}
	for key := range r.repeats {
		rep.Hists[key] = r.merged(key)
	}
	for _, n := range r.cfg.hashes {
		var sum queryCounters
		for _, d := range r.server[n] {
			sum.nanos, sum.hashes = sum.nanos+d.nanos, sum.hashes+d.hashes
		}
		row := QueryRow{Hashes: n, RTT: latency.RTTOf(rep.Hists[fmt.Sprintf("query %d/hot", n)].Stats()), ColdRTT: latency.RTTOf(rep.Hists[fmt.Sprintf("query %d/cold", n)].Stats())}
		row.ServerHashes, row.ServerNsPerHash = uint64(sum.hashes), sum.nanos/sum.hashes
		row.ServerNsPerQuery = sum.nanos / (sum.hashes / float64(n))
		rep.Rows = append(rep.Rows, row)
	}
	rep.ServerNsPerHash = rep.Rows[len(rep.Rows)-1].ServerNsPerHash
	rep.ProbeNsPerKey, rep.ProbeSerialNsPerKey = suite.MedianOf(r.probeNs), suite.MedianOf(r.probeSerial)
	if rep.ProbeNsPerKey > 0 {
		rep.ServerPerProbe = rep.ServerNsPerHash / rep.ProbeNsPerKey
	}
	rep.PollRTT, rep.PingRTT = latency.RTTOf(rep.Hists["poll/hot"].Stats()), latency.RTTOf(rep.Hists["ping/hot"].Stats())
	rep.PollColdRTT, rep.PingColdRTT = latency.RTTOf(rep.Hists["poll/cold"].Stats()), latency.RTTOf(rep.Hists["ping/cold"].Stats())
}

// figures are the query report's headline figures: hot and cold p50 and
// p99 of every row, of Ping and of Poll, and each row's server ns per hash.
func (r *queryRun) figures(rep *QueryReport) []suite.Figure {
	var out []suite.Figure
	for _, n := range r.cfg.hashes {
		for _, mode := range []string{"hot", "cold"} {
			key := fmt.Sprintf("query %d/%s", n, mode)
			out = append(out, suite.LatencyFigures(key, rep.Hists[key], r.repeats[key])...)
		}
		var per []float64
		for _, d := range r.server[n] {
			per = append(per, d.nanos/d.hashes)
		}
		row := rep.Rows[slices.Index(r.cfg.hashes, n)]
		out = append(out, suite.NewFigure(fmt.Sprintf("query %d/server_ns_per_hash", n), "ns/hash", suite.LowerIsBetter, row.ServerNsPerHash, per))
	}
	// The ratio per repeat: that repeat's largest row against that
	// repeat's probe, measured right after it.
	largest := r.cfg.hashes[len(r.cfg.hashes)-1]
	var ratios []float64
	for i, d := range r.server[largest] {
		if i < len(r.probeNs) && r.probeNs[i] > 0 {
			ratios = append(ratios, d.nanos/d.hashes/r.probeNs[i])
		}
	}
	out = append(out,
		suite.MedianFigure("probe_ns_per_key", "ns/key", suite.LowerIsBetter, r.probeNs),
		suite.MedianFigure("probe_serial_ns_per_key", "ns/key", suite.LowerIsBetter, r.probeSerial),
		suite.NewFigure("server_per_probe", "ratio", suite.LowerIsBetter, rep.ServerPerProbe, ratios))
	for _, key := range []string{"ping/hot", "poll/hot", "ping/cold", "poll/cold"} {
		out = append(out, suite.LatencyFigures(key, rep.Hists[key], r.repeats[key])...)
	}
	return out
}

// publish stores hashes 0..residentBlocks-1 from the pages of one engine
// buffer, a publish chunk at a time (pages are reused across calls; their
// content does not matter here), in hash order or, with --scattered, in a
// shuffled order (a fixed seed), and returns the seconds it took.
func (r *queryRun) publish() (float64, error) {
	total := r.cfg.residentBlocks
	per := min(total, r.c.MaxPublishEntries())
	var err error
	if r.buf, err = client.AllocBuffer(QueryLayers, QueryPageBytes, uint64(per)); err != nil {
		return 0, fmt.Errorf("allocating the engine buffer: %w", err)
	}
	id, err := r.c.RegisterBuffer(r.buf)
	if err != nil {
		return 0, fmt.Errorf("registering the engine buffer: %w", err)
	}
	r.hashes = make([]client.BlockHash, total)
	for i := range r.hashes {
		r.hashes[i] = content.BlockHash(uint64(i))
	}
	order := r.hashes
	if r.cfg.scattered {
		order = slices.Clone(r.hashes)
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	pages := make([]uint32, per)
	for i := range pages {
		pages[i] = uint32(i)
	}
	fmt.Fprintf(r.progress, "publishing %d blocks, %d per call ...\n", total, per)
	start := time.Now()
	for i := 0; i < total; i += per {
		n := min(per, total-i)
		res, err := r.c.Publish(r.ns, id, order[i:i+n], pages[:n])
		if err != nil {
			return 0, fmt.Errorf("publishing blocks %d..%d: %w", i, i+n-1, err)
		}
		if int(res.Stored) != n {
			return 0, fmt.Errorf("publishing blocks %d..%d: %d stored, %d already present; want %d fresh", i, i+n-1, res.Stored, res.Present, n)
		}
	}
	return suite.ElapsedSeconds(time.Since(start)), nil
}

// window returns the hashes of the next query of n: the first n with
// --same-chain, else the next n resident hashes after the previous query's,
// wrapping around, so a lookup finds its index entry cold in the caches.
func (r *queryRun) window(n int) []client.BlockHash {
	if r.cfg.sameChain {
		return r.hashes[:n]
	}
	if r.next+n > len(r.hashes) {
		r.next = 0
	}
	w := r.hashes[r.next : r.next+n]
	r.next += n
	return w
}

// measureRow times QueryBundle of n resident hashes hot, reading the
// Manager's query counters and its park counter around the hot samples
// (warmup included: every query of the row carries n hashes), then cold,
// and files repeat's histograms and counters.
func (r *queryRun) measureRow(n, repeat int) error {
	query := func() (time.Duration, error) {
		w := r.window(n)
		t := time.Now()
		l, err := r.c.Query(r.ns, w)
		d := time.Since(t)
		if err != nil {
			return 0, err
		}
		if int(l.Hits) != n {
			if l.ID != 0 {
				r.c.Release(l.ID)
			}
			return 0, fmt.Errorf("query hit %d of %d resident blocks", l.Hits, n)
		}
		return d, r.c.Release(l.ID)
	}
	before, err := scrapeQueryCounters(r.metricsAddr)
	if err != nil {
		return err
	}
	iters := r.cfg.rowIters(r.cfg.iters, n)
	var hot *latency.Hist
	err = r.watchHot(fmt.Sprintf("query %d/hot repeat %d", n, repeat+1), iters+warmupOf(iters), func() (err error) {
		hot, err = timeRoundTrips(query, iters, 0)
		return err
	})
	if err != nil {
		return err
	}
	after, err := scrapeQueryCounters(r.metricsAddr)
	if err != nil {
		return err
	}
	d := after.sub(before)
	if d.hashes <= 0 || d.nanos <= 0 {
		return fmt.Errorf("the Manager's counters moved by %.0f ns and %.0f hashes over %d queries; want both above 0", d.nanos, d.hashes, hot.Count())
	}
	// A row whose Manager-side time per query is under half the client's
	// spin window answers within it unless something parked or was
	// descheduled: its client side is checked too.
	last := &r.hot[len(r.hot)-1]
	if perQuery := d.nanos / (d.hashes / float64(n)); perQuery < float64(suite.ClientSpinDefault)/2 {
		*last = last.ClientSide(hot, 0)
	} else {
		last.Long = true
	}
	cold, err := timeRoundTrips(query, r.cfg.rowIters(r.cfg.coldIters, n), r.cfg.ColdGap)
	if err != nil {
		return err
	}
	r.server[n] = append(r.server[n], d)
	r.keep(fmt.Sprintf("query %d", n), hot, cold)
	return nil
}

// probeRounds is how many passes over the probe's keys one measurement
// makes (4M lookups at 1M keys: about 0.1 s).
const probeRounds = 4

// measureProbe times the bare probe (probeTable) once per repeat, right
// after the repeat's largest row, so both see the same machine state.
func (r *queryRun) measureProbe() error {
	ns, err := r.probe.independentNs(probeRounds)
	if err != nil {
		return err
	}
	serial, err := r.probe.serialNs(1)
	if err != nil {
		return err
	}
	r.probeNs, r.probeSerial = append(r.probeNs, ns), append(r.probeSerial, serial)
	return nil
}

// measurePoll times Poll of a ticket that stays pending beside Ping: a
// lease of the largest row's hashes fills the lease budget (the Manager was
// started with exactly its bytes), so a ticket for one more block waits for
// budget and answers Loading until that lease is released. Ping and Poll
// alternate sample by sample, so both see the same machine state.
func (r *queryRun) measurePoll(repeat int) error {
	largest := r.cfg.hashes[len(r.cfg.hashes)-1]
	held, err := r.c.Query(r.ns, r.hashes[:largest])
	if err != nil {
		return fmt.Errorf("leasing %d blocks to fill the lease budget: %w", largest, err)
	}
	if int(held.Hits) != largest {
		return fmt.Errorf("leasing %d blocks to fill the lease budget: hit %d", largest, held.Hits)
	}
	bh, err := client.NewBlockHashes(r.hashes[:1])
	if err != nil {
		return err
	}
	defer bh.Free()
	tk, ans, err := r.c.Submit(client.QuerySpec{NS: r.ns, Hashes: bh})
	if err != nil {
		return fmt.Errorf("submitting the ticket: %w", err)
	}
	defer r.c.FreeTicket(tk)
	if ans.Status != client.StatusLoading || !tk.Live() {
		return fmt.Errorf("the ticket answered status %d (live %v) with the lease budget full; want Loading (%d)", ans.Status, tk.Live(), client.StatusLoading)
	}
	poll := func() (time.Duration, error) {
		t := time.Now()
		a, err := r.c.Poll(tk)
		d := time.Since(t)
		if err == nil && a.Status != client.StatusLoading {
			err = fmt.Errorf("poll answered status %d; want Loading (%d)", a.Status, client.StatusLoading)
		}
		return d, err
	}
	ping := func() (time.Duration, error) {
		t := time.Now()
		_, err := r.c.Ping(1)
		return time.Since(t), err
	}
	var pollHot, pingHot *latency.Hist
	err = r.watchHot(fmt.Sprintf("poll+ping/hot repeat %d", repeat+1), 2*(r.cfg.iters+warmupOf(r.cfg.iters)), func() (err error) {
		pollHot, pingHot, err = timeAlternating(poll, ping, r.cfg.iters, 0)
		return err
	})
	if err != nil {
		return err
	}
	// Ping and a pending Poll answer in about a microsecond: the client
	// side is checked on Ping's round trips.
	last := &r.hot[len(r.hot)-1]
	*last = last.ClientSide(pingHot, 0)
	pollCold, pingCold, err := timeAlternating(poll, ping, r.cfg.coldIters, r.cfg.ColdGap)
	if err != nil {
		return err
	}
	r.keep("poll", pollHot, pollCold)
	r.keep("ping", pingHot, pingCold)
	// Releasing the held lease admits the ticket: its next poll answers Ok.
	if err := r.c.Release(held.ID); err != nil {
		return fmt.Errorf("releasing the budget lease: %w", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		a, err := r.c.Poll(tk)
		switch {
		case err != nil:
			return fmt.Errorf("poll after the budget freed: %w", err)
		case a.Status == client.StatusOK:
			return r.c.Release(a.LeaseID)
		case a.Status != client.StatusLoading || time.Now().After(deadline):
			return fmt.Errorf("poll after the budget freed answered status %d; want Ok (%d)", a.Status, client.StatusOK)
		}
		time.Sleep(time.Millisecond)
	}
}

// timeAlternating records n samples each of f and g, alternating which
// goes first, after a warmup as timeRoundTrips', pausing gap before each
// call.
func timeAlternating(f, g func() (time.Duration, error), n int, gap time.Duration) (*latency.Hist, *latency.Hist, error) {
	fs, gs := latency.NewHist(), latency.NewHist()
	call := func(h func() (time.Duration, error), out *latency.Hist, keep bool) error {
		if gap > 0 {
			time.Sleep(gap)
		}
		d, err := h()
		if err == nil && keep {
			out.RecordDuration(d)
		}
		return err
	}
	for i := -min(n/10+1, 1000); i < n; i++ {
		first, second := f, g
		fo, so := fs, gs
		if i%2 != 0 {
			first, second, fo, so = g, f, gs, fs
		}
		if err := call(first, fo, i >= 0); err != nil {
			return nil, nil, err
		}
		if err := call(second, so, i >= 0); err != nil {
			return nil, nil, err
		}
	}
	return fs, gs, nil
}
