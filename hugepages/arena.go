package hugepages

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits of a Spec.
const (
	// MaxBytes bounds Spec.Bytes: 64 TiB, half the user address space of
	// x86-64 with 4-level page tables.
	MaxBytes = 64 << 40
	// MaxNameBytes bounds Spec.Name: memfd_create(2) takes at most 249 bytes
	// (NAME_MAX less the "memfd:" prefix).
	MaxNameBytes = 249
	// DefaultName is the memfd name when Spec.Name is empty; it shows as
	// /memfd:orbitkv-arena in /proc/PID/maps.
	DefaultName = "orbitkv-arena"
)

// ErrUnavailable is wrapped by every reason a hugetlb arena could not be
// made: no 2 MiB pool, too few free pages, MFD_HUGETLB refused, allocation
// or mapping refused. New returns it in Require mode; in Prefer mode its text
// becomes the start of Fallback().
var ErrUnavailable = errors.New("hugetlb unavailable")

// Spec describes an arena; a plain value, validated without privileges.
type Spec struct {
	Bytes    uint64 // bytes wanted, 1..MaxBytes; rounded up to whole pages
	Mode     Mode   // Off (zero), Prefer or Require
	Name     string // memfd name for /proc/PID/maps; DefaultName if empty
	Prefault bool   // fault every page in at New (see the package doc)
	// Progress, when set, is called from New after each PrefaultStep
	// bytes pre-faulted (done of total bytes), so a caller can report a
	// start that takes seconds per few GiB.
	Progress func(done, total uint64)
}

// PrefaultStep is how many bytes New pre-faults between Progress calls.
const PrefaultStep = 256 << 20

// Validate names the field and limit that s violates.
func (s Spec) Validate() error {
	switch {
	case s.Bytes == 0 || s.Bytes > MaxBytes:
		return fmt.Errorf("hugepages spec: bytes %d, want 1..%d", s.Bytes, uint64(MaxBytes))
	case !s.Mode.valid():
		return fmt.Errorf("hugepages spec: mode %d: %w", int(s.Mode), ErrBadMode)
	case len(s.Name) > MaxNameBytes:
		return fmt.Errorf("hugepages spec: name is %d bytes, want at most %d", len(s.Name), MaxNameBytes)
	case containsNUL(s.Name):
		return fmt.Errorf("hugepages spec: name %q contains a NUL byte", s.Name)
	}
	return nil
}

func containsNUL(s string) bool {
	for i := range len(s) {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// Arena is one memfd and its shared read-write mapping.
type Arena struct {
	file     *os.File
	mem      []byte
	huge     bool
	fallback string
}

// New makes the arena s describes (see the package doc for each Mode).
// Errors: a Spec error from Validate; in Require mode an error wrapping
// ErrUnavailable whose text names the shortfall and how to reserve pages;
// otherwise a wrapped errno from memfd_create, ftruncate, mmap or the
// pre-fault (ENOMEM when memory is short). Nothing is left open on error.
func New(s Spec) (*Arena, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Name == "" {
		s.Name = DefaultName
	}
	switch s.Mode {
	case Require:
		return newHugetlb(s) // an error names hugetlb and the shortfall
	case Prefer:
		a, err := newHugetlb(s)
		if err == nil {
			return a, nil
		}
		return newShmem(s, true, err.Error())
	}
	return newShmem(s, false, "mode off")
}

// unavailable wraps ErrUnavailable with a reason.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// errnoText renders a syscall error as "EINVAL (invalid argument)".
func errnoText(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		if name := unix.ErrnoName(e); name != "" {
			return fmt.Sprintf("%s (%v)", name, e)
		}
	}
	return err.Error()
}

func newHugetlb(s Spec) (*Arena, error) {
	size := roundUp(s.Bytes, HugePageSize)
	need := size / HugePageSize
	if err := checkPool(size); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate(s.Name, unix.MFD_CLOEXEC|unix.MFD_HUGETLB|unix.MFD_HUGE_2MB)
	if err != nil {
		return nil, unavailable("memfd_create(MFD_HUGETLB|MFD_HUGE_2MB): %s", errnoText(err))
	}
	f := os.NewFile(uintptr(fd), s.Name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, unavailable("ftruncate hugetlb memfd to %d bytes: %s", size, errnoText(err))
	}
	// Allocate every page now: a shortage becomes this error instead of a
	// SIGBUS at the first touch (package doc). EOPNOTSUPP (kernels before
	// 4.3) leaves the reservation mmap makes below as the only guarantee.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		f.Close()
		return nil, unavailable("allocating %d 2 MiB hugepages (fallocate): %s; the pool shrank since it was read, or a hugetlb cgroup limit or memory policy refused them", need, errnoText(err))
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		if errors.Is(err, unix.ENOMEM) {
			return nil, unavailable("mmap %d bytes of hugetlb memfd: %s: fewer than %d 2 MiB hugepages could be reserved", size, errnoText(err), need)
		}
		return nil, unavailable("mmap %d bytes of hugetlb memfd: %s", size, errnoText(err))
	}
	a := &Arena{file: f, mem: mem, huge: true}
	if s.Prefault {
		if err := Populate(mem, HugePageSize, s.Progress); err != nil {
			a.Close()
			return nil, unavailable("pre-faulting %d bytes of hugetlb memfd: %s", size, errnoText(err))
		}
	}
	return a, nil
}

