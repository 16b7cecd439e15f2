//go:build cgo

package native

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// TestCopyLayoutMatchesC: CopySeg and CopyCompletion arrays are handed to C
// as okvi_copy_seg and okvi_copy_completion arrays, so the layouts must match.
func TestCopyLayoutMatchesC(t *testing.T) {
	c := Layout()
	var s CopySeg
	var cc CopyCompletion
	checkLayout(t, c, []layoutCase{
		{"a segment is 24 bytes", "sizeof(okvi_copy_seg)", unsafe.Sizeof(s)},
		{"segment src", "okvi_copy_seg.src", unsafe.Offsetof(s.Src)},
		{"segment dst", "okvi_copy_seg.dst", unsafe.Offsetof(s.Dst)},
		{"segment len", "okvi_copy_seg.len", unsafe.Offsetof(s.Len)},
		{"a completion is 24 bytes", "sizeof(okvi_copy_completion)", unsafe.Sizeof(cc)},
		{"completion token", "okvi_copy_completion.token", unsafe.Offsetof(cc.Token)},
		{"completion status", "okvi_copy_completion.status", unsafe.Offsetof(cc.Status)},
		{"completion reserved follows status", "okvi_copy_completion.reserved", unsafe.Offsetof(cc.Status) + 4},
		{"completion bytes", "okvi_copy_completion.bytes", unsafe.Offsetof(cc.Bytes)},
	})
}

