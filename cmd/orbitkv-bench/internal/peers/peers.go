package peers

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

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/discover"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// peersConfig is the parsed, validated flag set of `orbitkv-bench peers`.
type peersConfig struct {
	json        bool
	output      string
	managerBin  string
	managerArgs []string
	sizes       []uint64 // block sizes in bytes, report order
	blocks      []int    // blocks per batch, one per size (peersBatchBlocks)
	chains      []int    // lookup chain lengths in blocks
	lookups     int      // timed lookups per chain and system
	iters       int      // timed batches per size, operation and system
	warmup      int      // untimed batches after the cold one
	python      string   // the vLLM environment's python (holds lmcache)
	driver      string   // bench/peers/lmcache_driver.py
	timeout     time.Duration
	discover    int     // timed local and round-trip discoveries per chain (MeasureDiscover); 0 = skip
	l1GiB       float64 // LMCache's --l1-size-gb; OrbitKV's RAM tier is the same bytes
}

// Defaults of `orbitkv-bench peers`: the workload bench/peers/README.md
// describes. peersChunkBytes is one LMCache chunk (256 tokens, its server's
// default --chunk-size) of the default KV shape of `lmcache bench server`,
// (2,NB,16,8,128):float16:32, i.e. 128 KiB per token.
const (
	peersChunkBytes     = 256 * 2 * 8 * 128 * 2 * 32
	peersLookupBlock    = 64 << 10 // block size of the lookup chains
	peersLayers         = 4        // OrbitKV pages per block
	peersMaxBatchBytes  = 64 << 20 // a batch holds at most this many bytes ...
	peersMaxBatchBlocks = 16       // ... and at most this many blocks
	peersLookupTarget   = 100.0    // lookup of 32 blocks ≥ 100x faster than LMCache's
	peersTransferTarget = 2.0      // store and retrieve ≥ 2x LMCache's GB/s
	peersDefaultSizes   = "64KiB,256KiB,1MiB,2MiB,32MiB"
	// peersSizeMultiple is what every block size is a multiple of: 1 KiB
	// covers both OrbitKV's peersLayers pages of a multiple of pageAlign
	// (256 bytes) and LMCache's chunk of 256 tokens of float16 K and V
	// (2 × 2 bytes × 256 = 1 KiB).
	peersSizeMultiple = 1024
)

// peersBatchBlocks is how many blocks of size bytes one batch holds: as
// many as fit in peersMaxBatchBytes, between 1 and peersMaxBatchBlocks.
func peersBatchBlocks(size uint64) int {
	return int(max(1, min(peersMaxBatchBlocks, peersMaxBatchBytes/size)))
}

