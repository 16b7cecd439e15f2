package copy

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/copier"
)

// copyTarget is the copy suite's target: Publish and Restore
// reach at least this fraction of a memcpy of the same bytes by as many
// threads as the copy engine uses, in the same run.
const copyTarget = 0.90

// copyConfig is the parsed, validated flag set of `orbitkv-bench copy`.
type copyConfig struct {
	suite.Common
	sizes  []uint64 // block sizes over all layers, in report order
	blocks int      // blocks per Publish / Restore batch
	layers uint32   // layers a block spans
	iters  int      // timed batches per size and subject
	warmup int      // untimed batches first
	// threads is the copy engine's --copy-workers (the suite's default,
	// copier.DefaultWorkers, or the last one in --manager-args) and the
	// memcpy baseline's thread count.
	threads int
}

func parseCopyFlags(args []string, out io.Writer) (copyConfig, error) {
	var cfg copyConfig
	fs := suite.NewFlags("copy", &cfg.Common, out,
		"Copy throughput of the host backend: Publish (engine buffer → RAM tier) of a batch",
		"of fresh hashes and Restore (RAM tier → engine buffer) of a leased batch, each as",
		"GB/s and as a ratio to a plain memcpy of the same bytes measured in the same run.",
		"Starts its own Manager with a RAM tier of 4 batches of the largest size (at least",
		"256 MiB). Method: bench/README.md.")
	fs.ManagerFlags()
	sizes := fs.String("sizes", "256KiB,512KiB,1MiB,2MiB", "comma-separated block `sizes` (over all layers)")
	fs.IntVar(&cfg.blocks, "blocks", 32, "`N` blocks per Publish and Restore batch")
	layers := fs.Uint("layers", 4, "`N` layers a block spans (page bytes = size / layers, a multiple of 64)")
	fs.IntVar(&cfg.iters, "iters", 30, "`N` timed batches per size and subject (the median is reported)")
	fs.IntVar(&cfg.warmup, "warmup", 3, "`N` untimed batches per size and subject first")
	fs.PlotFlag("GB/s against block size")
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	err := suite.FirstError(
		suite.Between("layers", *layers, 1, content.MaxLayers),
		suite.Between("blocks", cfg.blocks, 1, 4096),
		suite.AtLeast("iters", cfg.iters, 1),
		suite.AtLeast("warmup", cfg.warmup, 0))
	if err != nil {
		return cfg, err
	}
	cfg.layers = uint32(*layers)
	if cfg.threads, err = copyWorkers(copier.DefaultWorkers(), cfg.ManagerArgs); err != nil {
		return cfg, err
	}
	// A size splits into --layers pages of a whole multiple of pageAlign
	// bytes exactly when it is a multiple of layers × pageAlign.
	cfg.sizes, err = suite.ParseSizes(*sizes, suite.BlockSizes{Multiple: uint64(cfg.layers) * content.PageAlign,
		Why:    fmt.Sprintf("/ --layers %d must be a whole multiple of %d bytes per page", cfg.layers, content.PageAlign),
		Blocks: cfg.blocks, MaxGiB: 4, Per: "batch"})
	return cfg, err
}

// copySize is the result for one block size. GB/s are 10^9 bytes per second
// over the median batch; ratios are subject / memcpy.
type copySize struct {
	BlockBytes   uint64  `json:"block_bytes"`
	BatchBytes   uint64  `json:"batch_bytes"`
	MemcpyGBps   float64 `json:"memcpy_gbps"`
	PublishGBps  float64 `json:"publish_gbps"`
	RestoreGBps  float64 `json:"restore_gbps"`
	PublishRatio float64 `json:"publish_ratio"`
	RestoreRatio float64 `json:"restore_ratio"`
}

// copyReport is the one JSON object `orbitkv-bench copy --json` prints.
type copyReport struct {
	suite.Head
	Blocks           int        `json:"blocks"`
	Layers           uint32     `json:"layers"`
	Iters            int        `json:"iters"`
	RAMCapacityBytes uint64     `json:"ram_capacity_bytes"`
	Baseline         string     `json:"baseline"`     // how memcpy was measured
	CopyThreads      int        `json:"copy_threads"` // the Manager's --copy-workers = the baseline's threads
	Sizes            []copySize `json:"sizes"`

	header string
}

