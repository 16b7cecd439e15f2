// Package ssd is the SSD tier's block store: fixed-size slots in one data
// file on an SSD, read and written with O_DIRECT by a bounded pool of I/O
// goroutines, every block and record authenticated by a MAC under a secret
// kept beside them, and an append-only index log that
// lets a restarted Manager serve the blocks again (warm restart;
// docs/design.md §7).
//
// It owns the files under Spec.Dir and nothing else: it knows blocks by
// Key and Meta, not the RAM tier, leases or sessions. The Manager's cache
// imports it: it demotes blocks evicted from RAM with Write (the sources
// are RAM tier chunks), prefetches with Read into freshly allocated chunks
// (answering Loading meanwhile), and learns what survived a restart from
// Keys. A Store is safe for concurrent use and never blocks its caller on
// I/O; done callbacks run on the store's goroutines and must not block.
//
// # Files
//
//	Spec.Dir/blocks.dat      the data file: Slots() slots, preallocated with fallocate(2)
//	Spec.Dir/index.log       the index: a header record and then fixed-size records, appended
//	Spec.Dir/index.log.tmp   a compaction in progress (removed by Open if a crash left it)
//	Spec.Dir/mac.key         the secret: 32 random bytes, the key of every tag (see Integrity)
//	Spec.Dir/mac.key.tmp     the secret being made (removed by Open if a crash left it)
//
// blocks.dat is flock(2)ed while open, so a second Store (or Manager) on
// the same directory gets ErrLocked.
//
// # Data file
//
// Slot i occupies bytes [i*S, (i+1)*S) of blocks.dat, S = HeaderBytes +
// SlotBytes. Its first 4096 bytes are the slot header; the block's bytes
// follow, rounded up to whole 4 KiB pages (the tail of the last page and
// of the slot are unspecified). The header is a whole page, and SlotBytes
// a multiple of it, so every header and every block starts on a 4 KiB
// boundary of the file: O_DIRECT needs offsets, lengths and memory aligned
// to the device's logical block (Open checks the filesystem's figures with
// statx STATX_DIOALIGN), and one preadv or pwritev moves the header and
// the block together. The slot header's bytes, the index log's records
// and their replay are gocore/tier/ssd/layout's (its doc.go draws them).
//
// # Write path: data before index
//
// Write reserves a slot (a free one, else the oldest block's: FIFO
// eviction) and queues the block. A worker seals the slot header (its
// fields, the block record, a MAC over the fields and the block and one
// over the fields and the record) and writes header and data with one
// pwritev. The committer goroutine then takes
// every block written meanwhile (group commit): one fdatasync of
// blocks.dat makes the batch's data durable (and the extent conversion of
// the preallocated file), then one write of the batch's put records to the
// index and one fdatasync of it, then the blocks become visible to
// Contains and Read and their done(nil) run. A put record therefore never
// reaches the disk before its data, and done(nil) means durable.
//
// Delete, and the dropping of a block that fails a read, append a delete
// record with the next commit. Eviction writes no record: the put record
// of the block that reuses the slot displaces the old occupant on replay.
// Admission "second-hit" keeps a bounded FIFO of 64-bit fingerprints of
// the keys offered once (as many as the store has slots); a key is written
// when offered again while remembered, and declined (ErrNotAdmitted) the
// first time.
//
// # Block records and the block observer
//
// A Write may carry a block record: at most MaxRecordBytes (3840) opaque
// bytes (the Manager's KV-event description of the block; this package
// never interprets them). The store copies it, writes it in the slot
// header with the block (no I/O of its own), and when the block becomes
// visible hands the copy to Spec.Blocks's Resident; after that it keeps
// none in memory. A longer record is refused (ErrRecordTooLong, counted
// in Stats.RecordTooLong). Record(k) reads it back from the disk: one
// 4 KiB O_DIRECT pread of the slot header by an I/O worker, the slot
// pinned meanwhile as a Read pins it, the header checked to name k and
// the index's Meta, slot and generation, and its record tag (a MAC over
// the header's fields and the record, apart from the block tag over the
// fields and the block) checked, so the record is authenticated without
// reading the block. A failure is ErrCorrupt and drops the block, as a
// failed Read does.
//
// Spec.Blocks (a BlockObserver) hears Resident when a written block
// becomes visible and Gone when a resident block leaves (FIFO eviction,
// Delete, MakeClassRoom, a failed Read or Record, a newer write of the
// key), under the store's lock. Blocks recovered at Open are not heard
// as Resident: a caller that re-announces what survived a restart walks
// Keys and asks Record for each, from a goroutine of its own (Record
// blocks on its read and is safe beside everything else); their Gone is
// heard. Slot headers with zeros where the record goes (written by a
// Manager that keeps no records) read as blocks with no record: Record
// answers nil.
//
// Classes (class.go): a block written with WriteAdmitted carries a
// Class (the Manager's tenant domain); the store counts each class's
// bytes (resident and being written) and keeps its resident blocks in a
// FIFO of their own, so MakeClassRoom can delete a class's oldest blocks
// to keep it within a quota. Classes are not persisted: blocks recovered
// at Open are of NoClass.
//
// # Open: replay and warm restart
//
// Open reads the secret from mac.key (or makes it; see Integrity), then
// reads index.log and applies its records in order until the first one
// that is incomplete or whose tag does not check; the file is cut back to
// there (a torn tail after a crash, damage, or a forged record: only
// complete records whose tags check count). A put of key K at slot S displaces K's earlier block and
// S's earlier occupant; a delete removes K only if K is still at that slot
// with that generation. Records naming a slot beyond the data file (the
// capacity shrank) or an impossible Meta are dropped. A log with no
// complete header, a header of another layout version (Open then logs the
// version) or under another secret, or one written for another SlotBytes,
// is discarded whole and a fresh one written (temp file, fsync, rename,
// fsync of the directory): the store starts empty, and another layout
// never matches old records. Another namespace never does either: the
// namespace is half of every key.
//
// A slot whose data was written but whose put record never reached the
// log is simply free after a restart. The one window the log cannot see:
// a crash while a Write was overwriting an evicted block's slot leaves the
// old block's put record naming a half-overwritten slot. Read catches it
// (the header must name the key, Meta, slot and generation of the index
// record, and its tag must check over them and the data), and Open reads
// back the oldest
// blocks, the FIFO victims, plus a random sample (Spec.VerifyOnOpen, 64 by
// default) and drops those that fail (Stats.DroppedAtOpen).
//
// When the log holds more than 4 records per resident block (and at least
// 4096), the committer rewrites it with one put per resident block (temp
// file, fsync, rename, fsync of the directory).
//
// # Integrity
//
// Every slot header and index record carries a tag: HMAC-SHA256 under the
// store's secret over everything that decides which bytes are served for
// which key (namespace, block hash, Meta, slot, generation, and the
// block's bytes; gocore/tier/ssd/layout's doc.go draws the fields and
// gives the measurements behind the choice). A slot header carries a
// second tag over the same fields and its block record, which Record
// checks. Every Read verifies the slot
// header (magic, version, that it names the key, Meta, slot and
// generation of the index) and its tag over those fields and the data. A
// mismatch answers ErrCorrupt: the block is dropped (and a delete record
// logged), counted in Stats.Corrupt, and logged with the slot; the caller
// treats it as a miss and never serves the bytes. Read also refuses a Meta
// other than the stored one (ErrMeta), so a block of another size or
// shape is a miss. The check costs more CPU than a CRC would: about 0.7 ms per
// MiB on each write and each read on the development VM (HMAC-SHA256 at
// 1.4 GB/s with SHA-NI, against 20 GB/s for CRC32C), on the worker
// goroutines.
//
// The secret is Spec.Dir/mac.key: exactly 32 bytes from crypto/rand,
// made by the first Open through mac.key.tmp (O_CREAT|O_EXCL|O_NOFOLLOW,
// mode 0600, written, fsynced, renamed, the directory fsynced), so a
// crash leaves no key or a whole one. It persists, so the blocks survive a
// restart. Later Opens read it with the checks of the other files (no
// symbolic link, a regular file of the process's uid, no permission bits
// for group or others, one link) and refuse any other length; a refused
// key fails Open with an error naming the path and what is wrong, and
// nothing else in the directory is touched. A missing key with a data file
// and index present means no record can be verified: Open makes a new key,
// discards the index (logged with its record count) and starts empty,
// rather than refusing to start; the old slots are free and are
// overwritten as blocks are written.
//
// The MAC stops a writer without the secret and detects bugs and damage;
// it is not encryption (the blocks are in the clear on disk, behind the
// files' mode and the directory checks), and a process of the Manager's
// uid can read mac.key and forge records (docs/security.md, "The SSD
// tier's directory and files").
//
// # I/O engine: a pread/pwrite pool, not io_uring
//
// Spec.IOWorkers goroutines (4 by default) take queued operations, reads
// before writes (a read is a client waiting; a write is background
// demotion), and do one preadv or pwritev each (IOV_MAX iovecs per call;
// the RAM tier's 16 KiB chunks make 128 iovecs for a 2 MiB block). A
// goroutine blocked in a system call holds an OS thread, so IOWorkers is
// also the number of I/Os in flight.
//
// The pool is kept because io_uring measured no faster: BenchmarkRead
// compares engine=pool, engine=uring (uring_test.go, a minimal ring over the
// raw system calls, for the benchmark only) and engine=store, and on the
// development VM's virtual disk all three are bound by the device. Most of
// the store's CPU per read is the MAC check of the block, which io_uring
// would not remove.
// bench/ssd/README.md has the figures with their conditions; on a faster
// NVMe device, where CPU per I/O matters more, rerun: `go test -run '^$'
// -bench BenchmarkRead ./gocore/tier/ssd` (cpu-µs/op is the CPU metric).
//
// # A disk that does not answer
//
// A worker in preadv is in the kernel until the device answers, and a
// read may be uninterruptible: nothing in this process can cancel it, and
// until it returns it may still write the caller's dst and the worker's
// header page. So Close waits for every worker, without a deadline, and
// releases the header pages only then. A caller that must stop in bounded
// time (the Manager's --shutdown-timeout) asks Outstanding which
// operations workers are in (slot, file offset, bytes, age) and which
// still wait in the queue, logs them and exits the process without
// releasing the memory they write: exiting is safe, recycling it is not
// (docs/design.md §6 rule 9).
//
// # Destination memory
//
// The kernel maps the caller's pages into an O_DIRECT request, so how fast
// a read lands depends on the memory it lands in (physically contiguous
// pages presumably make fewer, larger segments): on the development VM,
// reads into huge pages ran about twice as fast as into 4 KiB pages, for
// the store and a plain read alike, so a hugepage-backed RAM tier speeds
// prefetch. `orbitkv-bench ssd --memory 4k,thp` measures both against a
// plain O_DIRECT read of the same file into the same memory; its dd-style
// baseline (every slot into one small reused buffer) is fast or slow
// depending on where that buffer's pages lie, not on the store.
// bench/ssd/README.md has the figures.
//
// # Limits
//
// SlotBytes is a multiple of 4096 up to 1 GiB; a store has fewer than
// 2^31 slots (slot numbers are 32-bit in the log). Every block takes a
// whole slot, so blocks much smaller than SlotBytes waste space: the
// Manager sizes SlotBytes to its largest block. Eviction is FIFO by
// generation (a later refinement may use the RAM tier's eviction policy);
// a block pinned by a read in flight is skipped, and a Write finding every
// slot written or read answers ErrBusy, as it does past MaxPendingWrites.
package ssd
