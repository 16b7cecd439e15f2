package transfer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// The transfer suite's targets, at the default slice size, for
// blocks of transferTargetMin and more: the engine reaches
// transferStreamTarget of a plain TCP stream of the same bytes, and
// transferOneSliceTarget times the same engine limited to one slice in
// flight.
const (
	transferStreamTarget   = 0.90
	transferOneSliceTarget = 3.0
	transferTargetMin      = 1 << 20
	// Against Mooncake's Transfer Engine: for blocks of
	// mooncakeTargetMin..mooncakeTargetMax, the engine reaches
	// transferMooncakeTarget times Mooncake's TCP transport in the same run.
	transferMooncakeTarget = 1.0
	mooncakeTargetMin      = 64 << 10
	mooncakeTargetMax      = 4 << 20
)

// transferConfig is the parsed, validated flag set of `orbitkv-bench transfer`.
type transferConfig struct {
	suite.Common
	sizes    []uint64 // block sizes, in report order
	blocks   int      // blocks per batch
	iters    int      // timed batches per size and subject
	warmup   int      // untimed batches per size and subject first
	engine   requester.EngineSpec
	mooncake mooncakeSpec
}

func parseTransferFlags(args []string, out io.Writer) (transferConfig, error) {
	var cfg transferConfig
	fs := suite.NewFlags("transfer", &cfg.Common, out,
		"Throughput of the transfer engine (gocore/transfer) on loopback: a batch of READs of",
		"--blocks blocks from a transfer.Server's segment into registered memory, as GB/s, beside",
		"a plain TCP stream of the same bytes (io.Copy over one connection into the same",
		"destination) and the same engine limited to one slice in flight (1 rail, window 1),",
		"interleaved batch by batch in one process. With --mooncake-bench, Mooncake's Transfer",
		"Engine (the wheel's transfer_engine_bench, TCP transport, a target and an initiator",
		"process on loopback) moves the same block sizes and batches after each repeat, as a peer.",
		"Starts no Manager. Method: bench/transfer/README.md.")
	sizes := fs.String("sizes", "64KiB,256KiB,1MiB,4MiB", "comma-separated block `sizes`")
	fs.IntVar(&cfg.blocks, "blocks", 32, "`N` blocks per batch")
	fs.IntVar(&cfg.iters, "iters", 20, "`N` timed batches per size and subject (the median is reported)")
	fs.IntVar(&cfg.warmup, "warmup", 3, "`N` untimed batches per size and subject first")
	fs.IntVar(&cfg.engine.Rails, "rails", 0, fmt.Sprintf("`N` data connections per peer (0: the engine's default, %d)", requester.DefaultRails))
	slice := fs.String("slice-bytes", "", "slice `size` of a READ (default: the engine's, "+limit.Size(requester.DefaultSliceBytes)+")")
	fs.IntVar(&cfg.engine.Window, "window", 0, fmt.Sprintf("`N` slices in flight per rail (0: the engine's default, %d)", requester.DefaultWindow))
	fs.StringVar(&cfg.mooncake.bin, "mooncake-bench", "", "Mooncake's transfer_engine_bench `binary` (build/venv/mooncake/lib/python3.11/site-packages/mooncake/transfer_engine_bench): measure Mooncake's TCP transport beside the engine and fill mooncake_gbps")
	fs.DurationVar(&cfg.mooncake.duration, "mooncake-duration", 3*time.Second, "one Mooncake initiator run per block size and repeat (whole seconds, 1s..1m)")
	fs.IntVar(&cfg.mooncake.threads, "mooncake-threads", 1, "`N` submitting threads of the Mooncake initiator, each a batch in flight (1: one batch at a time, as the engine is measured)")
	fs.PlotFlag("GB/s against block size")
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	if err := suite.FirstError(suite.Between("blocks", cfg.blocks, 1, 4096), suite.AtLeast("iters", cfg.iters, 1), suite.AtLeast("warmup", cfg.warmup, 0), cfg.mooncake.check()); err != nil {
		return cfg, err
	}
	if *slice != "" {
		n, err := limit.ParseSize("--slice-bytes", *slice)
		switch {
		case err != nil:
			return cfg, suite.Usagef("%v", err)
		case n > transfer.MaxSliceBytes:
			return cfg, suite.Usagef("--slice-bytes %s: want at most %s", *slice, limit.Size(transfer.MaxSliceBytes))
		}
		cfg.engine.SliceBytes = int(n)
	}
	for _, c := range []struct {
		flag string
		r    limit.Range[int]
		v    int
	}{{"rails", requester.RailsRange, cfg.engine.Rails}, {"slice-bytes", requester.SliceBytesRange, cfg.engine.SliceBytes}, {"window", requester.WindowRange, cfg.engine.Window}} {
		if c.r.Check(c.v) != nil {
			return cfg, suite.Usagef("--%s %s: want %s (0 or unset: the engine's default, %s)", c.flag, limit.Format(c.v), c.r.Want(), c.r.Zero)
		}
	}
	var err error
	cfg.sizes, err = suite.ParseSizes(*sizes, suite.BlockSizes{Multiple: 8, Why: "must be a whole multiple of 8 bytes", Blocks: cfg.blocks, MaxGiB: 2, Per: "batch"})
	if err != nil || cfg.mooncake.bin == "" {
		return cfg, err
	}
	for _, size := range cfg.sizes {
		if n := mooncakeBufferBytes(size, cfg.blocks, cfg.mooncake.threads); n > mooncakeMaxBufferBytes {
			return cfg, suite.Usagef("--mooncake-threads %d: %s blocks × %d blocks × %d threads is a %s buffer in each Mooncake process, more than %s",
				cfg.mooncake.threads, humanize.IBytes(size), cfg.blocks, cfg.mooncake.threads, humanize.IBytes(n), humanize.IBytes(mooncakeMaxBufferBytes))
		}
	}
	return cfg, nil
}