// copyCapacity is the RAM tier the copy suite asks for: 4 batches of the
// largest size (a pinned restore batch, the publish batch in flight, and
// room for the eviction policy to evict without touching either), at least 256MiB, rounded
// up to 2MiB.
func copyCapacity(cfg *copyConfig) uint64 {
	c := max(4*slices.Max(cfg.sizes)*uint64(cfg.blocks), 256<<20)
	return (c + 2<<20 - 1) &^ (2<<20 - 1)
}

// Run is `orbitkv-bench copy`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseCopyFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	capacity := copyCapacity(&cfg)
	// --copy-workers explicitly: the baseline uses as many threads.
	m, err := managerproc.Launch(managerproc.RAMSpec(cfg.ManagerBin, capacity,
		append([]string{"--copy-workers", fmt.Sprint(copier.DefaultWorkers())}, cfg.ManagerArgs...)))
	if err != nil {
		return err
	}
	defer m.Stop()
	defer managerproc.StopOnSignal("copy", m, stderr, nil)()
	c, err := managerproc.Connect(m, "copy")
	if err != nil {
		return err
	}
	// A registered buffer must stay allocated until the session ends.
	var registered []*client.Buffer
	defer func() {
		c.Close()
		for _, b := range registered {
			b.Free()
		}
	}()
	pool := newParallelMemcpy(cfg.threads)
	defer pool.Close()
	rep := &copyReport{Blocks: cfg.blocks, Layers: cfg.layers, Iters: cfg.iters, RAMCapacityBytes: capacity,
		Baseline: pool.baselineText(), CopyThreads: cfg.threads}
	rep.header = fmt.Sprintf("orbitkv-bench copy: %d CPUs", runtime.NumCPU())
	if model := suite.CpuModel(); model != "" {
		rep.header += " (" + model + ")"
	}
	rep.header += fmt.Sprintf(", Manager pid %d started by the bench, --ram-capacity %s, --copy-workers %d; %d blocks per batch over %d layers, median of %d batches",
		m.Pid, humanize.IBytes(capacity), cfg.threads, cfg.blocks, cfg.layers, cfg.iters)
	var next uint64 // hash counter: every published batch is fresh
	var figs []suite.Figure
	for _, size := range cfg.sizes {
		if !cfg.Json {
			fmt.Fprintf(stderr, "measuring %s blocks, %d repeats ...\n", humanize.IBytes(size), cfg.Repeats)
		}
		reps, err := measureCopy(c, &cfg, pool, size, &next, &registered)
		if err != nil {
			return fmt.Errorf("%s blocks: %w%s", humanize.IBytes(size), err, m.ExitNote())
		}
		s, f := suite.MedianOver(humanize.IBytes(size), reps, copyFields)
		rep.Sizes, figs = append(rep.Sizes, s), append(figs, f...)
	}
	cfg.Finish(&rep.Head, mon, suite.ValidityInput{HotUnchecked: "the copy suite has no hot phase"}, figs)
	// The report first: a plot that fails does not lose a run's figures.
	err = cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeCopyTable(w, rep) })
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &rep.Head, copyCharts(rep)...))
}

