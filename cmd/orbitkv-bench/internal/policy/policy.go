package policy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/trace"
)

// The targets for the default policy (informational in the table):
// at 5% and 10% capacity it closes at least 70% of the gap between LRU and
// the optimum, and it is never below LRU.
const (
	policyTargetGap = 0.70
	optimumName     = "optimum"
)

var policyTargetFractions = []float64{0.05, 0.10}

// policyConfig is the parsed, validated flag set of `orbitkv-bench policy`.
type policyConfig struct {
	suite.Common
	tracePath string    // --trace; "" = the default trace, found by findTrace
	fractions []float64 // capacities as fractions of the trace's unique blocks, in (0, 1]
	policies  []string  // lru first, then the other policies compared
	limit     int       // simulate the first limit requests; 0 = all
}

func ParsePolicyFlags(args []string, out io.Writer) (policyConfig, error) {
	var cfg policyConfig
	fs := suite.NewFlags("policy", &cfg.Common, out,
		"Simulates the RAM tier's eviction policies (gocore/evict) on a Mooncake trace at",
		"capacities given as fractions of the trace's unique blocks, beside the offline",
		"optimum (Belady under the prefix-hit rule). Each policy sees exactly the events a",
		"Manager sends it for one replay client, so a live replay at the same capacity",
		"agrees. Prints the hit ratio of every policy, LRU and the optimum, and the share of",
		"the LRU→optimum gap the default policy ("+evict.Default+") closes. Starts no Manager.",
		"Method: bench/README.md.")
	fractions := fs.String("fractions", "0.05,0.10,0.25,0.50", "capacities to simulate, comma-separated `fractions` of the trace's unique blocks, each in (0, 1]")
	policies := fs.String("policies", strings.Join(evict.Names(), ","), "`policies` to compare, comma-separated (lru and the optimum are always shown)")
	fs.TraceFlags(&cfg.tracePath, &cfg.limit, "simulate")
	fs.ProgressFlag()
	fs.PlotFlag("hit ratio against capacity")
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	if err := suite.CheckLimit(cfg.limit); err != nil {
		return cfg, err
	}
	var err error
	if cfg.fractions, err = parseFractions(*fractions); err != nil {
		return cfg, err
	}
	if cfg.policies, err = parsePolicies(*policies); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// parseFractions parses --fractions: distinct fractions in (0, 1], in flag
// order.
func parseFractions(s string) ([]float64, error) {
	return suite.ParseList(suite.ListFlag{Name: "fractions", Noun: "capacity"}, s, func(f string) (float64, error) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || v <= 0 || v > 1 {
			return 0, suite.Usagef("--fractions: %q is not a fraction in (0, 1]", f)
		}
		return v, nil
	})
}

// parsePolicies returns lru, then the other named policies in flag order.
func parsePolicies(s string) ([]string, error) {
	out := []string{evict.NameLRU}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "" || p == evict.NameLRU:
			continue
		case !slices.Contains(evict.Names(), p):
			return nil, suite.Usagef("--policies: unknown policy %q (known: %s; lru and the optimum are always shown)", p, strings.Join(evict.Names(), ", "))
		case slices.Contains(out, p):
			return nil, suite.Usagef("--policies: %s named twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// policyRow is one policy at one capacity.
type policyRow struct {
	CapacityFraction float64 `json:"capacity_fraction"`
	CapacityBlocks   int     `json:"capacity_blocks"`
	Policy           string  `json:"policy"` // "lru", "optimum" or a policy name
	HitRatio         float64 `json:"hit_ratio"`
	HitBlocks        uint64  `json:"hit_blocks"`
	// GapClosed is (hit ratio − LRU's) / (optimum's − LRU's), for the
	// policies other than lru and the optimum; absent when the optimum
	// does not beat LRU at this capacity.
	GapClosed *float64 `json:"gap_closed,omitempty"`
	SimS      float64  `json:"sim_s"` // seconds the simulation took
}

// PolicyReport is the JSON of `orbitkv-bench policy --json`.
type PolicyReport struct {
	suite.Head
	Trace         string      `json:"trace"`
	DefaultPolicy string      `json:"default_policy"`
	Requests      int         `json:"requests"`
	Blocks        uint64      `json:"blocks"`
	UniqueBlocks  int         `json:"unique_blocks"`
	BoundHitRatio float64     `json:"bound_hit_ratio"` // infinite-cache bound under the prefix-hit rule
	Rows          []policyRow `json:"rows"`            // per capacity: lru, the policies in flag order, optimum
	WallS         float64     `json:"wall_s"`

	policies  []string  // column order: lru, then the others
	fractions []float64 // row order
}

// Run is `orbitkv-bench policy`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := ParsePolicyFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	path, err := suite.FindTrace(cfg.tracePath)
	if err != nil {
		return err
	}
	reqs, err := trace.Load(path)
	if err != nil {
		return err
	}
	if cfg.limit > 0 && cfg.limit < len(reqs) {
		reqs = reqs[:cfg.limit]
	}
	if len(reqs) == 0 {
		return fmt.Errorf("%s: the trace has no requests", path)
	}
	prog := suite.StartProgress(cfg.Progress, stderr, "policy", "simulations", int64(cfg.Repeats*len(cfg.fractions)*(len(cfg.policies)+1)))
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	var reps []*PolicyReport
	for range cfg.Repeats {
		r, err := simulatePolicies(&cfg, path, reqs, prog)
		if err != nil {
			prog.Finish()
			return err
		}
		reps = append(reps, r)
	}
	prog.Finish()
	rep, figs, err := combinePolicies(reps)
	if err != nil {
		return err
	}
	cfg.Finish(&rep.Head, mon, suite.ValidityInput{HotUnchecked: "the policy suite simulates: no hot phase"}, figs)
	// The report first: a plot that fails does not lose a run's figures.
	err = cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writePolicyTable(w, rep) })
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &rep.Head, policyCharts(rep)...))
}

