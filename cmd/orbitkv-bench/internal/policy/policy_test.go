package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

func TestParsePolicyFlagsDefaults(t *testing.T) {
	cfg, err := ParsePolicyFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.05, 0.10, 0.25, 0.50}; !slices.Equal(cfg.fractions, want) {
		t.Errorf("fractions = %v, want %v", cfg.fractions, want)
	}
	if !slices.Equal(cfg.policies, evict.Names()) {
		t.Errorf("policies = %v, want every policy, lru first: %v", cfg.policies, evict.Names())
	}
	if cfg.limit != 0 || cfg.Json || cfg.tracePath != "" {
		t.Errorf("defaults = %+v", cfg)
	}
	cfg, err = ParsePolicyFlags([]string{"--policies", "slru", "--fractions", "0.5, 0.025"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.policies, []string{evict.NameLRU, evict.NameSLRU}) || !slices.Equal(cfg.fractions, []float64{0.5, 0.025}) {
		t.Errorf("got policies %v fractions %v, want lru added first and the fractions in flag order", cfg.policies, cfg.fractions)
	}
}

func TestParsePolicyFlagsRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a zero fraction", []string{"--fractions", "0"}, `--fractions: "0" is not a fraction in (0, 1]`},
		{"a fraction above one", []string{"--fractions", "0.5,1.5"}, `--fractions: "1.5" is not a fraction`},
		{"a fraction that is not a number", []string{"--fractions", "5%"}, `--fractions: "5%" is not a fraction`},
		{"a fraction named twice", []string{"--fractions", "0.1,0.10"}, "--fractions: 0.10 named twice"},
		{"no fraction", []string{"--fractions", ","}, "--fractions names no capacity"},
		{"an unknown policy", []string{"--policies", "slru,arc"}, `--policies: unknown policy "arc" (known: lru, `},
		{"a policy named twice", []string{"--policies", "slru,slru"}, "--policies: slru named twice"},
		{"a negative limit", []string{"--limit", "-1"}, "--limit must be at least 0"},
		{"a Manager flag (the suite starts none)", []string{"--manager-args", "--copy-workers 2"}, "unknown flag: --manager-args"},
		{"an argument", []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicyFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestPolicyJSONHasTheIssuesShape(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--trace", benchtest.TestTrace, "--limit", "400", "--fractions", "0.05,0.5", "--json"}
	if err := Run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The keys bench/README.md documents, decoded loosely so an extra field is fine
	// and a renamed one is not.
	var rep struct {
		Trace         *string `json:"trace"`
		DefaultPolicy *string `json:"default_policy"`
		Rows          []struct {
			CapacityFraction *float64 `json:"capacity_fraction"`
			Policy           *string  `json:"policy"`
			HitRatio         *float64 `json:"hit_ratio"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.String(), err)
	}
	if rep.Trace == nil || *rep.Trace != benchtest.TestTrace || rep.DefaultPolicy == nil || *rep.DefaultPolicy != evict.Default {
		t.Fatalf("trace %v, default_policy %v: want %s and %s", rep.Trace, rep.DefaultPolicy, benchtest.TestTrace, evict.Default)
	}
	want := append(evict.Names(), optimumName)
	got := map[float64][]string{}
	ratio := map[float64]map[string]float64{}
	for _, r := range rep.Rows {
		if r.CapacityFraction == nil || r.Policy == nil || r.HitRatio == nil {
			t.Fatalf("row %+v lacks capacity_fraction, policy or hit_ratio", r)
		}
		f := *r.CapacityFraction
		got[f] = append(got[f], *r.Policy)
		if ratio[f] == nil {
			ratio[f] = map[string]float64{}
		}
		ratio[f][*r.Policy] = *r.HitRatio
		if *r.HitRatio < 0 || *r.HitRatio > 1 {
			t.Errorf("%s at %v: hit ratio %v", *r.Policy, f, *r.HitRatio)
		}
	}
	for _, f := range []float64{0.05, 0.5} {
		if !slices.Equal(got[f], want) {
			t.Errorf("rows at %v: %v, want %v", f, got[f], want)
		}
		for _, p := range evict.Names() {
			if ratio[f][p] > ratio[f][optimumName] {
				t.Errorf("%s beats the optimum at %v: %v > %v", p, f, ratio[f][p], ratio[f][optimumName])
			}
		}
	}
}

func TestPolicyTableMatchesGolden(t *testing.T) {
	gap := func(g float64) *float64 { return &g }
	rep := &PolicyReport{
		Trace: "bench/traces/mooncake-conversation.jsonl.gz", DefaultPolicy: evict.NameSLRU,
		Requests: 12031, Blocks: 288500, UniqueBlocks: 182790, BoundHitRatio: 0.36641,
		policies: []string{evict.NameLRU, evict.NameS3FIFO, evict.NameSLRU}, fractions: []float64{0.05, 0.5, 1},
		Rows: []policyRow{
			{CapacityFraction: 0.05, CapacityBlocks: 9139, Policy: "lru", HitRatio: 0.1957},
			{CapacityFraction: 0.05, CapacityBlocks: 9139, Policy: "s3fifo", HitRatio: 0.1917, GapClosed: gap(-0.023)},
			{CapacityFraction: 0.05, CapacityBlocks: 9139, Policy: "slru", HitRatio: 0.2166, GapClosed: gap(0.122)},
			{CapacityFraction: 0.05, CapacityBlocks: 9139, Policy: "optimum", HitRatio: 0.3664},
			{CapacityFraction: 0.5, CapacityBlocks: 91395, Policy: "lru", HitRatio: 0.3631},
			{CapacityFraction: 0.5, CapacityBlocks: 91395, Policy: "s3fifo", HitRatio: 0.3629, GapClosed: gap(-0.07)},
			{CapacityFraction: 0.5, CapacityBlocks: 91395, Policy: "slru", HitRatio: 0.3630, GapClosed: gap(-0.03)},
			{CapacityFraction: 0.5, CapacityBlocks: 91395, Policy: "optimum", HitRatio: 0.3664},
			{CapacityFraction: 1, CapacityBlocks: 182790, Policy: "lru", HitRatio: 0.3664},
			{CapacityFraction: 1, CapacityBlocks: 182790, Policy: "s3fifo", HitRatio: 0.3664},
			{CapacityFraction: 1, CapacityBlocks: 182790, Policy: "slru", HitRatio: 0.3664},
			{CapacityFraction: 1, CapacityBlocks: 182790, Policy: "optimum", HitRatio: 0.3664},
		},
		WallS: 1.25,
	}
	var got bytes.Buffer
	if err := writePolicyTable(&got, rep); err != nil {
		t.Fatal(err)
	}
	benchtest.CheckGolden(t, "policy_table.golden", got.Bytes())
}
