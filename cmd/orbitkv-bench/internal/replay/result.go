package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

// maxWorkerResultBytes bounds the result line a worker writes: its
// counters and numOps encoded histograms of at most maxEncodedHist bytes
// each, with room for the JSON around them.
const maxWorkerResultBytes = numOps*latency.MaxEncodedHist + 64<<10

// maxWorkerCounter bounds each counter of a worker's result: 2^56 (72
// PB, 2.3 years of ns), beyond any run, so the parent's sums over at most
// 64 workers (--clients) cannot wrap uint64 (a wrapped sum could put
// hit_blocks above blocks, or turn GB/s into nonsense).
const maxWorkerCounter = 1 << 56

// readResultLine reads one '\n'-terminated line of at most limit bytes
// (the newline included) from r. A longer line is an error naming the
// limit, read no further.
func readResultLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("result line longer than %d bytes", limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("result line of %d bytes ends without a newline", len(line))
		default:
			return nil, err
		}
	}
}

// decodeWorkerResult decodes a worker's result line (outside bytes to the
// parent) into its counters and one histogram per op, indexed like
// opNames. Every error names the field and the limit it broke: a line
// over maxWorkerResultBytes, JSON that is not one workerResult object
// (unknown keys included), a histogram missing, of an unknown op or that
// does not decode (decodeLatencyHist), a counter above maxWorkerCounter,
// or counters that contradict each other (hit_blocks above blocks).
func decodeWorkerResult(line []byte) (*workerResult, [numOps]*latency.Hist, error) {
	var hists [numOps]*latency.Hist
	if len(line) > maxWorkerResultBytes {
		return nil, hists, fmt.Errorf("result: %d bytes, limit %d", len(line), maxWorkerResultBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	res := &workerResult{}
	if err := dec.Decode(res); err != nil {
		return nil, hists, fmt.Errorf("result: not a workerResult JSON object: %w", err)
	}
	if dec.More() {
		return nil, hists, errors.New("result: data after the JSON object")
	}
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"requests", res.Requests}, {"blocks", res.Blocks}, {"hit_blocks", res.HitBlocks}, {"mismatches", res.Mismatches},
		{"unadmitted", res.Unadmitted}, {"unadmitted_blocks", res.UnadmittedBlocks}, {"loading_waits", res.LoadingWaits},
		{"stored_blocks", res.StoredBlocks}, {"present_blocks", res.PresentBlocks}, {"restored_bytes", res.RestoredBytes},
		{"published_bytes", res.PublishedBytes}, {"restore_ns", res.RestoreNS}, {"publish_ns", res.PublishNS},
	} {
		if c.v > maxWorkerCounter {
			return nil, hists, fmt.Errorf("result: %s %d above the limit %d", c.name, c.v, uint64(maxWorkerCounter))
		}
	}
	if res.HitBlocks > res.Blocks {
		return nil, hists, fmt.Errorf("result: hit_blocks %d above blocks %d", res.HitBlocks, res.Blocks)
	}
	for name := range res.Histograms {
		if !slices.Contains(opNames[:], name) {
			return nil, hists, fmt.Errorf("result: histograms: unknown op %q (want %s)", name, strings.Join(opNames[:], ", "))
		}
	}
	for op, name := range opNames {
		enc, ok := res.Histograms[name]
		if !ok {
			return nil, hists, fmt.Errorf("result: histograms: no %q histogram", name)
		}
		h, err := latency.DecodeHist("result: histograms."+name, []byte(enc))
		if err != nil {
			return nil, hists, err
		}
		hists[op] = h
	}
	if res.Remote != "" {
		h, err := latency.DecodeHist("result: remote", []byte(res.Remote))
		if err != nil {
			return nil, hists, err
		}
		res.remote = h
	}
	return res, hists, nil
}
