// Package layout is the SSD store's on-disk format (gocore/tier/ssd): the
// slot header in front of every block of the data file, the index log's
// header record and records, their encoders and checked decoders, and
// Replay, which turns an index log into the blocks it says are resident.
// It does no I/O: the store reads and writes the files and hands the bytes
// here. Decoders take outside bytes (a file after a crash, a damaged or
// foreign file) and never panic: a record that is torn, foreign or fails
// its checksum reads as not ok (FuzzReplay, FuzzSlotHeader). It imports
// only the standard library; only gocore/tier/ssd imports it.
//
// # Slot header
//
// Slot i occupies bytes [i*S, (i+1)*S) of the data file, S = HeaderBytes +
// SlotBytes; its first HeaderBytes (4096) are the slot header, the block's
// bytes follow. Slot header, little-endian, fields at natural alignment:
//
//	offset size field
//	     0    8 magic "OKVSLOT1"
//	     8    4 version, 1
//	    12    4 CRC32C of the block's Meta.Bytes bytes
//	    16   16 Key.NS, the namespace fingerprint
//	    32   16 Key.Hash, the block hash
//	    48    8 Meta.Bytes
//	    56    8 generation: the Write's sequence number, also in the put record
//	    64    4 Meta.Layers
//	    68    4 reserved, zero
//	    72    4 CRC32C of bytes 0..71
//	    76 4020 zero
//
// # Index log
//
// Every record is RecordBytes (80) bytes, so the log is a header record
// followed by records at multiples of 80, and a torn append can only leave
// a partial last record. Header record:
//
//	offset size field
//	     0    8 magic "OKVINDX1"
//	     8    4 version, 1
//	    12    4 HeaderBytes, 4096
//	    16    8 SlotBytes the data file was laid out with
//	    24   52 reserved, zero
//	    76    4 CRC32C of bytes 0..75
//
// Records:
//
//	offset size field
//	     0    1 kind: 1 put (Key is at slot), 2 delete (Key at slot with generation is gone)
//	     1    1 version, 1
//	     2    2 reserved, zero
//	     4    4 slot
//	     8    8 generation
//	    16   16 Key.NS
//	    32   16 Key.Hash
//	    48    8 Meta.Bytes (put; zero in a delete)
//	    56    4 Meta.Layers (put)
//	    60    4 CRC32C of the block (put)
//	    64   12 reserved, zero
//	    76    4 CRC32C of bytes 0..75
//
// Multi-byte fields are little-endian; the CRC32C is hash/crc32's
// Castagnoli polynomial, which Go computes with the SSE4.2 CRC32
// instruction on amd64 (faster than the disk). The generation numbers of
// the blocks are the FIFO order.
package layout