func parsePeersFlags(args []string, out io.Writer) (peersConfig, error) {
	cfg := peersConfig{}
	fs := suite.StandaloneFlags("peers", out,
		"The same workload through OrbitKV (a Manager the bench starts, the Go client) and",
		"through LMCache's multiprocess server (started by bench/peers/lmcache_driver.py on",
		"127.0.0.1, driven by LMCache's own client): lookup round trips of 32, 256 and 1,000",
		"blocks, store and retrieve GB/s per block size, cold and warm, every retrieve",
		"verified byte for byte, and the ratios. Method: bench/peers/README.md.",
	)
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.output, "output", "", "write the report (JSON with --json, else the table) to this `file` instead of stdout")
	fs.StringVar(&cfg.managerBin, "manager-bin", "", "Manager `binary` to start (default: orbitkv-manager next to this binary, then ./bin/orbitkv-manager)")
	managerArgs := fs.String("manager-args", "", "extra space-separated `arguments` for the Manager the bench starts; they come last and win")
	sizes := fs.String("sizes", peersDefaultSizes, "comma-separated block `sizes` (32MiB: one LMCache chunk of its default shape)")
	chains := fs.String("chains", "32,256,1000", "comma-separated lookup chain `lengths` in blocks")
	fs.IntVar(&cfg.lookups, "lookups", 200, "`N` timed lookups per chain and system")
	fs.IntVar(&cfg.iters, "iters", 8, "`N` timed batches per size, operation and system (the median is reported)")
	fs.IntVar(&cfg.warmup, "warmup", 2, "`N` untimed batches per size, operation and system after the cold one")
	fs.StringVar(&cfg.python, "python", "", "the vLLM engine environment's python `binary`, with lmcache (default: build/venv/vllm/bin/python beside this binary's ../, then under the working directory)")
	fs.StringVar(&cfg.driver, "driver", "", "the LMCache driver script `file` (default: bench/peers/lmcache_driver.py, found as --python is)")
	fs.IntVar(&cfg.discover, "discover-iters", 20000, "`N` timed discoveries per subject and chain of 32 and 1,000 blocks (local from the mapped index, and the round trip, measured as orbitkv-bench discover does, against a Manager of its own); 0 = leave discovery out")
	fs.DurationVar(&cfg.timeout, "lmcache-timeout", 15*time.Minute, "bound on the LMCache side (server start, workload, stop)")
	if err := suite.ParseStandalone(fs, args); err != nil {
		return cfg, err
	}
	cfg.managerArgs = strings.Fields(*managerArgs)
	err := suite.FirstError(suite.Between("lookups", cfg.lookups, 10, 100000), suite.Between("iters", cfg.iters, 1, 1000),
		suite.Between("warmup", cfg.warmup, 0, 1000), suite.Between("discover-iters", cfg.discover, 0, 10000000), suite.AtLeast("lmcache-timeout", cfg.timeout, time.Minute), suite.CheckOutput(cfg.output))
	if err != nil {
		return cfg, err
	}
	cfg.sizes, err = suite.ParseSizes(*sizes, suite.BlockSizes{Multiple: peersSizeMultiple,
		Why:    fmt.Sprintf("must split into %d pages of a multiple of %d bytes and into LMCache chunks of 256 float16 K/V tokens", peersLayers, content.PageAlign),
		Blocks: 1, MaxGiB: 1, Per: "block"})
	if err != nil {
		return cfg, err
	}
	for _, s := range cfg.sizes {
		cfg.blocks = append(cfg.blocks, peersBatchBlocks(s))
	}
	cfg.chains, err = suite.ParseList(suite.ListFlag{Name: "chains", Noun: "chain length"}, *chains, func(s string) (int, error) {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || n > 4096 {
			return 0, suite.Usagef("--chains: %q must be a whole number between 1 and 4096", s)
		}
		return n, nil
	})
	if err != nil {
		return cfg, err
	}
	cfg.l1GiB = peersL1GiB(&cfg)
	return cfg, nil
}

// peersL1GiB is the cache both systems get, in GiB (LMCache takes a
// --l1-size-gb; OrbitKV's RAM tier is the same bytes): everything the run
// stores (the lookup chains and every batch of every size) over LMCache's
// eviction watermark (0.8, its server's default), in whole GiB, at least 1,
// so that neither system evicts during the run. With less, LMCache 0.5.6
// was seen leaving a stored 32 MiB batch invisible to lookups for over 30 s
// once its L1 filled (bench/peers/README.md, run 3).
func peersL1GiB(cfg *peersConfig) float64 {
	var stored uint64
	for _, n := range cfg.chains {
		stored += uint64(n) * peersLookupBlock
	}
	batches := uint64(1 + cfg.warmup + cfg.iters)
	for i, s := range cfg.sizes {
		stored += batches * s * uint64(cfg.blocks[i])
	}
	need := stored * 5 / 4 // over the 0.8 watermark
	return float64(max(1, (need+1<<30-1)>>30))
}

// findBeside returns rel under this binary's ../ if it exists there, else
// rel under the working directory, else an error naming both.
func findBeside(flagName, rel string) (string, error) {
	var tried []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "..", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if _, err := os.Stat(rel); err == nil {
		return filepath.Abs(rel)
	}
	tried = append(tried, rel)
	return "", fmt.Errorf("--%s: none of %s exists (the vLLM environment comes from `engines/deps.sh vllm` or `make deps-engines`)", flagName, strings.Join(tried, ", "))
}