// transferSize is one row: GB/s (10^9 bytes per second) over the median
// batch of each subject, and the engine's ratios to the two baselines.
type transferSize struct {
	BlockBytes    uint64  `json:"block_bytes"`
	BatchBytes    uint64  `json:"batch_bytes"`
	OrbitKVGBps   float64 `json:"orbitkv_gbps"`
	TCPStreamGBps float64 `json:"tcp_stream_gbps"`
	OneSliceGBps  float64 `json:"one_slice_gbps"`
	// MooncakeGBps is Mooncake's Transfer Engine (its TCP transport,
	// transfer_engine_bench) on the same block size and batch: its batches'
	// bytes over its run's duration. Absent without --mooncake-bench.
	MooncakeGBps  *float64 `json:"mooncake_gbps,omitempty"`
	StreamRatio   float64  `json:"orbitkv_over_tcp_stream"`
	OneSliceRatio float64  `json:"orbitkv_over_one_slice"`
	// MooncakeRatio is a repeat's orbitkv_gbps over its mooncake_gbps;
	// absent without --mooncake-bench.
	MooncakeRatio *float64 `json:"orbitkv_over_mooncake,omitempty"`

	mooncake, mooncakeRatio float64 // what the two pointers point to once measured
}

// transferMooncake says how Mooncake was run, in the report.
type transferMooncake struct {
	Bench     string  `json:"bench"`
	DurationS float64 `json:"duration_s"`
	Threads   int     `json:"threads"`
	// Env is the MC_* variables of the bench's environment, which both
	// Mooncake processes inherit (Mooncake's tunables, e.g.
	// MC_TCP_ENABLE_CONNECTION_POOL); empty: Mooncake's defaults.
	Env    []string `json:"env"`
	Method string   `json:"method"`
}

// transferReport is the one JSON object `orbitkv-bench transfer --json` prints.
type transferReport struct {
	suite.Head
	Blocks     int               `json:"blocks"`
	Iters      int               `json:"iters"`
	Rails      int               `json:"rails"`
	SliceBytes int               `json:"slice_bytes"`
	Window     int               `json:"window"`
	Baseline   string            `json:"baseline"`
	Mooncake   *transferMooncake `json:"mooncake,omitempty"`
	Rows       []transferSize    `json:"rows"`

	header string
}

