package hugepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HugePageSize is the size of the hugetlb pages an arena uses: 2 MiB, the
// size x86-64 and arm64 (4 KiB granule) map with one PMD entry.
const HugePageSize = 2 << 20

// PoolDir is the sysfs directory of the kernel's 2 MiB hugepage pool; it
// exists only when the kernel has hugetlbfs and supports that size.
const PoolDir = "/sys/kernel/mm/hugepages/hugepages-2048kB"

// Pool is a snapshot of the 2 MiB hugepage pool, counted in pages; the
// fields are the files of PoolDir (and, when 2 MiB is the default size, the
// HugePages_* lines of /proc/meminfo).
type Pool struct {
	Total      uint64 // nr_hugepages: the persistent pool (vm.nr_hugepages)
	Free       uint64 // free_hugepages: not faulted in, reserved ones included
	Reserved   uint64 // resv_hugepages: promised to a mapping, not yet faulted in
	Surplus    uint64 // surplus_hugepages: allocated beyond Total by overcommit
	Overcommit uint64 // nr_overcommit_hugepages: the most surplus pages allowed
}

// ReadPool reads the pool counters. It fails (with the path) when the
// kernel has no 2 MiB hugepage pool.
func ReadPool() (Pool, error) {
	var p Pool
	for _, f := range []struct {
		name string
		dst  *uint64
	}{
		{"nr_hugepages", &p.Total}, {"free_hugepages", &p.Free}, {"resv_hugepages", &p.Reserved},
		{"surplus_hugepages", &p.Surplus}, {"nr_overcommit_hugepages", &p.Overcommit},
	} {
		path := filepath.Join(PoolDir, f.name)
		b, err := os.ReadFile(path)
		if err != nil {
			return Pool{}, err
		}
		if *f.dst, err = strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err != nil {
			return Pool{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return p, nil
}

// Available is how many pages a new arena can have: the free pages nobody
// has reserved, plus the surplus pages overcommit still allows.
func (p Pool) Available() uint64 {
	var n uint64
	if p.Free > p.Reserved {
		n = p.Free - p.Reserved
	}
	if p.Overcommit > p.Surplus {
		n += p.Overcommit - p.Surplus
	}
	return n
}

// ReserveHint is the shell command that grows the persistent pool by
// pages: it writes /proc/sys/vm/nr_hugepages when 2 MiB is the default
// hugepage size, else the per-size sysfs file.
func (p Pool) ReserveHint(pages uint64) string {
	target := p.Total + pages
	if defaultIs2MiB() {
		return fmt.Sprintf("echo %d > /proc/sys/vm/nr_hugepages", target)
	}
	return fmt.Sprintf("echo %d > %s/nr_hugepages", target, PoolDir)
}

// NrHugepagesFile is the file that sets the 2 MiB pool's persistent size.
const NrHugepagesFile = PoolDir + "/nr_hugepages"

// defaultIs2MiB reports whether /proc/meminfo's Hugepagesize is 2048 kB,
// so vm.nr_hugepages and the HugePages_* lines speak of 2 MiB pages.
func defaultIs2MiB() bool {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Hugepagesize:"); ok {
			return strings.TrimSpace(v) == "2048 kB"
		}
	}
	return false
}

// ShmemTHPFile says whether shmem (and so a memfd) gets transparent
// hugepages: always, within_size, advise (only after MADV_HUGEPAGE), never,
// deny or force.
const ShmemTHPFile = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

// ShmemTHP is the selected value of ShmemTHPFile (the bracketed word), or
// "unknown (<error>)" when it cannot be read: a kernel without transparent
// hugepages has no such file.
func ShmemTHP() string {
	b, err := os.ReadFile(ShmemTHPFile)
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	s := string(bytes.TrimSpace(b))
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return s
}

// thpNote says what shmem_enabled value v means for an arena that asked
// for MADV_HUGEPAGE.
func thpNote(v string) string {
	switch v {
	case "always", "within_size", "advise", "force":
		return "transparent hugepages where the kernel finds free 2 MiB ranges"
	case "never", "deny":
		return "4 KiB pages; set it to advise for transparent hugepages"
	}
	return "4 KiB pages unless the kernel gives transparent hugepages"
}
