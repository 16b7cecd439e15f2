package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Medium is where a block is held, as vLLM's events name it.
type Medium uint8

// The media OrbitKV announces: the RAM tier is "CPU", the SSD tier
// "STORAGE" (vLLM's MEDIUM_CPU and MEDIUM_STORAGE).
const (
	CPU Medium = 1 << iota
	Storage
)

// String is the medium's wire name.
func (m Medium) String() string {
	switch m {
	case CPU:
		return "CPU"
	case Storage:
		return "STORAGE"
	}
	return fmt.Sprintf("Medium(%d)", uint8(m))
}

func parseMedium(s string) (Medium, bool) {
	switch s {
	case "CPU":
		return CPU, true
	case "STORAGE":
		return Storage, true
	}
	return 0, false
}

// Event kinds, the "type" tag of each event map.
const (
	KindStored  = "BlockStored"
	KindRemoved = "BlockRemoved"
	KindCleared = "AllBlocksCleared"
)

// Event is one KV event: a BlockStored (Kind KindStored: Hashes, Parent,
// Tokens, BlockSize, Medium), a BlockRemoved (Hashes, Medium) or an
// AllBlocksCleared (no fields).
type Event struct {
	Kind      string
	Hashes    []uint64 // engine block hashes, in chain order
	HasParent bool
	Parent    uint64   // the engine hash of the block before Hashes[0]
	Tokens    []uint32 // BlockStored: the token ids of all its blocks
	BlockSize int      // BlockStored: tokens per block
	Medium    Medium
}

// Batch is one published message's payload: vLLM's KVEventBatch, a
// msgpack array [ts, events, data_parallel_rank].
type Batch struct {
	TS     float64 // seconds since the Unix epoch
	Events []Event
	DPRank *int64 // nil: msgpack nil (no data-parallel rank)
}

// Limits of DecodeBatch on outside bytes.
const (
	// MaxBatchEvents is the most events a decoded batch may hold.
	MaxBatchEvents = 1 << 20
	// MaxEventItems is the most block hashes or token ids one decoded
	// event may hold.
	MaxEventItems = 1 << 24
)

// AppendBatch appends b's msgpack encoding to dst, field for field as
// vLLM's msgspec encoder writes a KVEventBatch: the batch as an array,
// each event as a map whose first key is "type", BlockStored with its
// seven required fields (lora_id and lora_name nil), BlockRemoved with
// two. Integers take msgpack's shortest form, as msgspec writes them.
// The encoding is written here, not through a library: the stream's
// goroutine encodes every token id of every block it announces, and this
// is several times faster (BenchmarkAppendBatch); DecodeBatch reads it
// back with the msgpack library, and the conformance test with vLLM's.
func AppendBatch(dst []byte, b *Batch) []byte {
	dst = append(dst, 0x93) // fixarray of 3
	dst = append(dst, 0xcb)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(b.TS))
	dst = appendArrayLen(dst, len(b.Events))
	for i := range b.Events {
		ev := &b.Events[i]
		switch ev.Kind {
		case KindStored:
			dst = append(dst, 0x88) // fixmap of 8
			dst = appendStr(appendStr(dst, "type"), KindStored)
			dst = appendUints(appendStr(dst, "block_hashes"), ev.Hashes)
			dst = appendStr(dst, "parent_block_hash")
			if ev.HasParent {
				dst = appendUint(dst, ev.Parent)
			} else {
				dst = append(dst, 0xc0)
			}
			dst = appendStr(dst, "token_ids")
			dst = appendArrayLen(dst, len(ev.Tokens))
			for _, t := range ev.Tokens {
				dst = appendUint(dst, uint64(t))
			}
			dst = appendUint(appendStr(dst, "block_size"), uint64(ev.BlockSize))
			dst = append(appendStr(dst, "lora_id"), 0xc0)
			dst = appendStr(appendStr(dst, "medium"), ev.Medium.String())
			dst = append(appendStr(dst, "lora_name"), 0xc0)
		case KindRemoved:
			dst = append(dst, 0x83) // fixmap of 3
			dst = appendStr(appendStr(dst, "type"), KindRemoved)
			dst = appendUints(appendStr(dst, "block_hashes"), ev.Hashes)
			dst = appendStr(appendStr(dst, "medium"), ev.Medium.String())
		default:
			dst = append(dst, 0x81) // fixmap of 1
			dst = appendStr(appendStr(dst, "type"), KindCleared)
		}
	}
	if b.DPRank == nil {
		return append(dst, 0xc0)
	}
	return appendInt(dst, *b.DPRank)
}