// mapAnon maps n bytes of anonymous shared memory, unmapped at cleanup.
func mapAnon(t testing.TB, n int) []byte {
	t.Helper()
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// waitCompletion polls Drain until one completion arrives or 10 s pass.
func waitCompletion(t *testing.T, e *CopyEngine) CopyCompletion {
	t.Helper()
	out := make([]CopyCompletion, 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if e.Drain(out) == 1 {
			return out[0]
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("no completion within 10s (%d in flight)", e.Inflight())
	return CopyCompletion{}
}

func TestCopyEngineCopiesBetweenMappings(t *testing.T) {
	const region = 5<<20 + 4096
	tests := []struct {
		name    string
		workers int
		seg     int // bytes per segment
		nseg    int
	}{
		{"one worker copies one small segment", 1, 4096, 1},
		{"one worker copies a segment of several pieces", 1, 3<<20 + 17, 1},
		{"two workers share a segment of several pieces", 2, 5 << 20, 1},
		{"two workers copy many small segments", 2, 1000, 300},
		{"two workers copy a few odd segments", 2, 1<<20 + 1, 3},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := mapAnon(t, region), mapAnon(t, region)
			for j := range src {
				src[j] = byte(j*31 + j>>11 + i)
			}
			e, err := NewCopyEngine(nil, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Backend() != "host" {
				t.Errorf("Backend() = %q, want host", e.Backend())
			}
			// Segments go to the destination in reverse order.
			segs := make([]CopySeg, tc.nseg)
			for k := range segs {
				segs[k] = CopySeg{
					Src: addrOf(src) + uintptr(k*tc.seg),
					Dst: addrOf(dst) + uintptr((tc.nseg-1-k)*tc.seg),
					Len: uint64(tc.seg),
				}
			}
			token := uint64(0xC0FFEE00 + i)
			if err := e.Submit(token, segs); err != nil {
				t.Fatal(err)
			}
			c := waitCompletion(t, e)
			total := uint64(tc.seg * tc.nseg)
			if c.Token != token || c.Bytes != total || c.Err() != nil {
				t.Fatalf("completion %+v (err %v), want token %#x, %d bytes, status 0", c, c.Err(), token, total)
			}
			for k := range tc.nseg {
				d := dst[(tc.nseg-1-k)*tc.seg:][:tc.seg]
				if !bytes.Equal(d, src[k*tc.seg:][:tc.seg]) {
					t.Fatalf("segment %d: destination bytes differ from the source", k)
				}
			}
			if rest := dst[int(total):]; bytes.IndexFunc(rest, func(r rune) bool { return r != 0 }) >= 0 {
				t.Errorf("bytes past the job's %d were written", total)
			}
			if n := e.Inflight(); n != 0 {
				t.Errorf("Inflight() = %d after the drain", n)
			}
		})
	}
}

func TestCopyEngineRingsTheDoorbellControlSlot(t *testing.T) {
	db := mapAnon(t, abi.DoorbellSize)
	e, err := NewCopyEngine(db, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src, dst := mapAnon(t, 8192), mapAnon(t, 8192)
	if err := e.Submit(1, []CopySeg{{addrOf(src), addrOf(dst), 8192}}); err != nil {
		t.Fatal(err)
	}
	c := waitCompletion(t, e)
	if c.Token != 1 || c.Err() != nil {
		t.Fatalf("completion %+v", c)
	}
	off := Layout()["okv_doorbell.pending"] + 8*uintptr(abi.ControlSlot/64)
	word := atomic.LoadUint64((*uint64)(unsafe.Pointer(&db[off])))
	if word&(1<<(abi.ControlSlot%64)) == 0 {
		t.Errorf("control slot bit not set in pending word %#x", word)
	}
}

func TestCopyEngineRefusesBadArguments(t *testing.T) {
	for _, w := range []int{0, -1, 65} {
		if _, err := NewCopyEngine(nil, w); !errors.Is(err, unix.EINVAL) {
			t.Errorf("NewCopyEngine(nil, %d) = %v, want EINVAL", w, err)
		}
	}
	if _, err := NewCopyEngine(make([]byte, 8), 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a short doorbell: %v, want EINVAL", err)
	}
	e, err := NewCopyEngine(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := mapAnon(t, 4096)
	bad := []struct {
		name string
		segs []CopySeg
	}{
		{"no segments", nil},
		{"overlapping ranges", []CopySeg{{addrOf(buf), addrOf(buf) + 100, 200}}},
		{"a NULL source", []CopySeg{{0, addrOf(buf), 16}}},
		{"a wrapping destination", []CopySeg{{addrOf(buf), ^uintptr(0) - 8, 16}}},
	}
	for _, tc := range bad {
		if err := e.Submit(1, tc.segs); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: Submit = %v, want EINVAL", tc.name, err)
		}
	}
	if e.Inflight() != 0 {
		t.Errorf("refused jobs counted: Inflight() = %d", e.Inflight())
	}
	e.Close()
	e.Close()
	if err := e.Submit(1, []CopySeg{{addrOf(buf), addrOf(buf) + 2048, 16}}); !errors.Is(err, unix.ESHUTDOWN) {
		t.Errorf("Submit after Close = %v, want ESHUTDOWN", err)
	}
	if e.Drain(make([]CopyCompletion, 1)) != 0 || e.Inflight() != 0 {
		t.Error("a closed engine reports completions")
	}
}

func TestCopySubmitAndDrainDoNotAllocate(t *testing.T) {
	e, err := NewCopyEngine(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src, dst := mapAnon(t, 4096), mapAnon(t, 4096)
	segs := []CopySeg{{addrOf(src), addrOf(dst), 4096}}
	out := make([]CopyCompletion, 4)
	token := uint64(0)
	allocs := testing.AllocsPerRun(200, func() {
		token++
		if err := e.Submit(token, segs); err != nil {
			panic(err)
		}
		for e.Drain(out) == 0 {
			runtime.Gosched()
		}
	})
	if allocs != 0 {
		t.Errorf("Submit+Drain: %v allocations per job, want 0", allocs)
	}
}

func BenchmarkCopyEngine(b *testing.B) {
	for _, size := range []int{256 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("size=%s", sizeName(size)), func(b *testing.B) {
			src, dst := mapAnon(b, size), mapAnon(b, size)
			for i := range src {
				src[i] = byte(i)
			}
			clear(dst) // fault the pages in before timing
			b.Run("copy=memcpy", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				MemcpyBench(addrOf(dst), addrOf(src), uint64(size), b.N)
			})
			for _, w := range []int{1, 2} {
				b.Run(fmt.Sprintf("copy=engine/workers=%d", w), func(b *testing.B) {
					e, err := NewCopyEngine(nil, w)
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close()
					segs := []CopySeg{{addrOf(src), addrOf(dst), uint64(size)}}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					if e.Bench(segs, b.N) == 0 {
						b.Fatal("engine bench failed")
					}
				})
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
