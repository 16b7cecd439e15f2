package ram

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/hugepages"
)

// The ledger is the RAM tier's durable index: a second memfd
// ("orbitkv-ram-ledger") beside the arena that says, for every chunk, which
// sealed block it holds. It lives in shared memory only so that a successor
// Manager that receives both memfds (an upgrade's handover, or systemd's
// file descriptor store after a crash) can tell which chunks hold which
// sealed blocks without the predecessor's help. Layout (little-endian):
//
//	header, LedgerHeaderBytes (4096):
//	  0  [8]  magic "OKVRAMLG"
//	  8  u32  layout version (LedgerVersion)
//	  12 u32  entry bytes (entryHeadBytes + record room)
//	  16 u64  chunk bytes
//	  24 u32  chunks
//	  28 u32  record room per chunk
//	  32 u64  tag (Spec.Tag: what the entries' domain numbers mean)
//	  40 u32  crc32c of bytes [0, 40)
//	entry of chunk i, at LedgerHeaderBytes + i*entry bytes:
//	  0  u64  seal sequence (0: the chunk holds no sealed block)
//	  8  [16] namespace
//	  24 [16] block hash
//	  40 u64  block bytes
//	  48 u32  crc32c of the block's bytes, taken at seal
//	  52 u16  part: this chunk's place in the block, 0..parts-1
//	  54 u16  parts: the block's chunk count
//	  56 u16  domain (index.Domain)
//	  58 u16  layers
//	  60 u32  check: crc32c of bytes [0, 60) and the record room
//	  64 ...  record room: the block's record, split over its parts in
//	          part order, after a u16 length in part 0
//
// Invariants: an entry is written only after the block's bytes are
// complete (Seal, called at seal), and cleared (sequence 0) before its
// chunk is free again (Release); every part of one block carries the same
// sequence, key, bytes, checksum, parts, domain and layers. A crash may
// leave a block's parts half written: adoption drops any block whose parts
// disagree or whose check or checksum fails (adopt.go).
const (
	LedgerVersion     = 1
	LedgerHeaderBytes = 4096
	ledgerMagic       = "OKVRAMLG"
	entryHeadBytes    = 64
	// LedgerName and ArenaName are the memfds' names, which Adopt checks.
	LedgerName = "orbitkv-ram-ledger"
	ArenaName  = "orbitkv-ram-tier"
	// maxParts bounds the chunks of a block the ledger records (a u16);
	// a larger block is kept in RAM but does not survive a restart.
	maxParts = 1<<16 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordRoom is the record bytes each chunk's entry holds: 1/64 of the
// chunk, in [64 B, 4 KiB].
func recordRoom(chunkBytes uint64) uint64 { return min(max(chunkBytes/64, 64), 4096) }

// ledger is the mapped ledger memfd.
type ledger struct {
	mem    *hugepages.Arena
	b      []byte
	stride uint64 // entry bytes
	room   uint64 // record room per entry
	seq    uint64 // the last seal sequence given
}

// ledgerBytes is the ledger's size for an arena of s.
func (s Spec) ledgerBytes() uint64 {
	return LedgerHeaderBytes + s.CapacityBytes/s.ChunkBytes*(entryHeadBytes+recordRoom(s.ChunkBytes))
}

// newLedger makes an empty ledger for s.
func newLedger(s Spec) (*ledger, error) {
	mem, err := hugepages.New(hugepages.Spec{Bytes: s.ledgerBytes(), Name: LedgerName, Prefault: s.Prefault})
	if err != nil {
		return nil, fmt.Errorf("ram tier: ledger: %w", err)
	}
	l := &ledger{mem: mem, b: mem.Bytes(), room: recordRoom(s.ChunkBytes)}
	l.stride = entryHeadBytes + l.room
	h := l.b[:LedgerHeaderBytes]
	copy(h, ledgerMagic)
	binary.LittleEndian.PutUint32(h[8:], LedgerVersion)
	binary.LittleEndian.PutUint32(h[12:], uint32(l.stride))
	binary.LittleEndian.PutUint64(h[16:], s.ChunkBytes)
	binary.LittleEndian.PutUint32(h[24:], uint32(s.CapacityBytes/s.ChunkBytes))
	binary.LittleEndian.PutUint32(h[28:], uint32(l.room))
	binary.LittleEndian.PutUint64(h[32:], s.Tag)
	binary.LittleEndian.PutUint32(h[40:], crc32.Checksum(h[:40], castagnoli))
	return l, nil
}

// ErrLedger is wrapped by every refusal of a handed-over RAM tier whose
// ledger does not fit this Manager: another layout version, chunk size,
// capacity or tag. The successor then starts with an empty tier.
var ErrLedger = errors.New("ram tier: handed-over ledger refused")

// checkHeader checks a handed-over ledger's header against s; the error
// wraps ErrLedger and names the field and both values.
func checkHeader(b []byte, s Spec) error {
	if uint64(len(b)) < LedgerHeaderBytes {
		return fmt.Errorf("%w: %d bytes, shorter than its %d-byte header", ErrLedger, len(b), LedgerHeaderBytes)
	}
	h := b[:LedgerHeaderBytes]
	if string(h[:8]) != ledgerMagic {
		return fmt.Errorf("%w: magic %q, want %q", ErrLedger, h[:8], ledgerMagic)
	}
	if got := binary.LittleEndian.Uint32(h[40:]); got != crc32.Checksum(h[:40], castagnoli) {
		return fmt.Errorf("%w: header checksum %#x does not match its bytes", ErrLedger, got)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != LedgerVersion {
		return fmt.Errorf("%w: layout version %d; this Manager reads version %d", ErrLedger, v, LedgerVersion)
	}
	room := recordRoom(s.ChunkBytes)
	for _, f := range []struct {
		name      string
		got, want uint64
	}{
		{"ram.ChunkBytes", binary.LittleEndian.Uint64(h[16:]), s.ChunkBytes},
		{"ram.CapacityBytes (chunks)", uint64(binary.LittleEndian.Uint32(h[24:])), s.CapacityBytes / s.ChunkBytes},
		{"entry bytes", uint64(binary.LittleEndian.Uint32(h[12:])), entryHeadBytes + room},
		{"record room", uint64(binary.LittleEndian.Uint32(h[28:])), room},
		{"ram.Tag (tenant domains)", binary.LittleEndian.Uint64(h[32:]), s.Tag},
	} {
		if f.got != f.want {
			return fmt.Errorf("%w: %s is %d in the handed-over tier, %d in this Manager's configuration", ErrLedger, f.name, f.got, f.want)
		}
	}
	if want := s.ledgerBytes(); uint64(len(b)) < want {
		return fmt.Errorf("%w: %d bytes, want %d", ErrLedger, len(b), want)
	}
	return nil
}

// entry is chunk id's entry.
func (l *ledger) entry(id uint32) []byte {
	off := LedgerHeaderBytes + uint64(id)*l.stride
	return l.b[off : off+l.stride : off+l.stride]
}

// BlockMeta is what the ledger keeps of a sealed block besides its chunks.
type BlockMeta struct {
	NS     abi.Namespace
	Hash   abi.BlockHash
	Bytes  uint64
	Layers uint32
	Domain uint16
	// Record is the block record (abi.ParseRecord's form) or nil; one
	// longer than the block's record room is not kept.
	Record []byte
}

// write records a sealed block of chunks in the ledger; it reports false
// (nothing written) for a block the ledger cannot describe (more than
// maxParts chunks or layers).
func (l *ledger) write(a *Arena, chunks []uint32, m BlockMeta) bool {
	if len(chunks) == 0 || len(chunks) > maxParts || m.Layers > maxParts {
		return false
	}
	sum := a.checksum(chunks, m.Bytes)
	rec := m.Record
	if uint64(len(rec))+2 > uint64(len(chunks))*l.room {
		rec = nil
	}
	l.seq++
	var room []byte // the rest of the record to place
	for p, id := range chunks {
		e := l.entry(id)
		binary.LittleEndian.PutUint64(e[0:], l.seq)
		copy(e[8:24], m.NS[:])
		copy(e[24:40], m.Hash[:])
		binary.LittleEndian.PutUint64(e[40:], m.Bytes)
		binary.LittleEndian.PutUint32(e[48:], sum)
		binary.LittleEndian.PutUint16(e[52:], uint16(p))
		binary.LittleEndian.PutUint16(e[54:], uint16(len(chunks)))
		binary.LittleEndian.PutUint16(e[56:], m.Domain)
		binary.LittleEndian.PutUint16(e[58:], uint16(m.Layers))
		r := e[entryHeadBytes:]
		if p == 0 {
			binary.LittleEndian.PutUint16(r, uint16(len(rec)))
			room = rec[copy(r[2:], rec):]
		} else {
			room = room[copy(r, room):]
		}
		binary.LittleEndian.PutUint32(e[60:], entryCheck(e))
	}
	return true
}

// entryCheck is an entry's check: crc32c over its head (but the check)
// and its record room.
func entryCheck(e []byte) uint32 {
	return crc32.Update(crc32.Checksum(e[:60], castagnoli), castagnoli, e[entryHeadBytes:])
}

// clear marks chunks as holding no sealed block.
func (l *ledger) clear(ids []uint32) {
	for _, id := range ids {
		binary.LittleEndian.PutUint64(l.entry(id), 0)
	}
}

// checksum is the crc32c of the first n bytes of chunks, in order.
func (a *Arena) checksum(chunks []uint32, n uint64) uint32 {
	var sum uint32
	for _, id := range chunks {
		c := a.Chunk(id)
		k := min(n, uint64(len(c)))
		sum = crc32.Update(sum, castagnoli, c[:k])
		n -= k
	}
	return sum
}
