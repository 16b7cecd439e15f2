package peer

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckLookupRefusesFieldsOutsideTheirLimitsNamingThem(t *testing.T) {
	for _, c := range []struct {
		name      string
		ns        []byte
		hashes    []uint64
		tokens    []uint32
		blockSize int
		want      string // "" accepted
	}{
		{"hashes in any namespace", nil, []uint64{1, 2}, nil, 0, ""},
		{"tokens in a namespace", make([]byte, 16), nil, []uint32{1, 2, 3}, 3, ""},
		{"an empty chain", nil, nil, nil, 0, ""},
		{"a namespace of 15 bytes", make([]byte, 15), []uint64{1}, nil, 0, "namespace: 15 bytes"},
		{"hashes and tokens", nil, []uint64{1}, []uint32{1}, 1, "give one, not both"},
		{"too many hashes", nil, make([]uint64, MaxLookupHashes+1), nil, 0, "engine_hashes: 65537, at most 65536"},
		{"a block size of 0 with tokens", nil, nil, []uint32{1}, 0, "block_size: 0, want 1..512"},
		{"a block size over 512", nil, nil, []uint32{1}, 513, "block_size: 513, want 1..512"},
		{"a block size without tokens", nil, []uint64{1}, nil, 4, "block_size: 4 without token_ids"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkLookup(c.ns, c.hashes, c.tokens, c.blockSize)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrInvalidRequest naming %q", err, c.want)
			}
		})
	}
}