// Run is `orbitkv-bench peers`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parsePeersFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	rep := newPeersReport(&cfg)
	rep.Conditions.CPUs = runtime.NumCPU()
	rep.Conditions.CPUModel = suite.CpuModel()
	fmt.Fprintf(stderr, "peers: OrbitKV side (a Manager with a %.0f GiB RAM tier) ...\n", cfg.l1GiB)
	if err := measureOrbitKV(&cfg, rep, stderr); err != nil {
		return fmt.Errorf("OrbitKV side: %w", err)
	}
	if cfg.discover > 0 {
		fmt.Fprintf(stderr, "peers: OrbitKV discovery, local and round trip (MeasureDiscover, a Manager of its own) ...\n")
		d, err := discover.MeasureDiscover(discover.DiscoverOptions{ManagerBin: cfg.managerBin, ManagerArgs: cfg.managerArgs,
			Iters: cfg.discover, Chains: []int{32, 1000}})
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		rep.addDiscover(d)
	}
	fmt.Fprintf(stderr, "peers: LMCache side (its server with a %.0f GiB L1, bounded by %v) ...\n", cfg.l1GiB, cfg.timeout)
	lm, err := runLMCacheDriver(&cfg, stderr)
	if err != nil {
		// LMCache could not run: its exact error goes in the report, never a figure.
		rep.LMCacheError = err.Error()
		fmt.Fprintf(stderr, "peers: LMCache side failed: %v\n", err)
	} else {
		rep.addLMCache(lm)
	}
	rep.finish()
	write := func(w io.Writer) error {
		if cfg.json {
			return writePeersJSON(w, rep)
		}
		return writePeersTable(w, rep)
	}
	if cfg.output == "" {
		return write(stdout)
	}
	if err := suite.WriteReportFile(cfg.output, write); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "report written to %s\n", cfg.output)
	return nil
}

// measureOrbitKV runs the workload through a Manager the bench starts and
// files the figures under "orbitkv" in rep.
func measureOrbitKV(cfg *peersConfig, rep *peersReport, stderr io.Writer) error {
	capacity := uint64(cfg.l1GiB) << 30
	m, err := managerproc.Launch(managerproc.RAMSpec(cfg.managerBin, capacity, cfg.managerArgs))
	if err != nil {
		return err
	}
	defer m.Stop()
	defer managerproc.StopOnSignal("peers", m, stderr, nil)()
	c, err := managerproc.Connect(m, "peers")
	if err != nil {
		return err
	}
	var bufs []*client.Buffer
	defer func() {
		c.Close()
		for _, b := range bufs {
			b.Free()
		}
	}()
	rep.Conditions.ManagerPid = m.Pid
	p := &peersOKV{c: c, cfg: cfg, bufs: &bufs}
	for _, n := range cfg.chains {
		var q peerQuantiles
		parks, err := countParks(m.Http, func() (err error) { q, err = p.lookups(n); return err })
		if err != nil {
			return fmt.Errorf("lookup of %d blocks: %w%s", n, err, m.ExitNote())
		}
		q.ManagerParks = parks
		rep.Lookup[peerOrbitKV][fmt.Sprint(n)] = q
		fmt.Fprintf(stderr, "peers: OrbitKV lookup of %d blocks: p50 %d ns, p99 %d ns\n", n, q.P50, q.P99)
	}
	for i, size := range cfg.sizes {
		r, err := p.transfer(size, cfg.blocks[i])
		if err != nil {
			return fmt.Errorf("%s blocks: %w%s", humanize.IBytes(size), err, m.ExitNote())
		}
		rep.addTransfer(peerOrbitKV, r)
		fmt.Fprintf(stderr, "peers: OrbitKV %s x %d: store %.2f GB/s, retrieve %.2f GB/s (warm medians)\n",
			humanize.IBytes(size), r.Blocks, r.StoreGBps, r.RetrieveGBps)
	}
	return nil
}

