// Package ram is the RAM tier's memory: one memfd arena of a fixed byte
// capacity, mapped once and pre-faulted so that steady-state copies into and
// out of it take no page faults, and carved into fixed-size chunks. A block
// occupies whole chunks (not necessarily contiguous); the copy engine walks
// them, so blocks of any size share one arena without fragmentation.
//
// Layout: chunk i covers bytes [i*ChunkBytes, (i+1)*ChunkBytes) of the
// arena. ChunkBytes is a multiple of 4 KiB so a chunk never shares a 4 KiB
// page with another.
//
// Hugepages: the memfd comes from hugepages.New with Spec.Hugepages
// (Require, Prefer or Off; docs/design.md §7). The chunk size stays independent
// of the page size, so chunks of a hugetlb arena share 2 MiB pages. A
// hugetlb page is never split (nor swapped, migrated or reclaimed), so such
// a tier is allocated and pre-faulted in 2 MiB units: 512 times fewer faults
// and page-table entries than on 4 KiB pages, and the memory comes from the
// pool the operator reserved (vm.nr_hugepages), not from ordinary RAM. The
// capacity is rounded down to whole chunks as on 4 KiB pages; the hugetlb
// mapping is then rounded up to whole 2 MiB pages, and its tail past the
// last chunk (under 2 MiB) is unused. Huge and Fallback say what the tier
// got and, if not hugetlb, why.
//
// Ledger and adoption: beside the arena, a second memfd, the ledger
// (ledger.go has its layout), records which chunks hold which sealed block,
// with a crc32c of the block's bytes taken at seal (Seal) and cleared
// before the chunks are free again (Release). A successor Manager handed
// both memfds (Spec.Handed: an upgrade's handover, or systemd's fd store
// after a crash) adopts every block whose entries agree (adopt.go), each
// with the checksum its caller verifies (Verify) before serving it, and
// starts with an empty tier when the ledger does not fit its configuration
// (Adoption().Refused names why). docs/design.md §7.1 has the protocol.
//
// An Arena is not safe for concurrent use: the Manager's dispatcher
// goroutine owns it (docs/design.md §3). The mapping stays valid until Close;
// copy workers may read and write chunks only while the owner keeps them
// allocated.
package ram
