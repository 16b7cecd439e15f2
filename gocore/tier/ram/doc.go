// Package ram is the RAM tier's memory: one memfd arena of a fixed byte
// capacity, mapped once and pre-faulted (MAP_POPULATE) so that steady-state
// copies into and out of it take no page faults, and carved into fixed-size
// chunks. A block occupies whole chunks (not necessarily contiguous); the
// copy engine walks them, so blocks of any size share one arena without
// fragmentation.
//
// Layout: chunk i covers bytes [i*ChunkBytes, (i+1)*ChunkBytes) of the
// arena. ChunkBytes is a multiple of 4 KiB so a chunk never shares a page
// with another.
//
// An Arena is not safe for concurrent use: the Manager's dispatcher
// goroutine owns it (DESIGN.md §3). The mapping stays valid until Close;
// copy workers may read and write chunks only while the owner keeps them
// allocated. Hugepage arenas are a later issue (hugepages/).
package ram
