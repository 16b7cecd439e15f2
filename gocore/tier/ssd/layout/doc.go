// Package layout is the SSD store's on-disk format (gocore/tier/ssd): the
// slot header in front of every block of the data file, the index log's
// header record and records, their encoders and checked decoders, the MAC
// that authenticates all of them, and Replay, which turns an index log
// into the blocks it says are resident. It does no I/O: the store reads
// and writes the files (and the key file) and hands the bytes here.
// Decoders take outside bytes (a file after a crash, a damaged, foreign
// or forged file) and never panic: a record that is torn, foreign, of
// another version, or whose tag does not check reads as not ok
// (FuzzReplay, FuzzSlotHeader). It imports only the standard library;
// only gocore/tier/ssd imports it.
//
// # Integrity: HMAC-SHA256 under the store's secret
//
// Every slot header and index record carries a tag: HMAC-SHA256, all 32
// bytes, under the store's 32-byte secret (the mac.key file of
// gocore/tier/ssd). A slot header carries two: its block tag covers its
// fields (magic, version, slot, namespace, block hash, bytes, generation,
// layers) and the block's Meta.Bytes bytes; its record tag covers the
// same fields, the block record's length and the record (see Block
// record). A record's tag covers its 64 bytes of fields. So everything that decides which bytes are served for which
// key is authenticated: a file rewritten by a writer without the secret
// (recomputing every checksum it can) or by a bug fails the check, and so
// does a slot header or block copied to another slot (the slot number is
// MACed) or a record tagged under another secret. Each MACed input starts
// with its own magic or kind byte ("OKVSLOT1" the block tag's,
// "OKVSREC1" the record tag's, "OKVINDX1" the index header's, the kind
// byte an index record's), so a tag of one kind is never valid for
// another. Tags are compared in constant time (hmac.Equal).
//
// The tag does not order what it authenticates: a record or slot copied
// back from an earlier state of the same directory under the same secret
// checks. What it then serves is bytes that were written for that key,
// and the slot header must still name the index's slot and generation.
//
// HMAC-SHA256 was chosen over keyed BLAKE3 and GMAC by
// BenchmarkBlockMAC (bench_test.go) on the development VM (2 vCPUs of a
// 2.6 GHz Xeon with SHA-NI, AVX-512, AES-NI; single-threaded; blocks in
// 16 KiB chunks; medians of 3): CRC32C, the check of version 1 and the
// baseline, 19-21 GB/s; HMAC-SHA256 1.2-1.44 GB/s (0.07 of CRC32C: about
// 1.5 ms of CPU per 2 MiB block, 50 µs per 64 KiB, against 0.11 ms and
// 3 µs); GMAC (AES-256-GCM, the block as additional data) 9-10 GB/s
// (0.48); keyed BLAKE3 measured outside the module, github.com/zeebo/blake3
// v0.2.4 2.4-2.9 GB/s (0.13) and lukechampine.com/blake3 v1.4.1
// 0.5-0.6 GB/s. HMAC-SHA256 is the standard library's, takes the
// scattered chunks as a stream, and needs no nonce. GMAC is five to seven
// times faster but crypto/cipher takes the additional data only as one
// contiguous slice (the RAM tier's chunks of a block are not), and its
// security rests on never repeating a nonce under one key across restarts
// and index resets; BLAKE3 would be a new dependency for a factor of
// about 1.8. The cost is on the write path (a worker seals every block)
// and on the read path (a worker checks every block before done(nil));
// BenchmarkReplay measures Open's replay, one tag per record.
//
// # Slot header
//
// Slot i occupies bytes [i*S, (i+1)*S) of the data file, S = HeaderBytes +
// SlotBytes; its first HeaderBytes (4096) are the slot header, the block's
// bytes follow. Slot header, little-endian, fields at natural alignment:
//
//	offset size field
//	     0    8 magic "OKVSLOT1"
//	     8    4 layout version, 2 (FormatVersion)
//	    12    4 slot: i, the slot the header was written to
//	    16   16 Key.NS, the namespace fingerprint
//	    32   16 Key.Hash, the block hash
//	    48    8 Meta.Bytes
//	    56    8 generation: the Write's sequence number, also in the put record
//	    64    4 Meta.Layers
//	    68    4 reserved, zero
//	    72   32 block tag: HMAC-SHA256 of bytes 0..71 followed by the block's Meta.Bytes bytes
//	   104    4 record length n, 0 to MaxRecordBytes (3840)
//	   108    4 reserved, zero
//	   112   32 record tag: HMAC-SHA256 of "OKVSREC1", bytes 8..71, bytes 104..111 and the record
//	   144    n the block record
//	 144+n  ... zero (in no tag), to the end of the page (4096)
//
// ParseSlotHeader reads a header as not ok when its magic, version or
// reserved bytes are wrong, or its record length is over MaxRecordBytes
// or beyond the bytes it was given; it never panics (FuzzSlotHeader).
//
// # Block record
//
// A block may carry a block record: at most MaxRecordBytes (3840) opaque
// bytes its writer hands to the store (the Manager's KV-event description
// of the block: engine block hash, parent hash, token ids). This package
// and the store keep it and return it; they never interpret it. It rides
// in the header page, so writing it costs no I/O beyond the header's, and
// reading it back (CheckRecord) needs only that page: the record tag is
// apart from the block tag so that the record is checked without reading
// and MACing the block, which the block tag covers. The record tag binds
// the record to the header's slot, key, Meta and generation, so a record
// copied to another slot, key or write of the same key does not check.
// It is sealed with every header, with no record too (n = 0).
//
// The record part keeps FormatVersion at 2, so that data files whose
// headers have none stay readable: a version-2 header whose bytes from 104
// on are zero (what a writer that keeps no records leaves, including a
// Manager release that reads bytes 0..103 only) parses, its block tag
// (bytes 0..71 and the block, unchanged) checks, and CheckRecord reads it
// as a block with no record: n = 0 with an all-zero record tag is
// accepted as "none" unchecked. The absence of a record is therefore not
// authenticated: a writer without the secret can zero bytes 104..143 of a
// header to make its block read as record-less (its bytes still check),
// which loses the record but never substitutes one; any record that is
// returned has checked. The other way round, a Manager that reads bytes
// 0..103 only reads headers with records as blocks.
//
// # Index log
//
// Every record is RecordBytes (96) bytes, so the log is a header record
// followed by records at multiples of 96, and a torn append can only leave
// a partial last record. Header record:
//
//	offset size field
//	     0    8 magic "OKVINDX1"
//	     8    4 layout version, 2
//	    12    4 HeaderBytes, 4096
//	    16    8 SlotBytes the data file was laid out with
//	    24   40 reserved, zero
//	    64   32 tag: HMAC-SHA256 of bytes 0..63
//
// Records:
//
//	offset size field
//	     0    1 kind: 1 put (Key is at slot), 2 delete (Key at slot with generation is gone)
//	     1    1 layout version, 2
//	     2    2 reserved, zero
//	     4    4 slot
//	     8    8 generation
//	    16   16 Key.NS
//	    32   16 Key.Hash
//	    48    8 Meta.Bytes (put; zero in a delete)
//	    56    4 Meta.Layers (put)
//	    60    4 reserved, zero
//	    64   32 tag: HMAC-SHA256 of bytes 0..63
//
// A put record names the slot, generation, key and Meta its slot header
// must name; the header's tag then binds them to the block's bytes, so the
// record carries no tag of the data itself. Multi-byte fields are
// little-endian. The generation numbers of the blocks are the FIFO order.
//
// # Versions
//
// Replay resets an index of any version but FormatVersion (version 1's
// 80-byte records checked by CRC32C among them; Replayed.Reset names the
// version it found): the store then starts empty, as for any unusable
// index, and the old slots are free; a slot header of another version
// never parses, so nothing of another version is read as a block.
package layout
