package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Limits of one trace line.
const (
	MaxLineBytes = 16 << 20 // bytes of one JSON line
	MaxBlocks    = 1 << 20  // hash ids of one request
)

// ErrMalformed is wrapped by every error about the content of a trace.
var ErrMalformed = errors.New("malformed trace")

// Request is one trace line.
type Request struct {
	TimestampMS  uint64   // arrival time, milliseconds from the trace start
	InputLength  uint64   // prompt tokens
	OutputLength uint64   // generated tokens
	HashIDs      []uint64 // block hash ids of the prompt, 512 tokens a block, in order
}

// line is the JSON shape; pointers tell a missing field from a zero.
type line struct {
	Timestamp    *int64  `json:"timestamp"`
	InputLength  *int64  `json:"input_length"`
	OutputLength *int64  `json:"output_length"`
	HashIDs      []int64 `json:"hash_ids"`
}

// Reader reads requests one line at a time. Not safe for concurrent use.
type Reader struct {
	sc   *bufio.Scanner
	line int
	gz   *gzip.Reader
}

// NewReader reads a trace from r, gunzipping it when it starts with the gzip
// magic. Errors: a wrapped gzip header error.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	rd := &Reader{}
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace: gzip header: %v: %w", err, ErrMalformed)
		}
		rd.gz = gz
		r = gz
	} else {
		r = br
	}
	rd.sc = bufio.NewScanner(r)
	rd.sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	return rd, nil
}

// Next returns the next request, or io.EOF after the last one. Blank lines
// are skipped. A malformed line is an error wrapping ErrMalformed that names
// the line number and the field; reading may not continue after it.
func (r *Reader) Next() (Request, error) {
	for r.sc.Scan() {
		r.line++
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		return parseLine(b, r.line)
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Request{}, fmt.Errorf("trace: line %d: longer than %d bytes: %w", r.line+1, MaxLineBytes, ErrMalformed)
		}
		if r.gz != nil {
			return Request{}, fmt.Errorf("trace: line %d: reading the gzip stream (truncated or corrupt file?): %v: %w", r.line+1, err, ErrMalformed)
		}
		return Request{}, fmt.Errorf("trace: line %d: %v: %w", r.line+1, err, ErrMalformed)
	}
	return Request{}, io.EOF
}

func parseLine(b []byte, n int) (Request, error) {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Request{}, fmt.Errorf("trace: line %d: %v: %w", n, err, ErrMalformed)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("trace: line %d: more than one JSON value: %w", n, ErrMalformed)
	}
	fields := []struct {
		name string
		v    *int64
	}{{"timestamp", l.Timestamp}, {"input_length", l.InputLength}, {"output_length", l.OutputLength}}
	for _, f := range fields {
		if f.v == nil {
			return Request{}, fmt.Errorf("trace: line %d: field %s is missing: %w", n, f.name, ErrMalformed)
		}
		if *f.v < 0 {
			return Request{}, fmt.Errorf("trace: line %d: field %s is %d, must be >= 0: %w", n, f.name, *f.v, ErrMalformed)
		}
	}
	if l.HashIDs == nil {
		return Request{}, fmt.Errorf("trace: line %d: field hash_ids is missing: %w", n, ErrMalformed)
	}
	if len(l.HashIDs) > MaxBlocks {
		return Request{}, fmt.Errorf("trace: line %d: field hash_ids has %d entries, limit %d: %w", n, len(l.HashIDs), MaxBlocks, ErrMalformed)
	}
	ids := make([]uint64, len(l.HashIDs))
	for i, h := range l.HashIDs {
		if h < 0 {
			return Request{}, fmt.Errorf("trace: line %d: field hash_ids[%d] is %d, must be >= 0: %w", n, i, h, ErrMalformed)
		}
		ids[i] = uint64(h)
	}
	return Request{TimestampMS: uint64(*l.Timestamp), InputLength: uint64(*l.InputLength),
		OutputLength: uint64(*l.OutputLength), HashIDs: ids}, nil
}

// ReadAll reads every request of r.
func ReadAll(r io.Reader) ([]Request, error) {
	rd, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	var out []Request
	for {
		q, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
}

// Load reads the trace file at path (plain or gzip).
func Load(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	reqs, err := ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, nil
}

// Bound is the infinite-cache bound of a trace under the prefix-hit rule: a
// block of a request counts as a hit only if it and every earlier block of
// that request appeared in an earlier request (any earlier request, since an
// infinite cache keeps everything). HitRatio = HitBlocks / Blocks.
type Bound struct {
	Blocks    uint64
	HitBlocks uint64
}

// HitRatio is HitBlocks/Blocks, or 0 for an empty trace.
func (b Bound) HitRatio() float64 {
	if b.Blocks == 0 {
		return 0
	}
	return float64(b.HitBlocks) / float64(b.Blocks)
}

// InfiniteCacheBound computes the Bound of reqs in order.
func InfiniteCacheBound(reqs []Request) Bound {
	seen := make(map[uint64]struct{})
	var b Bound
	for _, q := range reqs {
		b.Blocks += uint64(len(q.HashIDs))
		for _, h := range q.HashIDs {
			if _, ok := seen[h]; !ok {
				break
			}
			b.HitBlocks++
		}
		for _, h := range q.HashIDs {
			seen[h] = struct{}{}
		}
	}
	return b
}