// countParks runs f and returns how often the Manager's dispatcher parked
// meanwhile (orbitkv_channel_parks_total of its /metrics at addr): a round
// trip that found it parked paid a futex wake-up. nil when addr is "" (the
// Manager was started without an HTTP listener) or f failed.
func countParks(addr string, f func() error) (*uint64, error) {
	if addr == "" {
		return nil, f()
	}
	before, err := managerproc.ScrapeParks(addr)
	if err != nil {
		return nil, err
	}
	if err := f(); err != nil {
		return nil, err
	}
	after, err := managerproc.ScrapeParks(addr)
	if err != nil {
		return nil, err
	}
	d := after - before
	return &d, nil
}

// peersOKV is the OrbitKV side's session and state.
type peersOKV struct {
	c    *client.Client
	cfg  *peersConfig
	bufs *[]*client.Buffer // registered buffers, freed after the session closes
	next uint64            // hash counter: every stored block is fresh
	ns   int               // namespaces made so far
}

// namespace is a fresh cache namespace (one per chain and per size, as
// LMCache's side registers one KV cache per chain and per size).
func (p *peersOKV) namespace() (client.Namespace, error) {
	p.ns++
	spec := content.Namespace
	spec.KVLayout = "orbitkv-bench-peers"
	spec.TenantSalt = fmt.Sprint(p.ns)
	ns, err := client.Fingerprint(spec)
	if err != nil {
		return ns, fmt.Errorf("namespace fingerprint: %w", err)
	}
	return ns, nil
}

// buffer allocates and registers an engine buffer of n blocks of size bytes.
func (p *peersOKV) buffer(size uint64, n int) (*client.Buffer, uint32, error) {
	b, err := client.AllocBuffer(peersLayers, size/peersLayers, uint64(n))
	if err != nil {
		return nil, 0, fmt.Errorf("allocating the engine buffer: %w", err)
	}
	*p.bufs = append(*p.bufs, b)
	id, err := p.c.RegisterBuffer(b)
	if err != nil {
		return nil, 0, fmt.Errorf("registering the engine buffer: %w", err)
	}
	return b, id, nil
}

// fresh returns n hashes never used before.
func (p *peersOKV) fresh(n int) []client.BlockHash {
	h := make([]client.BlockHash, n)
	for i := range h {
		p.next++
		h[i] = content.BlockHash(p.next)
	}
	return h
}

// store publishes hashes from pages 0..len-1 of buffer id after an untimed
// QueryBundle of them (a miss, as LMCache's side looks up before it
// stores), and returns the Publish's duration.
func (p *peersOKV) store(ns client.Namespace, id uint32, hashes []client.BlockHash) (time.Duration, error) {
	l, err := p.c.Query(ns, hashes)
	if err != nil {
		return 0, fmt.Errorf("query before publish: %w", err)
	}
	if l.ID != 0 {
		if err := p.c.Release(l.ID); err != nil {
			return 0, fmt.Errorf("release: %w", err)
		}
	}
	if l.Hits != 0 {
		return 0, fmt.Errorf("query of %d fresh blocks hit %d", len(hashes), l.Hits)
	}
	pages := make([]uint32, 0, len(hashes))
	for i := range hashes {
		pages = append(pages, uint32(i))
	}
	per := p.c.MaxPublishEntries()
	t := time.Now()
	for i := 0; i < len(hashes); i += per {
		n := min(per, len(hashes)-i)
		pr, err := p.c.Publish(ns, id, hashes[i:i+n], pages[i:i+n])
		if err != nil {
			return 0, fmt.Errorf("publish of %d blocks: %w", n, err)
		}
		if int(pr.Stored) != n {
			return 0, fmt.Errorf("publish of %d fresh blocks stored %d (%d present)", n, pr.Stored, pr.Present)
		}
	}
	return time.Since(t), nil
}

