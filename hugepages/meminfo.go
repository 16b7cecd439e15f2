package hugepages

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/dustin/go-humanize"
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

// ShortError is a refusal for want of memory or hugepages (New, Check):
// it wraps ErrNoMemory or ErrUnavailable with the figures, and Room is the
// most bytes that would have been given, so a caller can name the largest
// size it would accept.
type ShortError struct {
	Err  error
	Room uint64
}

func (e *ShortError) Error() string { return e.Err.Error() }
func (e *ShortError) Unwrap() error { return e.Err }

// checkMemory refuses size bytes when they exceed MemAvailable less
// MemReserve, or the room left under this process's cgroup v2 memory.max
// (systemd MemoryMax=, a container's limit: there the pre-fault would be
// OOM-killed rather than refused); when /proc/meminfo cannot be read it
// lets the allocation decide. The refusal is a *ShortError wrapping
// ErrNoMemory, its figures in IEC units (go-humanize: "1.0 TiB").
func checkMemory(size uint64) error {
	total, avail, err := Meminfo()
	if err != nil {
		return nil
	}
	reserve := MemReserve(total)
	if size+reserve > avail {
		return &ShortError{Room: avail - min(avail, reserve), Err: fmt.Errorf("%w: %s wanted, MemAvailable is %s and %s of it stays for the rest of the host (MemTotal %s)",
			ErrNoMemory, humanize.IBytes(size), humanize.IBytes(avail), humanize.IBytes(reserve), humanize.IBytes(total))}
	}
	if memMax, used, path, ok := cgroupMemory(); ok && size > memMax-min(used, memMax) {
		return &ShortError{Room: memMax - min(used, memMax), Err: fmt.Errorf("%w: %s wanted, the cgroup %s allows %s (memory.max) and uses %s", ErrNoMemory,
			humanize.IBytes(size), path, humanize.IBytes(memMax), humanize.IBytes(used))}
	}
	return nil
}

// CgroupRoot is where the cgroup v2 hierarchy is mounted (a variable for
// tests).
var CgroupRoot = "/sys/fs/cgroup"

// cgroupMemory reads memory.max and memory.current of this process's
// cgroup v2; ok is false without a v2 cgroup or without a limit ("max").
func cgroupMemory() (limit, used uint64, path string, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, "", false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, found := bytes.CutPrefix(line, []byte("0::")); found {
			path = string(rest)
		}
	}
	if path == "" {
		return 0, 0, "", false
	}
	read := func(name string) (uint64, bool) {
		v, err := os.ReadFile(CgroupRoot + path + "/" + name)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		return n, err == nil
	}
	if limit, ok = read("memory.max"); !ok {
		return 0, 0, "", false
	}
	used, _ = read("memory.current")
	return limit, used, path, true
}
