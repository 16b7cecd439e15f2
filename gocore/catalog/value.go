package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// recordVersion is the first byte of every value this version writes.
const recordVersion = 1

// Member value layout (little-endian, doc.go "Values").
const (
	memberHeaderBytes = 20
	maxMemberBytes    = memberHeaderBytes + MaxPeerAddrBytes
)

// Shard value layout (little-endian, doc.go "Values").
const (
	shardHeaderBytes = 16
	groupHeaderBytes = nsBytes + 4
	hashBytes        = 16
	nsBytes          = 16
)

func encodeMember(m Member) []byte {
	b := make([]byte, memberHeaderBytes, memberHeaderBytes+len(m.PeerAddr))
	b[0] = recordVersion
	binary.LittleEndian.PutUint16(b[2:], uint16(len(m.PeerAddr)))
	binary.LittleEndian.PutUint64(b[4:], m.Epoch)
	binary.LittleEndian.PutUint64(b[12:], m.CapacityBytes)
	return append(b, m.PeerAddr...)
}

func memberError(field, got, want string) error {
	return &DecodeError{Record: "member value", Field: field, Got: got, Want: want}
}

// decodeMember parses a member value; k is its decoded key (the node and
// epoch the value must agree with).
func decodeMember(k recordKey, b []byte) (Member, error) {
	if len(b) < memberHeaderBytes || len(b) > maxMemberBytes {
		return Member{}, memberError("length", strconv.Itoa(len(b)), fmt.Sprintf("%d..%d bytes", memberHeaderBytes+1, maxMemberBytes))
	}
	if b[0] != recordVersion {
		return Member{}, memberError("version", strconv.Itoa(int(b[0])), strconv.Itoa(recordVersion))
	}
	if b[1] != 0 {
		return Member{}, memberError("reserved", strconv.Itoa(int(b[1])), "0")
	}
	n := int(binary.LittleEndian.Uint16(b[2:]))
	if n == 0 || memberHeaderBytes+n != len(b) {
		return Member{}, memberError("peer_addr_len", strconv.Itoa(n), fmt.Sprintf("1..%d, the value's length less %d", MaxPeerAddrBytes, memberHeaderBytes))
	}
	m := Member{NodeID: k.node, Epoch: binary.LittleEndian.Uint64(b[4:]), CapacityBytes: binary.LittleEndian.Uint64(b[12:]), PeerAddr: string(b[memberHeaderBytes:])}
	if m.Epoch != k.epoch {
		return Member{}, memberError("epoch", strconv.FormatUint(m.Epoch, 10), fmt.Sprintf("the key's epoch %d", k.epoch))
	}
	if _, _, err := splitHostPort(m.PeerAddr); err != nil {
		return Member{}, memberError("peer_addr", strconv.Quote(clip(m.PeerAddr)), "host:port; "+err.Error())
	}
	return m, nil
}

// nsGroup is one namespace's hashes within a shard, strictly ascending.
type nsGroup struct {
	ns     abi.Namespace
	hashes []abi.BlockHash
}

// shardValue is a decoded shard value: groups strictly ascending by
// namespace, each nonempty.
type shardValue struct {
	shards, shard int
	epoch         uint64
	groups        []nsGroup
}

// encodedBytes is the length encodeShard gives v.
func (v *shardValue) encodedBytes() int {
	n := shardHeaderBytes
	for _, g := range v.groups {
		n += groupHeaderBytes + hashBytes*len(g.hashes)
	}
	return n
}

func encodeShard(v *shardValue) []byte {
	b := make([]byte, shardHeaderBytes, v.encodedBytes())
	b[0] = recordVersion
	binary.LittleEndian.PutUint16(b[2:], uint16(v.shards))
	binary.LittleEndian.PutUint16(b[4:], uint16(v.shard))
	binary.LittleEndian.PutUint16(b[6:], uint16(len(v.groups)))
	binary.LittleEndian.PutUint64(b[8:], v.epoch)
	for _, g := range v.groups {
		b = append(b, g.ns[:]...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(g.hashes)))
		for _, h := range g.hashes {
			b = append(b, h[:]...)
		}
	}
	return b
}