// copyFields are the figures of one block size: each the median of the
// repeats' values (a repeat's own GB/s is over its median batch).
var copyFields = []suite.FloatField[copySize]{
	{Name: "memcpy_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *copySize) *float64 { return &s.MemcpyGBps }},
	{Name: "publish_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *copySize) *float64 { return &s.PublishGBps }},
	{Name: "restore_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *copySize) *float64 { return &s.RestoreGBps }},
	{Name: "publish_ratio", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *copySize) *float64 { return &s.PublishRatio }},
	{Name: "restore_ratio", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *copySize) *float64 { return &s.RestoreRatio }},
}

// copyBench is one block size's buffers: src is registered with the
// Manager (Publish reads it, Restore writes it); dst is a second buffer of
// rotation times its size, the memcpy baseline's rotating destination.
type copyBench struct {
	c          *client.Client
	cfg        *copyConfig
	pool       *parallelMemcpy // the baseline's threads
	ns         client.Namespace
	src, dst   *client.Buffer
	rounds     uint64 // memcpy calls so far: picks the destination slice
	rotation   uint64 // batch-sized destination slices the baseline cycles through
	bufID      uint32
	batchBytes uint64
	hashes     []client.BlockHash
	pages      []uint32
	entries    []client.RestoreEntry
}

// measureCopy measures memcpy, Publish and Restore of one block size,
// --repeats times on the same buffers, and returns one result per repeat.
// The baseline runs interleaved with each subject, batch by batch, so both
// see the same machine state.
func measureCopy(c *client.Client, cfg *copyConfig, pool *parallelMemcpy, size uint64, next *uint64, registered *[]*client.Buffer) ([]copySize, error) {
	b := &copyBench{c: c, cfg: cfg, pool: pool, batchBytes: size * uint64(cfg.blocks)}
	spec := content.Namespace
	spec.KVLayout = "orbitkv-bench-copy"
	spec.TenantSalt = fmt.Sprint(size)
	var err error
	if b.ns, err = client.Fingerprint(spec); err != nil {
		return nil, fmt.Errorf("namespace fingerprint: %w", err)
	}
	pageBytes := size / uint64(cfg.layers)
	if b.src, err = client.AllocBuffer(cfg.layers, pageBytes, uint64(cfg.blocks)); err != nil {
		return nil, fmt.Errorf("allocating the engine buffer: %w", err)
	}
	*registered = append(*registered, b.src) // freed after the session closes
	// The memcpy destination rotates over as many batches as fill the
	// Manager's RAM tier, as the Manager's frames rotate over it (eviction
	// reuses the oldest unpinned chunks): both write into memory of the same footprint, so neither
	// writes into cache lines the previous round left hot.
	b.rotation = max(1, copyCapacity(cfg)/b.batchBytes)
	if b.dst, err = client.AllocBuffer(cfg.layers, pageBytes, b.rotation*uint64(cfg.blocks)); err != nil {
		return nil, fmt.Errorf("allocating the memcpy destination: %w", err)
	}
	defer b.dst.Free()
	if b.bufID, err = c.RegisterBuffer(b.src); err != nil {
		return nil, fmt.Errorf("registering the engine buffer: %w", err)
	}
	content.FillPage(b.src.Bytes(), size)
	b.hashes = make([]client.BlockHash, cfg.blocks)
	b.pages = make([]uint32, cfg.blocks)
	for i := range b.pages {
		b.pages[i] = uint32(i)
		b.entries = append(b.entries, client.RestoreEntry{Block: uint32(i), Page: uint32(i)})
	}

	var out []copySize
	for range cfg.Repeats {
		r, err := b.once(next)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// once measures one repeat of the size: --warmup and --iters batches of
// memcpy beside Publish, then of memcpy beside Restore of the last batch
// published (leased; its first restore is checked byte for byte).
func (b *copyBench) once(next *uint64) (copySize, error) {
	c, cfg, size := b.c, b.cfg, b.batchBytes/uint64(b.cfg.blocks)
	var base, pub, res []time.Duration
	for i := range cfg.warmup + cfg.iters {
		m := b.memcpy()
		p, err := b.publish(next)
		if err != nil {
			return copySize{}, err
		}
		if i >= cfg.warmup {
			base, pub = append(base, m), append(pub, p)
		}
	}
	// The last published batch is resident: lease it and restore it
	// repeatedly. The first restore lands in a zeroed buffer and is checked.
	l, err := c.Query(b.ns, b.hashes)
	if err != nil {
		return copySize{}, fmt.Errorf("query: %w", err)
	}
	defer func() {
		if l.ID != 0 {
			c.Release(l.ID)
		}
	}()
	if int(l.Hits) != cfg.blocks {
		return copySize{}, fmt.Errorf("query of the batch just published hit %d of %d blocks", l.Hits, cfg.blocks)
	}
	clear(b.src.Bytes())
	if _, err := b.restore(l.ID); err != nil {
		return copySize{}, err
	}
	if bad := content.VerifyPage(b.src.Bytes(), size); bad != 0 {
		return copySize{}, fmt.Errorf("restored batch differs from the published one in %d bytes", bad)
	}
	for i := range cfg.warmup + cfg.iters {
		m := b.memcpy()
		r, err := b.restore(l.ID)
		if err != nil {
			return copySize{}, err
		}
		if i >= cfg.warmup {
			base, res = append(base, m), append(res, r)
		}
	}
	if err := c.Release(l.ID); err != nil {
		return copySize{}, fmt.Errorf("release: %w", err)
	}
	l.ID = 0
	out := copySize{BlockBytes: size, BatchBytes: b.batchBytes,
		MemcpyGBps: b.gbps(base), PublishGBps: b.gbps(pub), RestoreGBps: b.gbps(res)}
	if out.MemcpyGBps > 0 {
		out.PublishRatio, out.RestoreRatio = out.PublishGBps/out.MemcpyGBps, out.RestoreGBps/out.MemcpyGBps
	}
	return out, nil
}

// gbps is the batch bytes over the median duration, in GB/s.
func (b *copyBench) gbps(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return suite.GBps(b.batchBytes, uint64(d[(len(d)-1)/2]))
}

// memcpy copies the batch's bytes from src to the next destination slice
// with the baseline's threads.
func (b *copyBench) memcpy() time.Duration {
	n := b.batchBytes
	dst := b.dst.Bytes()[(b.rounds%b.rotation)*n:]
	b.rounds++
	return b.pool.copy(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(b.src.Bytes())), n)
}

// publish stores the batch under fresh hashes and times the call.
func (b *copyBench) publish(next *uint64) (time.Duration, error) {
	for i := range b.hashes {
		*next++
		b.hashes[i] = content.BlockHash(*next)
	}
	t := time.Now()
	pr, err := b.c.Publish(b.ns, b.bufID, b.hashes, b.pages)
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("publish of %d blocks: %w", len(b.hashes), err)
	}
	if int(pr.Stored) != len(b.hashes) {
		return 0, fmt.Errorf("publish of %d fresh blocks stored %d (%d present)", len(b.hashes), pr.Stored, pr.Present)
	}
	return d, nil
}

// restore copies the leased batch into src and times Restore + RestoreWait.
func (b *copyBench) restore(lease uint64) (time.Duration, error) {
	t := time.Now()
	op, err := b.c.Restore(lease, b.bufID, b.entries)
	if err == nil {
		err = b.c.RestoreWait(op, content.RestoreTimeout)
	}
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("restore of %d blocks: %w", len(b.entries), err)
	}
	return d, nil
}