// lookups stores a chain of n blocks and times --lookups QueryBundle round
// trips of it after a tenth as many untimed ones, each a full hit whose
// lease is released untimed.
func (p *peersOKV) lookups(n int) (peerQuantiles, error) {
	ns, err := p.namespace()
	if err != nil {
		return peerQuantiles{}, err
	}
	b, id, err := p.buffer(peersLookupBlock, n)
	if err != nil {
		return peerQuantiles{}, err
	}
	content.FillPage(b.Bytes(), uint64(n))
	chain := p.fresh(n)
	if _, err := p.store(ns, id, chain); err != nil {
		return peerQuantiles{}, err
	}
	warm := max(1, p.cfg.lookups/10)
	var samples []int64
	for i := range warm + p.cfg.lookups {
		t := time.Now()
		l, err := p.c.Query(ns, chain)
		d := time.Since(t)
		if err != nil {
			return peerQuantiles{}, fmt.Errorf("query: %w", err)
		}
		if l.ID != 0 {
			if err := p.c.Release(l.ID); err != nil {
				return peerQuantiles{}, fmt.Errorf("release: %w", err)
			}
		}
		if int(l.Hits) != n {
			return peerQuantiles{}, fmt.Errorf("query of a stored chain of %d blocks hit %d", n, l.Hits)
		}
		if i >= warm {
			samples = append(samples, d.Nanoseconds())
		}
	}
	return quantilesOf(samples), nil
}

// transfer measures one block size: a cold batch, --warmup and --iters
// batches of Publish (fresh hashes, the buffer refilled with the batch's
// own content first), then as many Restores of the last batch, each into
// a zeroed buffer under a fresh lease (QueryBundle and Release untimed)
// and checked byte for byte.
func (p *peersOKV) transfer(size uint64, blocks int) (peerTransfer, error) {
	ns, err := p.namespace()
	if err != nil {
		return peerTransfer{}, err
	}
	b, id, err := p.buffer(size, blocks)
	if err != nil {
		return peerTransfer{}, err
	}
	batch := size * uint64(blocks)
	out := peerTransfer{BlockBytes: size, Blocks: blocks, BatchBytes: batch}
	var stores, restores []int64
	var last []client.BlockHash
	var seed uint64
	for i := range 1 + p.cfg.warmup + p.cfg.iters {
		seed = size<<8 + uint64(i)
		content.FillPage(b.Bytes(), seed)
		last = p.fresh(blocks)
		d, err := p.store(ns, id, last)
		if err != nil {
			return out, err
		}
		switch {
		case i == 0:
			out.StoreColdGBps = suite.GBps(batch, uint64(d.Nanoseconds()))
		case i > p.cfg.warmup:
			stores = append(stores, d.Nanoseconds())
		}
	}
	entries := make([]client.RestoreEntry, blocks)
	for i := range entries {
		entries[i] = client.RestoreEntry{Block: uint32(i), Page: uint32(i)}
	}
	for i := range 1 + p.cfg.warmup + p.cfg.iters {
		l, err := p.c.Query(ns, last)
		if err != nil {
			return out, fmt.Errorf("query: %w", err)
		}
		if int(l.Hits) != blocks {
			if l.ID != 0 {
				p.c.Release(l.ID)
			}
			return out, fmt.Errorf("query of the batch just stored hit %d of %d blocks", l.Hits, blocks)
		}
		clear(b.Bytes())
		t := time.Now()
		op, err := p.c.Restore(l.ID, id, entries)
		if err == nil {
			err = p.c.RestoreWait(op, content.RestoreTimeout)
		}
		d := time.Since(t)
		relErr := p.c.Release(l.ID)
		if err = errors.Join(err, relErr); err != nil {
			return out, fmt.Errorf("restore of %d blocks: %w", blocks, err)
		}
		if bad := content.VerifyPage(b.Bytes(), seed); bad != 0 {
			return out, fmt.Errorf("restored batch differs from the stored one in %d bytes", bad)
		}
		out.VerifiedRetrieves++
		switch {
		case i == 0:
			out.RetrieveColdGBps = suite.GBps(batch, uint64(d.Nanoseconds()))
		case i > p.cfg.warmup:
			restores = append(restores, d.Nanoseconds())
		}
	}
	out.StoreGBps = suite.GBps(batch, uint64(medianNS(stores)))
	out.RetrieveGBps = suite.GBps(batch, uint64(medianNS(restores)))
	return out, nil
}

// medianNS is the lower median of samples (sorted in place); 0 if none.
func medianNS(samples []int64) int64 {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	return samples[(len(samples)-1)/2]
}
