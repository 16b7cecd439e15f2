package ssd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"golang.org/x/sys/unix"
)

// ssdTarget is the ssd suite's target: reading blocks through
// the SSD tier reaches at least this fraction of a plain O_DIRECT
// sequential read of the same file in the same run.
const ssdTarget = 0.80

// ssdChunkBytes is the size of the destination pieces Store.Read fills:
// the RAM tier's default chunk (--ram-chunk-bytes), so each block is
// scattered over as many iovecs as a restore into the tier would be.
const ssdChunkBytes = 16 << 10

// ssdConfig is the parsed, validated flag set of `orbitkv-bench ssd`.
type ssdConfig struct {
	suite.Common
	dir       string   // parent of the bench's own temporary directory
	sizes     []uint64 // block sizes, in report order
	blocks    int      // blocks per size: the file holds exactly these
	iters     int      // timed passes per size and subject (the median is reported)
	warmup    int      // untimed passes first
	ioWorkers int
	memory    []string // destination memory kinds, in report order
}

// Destination memory kinds of --memory.
const (
	ssdMemoryPages = "4k"  // anonymous memory of 4 KiB pages, pre-faulted, like today's RAM tier
	ssdMemoryTHP   = "thp" // the same with MADV_HUGEPAGE: physically contiguous 2 MiB pieces, like a hugepage RAM tier
)

func ParseSSDFlags(args []string, out io.Writer) (ssdConfig, error) {
	var cfg ssdConfig
	fs := suite.NewFlags("ssd", &cfg.Common, out,
		"SSD tier read throughput: Store.Read (O_DIRECT preadv through the store's I/O",
		"workers into 16 KiB chunks, slot header and MAC check of every block) of all",
		"--blocks blocks at once, as GB/s and as a ratio to a plain O_DIRECT sequential",
		"read of the same data file (one call per slot, queue depth 1) into the same",
		"memory, measured in the same run pass by pass (the ratio is the median of the",
		"passes' ratios). A second baseline reads every slot into one reused buffer, as",
		"dd does; on some virtual disks that is faster for reasons of the memory, not of",
		"the store (gocore/tier/ssd/doc.go). Each size is measured into destination memory",
		"of 4 KiB pages and of transparent huge pages (--memory). Also reports write-behind",
		"demotion (Store.Write of all blocks at once) throughput.",
		"Starts no Manager. The store's files live in a temporary directory under --dir,",
		"removed at the end.")
	fs.StringVar(&cfg.dir, "dir", "/var/tmp", "the `dir`ectory on the SSD to measure (must accept O_DIRECT; a temporary directory is made in it)")
	sizes := fs.String("sizes", "256KiB,2MiB", "comma-separated block `sizes`, multiples of 4KiB")
	fs.IntVar(&cfg.blocks, "blocks", 64, "`N` blocks per size (the data file holds exactly these)")
	fs.IntVar(&cfg.iters, "iters", 5, "`N` timed passes over all blocks per size and subject (the median is reported)")
	fs.IntVar(&cfg.warmup, "warmup", 1, "`N` untimed passes per size and subject first")
	fs.IntVar(&cfg.ioWorkers, "io-workers", ssd.DefaultIOWorkers, "`N` I/O workers of the store (reads in flight)")
	fs.PlotFlag("GB/s against block size, one PNG per --memory kind")
	fs.ProgressFlag()
	memory := fs.String("memory", "4k,thp", "comma-separated destination memory `kinds`: 4k (4 KiB pages) and thp (MADV_HUGEPAGE)")
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	var err error
	cfg.memory, err = suite.ParseList(suite.ListFlag{Name: "memory", Noun: "kind"}, *memory, func(m string) (string, error) {
		if m != ssdMemoryPages && m != ssdMemoryTHP {
			return "", suite.Usagef("--memory: %q, want %s or %s", m, ssdMemoryPages, ssdMemoryTHP)
		}
		return m, nil
	})
	if err != nil {
		return cfg, err
	}
	if cfg.dir == "" {
		return cfg, suite.Usagef("--dir is empty")
	}
	err = suite.FirstError(
		suite.Between("blocks", cfg.blocks, 1, 65536),
		suite.AtLeast("iters", cfg.iters, 1),
		suite.AtLeast("warmup", cfg.warmup, 0),
		suite.Between("io-workers", cfg.ioWorkers, 1, ssd.MaxIOWorkers))
	if err != nil {
		return cfg, err
	}
	cfg.sizes, err = suite.ParseSizes(*sizes, suite.BlockSizes{Multiple: 4096, Why: "must be a multiple of 4KiB up to 256MiB",
		Blocks: cfg.blocks, MaxGiB: 16, Per: "size (the file and the read buffers)"})
	return cfg, err
}