func writeCopyTable(w io.Writer, rep *copyReport) error {
	tw := suite.NewBaselineTable(w, rep.header, rep.Baseline)
	fmt.Fprintln(tw, "block\tbatch\tmemcpy GB/s\tpublish GB/s\tpublish / memcpy\trestore GB/s\trestore / memcpy\t")
	for _, s := range rep.Sizes {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", humanize.IBytes(s.BlockBytes), humanize.IBytes(s.BatchBytes),
			s.MemcpyGBps, s.PublishGBps, s.PublishRatio, s.RestoreGBps, s.RestoreRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var ts []suite.Target
	for _, s := range rep.Sizes {
		for _, sub := range []struct {
			name  string
			ratio float64
		}{{"publish", s.PublishRatio}, {"restore", s.RestoreRatio}} {
			ts = append(ts, suite.Target{Name: fmt.Sprintf("%s %s ≥ %.2fx memcpy", humanize.IBytes(s.BlockBytes), sub.name, copyTarget),
				Measured: fmt.Sprintf("%.2fx", sub.ratio), Ok: sub.ratio >= copyTarget})
		}
	}
	return suite.WriteTargets(w, suite.TargetsSource, suite.TargetsInformational, ts)
}

// memcpyOnce copies n bytes from src to dst once and returns how long it took.
func memcpyOnce(dst, src unsafe.Pointer, n uint64) time.Duration {
	return client.MemcpyBench(uintptr(dst), uintptr(src), n, 1)
}