// msgpack's shortest forms (the msgpack specification, "Formats").
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v < 0x80:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func appendUints(dst []byte, vs []uint64) []byte {
	dst = appendArrayLen(dst, len(vs))
	for _, v := range vs {
		dst = appendUint(dst, v)
	}
	return dst
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// DecodeBatch decodes a payload AppendBatch or vLLM's publisher wrote.
// Fields it does not know (vLLM's optional ones: extra_keys, group_idx,
// ...) are skipped. Errors name the field and the limit: a payload that
// is not a 3-element array, a count over MaxBatchEvents or
// MaxEventItems, an unknown "type", a missing required field, a medium
// other than CPU or STORAGE, a block hash that is not an unsigned 64-bit
// integer (vLLM's bytes form is refused), a token id over 2^32-1,
// trailing bytes.
func DecodeBatch(p []byte) (Batch, error) {
	var b Batch
	r := bytes.NewReader(p)
	d := msgpack.NewDecoder(r)
	n, err := d.DecodeArrayLen()
	if err != nil || n != 3 {
		return b, fmt.Errorf("kvevents: batch: want a msgpack array [ts, events, data_parallel_rank], got %d elements (%v)", n, err)
	}
	if b.TS, err = d.DecodeFloat64(); err != nil || math.IsNaN(b.TS) {
		return b, fmt.Errorf("kvevents: batch ts: %v", orNaN(err))
	}
	ne, err := d.DecodeArrayLen()
	if err != nil || ne < 0 || ne > MaxBatchEvents {
		return b, fmt.Errorf("kvevents: batch events: %d, want an array of at most %d (%v)", ne, MaxBatchEvents, err)
	}
	b.Events = make([]Event, 0, min(ne, 1024))
	for i := range ne {
		ev, err := decodeEvent(d)
		if err != nil {
			return b, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		b.Events = append(b.Events, ev)
	}
	if c, err := d.PeekCode(); err == nil && c == msgpcode.Nil {
		_ = d.DecodeNil()
	} else {
		rank, err := d.DecodeInt64()
		if err != nil {
			return b, fmt.Errorf("kvevents: batch data_parallel_rank: %v", err)
		}
		b.DPRank = &rank
	}
	if r.Len() != 0 {
		return b, fmt.Errorf("kvevents: %d bytes after the batch", r.Len())
	}
	return b, nil
}

func orNaN(err error) error {
	if err == nil {
		return errors.New("NaN")
	}
	return err
}

func decodeEvent(d *msgpack.Decoder) (Event, error) {
	var ev Event
	n, err := d.DecodeMapLen()
	if err != nil || n < 1 {
		return ev, fmt.Errorf("want a map with a \"type\" key (%v)", err)
	}
	var seen struct{ hashes, parent, tokens, size, medium bool }
	for range n {
		key, err := d.DecodeString()
		if err != nil {
			return ev, fmt.Errorf("key: %v", err)
		}
		switch key {
		case "type":
			if ev.Kind, err = d.DecodeString(); err == nil && ev.Kind != KindStored && ev.Kind != KindRemoved && ev.Kind != KindCleared {
				err = fmt.Errorf("%q, want %s, %s or %s", ev.Kind, KindStored, KindRemoved, KindCleared)
			}
		case "block_hashes":
			seen.hashes = true
			ev.Hashes, err = decodeUints(d, "block_hashes", math.MaxUint64, func(v uint64) uint64 { return v })
		case "parent_block_hash":
			seen.parent = true
			if c, perr := d.PeekCode(); perr == nil && c == msgpcode.Nil {
				err = d.DecodeNil()
			} else if ev.Parent, err = decodeUnsigned(d); err == nil {
				ev.HasParent = true
			}
		case "token_ids":
			seen.tokens = true
			ev.Tokens, err = decodeUints(d, "token_ids", math.MaxUint32, func(v uint64) uint32 { return uint32(v) })
		case "block_size":
			seen.size = true
			var s int64
			if s, err = d.DecodeInt64(); err == nil && (s < 1 || s > math.MaxInt32) {
				err = fmt.Errorf("%d, want 1..%d", s, math.MaxInt32)
			}
			ev.BlockSize = int(s)
		case "medium":
			seen.medium = true
			var s string
			if s, err = d.DecodeString(); err == nil {
				var ok bool
				if ev.Medium, ok = parseMedium(s); !ok {
					err = fmt.Errorf("%q, want CPU or STORAGE", s)
				}
			}
		default:
			err = d.Skip()
		}
		if err != nil {
			return ev, fmt.Errorf("%s: %w", key, err)
		}
	}
	switch {
	case ev.Kind == "":
		return ev, errors.New("no \"type\" key")
	case ev.Kind == KindStored && !(seen.hashes && seen.parent && seen.tokens && seen.size && seen.medium):
		return ev, errors.New("BlockStored without one of block_hashes, parent_block_hash, token_ids, block_size, medium")
	case ev.Kind == KindRemoved && !(seen.hashes && seen.medium):
		return ev, errors.New("BlockRemoved without block_hashes or medium")
	}
	return ev, nil
}

// decodeUints decodes an array of unsigned integers of at most max each
// and MaxEventItems in all.
func decodeUints[T uint32 | uint64](d *msgpack.Decoder, field string, max uint64, conv func(uint64) T) ([]T, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 || n > MaxEventItems {
		return nil, fmt.Errorf("%d items, want an array of at most %d (%v)", n, MaxEventItems, err)
	}
	out := make([]T, 0, min(n, 4096))
	for i := range n {
		v, err := decodeUnsigned(d)
		if err != nil || v > max {
			return nil, fmt.Errorf("item %d: %d, want an unsigned integer ≤ %d (%v)", i, v, max, err)
		}
		out = append(out, conv(v))
	}
	return out, nil
}

// decodeUnsigned decodes a msgpack integer that is not negative (any
// width, signed formats included); other values are refused.
func decodeUnsigned(d *msgpack.Decoder) (uint64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case msgpcode.IsFixedNum(c) && int8(c) >= 0, c == msgpcode.Uint8, c == msgpcode.Uint16, c == msgpcode.Uint32, c == msgpcode.Uint64:
		return d.DecodeUint64()
	case c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64:
		v, err := d.DecodeInt64()
		if err == nil && v < 0 {
			err = fmt.Errorf("%d is negative", v)
		}
		return uint64(v), err
	}
	return 0, fmt.Errorf("msgpack code 0x%02x is not an integer", c)
}