// transferBaseline says how the baselines were measured.
const transferBaseline = "tcp_stream: the batch's blocks written with io.Copy (writev of the same buffers) over one loopback TCP connection and read with io.ReadFull into the same destination, no request; one_slice: the engine with 1 rail and a window of 1, so one READ is in flight at a time"

// transferFields are the figures of one block size, each the median of
// the repeats' values.
var transferFields = []suite.FloatField[transferSize]{
	{Name: "orbitkv_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.OrbitKVGBps }},
	{Name: "tcp_stream_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.TCPStreamGBps }},
	{Name: "one_slice_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.OneSliceGBps }},
	{Name: "orbitkv_over_tcp_stream", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.StreamRatio }},
	{Name: "orbitkv_over_one_slice", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.OneSliceRatio }},
}

// transferMooncakeFields are the figures with --mooncake-bench, beside transferFields.
var transferMooncakeFields = []suite.FloatField[transferSize]{
	{Name: "mooncake_gbps", Unit: "GB/s", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.mooncake }},
	{Name: "orbitkv_over_mooncake", Unit: "ratio", Better: suite.HigherIsBetter, Get: func(s *transferSize) *float64 { return &s.mooncakeRatio }},
}

// transferMooncakeMethod says how the Mooncake figures were measured.
const transferMooncakeMethod = "per block size, one transfer_engine_bench --mode=target process (P2PHANDSHAKE metadata, TCP transport, 127.0.0.1); after one untimed initiator run of 1 s (with --warmup > 0) and after each repeat's interleaved batches, one --mode=initiator process READs batches of --blocks blocks of the size from it for the duration; mooncake_gbps is its completed batches' bytes over the duration it reports (a mean over the run, where orbitkv_gbps is over the median batch); its bytes are not checked"

// Run is `orbitkv-bench transfer`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseTransferFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	spec := cfg.engine
	rep := &transferReport{Blocks: cfg.blocks, Iters: cfg.iters, Baseline: transferBaseline,
		Rails: cmp.Or(spec.Rails, requester.DefaultRails), SliceBytes: cmp.Or(spec.SliceBytes, requester.DefaultSliceBytes), Window: cmp.Or(spec.Window, requester.DefaultWindow)}
	rep.header = fmt.Sprintf("orbitkv-bench transfer: %d CPUs", runtime.NumCPU())
	if model := suite.CpuModel(); model != "" {
		rep.header += " (" + model + ")"
	}
	rep.header += fmt.Sprintf(", source and requester in this process on loopback; %d blocks per batch, median of %d batches; engine: %d rails, %s slices, window %d",
		cfg.blocks, cfg.iters, rep.Rails, humanize.IBytes(uint64(rep.SliceBytes)), rep.Window)
	fields := transferFields
	if cfg.mooncake.bin != "" {
		fields = append(slices.Clone(fields), transferMooncakeFields...)
		rep.Mooncake = &transferMooncake{Bench: cfg.mooncake.bin, DurationS: cfg.mooncake.duration.Seconds(), Threads: cfg.mooncake.threads, Env: mooncakeEnv(), Method: transferMooncakeMethod}
		rep.header += fmt.Sprintf("; Mooncake: transfer_engine_bench, TCP, %d thread(s), %s per repeat", cfg.mooncake.threads, cfg.mooncake.duration)
		if len(rep.Mooncake.Env) > 0 {
			rep.header += " with " + strings.Join(rep.Mooncake.Env, " ")
		}
	}
	var figs []suite.Figure
	for _, size := range cfg.sizes {
		if !cfg.Json {
			fmt.Fprintf(stderr, "measuring %s blocks, %d repeats ...\n", humanize.IBytes(size), cfg.Repeats)
		}
		reps, err := measureTransfer(&cfg, size)
		if err != nil {
			return fmt.Errorf("%s blocks: %w", humanize.IBytes(size), err)
		}
		s, f := suite.MedianOver(humanize.IBytes(size), reps, fields)
		if cfg.mooncake.bin != "" {
			s.MooncakeGBps, s.MooncakeRatio = &s.mooncake, &s.mooncakeRatio
		}
		rep.Rows, figs = append(rep.Rows, s), append(figs, f...)
	}
	cfg.Finish(&rep.Head, mon, suite.ValidityInput{HotUnchecked: "the transfer suite has no hot phase"}, figs)
	err = cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeTransferTable(w, rep) })
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &rep.Head, transferCharts(rep)...))
}

