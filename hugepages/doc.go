// Package hugepages makes memfd arenas backed by 2 MiB hugepages: the
// memory of the Manager's RAM tier (gocore/tier/ram, docs/design.md §7).
//
// Why: a tier of many GiB mapped with 4 KiB pages costs 512 times the
// page-table entries and TLB misses of the same tier on 2 MiB pages, and
// pre-faulting it takes 512 times the faults. Hugetlb pages come from a pool
// the operator reserves (vm.nr_hugepages), so they are also never swapped,
// split, migrated or reclaimed under the tier's feet.
//
// An Arena owns one memfd and its one shared mapping. How it is backed
// depends on Spec.Mode:
//
//   - Require: memfd_create(MFD_HUGETLB|MFD_HUGE_2MB), the size rounded up
//     to whole 2 MiB pages. New first reads the pool counters in
//     /sys/kernel/mm/hugepages/hugepages-2048kB (free − reserved, plus any
//     overcommit headroom: the counters of /proc/meminfo's HugePages_* lines
//     when 2 MiB is the default size) and refuses, naming the shortfall and
//     the `echo N > /proc/sys/vm/nr_hugepages` that would fix it, before
//     touching anything. It then allocates every page with fallocate(2)
//     whether or not Prefault is set: a hugetlb page that cannot be had at
//     fault time (the pool drained meanwhile, a hugetlb cgroup limit, a
//     NUMA policy) is a SIGBUS in whichever thread touched it, while
//     fallocate answers the same shortage with an error from New. Prefault
//     then only fills the page tables (one entry per 2 MiB). Every failure
//     is an error wrapping ErrUnavailable.
//   - Prefer: Require's path; if it fails for any reason, an ordinary shmem
//     memfd with madvise(MADV_HUGEPAGE), which gets transparent hugepages
//     only when /sys/kernel/mm/transparent_hugepage/shmem_enabled says
//     advise, always or within_size. Fallback() says why hugetlb was not
//     used and what shmem_enabled says.
//   - Off (the zero Mode): an ordinary shmem memfd, no madvise; Fallback()
//     is "mode off". This is what the RAM tier was before this package.
//
// Memory: Bytes() is the whole mapping, Spec.Bytes rounded up to PageSize();
// it stays valid until Close, which unmaps it and closes the memfd. An
// Arena's methods may be called from any goroutine; Close must not race with
// any use of the memory or the file.
//
// Who imports it: gocore/tier/ram. Tests that need a hugepage pool reserve
// one through hugepages/hugepagestest. Only Linux is supported.
package hugepages
