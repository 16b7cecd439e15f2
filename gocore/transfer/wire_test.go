package transfer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func goodRead() Header {
	return Header{Op: OpRead, Tag: 7, Segment: 3, Offset: 4096, Length: 256 << 10, Capability: Capability{1, 2, 3}}
}

func encoded(h Header) []byte {
	b := make([]byte, HeaderBytes)
	h.Encode(b)
	return b
}

func TestHeadersRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		h    Header
	}{
		{"a READ with its capability", goodRead()},
		{"a DATA answer of the largest slice", Header{Op: OpData, Tag: 1 << 63, Segment: 1, Offset: 1 << 40, Length: MaxSliceBytes}},
		{"an ERROR with no text", Header{Op: OpError, Code: CodeExpired, Tag: 2, Segment: 9}},
		{"an ERROR with the longest text", Header{Op: OpError, Code: CodeOutOfRange, Tag: 2, Segment: 9, Length: MaxErrorTextBytes}},
	}
	for _, c := range cases {
		t.Run(c.name+" decodes to itself", func(t *testing.T) {
			got, err := DecodeHeader(encoded(c.h))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.h {
				t.Errorf("decoded %+v, want %+v", got, c.h)
			}
		})
	}
}

func TestMalformedHeadersAreRefusedNamingTheField(t *testing.T) {
	set := func(h Header, f func(*Header)) []byte { f(&h); return encoded(h) }
	poke := func(off int, v uint64, n int) []byte {
		b := encoded(goodRead())
		switch n {
		case 1:
			b[off] = byte(v)
		case 4:
			binary.LittleEndian.PutUint32(b[off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[off:], v)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"a short header", encoded(goodRead())[:63], "header is 63 bytes, want 64"},
		{"a wrong magic", poke(0, 0x12345678, 4), "magic 0x12345678"},
		{"another version", poke(4, 2, 1), "version 2, want 1"},
		{"an unknown op", poke(5, 9, 1), "op 9 is unknown"},
		{"op 0", poke(5, 0, 1), "op 0 is unknown"},
		{"a READ of 0 bytes", set(goodRead(), func(h *Header) { h.Length = 0 }), "length 0 of op READ, want 1..16777216"},
		{"a READ beyond the slice bound", set(goodRead(), func(h *Header) { h.Length = MaxSliceBytes + 1 }), "length 16777217 of op READ, want 1..16777216"},
		{"an ERROR text beyond its bound", set(Header{Op: OpError, Code: 1, Segment: 1}, func(h *Header) { h.Length = 257 }), "length 257 of op ERROR, want 0..256"},
		{"segment id 0", set(goodRead(), func(h *Header) { h.Segment = 0 }), "segment id 0, want ≥ 1"},
		{"an offset whose end overflows", set(goodRead(), func(h *Header) { h.Offset = ^uint64(0) - 10 }), "overflows 2^64"},
		{"a code in a READ", set(goodRead(), func(h *Header) { h.Code = 1 }), "code 1 in op READ, want 0"},
		{"an ERROR without a code", set(Header{Op: OpError, Segment: 1}, func(*Header) {}), "code 0 in op ERROR, want 1..5"},
		{"an ERROR with an unknown code", set(Header{Op: OpError, Segment: 1, Code: 77}, func(*Header) {}), "code 77 in op ERROR"},
		{"a capability in a DATA frame", set(Header{Op: OpData, Segment: 1, Length: 1, Capability: Capability{1}}, func(*Header) {}), "capability set in op DATA"},
		{"reserved bytes 36..40 set", poke(36, 1, 4), "reserved bytes 36..40"},
		{"reserved bytes 56..64 set", poke(56, 1, 8), "reserved bytes 56..64"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := DecodeHeader(c.b)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeHeader: %v, want ErrMalformed naming %q", err, c.want)
			}
		})
	}
}

func TestCheckRangeRefusesReadsPastTheSegment(t *testing.T) {
	cases := []struct {
		name      string
		off       uint64
		n         uint32
		seg       uint64
		wantError bool
	}{
		{"a read of the whole segment is inside", 0, 100, 100, false},
		{"a read of the last byte is inside", 99, 1, 100, false},
		{"a read one byte past the end is outside", 99, 2, 100, true},
		{"a read starting past the end is outside", 101, 1, 100, true},
		{"a read of a huge offset is outside", 1 << 62, 1, 100, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Header{Op: OpRead, Segment: 5, Offset: c.off, Length: c.n}
			err := CheckRange(&h, c.seg)
			if (err != nil) != c.wantError {
				t.Fatalf("CheckRange: %v, want error %v", err, c.wantError)
			}
			if err != nil && (!errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "beyond the 100 bytes of segment 5")) {
				t.Errorf("error %q does not name the segment's size", err)
			}
		})
	}
}

func TestEveryCodeMapsToItsErrorAndBack(t *testing.T) {
	for c := Code(1); c < codeEnd; c++ {
		err := RemoteError(c, "why")
		if codeOf(err) != c || !errors.Is(err, codeErrors[c]) {
			t.Errorf("code %d → %v → code %d", c, err, codeOf(err))
		}
	}
}

// FuzzDecodeHeader: DecodeHeader never panics; a header it accepts
// encodes back to the same 64 bytes and satisfies the bounds it promises;
// CheckRange admits exactly the reads inside the segment.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(encoded(goodRead()), uint64(1<<20))
	f.Add(encoded(Header{Op: OpData, Tag: 1, Segment: 1, Length: 1}), uint64(0))
	f.Add(encoded(Header{Op: OpError, Code: CodeMalformed, Segment: 2, Length: 10}), uint64(5))
	f.Add(make([]byte, HeaderBytes), uint64(0))
	f.Add([]byte("OKVT"), uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, segBytes uint64) {
		h, err := DecodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if got := encoded(h); !bytes.Equal(got, b[:HeaderBytes]) {
			t.Fatalf("accepted %x, re-encoded %x", b[:HeaderBytes], got)
		}
		if h.Segment == 0 || h.Length > MaxSliceBytes || h.Offset+uint64(h.Length) < h.Offset {
			t.Fatalf("accepted %+v outside the bounds", h)
		}
		inside := h.Offset+uint64(h.Length) <= segBytes
		if rerr := CheckRange(&h, segBytes); (rerr == nil) != inside {
			t.Fatalf("CheckRange(%+v, %d): %v, inside %v", h, segBytes, rerr, inside)
		}
	})
}