// combinePolicies is the report of repeated simulations: a simulation is
// deterministic, so every repeat must find the same hits in every row
// (else the policy depends on something besides the trace: an error
// naming the row). The report is the first repeat's with each row's and
// the whole's seconds the median over the repeats; the figures are each
// row's hit ratio (its spread is zero by the check) and the wall time.
func combinePolicies(reps []*PolicyReport) (*PolicyReport, []suite.Figure, error) {
	rep := reps[0]
	var figs []suite.Figure
	for i := range rep.Rows {
		row := &rep.Rows[i]
		var ratios, secs []float64
		for k, r := range reps {
			o := r.Rows[i]
			if o.HitBlocks != row.HitBlocks {
				return nil, nil, fmt.Errorf("%s at %d blocks hit %d blocks in repeat 1 and %d in repeat %d: the simulation is not deterministic",
					row.Policy, row.CapacityBlocks, row.HitBlocks, o.HitBlocks, k+1)
			}
			ratios, secs = append(ratios, o.HitRatio), append(secs, o.SimS)
		}
		row.SimS = suite.MedianOf(secs)
		figs = append(figs, suite.NewFigure(fmt.Sprintf("%s/%s/hit_ratio", percent(row.CapacityFraction), row.Policy), "fraction", suite.HigherIsBetter, row.HitRatio, ratios))
	}
	var walls []float64
	for _, r := range reps {
		walls = append(walls, r.WallS)
	}
	wall := suite.MedianFigure("wall_s", "s", suite.LowerIsBetter, walls)
	rep.WallS = wall.Value
	return rep, append(figs, wall), nil
}

