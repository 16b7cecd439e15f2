package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMalformedLinesNameTheLineAndTheField(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, 2]}`
	tests := []struct {
		name, line, want string
	}{
		{"a missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": []}`, "line 2: field timestamp is missing"},
		{"a missing hash_ids", `{"timestamp": 1, "input_length": 1, "output_length": 1}`, "line 2: field hash_ids is missing"},
		{"a negative input length", `{"timestamp": 1, "input_length": -1, "output_length": 1, "hash_ids": []}`, "line 2: field input_length is -1, must be >= 0"},
		{"a negative hash id", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [3, -4]}`, "line 2: field hash_ids[1] is -4"},
		{"a fractional timestamp", `{"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": []}`, "line 2: json: cannot unmarshal number 1.5 into Go struct field line.timestamp"},
		{"an unknown field", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [], "x": 1}`, `line 2: json: unknown field "x"`},
		{"text that is not JSON", `hello`, "line 2: invalid character"},
		{"two objects on one line", good + good, "line 2: more than one JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			_, err := ReadAll(strings.NewReader(good + "\n" + tc.line + "\n"))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", err, tc.want)
			}
		})
	}
}

func TestReadingPlainAndGzipGiveTheSameRequests(t *testing.T) {
	text := "{\"timestamp\": 5, \"input_length\": 1024, \"output_length\": 7, \"hash_ids\": [9, 8]}\n\n" +
		"{\"timestamp\": 6, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [9]}\n"
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	io.WriteString(w, text)
	w.Close()
	for name, r := range map[string]io.Reader{"plain": strings.NewReader(text), "gzip": &gz} {
		reqs, err := ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(reqs) != 2 || reqs[0].TimestampMS != 5 || reqs[0].InputLength != 1024 || reqs[0].OutputLength != 7 ||
			len(reqs[0].HashIDs) != 2 || reqs[0].HashIDs[1] != 8 || reqs[1].HashIDs[0] != 9 {
			t.Fatalf("%s: %+v", name, reqs)
		}
	}
}

func TestAnOverlongLineIsRefused(t *testing.T) {
	big := `{"timestamp": 0, "input_length": 0, "output_length": 0, "hash_ids": [` + strings.Repeat("1,", MaxLineBytes/2) + `1]}`
	_, err := ReadAll(strings.NewReader(big))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line 1: longer than") {
		t.Fatalf("err = %v", err)
	}
}

func TestTheBoundCountsOnlyPrefixesSeenBefore(t *testing.T) {
	reqs := []Request{
		{HashIDs: []uint64{1, 2, 3}},    // all new
		{HashIDs: []uint64{1, 2, 4, 3}}, // 1,2 hit; 4 breaks the prefix, 3 does not count
		{HashIDs: []uint64{1, 2, 4}},    // all hit
		{HashIDs: []uint64{5, 1}},       // 5 new: nothing counts
	}
	b := InfiniteCacheBound(reqs)
	if b.Blocks != 12 || b.HitBlocks != 5 {
		t.Fatalf("bound %+v, want 5 of 12", b)
	}
}

// The issue states the conversation trace's bound: 0.3664 of 288,500 blocks.
func TestTheConversationTraceBound(t *testing.T) {
	reqs, err := Load("../../bench/traces/mooncake-conversation.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	b := InfiniteCacheBound(reqs)
	if len(reqs) != 12031 || b.Blocks != 288500 || b.HitBlocks != 105710 {
		t.Fatalf("%d requests, bound %+v; want 12031 requests, 105710 of 288500 blocks", len(reqs), b)
	}
	if r := b.HitRatio(); r < 0.3664 || r > 0.3665 {
		t.Errorf("hit ratio %.5f, want 0.3664", r)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 2, "hash_ids": [0, 1]}` + "\n"))
	f.Add([]byte(`{"timestamp": 0}`))
	f.Add([]byte("\x1f\x8b\x08\x00garbage"))
	f.Add([]byte(`{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1e300]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := ReadAll(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, q := range reqs {
			if len(q.HashIDs) > MaxBlocks {
				t.Fatalf("request with %d blocks accepted", len(q.HashIDs))
			}
		}
		InfiniteCacheBound(reqs)
	})
}