// transferSubject is one line of the suite: run moves the batch once into
// dst and returns how long it took. The Mooncake subject is one
// more of these.
type transferSubject struct {
	name string
	run  func(dst []byte) (time.Duration, error)
}

// transferBench is one block size's source, destination and subjects.
type transferBench struct {
	cfg      *transferConfig
	size     uint64
	blocks   [][]byte // the source: one buffer per block, the segment's bufs
	dst      []byte   // registered with both engines; every subject lands here
	srv      *transfer.Server
	engines  []*requester.Engine
	subjects []transferSubject // in the order they run: stream, orbitkv, one slice
	closers  []func()
}

// measureTransfer measures the subjects of one block size, --repeats
// times on the same buffers, interleaved batch by batch so all see the
// same machine state, and returns one row per repeat.
func measureTransfer(cfg *transferConfig, size uint64) ([]transferSize, error) {
	b := &transferBench{cfg: cfg, size: size}
	defer b.close()
	if err := b.setup(); err != nil {
		return nil, err
	}
	batch := size * uint64(cfg.blocks)
	var target *mooncakeTarget
	if cfg.mooncake.bin != "" {
		var err error
		if target, err = startMooncakeTarget(cfg.mooncake, mooncakeBufferBytes(size, cfg.blocks, cfg.mooncake.threads)); err != nil {
			return nil, err
		}
		defer target.close()
		if cfg.warmup > 0 { // one untimed run first: the target's buffer faulted in, as the engine's warm-up batches do for ours
			warm := cfg.mooncake
			warm.duration = mooncakeMinDuration
			if _, err := runMooncakeInitiator(warm, target, size, cfg.blocks); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	var out []transferSize
	for range cfg.Repeats {
		times := make([][]time.Duration, len(b.subjects))
		for i := range cfg.warmup + cfg.iters {
			for j, s := range b.subjects {
				if i == 0 { // the first batch of each repeat is checked byte for byte
					clear(b.dst)
				}
				d, err := s.run(b.dst)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				if i == 0 {
					if bad := b.verify(); bad != 0 {
						return nil, fmt.Errorf("%s: %d bytes of the batch differ from the source", s.name, bad)
					}
				}
				if i >= cfg.warmup {
					times[j] = append(times[j], d)
				}
			}
		}
		g := func(j int) float64 {
			slices.Sort(times[j])
			return suite.GBps(batch, uint64(times[j][(len(times[j])-1)/2]))
		}
		r := transferSize{BlockBytes: size, BatchBytes: batch, TCPStreamGBps: g(0), OrbitKVGBps: g(1), OneSliceGBps: g(2)}
		if r.TCPStreamGBps > 0 {
			r.StreamRatio = r.OrbitKVGBps / r.TCPStreamGBps
		}
		if r.OneSliceGBps > 0 {
			r.OneSliceRatio = r.OrbitKVGBps / r.OneSliceGBps
		}
		if target != nil {
			res, err := runMooncakeInitiator(cfg.mooncake, target, size, cfg.blocks)
			if err != nil {
				return nil, err
			}
			r.mooncake = res.gbps(batch)
			r.mooncakeRatio = r.OrbitKVGBps / r.mooncake
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *transferBench) setup() error {
	cfg, n := b.cfg, b.cfg.blocks
	for i := range n {
		blk := make([]byte, b.size)
		content.FillPage(blk, uint64(i)+1)
		b.blocks = append(b.blocks, blk)
	}
	b.dst = make([]byte, b.size*uint64(n))
	var err error
	if b.srv, err = transfer.Listen(transfer.ServerSpec{Addr: "127.0.0.1:0"}); err != nil {
		return err
	}
	b.closers = append(b.closers, func() { b.srv.Close() })
	id, capability, err := b.srv.RegisterSegment(b.blocks, time.Now().Add(24*time.Hour))
	if err != nil {
		return err
	}
	stream, err := b.streamSubject()
	if err != nil {
		return err
	}
	one := cfg.engine
	one.Rails, one.Window = 1, 1
	b.subjects = []transferSubject{stream}
	for _, s := range []struct {
		name string
		spec requester.EngineSpec
	}{{"orbitkv", cfg.engine}, {"one_slice", one}} {
		sub, err := b.engineSubject(s.name, s.spec, id, capability)
		if err != nil {
			return err
		}
		b.subjects = append(b.subjects, sub)
	}
	return nil
}

// engineSubject is a batch of one READ per block through a fresh Engine
// of spec: SubmitTransfer, Wait, FreeBatch.
func (b *transferBench) engineSubject(name string, spec requester.EngineSpec, id uint64, capability transfer.Capability) (transferSubject, error) {
	e, err := requester.NewEngine(spec)
	if err != nil {
		return transferSubject{}, err
	}
	b.closers = append(b.closers, func() { e.Close() })
	if err := e.RegisterLocalMemory(b.dst); err != nil {
		return transferSubject{}, err
	}
	h, err := e.OpenSegment(b.srv.Addr(), id, capability)
	if err != nil {
		return transferSubject{}, err
	}
	reqs := make([]requester.Request, len(b.blocks))
	for i := range reqs {
		off := uint64(i) * b.size
		reqs[i] = requester.Request{Segment: h, Offset: off, Dst: b.dst[off : off+b.size]}
	}
	return transferSubject{name: name, run: func([]byte) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t := time.Now()
		batch, err := e.SubmitTransfer(ctx, reqs)
		if err != nil {
			return 0, err
		}
		err = e.Wait(ctx, batch)
		d := time.Since(t)
		e.FreeBatch(batch)
		return d, err
	}}, nil
}

// streamSubject is the plain stream: a sender goroutine that, per batch,
// io.Copy's the blocks (net.Buffers: writev of the same buffers) to one
// loopback TCP connection, and the caller reading them with io.ReadFull
// into dst.
func (b *transferBench) streamSubject() (transferSubject, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return transferSubject{}, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	rx, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return transferSubject{}, err
	}
	tx, ok := <-accepted
	if !ok {
		rx.Close()
		return transferSubject{}, errors.New("the stream's listener accepted nothing")
	}
	gos, sent := make(chan struct{}), make(chan error, 1)
	go func() {
		for range gos {
			bufs := net.Buffers(slices.Clone(b.blocks))
			_, err := io.Copy(tx, &bufs)
			sent <- err
		}
	}()
	b.closers = append(b.closers, func() { close(gos); tx.Close(); rx.Close() })
	return transferSubject{name: "tcp_stream", run: func(dst []byte) (time.Duration, error) {
		t := time.Now()
		gos <- struct{}{}
		_, err := io.ReadFull(rx, dst)
		d := time.Since(t)
		return d, errors.Join(err, <-sent)
	}}, nil
}

// verify returns how many bytes of dst differ from the source blocks.
func (b *transferBench) verify() uint64 {
	var bad uint64
	for i := range b.blocks {
		off := uint64(i) * b.size
		bad += content.VerifyPage(b.dst[off:off+b.size], uint64(i)+1)
	}
	return bad
}

func (b *transferBench) close() {
	for _, c := range slices.Backward(b.closers) {
		c()
	}
}

func writeTransferTable(w io.Writer, rep *transferReport) error {
	tw := suite.NewBaselineTable(w, rep.header, rep.Baseline)
	fmt.Fprintln(tw, "block\tbatch\ttcp stream GB/s\torbitkv GB/s\torbitkv / stream\tone slice GB/s\torbitkv / one slice\tmooncake GB/s\torbitkv / mooncake\t")
	for _, s := range rep.Rows {
		mc, mcRatio := "-", "-"
		if s.MooncakeGBps != nil && s.MooncakeRatio != nil {
			mc, mcRatio = fmt.Sprintf("%.2f", *s.MooncakeGBps), fmt.Sprintf("%.2f", *s.MooncakeRatio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", humanize.IBytes(s.BlockBytes), humanize.IBytes(s.BatchBytes),
			s.TCPStreamGBps, s.OrbitKVGBps, s.StreamRatio, s.OneSliceGBps, s.OneSliceRatio, mc, mcRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var ts []suite.Target
	for _, s := range rep.Rows {
		if s.MooncakeRatio != nil && s.BlockBytes >= mooncakeTargetMin && s.BlockBytes <= mooncakeTargetMax {
			ts = append(ts, suite.Target{Name: fmt.Sprintf("%s orbitkv ≥ %.1fx mooncake (TCP)", humanize.IBytes(s.BlockBytes), transferMooncakeTarget),
				Measured: fmt.Sprintf("%.2fx", *s.MooncakeRatio), Ok: *s.MooncakeRatio >= transferMooncakeTarget})
		}
		if s.BlockBytes < transferTargetMin {
			continue
		}
		b := humanize.IBytes(s.BlockBytes)
		ts = append(ts,
			suite.Target{Name: fmt.Sprintf("%s orbitkv ≥ %.2fx tcp stream", b, transferStreamTarget), Measured: fmt.Sprintf("%.2fx", s.StreamRatio), Ok: s.StreamRatio >= transferStreamTarget},
			suite.Target{Name: fmt.Sprintf("%s orbitkv ≥ %.0fx one slice in flight", b, transferOneSliceTarget), Measured: fmt.Sprintf("%.2fx", s.OneSliceRatio), Ok: s.OneSliceRatio >= transferOneSliceTarget})
	}
	if rep.SliceBytes != requester.DefaultSliceBytes {
		fmt.Fprintf(w, "note: the targets hold at the default slice size (%s); this run used %s\n", humanize.IBytes(requester.DefaultSliceBytes), humanize.IBytes(uint64(rep.SliceBytes)))
	}
	return suite.WriteTargets(w, "bench/transfer/README.md", suite.TargetsInformational, ts)
}

// transferCharts is transfer-throughput.png: GB/s against block size of
// the engine beside its two baselines.
func transferCharts(rep *transferReport) []chart.Line {
	var sizes []uint64
	orb, stream, one := chart.ThroughputSubject{Name: "orbitkv transfer engine"}, chart.ThroughputSubject{Name: "plain TCP stream (baseline)", Reference: true},
		chart.ThroughputSubject{Name: "one slice in flight (baseline)", Reference: true}
	for _, s := range rep.Rows {
		sizes = append(sizes, s.BlockBytes)
		orb.GBps, stream.GBps, one.GBps = append(orb.GBps, s.OrbitKVGBps), append(stream.GBps, s.TCPStreamGBps), append(one.GBps, s.OneSliceGBps)
	}
	subjects, names := []chart.ThroughputSubject{orb, stream, one}, []string{"orbitkv_gbps", "tcp_stream_gbps", "one_slice_gbps"}
	if rep.Mooncake != nil {
		mc := chart.ThroughputSubject{Name: "Mooncake Transfer Engine, TCP (peer)", Reference: true}
		for _, s := range rep.Rows {
			mc.GBps = append(mc.GBps, *s.MooncakeGBps)
		}
		subjects, names = append(subjects, mc), append(names, "mooncake_gbps")
	}
	note := chart.WithSpread(&rep.Head, subjects, names, len(sizes),
		func(i int) string { return humanize.IBytes(sizes[i]) })
	title := fmt.Sprintf("orbitkv-bench transfer: %d blocks per batch on loopback, %d rails, %s slices, median of %d batches%s",
		rep.Blocks, rep.Rails, humanize.IBytes(uint64(rep.SliceBytes)), rep.Iters, note)
	return []chart.Line{chart.Throughput("transfer-throughput.png", title, sizes, subjects)}
}