// checkPool refuses a hugetlb arena of size bytes (a multiple of
// HugePageSize) when the 2 MiB pool has no room for it: a *ShortError
// (Room: the bytes of the pages available) wrapping ErrUnavailable that
// names the shortfall and the command that reserves the missing pages.
func checkPool(size uint64) error {
	need := size / HugePageSize
	p, err := ReadPool()
	if err != nil {
		return unavailable("no 2 MiB hugepage pool (%v)", err)
	}
	if avail := p.Available(); avail < need {
		return &ShortError{Room: avail * HugePageSize, Err: unavailable("%d free 2 MiB hugepages, %d needed (HugePages_Free %d, HugePages_Rsvd %d, overcommit %d); reserve them: %s",
			avail, need, p.Free, p.Reserved, p.Overcommit, p.ReserveHint(need-avail))}
	}
	return nil
}

// Check runs, without allocating anything, the checks New makes before it
// allocates the arena s describes: in Require mode the hugepage pool's
// room (an error wrapping ErrUnavailable), in Off mode the available
// memory (ErrNoMemory), and in Prefer mode the available memory unless the
// pool has room. It is the preflight of New (orbitkv-manager --check);
// New may still fail where the host changes in between.
func Check(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	switch s.Mode {
	case Require:
		return checkPool(roundUp(s.Bytes, HugePageSize))
	case Prefer:
		if checkPool(roundUp(s.Bytes, HugePageSize)) == nil {
			return nil
		}
	}
	return checkMemory(roundUp(s.Bytes, uint64(os.Getpagesize())))
}

// newShmem makes an ordinary memfd arena; advise asks for transparent
// hugepages, and reason is why hugetlb was not used.
func newShmem(s Spec, advise bool, reason string) (*Arena, error) {
	size := roundUp(s.Bytes, uint64(os.Getpagesize()))
	if err := checkMemory(size); err != nil {
		return nil, err // its text names what it is about
	}
	fd, err := unix.MemfdCreate(s.Name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("hugepages: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), s.Name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("hugepages: ftruncate memfd to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hugepages: mmap %d bytes: %w", size, err)
	}
	a := &Arena{file: f, mem: mem, fallback: reason}
	if advise {
		if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
			a.fallback += fmt.Sprintf("; shmem memfd, madvise(MADV_HUGEPAGE): %s, so 4 KiB pages", errnoText(err))
		} else {
			v := ShmemTHP()
			a.fallback += fmt.Sprintf("; shmem memfd with MADV_HUGEPAGE, transparent_hugepage/shmem_enabled is %s: %s", v, thpNote(v))
		}
	}
	// MADV_HUGEPAGE (above) must come before the pages are faulted in.
	if s.Prefault {
		if err := Populate(mem, uint64(os.Getpagesize()), s.Progress); err != nil {
			a.Close()
			return nil, fmt.Errorf("hugepages: pre-faulting %d bytes: %w", size, err)
		}
	}
	return a, nil
}

