package session

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count fds: %v", err)
	}
	return len(ents)
}

func TestSpecValidate(t *testing.T) {
	good := Spec{Epoch: 1, MaxSessions: 8, DescCapacity: 64 << 10}
	tests := []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"a default spec is accepted", good, true},
		{"a zero epoch is refused", Spec{MaxSessions: 8, DescCapacity: 4096}, false},
		{"zero sessions are refused", Spec{Epoch: 1, DescCapacity: 4096}, false},
		{"the control slot cannot be a session", Spec{Epoch: 1, MaxSessions: abi.MaxSessions, DescCapacity: 4096}, false},
		{"a descriptor area below a page is refused", Spec{Epoch: 1, MaxSessions: 1, DescCapacity: 1024}, false},
		{"a descriptor area that is not page-aligned is refused", Spec{Epoch: 1, MaxSessions: 1, DescCapacity: 5000}, false},
		{"a descriptor area above 64 MiB is refused", Spec{Epoch: 1, MaxSessions: 1, DescCapacity: 128 << 20}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.spec.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestOpenMakesASealedSlotWithItsHeader(t *testing.T) {
	before := openFDs(t)
	tab, err := NewTable(Spec{Epoch: 77, MaxSessions: 2, DescCapacity: 8192})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tab.Open(Peer{PID: 1, InstanceID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	seals, err := unix.FcntlInt(s.SlotFile().Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if seals&want != want {
		t.Errorf("seals = %#x, want %#x set", seals, want)
	}
	if err := unix.Ftruncate(int(s.SlotFile().Fd()), 1); err == nil {
		t.Error("shrinking the sealed slot succeeded")
	}
	mem := s.Slot()
	le := binary.LittleEndian
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"magic", uint64(le.Uint32(mem[0:])), abi.SlotMagic},
		{"abi version", uint64(le.Uint16(mem[4:])), abi.Version},
		{"slot bytes", uint64(le.Uint32(mem[8:])), abi.SlotDescOffset + 8192},
		{"slot index", uint64(le.Uint32(mem[12:])), uint64(s.Index)},
		{"desc offset", uint64(le.Uint32(mem[16:])), abi.SlotDescOffset},
		{"desc capacity", uint64(le.Uint32(mem[20:])), 8192},
		{"epoch", le.Uint64(mem[24:]), 77},
		{"initial generation", le.Uint64(mem[32:]), s.InitialGeneration},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("header %s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if s.InitialGeneration&1 != 1 {
		t.Errorf("initial generation %d is even", s.InitialGeneration)
	}
	tab.Close(s)
	tab.Close(s) // idempotent
	if tab.Len() != 0 {
		t.Errorf("Len() = %d after Close, want 0", tab.Len())
	}
	if after := openFDs(t); after != before {
		t.Errorf("open fds %d -> %d: Close leaked", before, after)
	}
}

func TestAFullTableRefusesAndAReusedIndexStartsBeyondItsGenerations(t *testing.T) {
	tab, err := NewTable(Spec{Epoch: 1, MaxSessions: 1, DescCapacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	a, err := tab.Open(Peer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Open(Peer{}); !errors.Is(err, ErrFull) {
		t.Fatalf("second Open on a one-slot table: %v, want ErrFull", err)
	}
	a.SetLastGeneration(a.InitialGeneration + 1000) // accepted by the dispatcher
	tab.Close(a)
	b, err := tab.Open(Peer{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close(b)
	if b.Index != a.Index {
		t.Fatalf("index %d, want reuse of %d", b.Index, a.Index)
	}
	if b.InitialGeneration <= a.InitialGeneration+1000 || b.InitialGeneration&1 != 1 {
		t.Errorf("reused slot starts at %d, want odd and beyond %d", b.InitialGeneration, a.InitialGeneration+1000)
	}
	if b.Token == a.Token {
		t.Error("client token repeated across sessions")
	}
}

// The Manager commits the control page and the first PopulatedDescBytes
// of the descriptor area at the session's start and nothing beyond: the
// rest of a large area is committed by whoever first writes it.
func TestASlotCommitsItsControlPageAndTheFirstDescriptorBytesOnly(t *testing.T) {
	const desc = 4 * PopulatedDescBytes
	tab, err := NewTable(Spec{Epoch: 1, MaxSessions: 2, DescCapacity: desc})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tab.Open(Peer{PID: 1, InstanceID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close(s)
	mem := s.Slot()
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if err := mincore(mem, vec); err != nil {
		t.Fatal(err)
	}
	committed := (abi.SlotDescOffset + PopulatedDescBytes) / page
	for i, v := range vec {
		if resident := v&1 != 0; resident != (i < committed) {
			t.Fatalf("page %d of %d: resident %v, want the first %d pages resident and no other", i, len(vec), resident, committed)
		}
	}
	mem[len(mem)-1] = 1 // a client's write commits the page it lands on
	if err := mincore(mem, vec); err != nil {
		t.Fatal(err)
	}
	if vec[len(vec)-1]&1 == 0 {
		t.Fatal("the last page is not resident after a write to it")
	}
}

// mincore is mincore(2): vec[i]&1 says whether page i of mem is resident.
func mincore(mem, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		return e
	}
	return nil
}
