package catalog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is what every *DecodeError matches with errors.Is: a key or
// value under the catalog's prefix that this version cannot read. The
// watcher skips such a record (counting it in Stats.MalformedRecords); it
// never panics and never indexes part of it.
var ErrMalformed = errors.New("catalog: malformed record")

// DecodeError is one key or value that does not decode: the record kind
// (key, member value, shard value), the field, what it held and the limit.
type DecodeError struct {
	Record string // "key", "member value", "shard value"
	Field  string // e.g. "epoch", "groups[2].hashes[7]"
	Got    string // the offending content, quoted or as a number
	Want   string // the limit in words
}

// Error reads "catalog: malformed shard value: field epoch 0: want nonzero".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("catalog: malformed %s: field %s %s: want %s", e.Record, e.Field, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// recordKind is what a key under the prefix names.
type recordKind uint8

const (
	kindMember    recordKind = iota + 1 // P m/<node>/<epoch>
	kindInventory                       // P i/<node>/<epoch>/<shard>
)

// recordKey is a decoded key.
type recordKey struct {
	kind  recordKind
	node  string
	epoch uint64
	shard int // kindInventory only
}

// The sizes of a key beyond its prefix and node id (doc.go "Key layout").
const (
	memberKeyFixedBytes    = 2 + 1 + 16     // "m/" node "/" epoch
	inventoryKeyFixedBytes = 2 + 1 + 16 + 5 // "i/" node "/" epoch "/" shard
)

func memberKey(prefix, node string, epoch uint64) string {
	return fmt.Sprintf("%sm/%s/%016x", prefix, node, epoch)
}

func inventoryKey(prefix, node string, epoch uint64, shard int) string {
	return fmt.Sprintf("%si/%s/%016x/%04x", prefix, node, epoch, shard)
}

// nodePrefix is the key prefix of one kind ("m/" or "i/") of one
// node: its older epochs sort before epochKey(epoch).
func nodePrefix(prefix, kind, node string) string { return prefix + kind + "/" + node + "/" }

func epochKey(prefix, kind, node string, epoch uint64) string {
	return fmt.Sprintf("%s%016x", nodePrefix(prefix, kind, node), epoch)
}

func keyError(field, got, want string) error {
	return &DecodeError{Record: "key", Field: field, Got: got, Want: want}
}

// decodeKey parses key, which must start with prefix.
func decodeKey(prefix string, key []byte) (recordKey, error) {
	s := string(key)
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return recordKey{}, keyError("prefix", strconv.Quote(clip(s)), strconv.Quote(prefix))
	}
	parts := strings.Split(rest, "/")
	var k recordKey
	switch parts[0] {
	case "m":
		k.kind = kindMember
		if len(parts) != 3 {
			return k, keyError("parts", strconv.Itoa(len(parts)), "m/<node>/<epoch>")
		}
	case "i":
		k.kind = kindInventory
		if len(parts) != 4 {
			return k, keyError("parts", strconv.Itoa(len(parts)), "i/<node>/<epoch>/<shard>")
		}
	default:
		return k, keyError("kind", strconv.Quote(clip(parts[0])), `"m" or "i"`)
	}
	if !validNodeID(parts[1]) {
		return k, keyError("node", strconv.Quote(clip(parts[1])), fmt.Sprintf("1..%d bytes of [A-Za-z0-9._-]", MaxNodeIDBytes))
	}
	k.node = parts[1]
	epoch, ok := parseHex(parts[2], 16)
	if !ok || epoch == 0 {
		return k, keyError("epoch", strconv.Quote(clip(parts[2])), "16 lowercase hex digits, nonzero")
	}
	k.epoch = epoch
	if k.kind == kindInventory {
		shard, ok := parseHex(parts[3], 4)
		if !ok || shard >= MaxShards {
			return k, keyError("shard", strconv.Quote(clip(parts[3])), fmt.Sprintf("4 lowercase hex digits below %d", MaxShards))
		}
		k.shard = int(shard)
	}
	return k, nil
}

// parseHex parses exactly n lowercase hex digits.
func parseHex(s string, n int) (uint64, bool) {
	if len(s) != n {
		return 0, false
	}
	var v uint64
	for i := 0; i < n; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// clip shortens what an error repeats back of outside input.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