func shardError(field, got, want string) error {
	return &DecodeError{Record: "shard value", Field: field, Got: got, Want: want}
}

// decodeShard parses a shard value; k is its decoded key. It accepts only
// the canonical form encodeShard writes (sorted, no duplicates, every
// entry in the value's shard), so decode∘encode is the identity.
func decodeShard(k recordKey, b []byte) (*shardValue, error) {
	if len(b) < shardHeaderBytes+groupHeaderBytes+hashBytes || len(b) > MaxShardValueBytes {
		return nil, shardError("length", strconv.Itoa(len(b)), fmt.Sprintf("%d..%d bytes", shardHeaderBytes+groupHeaderBytes+hashBytes, MaxShardValueBytes))
	}
	if b[0] != recordVersion {
		return nil, shardError("version", strconv.Itoa(int(b[0])), strconv.Itoa(recordVersion))
	}
	if b[1] != 0 {
		return nil, shardError("reserved", strconv.Itoa(int(b[1])), "0")
	}
	v := &shardValue{shards: int(binary.LittleEndian.Uint16(b[2:])), shard: int(binary.LittleEndian.Uint16(b[4:])), epoch: binary.LittleEndian.Uint64(b[8:])}
	if v.shards < 1 || v.shards > MaxShards {
		return nil, shardError("shards", strconv.Itoa(v.shards), fmt.Sprintf("1..%d", MaxShards))
	}
	if v.shard != k.shard || v.shard >= v.shards {
		return nil, shardError("shard", strconv.Itoa(v.shard), fmt.Sprintf("the key's shard %d, below shards %d", k.shard, v.shards))
	}
	if v.epoch != k.epoch {
		return nil, shardError("epoch", strconv.FormatUint(v.epoch, 10), fmt.Sprintf("the key's epoch %d", k.epoch))
	}
	ngroups := int(binary.LittleEndian.Uint16(b[6:]))
	if ngroups == 0 {
		return nil, shardError("groups", "0", "at least 1 (an empty shard is deleted, not written)")
	}
	v.groups = make([]nsGroup, 0, min(ngroups, (len(b)-shardHeaderBytes)/(groupHeaderBytes+hashBytes)))
	off := shardHeaderBytes
	for gi := 0; gi < ngroups; gi++ {
		field := fmt.Sprintf("groups[%d]", gi)
		if len(b)-off < groupHeaderBytes+hashBytes {
			return nil, shardError(field, fmt.Sprintf("%d bytes left", len(b)-off), fmt.Sprintf("%d declared groups of at least %d bytes", ngroups, groupHeaderBytes+hashBytes))
		}
		var g nsGroup
		copy(g.ns[:], b[off:])
		if gi > 0 && bytes.Compare(v.groups[gi-1].ns[:], g.ns[:]) >= 0 {
			return nil, shardError(field+".namespace", g.ns.String(), "namespaces strictly ascending")
		}
		n := int(binary.LittleEndian.Uint32(b[off+nsBytes:]))
		off += groupHeaderBytes
		if n == 0 || n > (len(b)-off)/hashBytes {
			return nil, shardError(field+".count", strconv.Itoa(n), fmt.Sprintf("1..%d (the hashes left in the value)", (len(b)-off)/hashBytes))
		}
		g.hashes = make([]abi.BlockHash, n)
		for i := range g.hashes {
			copy(g.hashes[i][:], b[off:])
			off += hashBytes
			if i > 0 && bytes.Compare(g.hashes[i-1][:], g.hashes[i][:]) >= 0 {
				return nil, shardError(fmt.Sprintf("%s.hashes[%d]", field, i), fmt.Sprintf("%x", g.hashes[i]), "hashes strictly ascending")
			}
			if s := shardOf(g.ns, g.hashes[i], v.shards); s != v.shard {
				return nil, shardError(fmt.Sprintf("%s.hashes[%d]", field, i), fmt.Sprintf("%x", g.hashes[i]), fmt.Sprintf("a hash of shard %d (it is in shard %d)", v.shard, s))
			}
		}
		v.groups = append(v.groups, g)
	}
	if off != len(b) {
		return nil, shardError("length", strconv.Itoa(len(b)), fmt.Sprintf("%d, the end of the declared groups", off))
	}
	return v, nil
}
