package hugepages

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrNoMemory is wrapped by New when an ordinary (not hugetlb) arena is
// larger than the memory the kernel says it can give without swapping,
// less MemReserve: committing it would push the host into swap or the OOM
// killer instead of failing at start.
var ErrNoMemory = errors.New("not enough available memory")

// MeminfoPath is where MemAvailable is read (a variable for tests).
var MeminfoPath = "/proc/meminfo"

// MemReserve is the memory New leaves to everything else on the host: 5%
// of MemTotal, at least 256 MiB.
func MemReserve(total uint64) uint64 { return max(256<<20, total/20) }

// Meminfo reads MemTotal and MemAvailable (bytes) from MeminfoPath.
func Meminfo() (total, available uint64, err error) {
	b, err := os.ReadFile(MeminfoPath)
	if err != nil {
		return 0, 0, err
	}
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		var dst *uint64
		switch string(f[0]) {
		case "MemTotal:":
			dst, haveTotal = &total, true
		case "MemAvailable:":
			dst, haveAvail = &available, true
		default:
			continue
		}
		kib, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %s %q: %w", MeminfoPath, f[0], f[1], err)
		}
		*dst = kib << 10
	}
	if !haveTotal || !haveAvail {
		return 0, 0, fmt.Errorf("%s: no MemTotal or MemAvailable line", MeminfoPath)
	}
	return total, available, nil
}

// checkMemory refuses size bytes when they exceed MemAvailable less
// MemReserve; when /proc/meminfo cannot be read it lets the allocation
// decide.
func checkMemory(size uint64) error {
	total, avail, err := Meminfo()
	if err != nil {
		return nil
	}
	reserve := MemReserve(total)
	if size+reserve > avail {
		return fmt.Errorf("%w: %d bytes wanted, MemAvailable is %d bytes and %d of them stay for the rest of the host (MemTotal %d)",
			ErrNoMemory, size, avail, reserve, total)
	}
	return nil
}
