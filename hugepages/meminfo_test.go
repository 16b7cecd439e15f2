package hugepages

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAnArenaLargerThanAvailableMemoryIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte("MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    1000000 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := MeminfoPath
	MeminfoPath = p
	defer func() { MeminfoPath = old }()
	total, avail, err := Meminfo()
	if err != nil || total != 8000000<<10 || avail != 1000000<<10 {
		t.Fatalf("Meminfo = %d, %d, %v", total, avail, err)
	}
	// 1,000,000 KiB available, 400,000 KiB of it reserved (5% of 8,000,000):
	// 600,000 KiB fit. Check, the preflight, refuses the same size with the
	// same text, in IEC units, and the same room.
	const want = "not enough available memory: 700 MiB wanted, MemAvailable is 977 MiB and 391 MiB of it stays for the rest of the host (MemTotal 7.6 GiB)"
	for name, err := range map[string]error{"New": func() error { _, err := New(Spec{Bytes: 700 << 20, Mode: Off}); return err }(),
		"Check": Check(Spec{Bytes: 700 << 20, Mode: Off})} {
		var se *ShortError
		if !errors.Is(err, ErrNoMemory) || err.Error() != want || !errors.As(err, &se) || se.Room != 600000<<10 {
			t.Fatalf("%s(700 MiB) = %v, want a ShortError of room %d: %s", name, err, 600000<<10, want)
		}
	}
	if err := Check(Spec{Bytes: 600000 << 10, Mode: Off}); err != nil {
		t.Fatalf("Check of the room = %v", err)
	}
	a, err := New(Spec{Bytes: 64 << 20, Mode: Off})
	if err != nil {
		t.Fatalf("New(64 MiB) = %v", err)
	}
	a.Close()
	if err := os.WriteFile(p, []byte("MemTotal: x kB\nMemAvailable: 1 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Meminfo(); err == nil {
		t.Fatal("Meminfo of a malformed file = nil error")
	}
}

func TestPrefaultReportsProgressUpToTheWholeArena(t *testing.T) {
	var calls int
	var last, total uint64
	a, err := New(Spec{Bytes: PrefaultStep + 4<<20, Mode: Off, Prefault: true, Progress: func(d, tot uint64) { calls++; last, total = d, tot }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if calls != 2 || last != total || total != uint64(len(a.Bytes())) {
		t.Fatalf("Progress called %d times, last %d of %d; want 2 calls ending at %d", calls, last, total, len(a.Bytes()))
	}
}

// Under a cgroup v2 memory.max, an arena larger than the room left in the
// cgroup is refused, naming memory.max.
func TestAnArenaAboveTheCgroupLimitIsRefused(t *testing.T) {
	if _, _, _, ok := cgroupMemory(); !ok {
		if b, err := os.ReadFile("/proc/self/cgroup"); err != nil || !strings.Contains(string(b), "0::") {
			t.Skip("no cgroup v2 entry in /proc/self/cgroup")
		}
	}
	b, _ := os.ReadFile("/proc/self/cgroup")
	var path string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "0::") {
			path = strings.TrimPrefix(l, "0::")
		}
	}
	root := t.TempDir()
	dir := filepath.Join(root, path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "memory.max"), []byte("104857600\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "memory.current"), []byte("94371840\n"), 0o600)
	old := CgroupRoot
	CgroupRoot = root
	defer func() { CgroupRoot = old }()
	err := checkMemory(64 << 20)
	if !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "memory.max") {
		t.Fatalf("checkMemory(64 MiB) with 10 MiB left in the cgroup = %v, want ErrNoMemory naming memory.max", err)
	}
	if err := checkMemory(4 << 20); err != nil {
		t.Fatalf("checkMemory(4 MiB) = %v", err)
	}
}