// simulatePolicies runs every policy and the optimum at every capacity,
// counting each simulation done on prog.
func simulatePolicies(cfg *policyConfig, path string, reqs []trace.Request, prog *suite.Progress) (*PolicyReport, error) {
	start := time.Now()
	bound := trace.InfiniteCacheBound(reqs)
	ids := make([][]uint64, len(reqs))
	seen := make(map[uint64]struct{})
	for i, q := range reqs {
		ids[i] = q.HashIDs
		for _, h := range q.HashIDs {
			seen[h] = struct{}{}
		}
	}
	rep := &PolicyReport{Trace: path, DefaultPolicy: evict.Default, Requests: len(reqs), Blocks: bound.Blocks,
		UniqueBlocks: len(seen), BoundHitRatio: bound.HitRatio(), policies: cfg.policies, fractions: cfg.fractions}
	ratio := func(hits uint64) float64 {
		if bound.Blocks == 0 {
			return 0
		}
		return float64(hits) / float64(bound.Blocks)
	}
	for _, f := range cfg.fractions {
		c := max(1, int(f*float64(len(seen))))
		t := time.Now()
		optHits, _ := evict.Optimum(ids, c)
		prog.Add(1)
		opt := policyRow{CapacityFraction: f, CapacityBlocks: c, Policy: optimumName, HitRatio: ratio(optHits),
			HitBlocks: optHits, SimS: suite.ElapsedSeconds(time.Since(t))}
		var lru float64
		for _, name := range cfg.policies {
			t := time.Now()
			hits, _, err := evict.Simulate(ids, c, name)
			if err != nil {
				return nil, fmt.Errorf("%s at %d blocks: %w", name, c, err)
			}
			prog.Add(1)
			row := policyRow{CapacityFraction: f, CapacityBlocks: c, Policy: name, HitRatio: ratio(hits),
				HitBlocks: hits, SimS: suite.ElapsedSeconds(time.Since(t))}
			if name == evict.NameLRU {
				lru = row.HitRatio
			} else if opt.HitRatio > lru {
				g := (row.HitRatio - lru) / (opt.HitRatio - lru)
				row.GapClosed = &g
			}
			rep.Rows = append(rep.Rows, row)
		}
		rep.Rows = append(rep.Rows, opt)
	}
	rep.WallS = suite.ElapsedSeconds(time.Since(start))
	return rep, nil
}

// row returns the row of policy at capacity fraction f, or nil.
func (r *PolicyReport) row(f float64, policy string) *policyRow {
	for i := range r.Rows {
		if r.Rows[i].CapacityFraction == f && r.Rows[i].Policy == policy {
			return &r.Rows[i]
		}
	}
	return nil
}

// writePolicyTable prints one line per capacity: the hit ratio of LRU, each
// policy and the optimum, and the gap the default policy closes; then the
// targets (informational).
func writePolicyTable(w io.Writer, r *PolicyReport) error {
	fmt.Fprintf(w, "orbitkv-bench policy: %s, %d requests, %d blocks (%d unique), infinite-cache bound %.4f\n",
		r.Trace, r.Requests, r.Blocks, r.UniqueBlocks, r.BoundHitRatio)
	fmt.Fprintf(w, "hit ratio of one client's replay under each policy (the Manager's events); default policy %s\n\n", r.DefaultPolicy)
	showGap := slices.Contains(r.policies, r.DefaultPolicy) && r.DefaultPolicy != evict.NameLRU
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "capacity\tblocks\t")
	for _, p := range r.policies {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprintf(tw, "%s\t", optimumName)
	if showGap {
		fmt.Fprintf(tw, "%s gap closed\t", r.DefaultPolicy)
	}
	fmt.Fprintln(tw)
	for _, f := range r.fractions {
		opt := r.row(f, optimumName)
		fmt.Fprintf(tw, "%s\t%d\t", percent(f), opt.CapacityBlocks)
		for _, p := range r.policies {
			fmt.Fprintf(tw, "%.4f\t", r.row(f, p).HitRatio)
		}
		fmt.Fprintf(tw, "%.4f\t", opt.HitRatio)
		if showGap {
			if g := r.row(f, r.DefaultPolicy).GapClosed; g != nil {
				fmt.Fprintf(tw, "%.1f%%\t", 100**g)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if showGap {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "targets (informational, bench/README.md): %s closes >= %.0f%% of the gap at %s and %s capacity, and is never below lru\n",
			r.DefaultPolicy, 100*policyTargetGap, percent(policyTargetFractions[0]), percent(policyTargetFractions[1]))
		for _, f := range r.fractions {
			d, l := r.row(f, r.DefaultPolicy), r.row(f, evict.NameLRU)
			switch {
			case d.HitRatio < l.HitRatio:
				fmt.Fprintf(w, "  %s: %s %.4f is below lru %.4f\n", percent(f), r.DefaultPolicy, d.HitRatio, l.HitRatio)
			case slices.Contains(policyTargetFractions, f) && d.GapClosed != nil && *d.GapClosed < policyTargetGap:
				fmt.Fprintf(w, "  %s: %s closes %.1f%% of the gap, short of %.0f%%\n", percent(f), r.DefaultPolicy, 100**d.GapClosed, 100*policyTargetGap)
			}
		}
	}
	_, err := fmt.Fprintf(w, "simulated in %.2f s\n", r.WallS)
	return err
}

// percent formats a fraction as "5%" or "2.5%".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e4, 'f', -1, 64) + "%"
}