// ssdSize is the result for one block size. GB/s are 10^9 bytes per
// second over the median pass: block bytes for the store, file bytes
// (slot headers included) for the baseline, so the ratio never flatters
// the store. ReadRatio is the median over the passes of read GB/s over
// baseline GB/s of the same pass; ReusedBufferRatio the same against the
// dd-style read into one reused buffer.
type ssdSize struct {
	BlockBytes        uint64  `json:"block_bytes"`
	Memory            string  `json:"memory"`     // the destination memory: ssdMemoryPages or ssdMemoryTHP
	HugeBytes         uint64  `json:"huge_bytes"` // of it, bytes the kernel backed with huge pages (thp only)
	Blocks            int     `json:"blocks"`
	FileBytes         uint64  `json:"file_bytes"`
	WriteGBps         float64 `json:"write_gbps"`
	BaselineGBps      float64 `json:"baseline_gbps"`
	ReadGBps          float64 `json:"read_gbps"`
	ReadRatio         float64 `json:"read_ratio"`
	ReusedBufferGBps  float64 `json:"reused_buffer_gbps"`
	ReusedBufferRatio float64 `json:"reused_buffer_ratio"`
}

// ssdReport is the one JSON object `orbitkv-bench ssd --json` prints.
type ssdReport struct {
	suite.Head
	Dir       string    `json:"dir"`
	IOWorkers int       `json:"io_workers"`
	Iters     int       `json:"iters"`
	Baseline  string    `json:"baseline"` // how the baseline was measured
	Sizes     []ssdSize `json:"sizes"`

	header string
}

// ssdBaseline says how the baselines were measured.
const ssdBaseline = "the store's data file read front to back with O_DIRECT, queue depth 1, one call per slot (4KiB header + block): " +
	"baseline = preadv(2) of the header into one page and the block into the memory Store.Read fills (one contiguous piece per block); " +
	"reused buffer = pread(2) of every slot into one buffer (dd-style)"

// Run is `orbitkv-bench ssd`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := ParseSSDFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(cfg.dir, "orbitkv-bench-ssd-")
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rep := &ssdReport{Dir: dir, IOWorkers: cfg.ioWorkers, Iters: cfg.iters, Baseline: ssdBaseline}
	rep.header = fmt.Sprintf("orbitkv-bench ssd: %d CPUs", runtime.NumCPU())
	if model := suite.CpuModel(); model != "" {
		rep.header += " (" + model + ")"
	}
	rep.header += fmt.Sprintf(", store in %s, %d I/O workers; %d blocks per size read at once, median of %d passes",
		dir, cfg.ioWorkers, cfg.blocks, cfg.iters)
	prog := suite.StartProgress(cfg.Progress, stderr, "ssd", "passes", int64(cfg.Repeats*len(cfg.sizes)*len(cfg.memory)*(cfg.warmup+cfg.iters)))
	defer prog.Finish()
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	var figs []suite.Figure
	for _, size := range cfg.sizes {
		for _, memory := range cfg.memory {
			var reps []ssdSize
			for repeat := range cfg.Repeats {
				if !cfg.Json {
					fmt.Fprintf(stderr, "repeat %d of %d: measuring %s blocks into %s memory ...\n", repeat+1, cfg.Repeats, humanize.IBytes(size), memory)
				}
				storeDir := filepath.Join(dir, fmt.Sprint(size, "-", memory, "-", repeat))
				r, err := measureSSD(&cfg, storeDir, size, memory, prog)
				if err != nil {
					return fmt.Errorf("%s blocks, %s memory: %w", humanize.IBytes(size), memory, err)
				}
				// Each repeat writes a store of its own; only one is on disk at a time.
				if err := os.RemoveAll(storeDir); err != nil {
					return err
				}
				reps = append(reps, r)
			}
			s, f := suite.MedianOver(humanize.IBytes(size)+"/"+memory, reps, ssdFields)
			rep.Sizes, figs = append(rep.Sizes, s), append(figs, f...)
		}
	}
	cfg.Finish(&rep.Head, mon, suite.ValidityInput{HotUnchecked: "the ssd suite has no hot phase"}, figs)
	// The report first: a plot that fails does not lose a run's figures.
	err = cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeSSDTable(w, rep) })
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &rep.Head, ssdCharts(rep)...))
}

