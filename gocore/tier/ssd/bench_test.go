package ssd

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// benchFile is a store of blocks of one size, written and closed, for the
// read benchmarks: they read its slots round robin.
type benchFile struct {
	spec   Spec
	blocks int
	meta   Meta
}

// benchBytes is how much block data each read benchmark cycles through.
const benchBytes = 64 << 20

func makeBenchFile(b *testing.B, size uint64) benchFile {
	b.Helper()
	n := max(16, benchBytes/int(size))
	dir := directDir(b)
	spec := Spec{Dir: dir, SlotBytes: size, CapacityBytes: uint64(n) * (HeaderBytes + size), VerifyOnOpen: -1}
	st := mustOpen(b, spec)
	m := Meta{Bytes: size, Layers: 1}
	for i := range n {
		if err := writeBlock(b, st, key(40, uint64(i)), m); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return benchFile{spec: spec, blocks: n, meta: m}
}

// BenchmarkRead compares ways to read blocks of the data file with O_DIRECT
// at a queue depth: engine=pool, qd goroutines each doing one preadv of
// header and data at a time (the store's engine, without its checks);
// engine=uring, one goroutine keeping qd IORING_OP_READV in flight on one
// ring (same iovecs); engine=store, Store.Read with IOWorkers=qd and qd
// Reads outstanding (queueing, header check and MAC check included).
func BenchmarkRead(b *testing.B) {
	for _, size := range []uint64{256 << 10, 2 << 20} {
		f := makeBenchFile(b, size)
		for _, qd := range []int{4, 16} {
			for _, engine := range []string{"pool", "uring", "store"} {
				name := fmt.Sprintf("engine=%s/size=%s/qd=%d", engine, humanize.IBytes(size), qd)
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					defer reportCPU(b)()
					switch engine {
					case "pool":
						benchPool(b, f, qd)
					case "uring":
						benchUring(b, f, qd)
					case "store":
						benchStore(b, f, qd)
					}
				})
			}
		}
	}
}

// reportCPU reports the process's CPU time (user + system, every thread)
// per operation as cpu-µs/op; call the returned func when the timed part
// ends. Engines that reach the same throughput may differ here.
func reportCPU(b *testing.B) func() {
	var before unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	return func() {
		var after unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &after)
		us := func(r *unix.Rusage) float64 {
			return float64(r.Utime.Sec+r.Stime.Sec)*1e6 + float64(r.Utime.Usec+r.Stime.Usec)
		}
		b.ReportMetric((us(&after)-us(&before))/float64(b.N), "cpu-µs/op")
	}
}

// readTarget is one outstanding read's memory: a header page and the
// block's buffer in 16 KiB chunks (as the RAM tier hands them over).
type readTarget struct {
	hdr  []byte
	bufs [][]byte
	iov  []unix.Iovec
}

func newTargets(b *testing.B, qd int, size uint64) []readTarget {
	t := make([]readTarget, qd)
	for i := range t {
		t[i].hdr = alignedBuf(b, HeaderBytes)
		t[i].bufs = chunks(alignedBuf(b, int(size)), 16<<10)
	}
	return t
}

func (t *readTarget) iovs(size uint64) []unix.Iovec {
	t.iov = buildIov(t.iov[:0], t.hdr, t.bufs, size)
	return t.iov
}

func openData(b *testing.B, f benchFile) int {
	fd, err := unix.Open(f.spec.Dir+"/"+dataName, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	return fd
}

func benchPool(b *testing.B, f benchFile, qd int) {
	fd := openData(b, f)
	defer unix.Close(fd)
	targets := newTargets(b, qd, f.meta.Bytes)
	stride := int64(f.spec.stride())
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range qd {
		wg.Go(func() {
			t := &targets[w]
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				if err := rwv(unix.SYS_PREADV, fd, t.iovs(f.meta.Bytes), (i%int64(f.blocks))*stride); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func benchUring(b *testing.B, f benchFile, qd int) {
	fd := openData(b, f)
	defer unix.Close(fd)
	r, err := newUring(uint32(qd))
	if err != nil {
		b.Skipf("io_uring unavailable here: %v", err)
	}
	defer r.close()
	targets := newTargets(b, qd, f.meta.Bytes)
	stride := int64(f.spec.stride())
	want := int32(HeaderBytes + f.meta.Bytes)
	issued, completed := 0, 0
	submit := func(t int) {
		r.readv(fd, targets[t].iovs(f.meta.Bytes), int64(issued%f.blocks)*stride, uint64(t))
		issued++
	}
	b.ResetTimer()
	for t := 0; t < qd && issued < b.N; t++ {
		submit(t)
	}
	for completed < b.N {
		if err := r.wait(1); err != nil {
			b.Fatal(err)
		}
		r.reap(func(tag uint64, res int32) {
			completed++
			if res != want {
				b.Fatalf("READV returned %d, want %d", res, want)
			}
			if issued < b.N {
				submit(int(tag))
			}
		})
	}
}

func benchStore(b *testing.B, f benchFile, qd int) {
	spec := f.spec
	spec.IOWorkers = qd
	st := mustOpen(b, spec)
	defer st.Close()
	targets := newTargets(b, qd, f.meta.Bytes)
	free := make(chan int, qd)
	dones := make([]func(error), qd)
	for t := range qd {
		free <- t
		dones[t] = func(err error) {
			if err != nil {
				b.Error(err)
			}
			free <- t
		}
	}
	b.ResetTimer()
	for i := range b.N {
		t := <-free
		st.Read(key(40, uint64(i%f.blocks)), f.meta, targets[t].bufs, dones[t])
	}
	for range qd {
		<-free
	}
}

// BenchmarkWrite is write-behind demotion: Store.Write of fresh blocks with
// MaxPendingWrites outstanding (group commit shares the fdatasyncs), FIFO
// eviction once the file is full.
func BenchmarkWrite(b *testing.B) {
	for _, size := range []uint64{256 << 10, 2 << 20} {
		b.Run("size="+humanize.IBytes(size), func(b *testing.B) {
			n := max(16, benchBytes/int(size))
			st := mustOpen(b, Spec{Dir: directDir(b), SlotBytes: size, CapacityBytes: uint64(n) * (HeaderBytes + size), VerifyOnOpen: -1, MaxPendingWrites: 16})
			defer st.Close()
			const depth = 16
			srcs := newTargets(b, depth, size)
			free := make(chan int, depth)
			for t := range depth {
				free <- t
			}
			m := Meta{Bytes: size, Layers: 1}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t := <-free
				st.Write(key(41, uint64(i)), m, srcs[t].bufs, nil, func(err error) {
					if err != nil {
						b.Error(err)
					}
					free <- t
				})
			}
			for range depth {
				<-free
			}
		})
	}
}
