package replay

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
)

// workerLine is the result line a worker writes for res with one
// histogram per op, op i holding samples[i].
func workerLine(t testing.TB, res workerResult, samples [numOps][]uint64) []byte {
	t.Helper()
	res.Histograms = map[string]string{}
	for op, s := range samples {
		b, err := latency.Of(s...).Encode()
		if err != nil {
			t.Fatal(err)
		}
		res.Histograms[opNames[op]] = string(b)
	}
	b, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestWorkerHistogramsRoundTripToTheParent(t *testing.T) {
	samples := [numOps][]uint64{benchtest.Seq(1000, 1999), {900_000, 1_000_000}, {700_000}, benchtest.Seq(3000, 3099)}
	line := workerLine(t, workerResult{Requests: 10, Blocks: 40, HitBlocks: 12}, samples)
	res, hists, err := decodeWorkerResult(line)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 10 || res.Blocks != 40 || res.HitBlocks != 12 {
		t.Errorf("counters = %+v, want those sent", res)
	}
	for op := range numOps {
		want := latency.Of(samples[op]...).Stats()
		if got := hists[op].Stats(); got != want {
			t.Errorf("%s: stats after the round trip = %+v, want %+v", opNames[op], got, want)
		}
	}
	t.Run("the parent's merge of two workers equals one histogram of all samples", func(t *testing.T) {
		_, other, err := decodeWorkerResult(workerLine(t, workerResult{}, [numOps][]uint64{benchtest.Seq(2000, 2999)}))
		if err != nil {
			t.Fatal(err)
		}
		run := &replayRun{plan: &replayPlan{}, manager: managerproc.External("/nonexistent"), cfg: replayConfig{clients: 2}}
		rep := run.merge([]*workerResult{res, {}}, [][numOps]*latency.Hist{hists, other}, 0)
		if got, want := rep.RTT["query"], latency.Of(benchtest.Seq(1000, 2999)...).Stats(); got.P50 != want.P50 || got.P99 != want.P99 || got.N != want.N {
			t.Errorf("merged query = %+v, want %+v", got, want)
		}
	})
}

func TestDecodeWorkerResultNamesTheBadField(t *testing.T) {
	good := string(workerLine(t, workerResult{Blocks: 1}, [numOps][]uint64{}))
	tests := []struct {
		name string
		line string
		want string
	}{
		{"a line that is not JSON", "ready\n", "result: not a workerResult JSON object"},
		{"an unknown key", `{"samples_ns": {}}`, `unknown field "samples_ns"`},
		{"a missing histogram", `{"histograms": {}}`, `result: histograms: no "query" histogram`},
		{"an unknown op", strings.Replace(good, `"query"`, `"quack"`, 1), `result: histograms: unknown op "quack"`},
		{"a histogram that does not decode", strings.Replace(good, `"release":"`, `"release":"xx`, 1), "result: histograms.release: not an HdrHistogram"},
		{"more hits than blocks", `{"blocks": 1, "hit_blocks": 2}`, "result: hit_blocks 2 above blocks 1"},
		{"a second object after the first", `{} {}`, "result: data after the JSON object"},
		{"a negative counter", `{"blocks": -1}`, "result: not a workerResult JSON object"},
		{"a counter that 64 workers could wrap when summed", `{"blocks": 9223372036854775808, "hit_blocks": 9223372036854775808}`,
			"result: blocks 9223372036854775808 above the limit 72057594037927936"},
		{"a byte count that 64 workers could wrap when summed", `{"restored_bytes": 18446744073709551615}`,
			"result: restored_bytes 18446744073709551615 above the limit 72057594037927936"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeWorkerResult([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("a line over the limit is refused naming the limit", func(t *testing.T) {
		_, _, err := decodeWorkerResult(make([]byte, maxWorkerResultBytes+1))
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("err = %v, want the limit named", err)
		}
	})
}

func TestReadResultLineStopsAtTheLimit(t *testing.T) {
	tests := []struct {
		name  string
		input string
		limit int
		want  string // "" = the line comes back
	}{
		{"a short line comes back with its newline", "abc\nrest", 10, ""},
		{"a line longer than the limit is refused", strings.Repeat("x", 100) + "\n", 50, "longer than 50 bytes"},
		{"a line without a newline is refused", "abc", 10, "ends without a newline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line, err := readResultLine(bufio.NewReaderSize(strings.NewReader(tt.input), 16), tt.limit)
			switch {
			case tt.want == "" && (err != nil || string(line) != "abc\n"):
				t.Errorf("line, err = %q, %v; want \"abc\\n\", nil", line, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// FuzzDecodeWorkerResult feeds outside bytes to the parent's decoder of a
// worker's result: it must return an error or a result whose histograms
// all have the bench's geometry, and never panic.
func FuzzDecodeWorkerResult(f *testing.F) {
	f.Add(workerLine(f, workerResult{Requests: 3, Blocks: 9, HitBlocks: 4}, [numOps][]uint64{{1, 2, 3}, {1000}, nil, {5}}))
	f.Add([]byte(`{"histograms": {"query": "HISTFAAAACB4nJNpmSzMwMDAxQABzFCaEUzOmNZg/wEiAAXYAkE="}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte("ready\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		res, hists, err := decodeWorkerResult(line)
		if err != nil {
			return
		}
		if res.HitBlocks > res.Blocks {
			t.Errorf("accepted hit_blocks %d above blocks %d", res.HitBlocks, res.Blocks)
		}
		if res.Blocks > maxWorkerCounter || res.RestoredBytes > maxWorkerCounter || res.Requests > maxWorkerCounter {
			t.Errorf("accepted a counter above %d: %+v", uint64(maxWorkerCounter), res)
		}
		for op, h := range hists {
			if h == nil || h.H.SignificantFigures() != latency.HistSigFigs || h.H.HighestTrackableValue() != latency.HistHighestNS {
				t.Fatalf("accepted a %s histogram of a foreign geometry", opNames[op])
			}
			if h.Count() < 0 || h.Count() > latency.MaxHistSamples {
				t.Fatalf("accepted a %s histogram of %d samples, limit %d", opNames[op], h.Count(), latency.MaxHistSamples)
			}
			b, err := h.Encode()
			if err != nil {
				t.Fatal(err)
			}
			again, err := latency.DecodeHist("again", b)
			if err != nil || again.Count() != h.Count() {
				t.Fatalf("re-encoding an accepted histogram: %v (count %d, want %d)", err, again.Count(), h.Count())
			}
		}
	})
}