// ssdFields are the figures of one size and memory kind: each the median
// of the repeats' values (a repeat's own is over its median pass).
var ssdFields = []suite.FloatField[ssdSize]{
	{Name: "write_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.WriteGBps }},
	{Name: "baseline_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.BaselineGBps }},
	{Name: "read_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.ReadGBps }},
	{Name: "read_ratio", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.ReadRatio }},
	{Name: "reused_buffer_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.ReusedBufferGBps }},
	{Name: "reused_buffer_ratio", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *ssdSize) *float64 { return &s.ReusedBufferRatio }},
}

// ssdBench is one block size's store and buffers.
type ssdBench struct {
	cfg    *ssdConfig
	st     *ssd.Store
	meta   ssd.Meta
	keys   []ssd.Key
	mem    []byte     // blocks × size: the read destinations (and the write sources)
	dst    [][][]byte // per block: its destination in 16 KiB chunks
	done   chan error
	fd     int    // blocks.dat opened O_DIRECT for the baseline
	buf    []byte // the baseline's buffer, one slot
	stride int64
}

// measureSSD writes cfg.blocks blocks of size into a fresh store, then
// times passes of the baseline and of Store.Read alternately, counting
// each pass (warm-up ones too) on prog.
func measureSSD(cfg *ssdConfig, dir string, size uint64, memory string, prog *suite.Progress) (ssdSize, error) {
	stride := ssd.HeaderBytes + size
	spec := ssd.Spec{Dir: dir, CreateDir: true, SlotBytes: size, CapacityBytes: uint64(cfg.blocks) * stride, IOWorkers: cfg.ioWorkers,
		MaxPendingWrites: cfg.blocks, VerifyOnOpen: -1}
	b := &ssdBench{cfg: cfg, meta: ssd.Meta{Bytes: size, Layers: 1}, done: make(chan error, cfg.blocks), stride: int64(stride)}
	var err error
	if b.st, err = ssd.Open(spec, nil); err != nil {
		if errors.Is(err, ssd.ErrNoDirectIO) {
			return ssdSize{}, fmt.Errorf("%w (choose another --dir)", err)
		}
		return ssdSize{}, err
	}
	defer b.st.Close()
	raw, mem, err := mapDestination(int(size)*cfg.blocks, memory == ssdMemoryTHP)
	if err != nil {
		return ssdSize{}, err
	}
	defer unix.Munmap(raw)
	b.mem = mem
	if b.buf, err = unix.Mmap(-1, 0, int(stride), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return ssdSize{}, fmt.Errorf("mapping the baseline buffer: %w", err)
	}
	defer unix.Munmap(b.buf)
	for i := range cfg.blocks {
		var k ssd.Key
		copy(k.NS[:], "orbitkv-bench-ss")
		k.Hash = [16]byte(content.BlockHash(uint64(i) + 1))
		b.keys = append(b.keys, k)
		blk := b.mem[uint64(i)*size : uint64(i+1)*size]
		content.FillPage(blk, uint64(i)+1)
		var chunks [][]byte
		for off := uint64(0); off < size; off += ssdChunkBytes {
			end := min(off+ssdChunkBytes, size)
			chunks = append(chunks, blk[off:end:end])
		}
		b.dst = append(b.dst, chunks)
	}

	out := ssdSize{BlockBytes: size, Memory: memory, Blocks: cfg.blocks, FileBytes: uint64(cfg.blocks) * stride}
	if memory == ssdMemoryTHP {
		out.HugeBytes = anonHugeBytes(b.mem)
	}
	t := time.Now()
	write := func(k ssd.Key, m ssd.Meta, src [][]byte, done func(error)) { b.st.Write(k, m, src, nil, done) }
	if err := b.pass(write); err != nil {
		return out, fmt.Errorf("writing: %w", err)
	}
	out.WriteGBps = suite.GBps(size*uint64(cfg.blocks), uint64(time.Since(t)))

	// The first read lands in cleared buffers and is checked byte for byte.
	clear(b.mem)
	if err := b.pass(b.read); err != nil {
		return out, err
	}
	for i := range cfg.blocks {
		if bad := content.VerifyPage(b.mem[uint64(i)*size:uint64(i+1)*size], uint64(i)+1); bad != 0 {
			return out, fmt.Errorf("block %d read back differs from the one written in %d bytes", i, bad)
		}
	}
	if b.fd, err = unix.Open(filepath.Join(dir, "blocks.dat"), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0); err != nil {
		return out, fmt.Errorf("opening the data file for the baseline: %w", err)
	}
	defer unix.Close(b.fd)
	// Each pass times the three subjects back to back, in rotating order
	// so none always runs on a disk another just warmed; a ratio is the
	// median of the passes' ratios, which a slow moment of a shared disk
	// skews less than a ratio of medians.
	subjects := []func() error{b.sequential, b.sequentialReused, func() error { return b.pass(b.read) }}
	times := make([][]time.Duration, len(subjects))
	var ratios, reusedRatios []float64
	for i := range cfg.warmup + cfg.iters {
		var d [3]time.Duration
		for j := range subjects {
			k := (i + j) % len(subjects)
			t := time.Now()
			if err := subjects[k](); err != nil {
				return out, err
			}
			d[k] = time.Since(t)
		}
		prog.Add(1)
		if i < cfg.warmup {
			continue
		}
		for k := range d {
			times[k] = append(times[k], d[k])
		}
		read := suite.GBps(size*uint64(cfg.blocks), uint64(d[2]))
		ratios = append(ratios, read/suite.GBps(out.FileBytes, uint64(d[0])))
		reusedRatios = append(reusedRatios, read/suite.GBps(out.FileBytes, uint64(d[1])))
	}
	out.BaselineGBps = suite.GBps(out.FileBytes, uint64(median(times[0])))
	out.ReusedBufferGBps = suite.GBps(out.FileBytes, uint64(median(times[1])))
	out.ReadGBps = suite.GBps(size*uint64(cfg.blocks), uint64(median(times[2])))
	out.ReadRatio, out.ReusedBufferRatio = medianFloat(ratios), medianFloat(reusedRatios)
	if s := b.st.Stats(); s.Corrupt != 0 || s.ReadErrors != 0 {
		return out, fmt.Errorf("the store reports %d corrupt blocks and %d read errors", s.Corrupt, s.ReadErrors)
	}
	return out, nil
}

// pass issues op for every block at once and waits for all of them.
func (b *ssdBench) pass(op func(ssd.Key, ssd.Meta, [][]byte, func(error))) error {
	done := func(err error) { b.done <- err }
	for i, k := range b.keys {
		op(k, b.meta, b.dst[i], done)
	}
	var first error
	for range b.keys {
		if err := <-b.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (b *ssdBench) read(k ssd.Key, m ssd.Meta, dst [][]byte, done func(error)) {
	b.st.Read(k, m, dst, done)
}

// sequential is the baseline: the data file front to back, one slot per
// preadv, the header into one page and the block into the same memory
// Store.Read fills (as one contiguous piece).
func (b *ssdBench) sequential() error {
	size := int(b.meta.Bytes)
	for i := range b.keys {
		n, err := unix.Preadv(b.fd, [][]byte{b.buf[:ssd.HeaderBytes], b.mem[i*size : (i+1)*size]}, int64(i)*b.stride)
		if err != nil {
			return fmt.Errorf("baseline preadv: %w", err)
		}
		if n != ssd.HeaderBytes+size {
			return fmt.Errorf("baseline preadv: %d bytes of %d", n, ssd.HeaderBytes+size)
		}
	}
	return nil
}

// sequentialReused is the dd-style variant: every slot into one reused
// buffer.
func (b *ssdBench) sequentialReused() error {
	for i := range b.keys {
		n, err := unix.Pread(b.fd, b.buf, int64(i)*b.stride)
		if err != nil {
			return fmt.Errorf("reused-buffer pread: %w", err)
		}
		if n != len(b.buf) {
			return fmt.Errorf("reused-buffer pread: %d bytes of %d", n, len(b.buf))
		}
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)-1)/2]
}

func medianFloat(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	slices.Sort(f)
	return f[(len(f)-1)/2]
}

func writeSSDTable(w io.Writer, rep *ssdReport) error {
	tw := suite.NewBaselineTable(w, rep.header, rep.Baseline)
	fmt.Fprintln(tw, "block\tmemory\tblocks\tfile\twrite GB/s\tbaseline GB/s\tread GB/s\tread / baseline\treused buffer GB/s\tread / reused\t")
	for _, s := range rep.Sizes {
		mem := s.Memory
		if s.Memory == ssdMemoryTHP {
			mem = fmt.Sprintf("thp %d%%", s.HugeBytes*100/max(1, s.BlockBytes*uint64(s.Blocks)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", humanize.IBytes(s.BlockBytes), mem, s.Blocks, humanize.IBytes(s.FileBytes),
			s.WriteGBps, s.BaselineGBps, s.ReadGBps, s.ReadRatio, s.ReusedBufferGBps, s.ReusedBufferRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var ts []suite.Target
	for _, s := range rep.Sizes {
		ts = append(ts, suite.Target{Name: fmt.Sprintf("%s SSD read into %s memory ≥ %.2fx O_DIRECT sequential read", humanize.IBytes(s.BlockBytes), s.Memory, ssdTarget),
			Measured: fmt.Sprintf("%.2fx", s.ReadRatio), Ok: s.ReadRatio >= ssdTarget})
	}
	return suite.WriteTargets(w, "bench/ssd/README.md", suite.TargetsInformational, ts)
}

// mapDestination maps n bytes of pre-faulted anonymous memory for the read
// destinations, aligned to 2 MiB; with thp it asks for transparent huge
// pages first (MADV_HUGEPAGE). raw is the whole mapping, for munmap.
func mapDestination(n int, thp bool) (raw, mem []byte, err error) {
	const huge = 2 << 20
	raw, err = unix.Mmap(-1, 0, n+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %d bytes of buffers: %w", n, err)
	}
	off := (huge - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%huge)) % huge
	mem = raw[off : off+n : off+n]
	if thp {
		if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
			unix.Munmap(raw)
			return nil, nil, fmt.Errorf("madvise(MADV_HUGEPAGE): %w (transparent huge pages disabled? try --memory 4k)", err)
		}
	}
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 0 // fault every page in now, as the RAM tier's MAP_POPULATE does
	}
	return raw, mem, nil
}

// anonHugeBytes is how many bytes of mem /proc/self/smaps says are backed
// by transparent huge pages (0 if it cannot tell).
func anonHugeBytes(mem []byte) uint64 {
	f, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	end := start + uint64(len(mem))
	var total uint64
	var in bool
	for _, line := range strings.Split(string(f), "\n") {
		var lo, hi uint64
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo < end && hi > start
			continue
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			var kb uint64
			fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb)
			total += kb << 10
		}
	}
	return total
}