// Populate faults every page of mem in for writing, PrefaultStep bytes at
// a time, calling progress (when set) after each step: MADV_POPULATE_WRITE
// (Linux 5.14), which answers a shortage with ENOMEM rather than a signal,
// or on older kernels a write of a zero to each page of pageBytes (mem
// must be a new, all-zero mapping).
func Populate(mem []byte, pageBytes uint64, progress func(done, total uint64)) error {
	total := uint64(len(mem))
	for off := uint64(0); off < total; off += PrefaultStep {
		part := mem[off:min(off+PrefaultStep, total)]
		if err := unix.Madvise(part, unix.MADV_POPULATE_WRITE); errors.Is(err, unix.EINVAL) {
			for i := uint64(0); i < uint64(len(part)); i += pageBytes {
				part[i] = 0
			}
		} else if err != nil {
			return err
		}
		if progress != nil {
			progress(off+uint64(len(part)), total)
		}
	}
	return nil
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// Bytes is the whole mapping: Spec.Bytes rounded up to PageSize(). It is
// valid until Close; the caller must not use it after.
func (a *Arena) Bytes() []byte { return a.mem }

// File is the memfd (close-on-exec). It stays owned by the Arena: Close
// closes it; do not close it yourself.
func (a *Arena) File() *os.File { return a.file }

// Huge reports whether the memfd was made with MFD_HUGETLB, so every page
// is a 2 MiB hugetlb page.
func (a *Arena) Huge() bool { return a.huge }

// PageSize is the size in bytes of the arena's pages: HugePageSize when
// Huge, else the base page size (transparent hugepages are the kernel's
// choice and not counted).
func (a *Arena) PageSize() uint64 {
	if a.huge {
		return HugePageSize
	}
	return uint64(os.Getpagesize())
}

// Fallback is why the arena is not hugetlb-backed: "" when Huge, "mode
// off" for Off, and for Prefer the hugetlb failure (the text of an
// ErrUnavailable error) followed by what the shmem fallback gets.
func (a *Arena) Fallback() string { return a.fallback }

// Close unmaps the memory and closes the memfd; hugetlb pages go back to
// the pool. Calling it again returns nil. No goroutine may use Bytes or
// File during or after Close.
func (a *Arena) Close() error {
	if a.mem == nil {
		return nil
	}
	err := unix.Munmap(a.mem)
	a.mem = nil
	if cerr := a.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrNotArena is wrapped by Adopt's refusal of a file that is not an
// arena of this package by the given name.
var ErrNotArena = errors.New("not an orbitkv memfd arena")

// Adopt maps f, an arena's memfd another process made with New and
// passed on (SCM_RIGHTS, or systemd's file descriptor store), as an Arena
// of this process; f becomes the Arena's (Close closes it, on error too).
// It refuses, wrapping ErrNotArena, a file that is not a memfd named name
// (the /proc/self/fd link reads "/memfd:NAME (deleted)") or whose size is
// not bytes. The memory keeps what it held: nothing is pre-faulted, and a
// hugetlb memfd (fstatfs says hugetlbfs) reports Huge. Errors: those, or
// the errno of fstat, fstatfs or mmap.
func Adopt(f *os.File, name string, bytes uint64) (*Arena, error) {
	fail := func(err error) (*Arena, error) { f.Close(); return nil, err }
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return fail(fmt.Errorf("hugepages: adopt: %w", err))
	}
	if want := "/memfd:" + name + " (deleted)"; link != want {
		return fail(fmt.Errorf("%w: fd links to %q, want %q", ErrNotArena, link, want))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fail(fmt.Errorf("hugepages: adopt: fstat: %w", err))
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return fail(fmt.Errorf("hugepages: adopt: fstatfs: %w", err))
	}
	huge := fs.Type == unix.HUGETLBFS_MAGIC
	size := roundUp(bytes, uint64(os.Getpagesize()))
	if huge {
		size = roundUp(bytes, HugePageSize)
	}
	if bytes == 0 || uint64(st.Size) != size {
		return fail(fmt.Errorf("%w: memfd %q is %d bytes, want %d", ErrNotArena, name, st.Size, size))
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("hugepages: adopt: mmap %d bytes: %s", size, errnoText(err)))
	}
	a := &Arena{file: f, mem: mem, huge: huge}
	if !huge {
		a.fallback = "adopted from a predecessor: shmem memfd"
	}
	return a, nil
}

// MapAdopted maps every page of an adopted arena's mapping for writing
// (MADV_POPULATE_WRITE, PrefaultStep bytes at a time), so copies into it
// take no faults, until stop is closed. The pages exist and keep their
// bytes. On kernels before 5.14 (EINVAL) it does nothing: the pages are
// then mapped by their first touch. The mapping must stay until it
// returns.
func MapAdopted(mem []byte, stop <-chan struct{}) error {
	total := uint64(len(mem))
	for off := uint64(0); off < total; off += PrefaultStep {
		select {
		case <-stop:
			return nil
		default:
		}
		part := mem[off:min(off+PrefaultStep, total)]
		if err := unix.Madvise(part, unix.MADV_POPULATE_WRITE); errors.Is(err, unix.EINVAL) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Dup is a duplicate of the arena's memfd (close-on-exec), the caller's to
// close: what outlives Close when the memory is handed to another process.
func (a *Arena) Dup() (*os.File, error) {
	fd, err := unix.FcntlInt(a.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hugepages: dup %s: %w", a.file.Name(), err)
	}
	return os.NewFile(uintptr(fd), a.file.Name()), nil
}
