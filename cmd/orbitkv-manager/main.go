// Command orbitkv-manager is the OrbitKV node-local KV-cache Manager.
//
// It serves inference processes on this host through a mode-0600 Unix
// bootstrap socket and per-session shared-memory slots (DESIGN.md §3, §5).
// Run with --help for the flags.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"github.com/orbitkv/orbitkv/hugepages"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `orbitkv-manager: the OrbitKV node-local KV-cache Manager.

Inference processes on this host connect through a Unix socket (mode 0600,
same uid only), receive a sealed shared-memory slot, an eventfd and the
doorbell, and then exchange fixed 64-byte messages with the Manager.

Usage:
  orbitkv-manager [flags]

Examples:
  orbitkv-manager                                    # socket /tmp/orbitkv-127.0.0.1-7470.sock
  orbitkv-manager --poll-mode spin                   # lowest latency, one core busy
  orbitkv-manager --ram-capacity 64GiB --copy-workers 8
  orbitkv-manager --bootstrap-socket /run/okv.sock --http-addr ""

Flags:
`

type config struct {
	listen       string
	socket       string
	pollMode     string
	spinWindow   time.Duration
	httpAddr     string
	maxSessions  uint
	descBytes    string
	helloTimeout time.Duration
	logLevel     string
	logFormat    string
	showVersion  bool
	ramCapacity  string
	chunkBytes   string
	copyWorkers  int
	prefault     bool
	maxBufBytes  string
	hugepages    string
	eviction     string
	ssdDir       string
	ssdCapacity  string
	ssdSlot      string
	ssdAdmission string
	ssdWorkers   int
	maxOpsSess   int
	maxOps       int
	opExpiry     time.Duration
	leaseBudget  string
	warmupBudget string
	shutdownWait time.Duration
}

func parseFlags(args []string) (*config, *flag.FlagSet, error) {
	c := &config{}
	fs := flag.NewFlagSet("orbitkv-manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // main prints errors and, for --help, the usage
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7470", "`host:port` this Manager is known by; the bootstrap socket path /tmp/orbitkv-<host>-<port>.sock is derived from it (no TCP port is opened in this build)")
	fs.StringVar(&c.socket, "bootstrap-socket", "", "bootstrap Unix socket `path` (default: derived from --listen)")
	fs.StringVar(&c.pollMode, "poll-mode", "adaptive", "how the dispatcher waits for requests: spin (dedicated core), adaptive (spin for --spin-window after the last request, then park), park")
	fs.DurationVar(&c.spinWindow, "spin-window", 50*time.Microsecond, "adaptive mode: how long to spin after the last request before parking (`duration` with a unit, e.g. 50us; 0..1s)")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:7471", "loopback `host:port` for /health and /metrics; empty disables")
	fs.UintVar(&c.maxSessions, "max-sessions", 1024, "most concurrent sessions (`count`, 1..4095)")
	fs.StringVar(&c.descBytes, "desc-bytes", "64KiB", "descriptor area per session slot (`size`: 4KiB..64MiB, multiple of 4KiB)")
	fs.DurationVar(&c.helloTimeout, "hello-timeout", 5*time.Second, "how long a new connection may take to send its hello (`duration`)")
	fs.StringVar(&c.ramCapacity, "ram-capacity", "4GiB", "bytes of the RAM tier (`size`: 4GiB, 512MiB; KiB = 1024 bytes); committed at start")
	fs.StringVar(&c.chunkBytes, "ram-chunk-bytes", "16KiB", "RAM tier allocation unit (`size`, a multiple of 4KiB in 4KiB..64MiB); a block takes whole chunks")
	fs.IntVar(&c.copyWorkers, "copy-workers", defaultCopyWorkers(), "native copy threads for publish and restore (`count`, 1..64)")
	fs.StringVar(&c.eviction, "eviction", evict.Default, "RAM tier eviction `policy`: "+strings.Join(evict.Names(), ", ")+" (orbitkv-bench policy compares them)")
	fs.StringVar(&c.ssdDir, "ssd-dir", "", "`directory` of the SSD tier on a filesystem that takes O_DIRECT (empty: no SSD tier); its blocks survive a restart")
	fs.StringVar(&c.ssdCapacity, "ssd-capacity", "64GiB", "bytes of the SSD tier's data file (`size`), preallocated")
	fs.StringVar(&c.ssdSlot, "ssd-slot-bytes", "64KiB", "largest block the SSD tier stores (`size`, a multiple of 4KiB); every block takes a slot of this size plus a 4 KiB header, so set it to the engine's block size")
	fs.StringVar(&c.ssdAdmission, "ssd-admission", "all", "which evicted blocks are written to SSD: all, or second-hit (a block evicted twice)")
	fs.IntVar(&c.ssdWorkers, "ssd-io-workers", 4, "O_DIRECT I/Os in flight on the SSD tier (`count`, 1..256)")
	fs.StringVar(&c.maxBufBytes, "max-buffer-bytes", "32TiB", "engine buffer bytes all sessions together may register for the Manager to map (`size`, 1GiB..64TiB); it bounds the Manager's virtual address space, not its memory")
	fs.IntVar(&c.maxOpsSess, "max-ops-per-session", cache.DefaultMaxOpsPerSession, "operations (query tickets, restores) one session may hold at once (`count`, 1..1048576); beyond it they answer Unadmitted")
	fs.IntVar(&c.maxOps, "max-ops", cache.DefaultMaxOps, "operations all sessions together may hold at once (`count`, 1..1048576)")
	fs.DurationVar(&c.opExpiry, "op-expiry", ticket.DefaultOpExpiry, "how long a query ticket or an unpolled restore result lives after its latest submission (`duration`, 1s..24h); a late poll then answers Timeout")
	fs.StringVar(&c.leaseBudget, "lease-budget", "", "bytes leases and restores in flight may reserve (`size`; empty: --ram-capacity); a ticket beyond it waits (Loading), an untracked query answers Unadmitted")
	fs.StringVar(&c.warmupBudget, "warmup-budget", "256MiB", "bytes of SSD reads in flight for warm-ups and unawaited chain tails (`size`); beyond it warming is skipped")
	fs.BoolVar(&c.prefault, "prefault", true, "pre-fault the RAM tier at start so steady-state copies take no page faults")
	fs.StringVar(&c.hugepages, "hugepages", "prefer", "RAM tier on 2 MiB hugetlb pages: require (fail without enough free ones; reserve them with vm.nr_hugepages), prefer (else an ordinary memfd with MADV_HUGEPAGE; the reason is logged and in metrics) or off")
	fs.DurationVar(&c.shutdownWait, "shutdown-timeout", 10*time.Second, "after SIGTERM, how long closing sessions and stopping the cache may take (`duration`, 1s..10m); past it the Manager logs the SSD reads still stuck and exits with status 3 without freeing the memory they may write")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return c, fs, nil
}

func newLogger(c *config) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", c.logFormat)
}

// settings are the validated flag values.
type settings struct {
	mode        channel.PollMode
	descBytes   uint32
	socket      string
	maxSessions uint32
	cache       cache.Spec
	maxBufBytes uint64
}

// defaultCopyWorkers is one copy thread per CPU beyond the dispatcher's,
// at least 2 (so one large job is split across two threads) and at most 4.
func defaultCopyWorkers() int { return max(2, min(4, runtime.NumCPU()-1)) }

// validate checks every flag against its limit; each error names the flag.
func validate(c *config) (*settings, error) {
	st := &settings{}
	var err error
	if st.mode, err = channel.ParsePollMode(c.pollMode); err != nil {
		return nil, fmt.Errorf("--poll-mode: %w", err)
	}
	if c.spinWindow < 0 || c.spinWindow > time.Second {
		return nil, fmt.Errorf("--spin-window %v: want 0..1s", c.spinWindow)
	}
	if c.maxSessions < 1 || c.maxSessions > abi.ControlSlot {
		return nil, fmt.Errorf("--max-sessions %d: want 1..%d", c.maxSessions, abi.ControlSlot)
	}
	st.maxSessions = uint32(c.maxSessions)
	desc, err := humanize.ParseBytes(c.descBytes)
	if err != nil {
		return nil, fmt.Errorf("--desc-bytes %q: not a size (examples: 64KiB, 1MiB; KiB = 1024 bytes, kB = 1000)", c.descBytes)
	}
	if desc < 4096 || desc > 64<<20 || desc%4096 != 0 {
		return nil, fmt.Errorf("--desc-bytes %s (%d bytes): want a multiple of 4KiB in 4KiB..64MiB", c.descBytes, desc)
	}
	st.descBytes = uint32(desc)
	if c.shutdownWait < time.Second || c.shutdownWait > 10*time.Minute {
		return nil, fmt.Errorf("--shutdown-timeout %v: want 1s..10m", c.shutdownWait)
	}
	if c.helloTimeout <= 0 || c.helloTimeout > time.Minute {
		return nil, fmt.Errorf("--hello-timeout %v: want more than 0 and at most 1m", c.helloTimeout)
	}
	capBytes, err := humanize.ParseBytes(c.ramCapacity)
	if err != nil {
		return nil, fmt.Errorf("--ram-capacity %q: not a size (examples: 4GiB, 512MiB)", c.ramCapacity)
	}
	chunk, err := humanize.ParseBytes(c.chunkBytes)
	if err != nil {
		return nil, fmt.Errorf("--ram-chunk-bytes %q: not a size (examples: 16KiB, 2MiB)", c.chunkBytes)
	}
	st.cache = cache.Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: capBytes, ChunkBytes: chunk, Prefault: c.prefault}, Eviction: c.eviction}, CopyWorkers: c.copyWorkers}
	if c.maxOpsSess < 1 || c.maxOpsSess > cache.MaxOpsLimit {
		return nil, fmt.Errorf("--max-ops-per-session %d: want 1..%d", c.maxOpsSess, cache.MaxOpsLimit)
	}
	if c.maxOps < 1 || c.maxOps > cache.MaxOpsLimit {
		return nil, fmt.Errorf("--max-ops %d: want 1..%d", c.maxOps, cache.MaxOpsLimit)
	}
	if c.opExpiry < time.Second || c.opExpiry > 24*time.Hour {
		return nil, fmt.Errorf("--op-expiry %v: want 1s..24h", c.opExpiry)
	}
	st.cache.MaxOpsPerSession, st.cache.MaxOps, st.cache.OpExpiry = c.maxOpsSess, c.maxOps, c.opExpiry
	if c.leaseBudget != "" {
		if st.cache.LeaseBudget, err = humanize.ParseBytes(c.leaseBudget); err != nil || st.cache.LeaseBudget == 0 {
			return nil, fmt.Errorf("--lease-budget %q: want a size above 0 (examples: 4GiB, 512MiB)", c.leaseBudget)
		}
	}
	if st.cache.Tiers.WarmupBudget, err = humanize.ParseBytes(c.warmupBudget); err != nil || st.cache.Tiers.WarmupBudget == 0 {
		return nil, fmt.Errorf("--warmup-budget %q: want a size above 0 (examples: 256MiB, 1GiB)", c.warmupBudget)
	}
	st.cache.Clock = failpoint.Clock
	if !slices.Contains(evict.Names(), c.eviction) {
		return nil, fmt.Errorf("--eviction %q: want one of %s", c.eviction, strings.Join(evict.Names(), ", "))
	}
	if err := (ram.Spec{CapacityBytes: capBytes, ChunkBytes: chunk}).Validate(); err != nil {
		return nil, fmt.Errorf("--ram-capacity %s / --ram-chunk-bytes %s: %w", c.ramCapacity, c.chunkBytes, err)
	}
	if st.cache.Tiers.RAM.Hugepages, err = hugepages.ParseMode(c.hugepages); err != nil {
		return nil, fmt.Errorf("--hugepages %q: want require, prefer or off", c.hugepages)
	}
	if c.copyWorkers < 1 || c.copyWorkers > copier.MaxWorkers {
		return nil, fmt.Errorf("--copy-workers %d: want 1..%d", c.copyWorkers, copier.MaxWorkers)
	}
	if c.ssdDir != "" {
		sp := ssd.Spec{Dir: c.ssdDir, Admission: c.ssdAdmission, IOWorkers: c.ssdWorkers}
		if sp.CapacityBytes, err = humanize.ParseBytes(c.ssdCapacity); err != nil {
			return nil, fmt.Errorf("--ssd-capacity %q: not a size (examples: 64GiB, 2TiB)", c.ssdCapacity)
		}
		if sp.SlotBytes, err = humanize.ParseBytes(c.ssdSlot); err != nil {
			return nil, fmt.Errorf("--ssd-slot-bytes %q: not a size (examples: 64KiB, 2MiB)", c.ssdSlot)
		}
		if c.ssdWorkers < 1 || c.ssdWorkers > ssd.MaxIOWorkers {
			return nil, fmt.Errorf("--ssd-io-workers %d: want 1..%d", c.ssdWorkers, ssd.MaxIOWorkers)
		}
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("--ssd-dir/--ssd-capacity/--ssd-slot-bytes/--ssd-admission: %w", err)
		}
		st.cache.Tiers.SSD = &sp
	}
	if st.maxBufBytes, err = humanize.ParseBytes(c.maxBufBytes); err != nil {
		return nil, fmt.Errorf("--max-buffer-bytes %q: not a size (examples: 32TiB, 512GiB)", c.maxBufBytes)
	}
	if st.maxBufBytes < 1<<30 || st.maxBufBytes > 64<<40 {
		return nil, fmt.Errorf("--max-buffer-bytes %s: want 1GiB..64TiB (half of the 128 TiB address space at most)", c.maxBufBytes)
	}
	st.socket = c.socket
	if st.socket == "" {
		if st.socket, err = lifecycle.SocketPath(c.listen); err != nil {
			return nil, fmt.Errorf("--listen %q: %w", c.listen, err)
		}
	} else if len(st.socket) > lifecycle.MaxSocketPath {
		return nil, fmt.Errorf("--bootstrap-socket: path is %d bytes, the limit for a Unix socket is %d", len(st.socket), lifecycle.MaxSocketPath)
	}
	return st, nil
}

func main() {
	c, fs, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "orbitkv-manager: %v\nRun 'orbitkv-manager --help' for the flags.\n", err)
		os.Exit(2)
	}
	if c.showVersion {
		fmt.Printf("orbitkv-manager %s (abi %d, bootstrap %d)\n", version, abi.Version, abi.BootstrapVersion)
		return
	}
	log, err := newLogger(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orbitkv-manager:", err)
		os.Exit(2)
	}
	st, err := validate(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orbitkv-manager:", err)
		os.Exit(2)
	}
	if err := run(c, st, log); err != nil {
		log.Error("manager failed", slog.Any("err", err))
		os.Exit(1)
	}
}

// exitForced is the exit status of a shutdown that ran past --shutdown-timeout.
const exitForced = 3

// waitUntil waits for done until deadline; it reports whether done closed.
func waitUntil(deadline time.Time, done <-chan struct{}) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// maxStuckLines bounds the SSD I/Os forceExit logs one by one.
const maxStuckLines = 32

// forceExit ends a shutdown that ran past its deadline: it logs what still
// runs (each SSD I/O not finished: slot, file offset, bytes, age) and exits
// with exitForced. Nothing is freed: the RAM tier, staging buffers and
// session mappings stay mapped until the process is gone, because a stuck
// read may still write them (DESIGN.md §6 rule 9). The kernel may hold the
// process until an uninterruptible read returns; nothing waits for it.
func forceExit(log *slog.Logger, wait time.Duration, why string, svc *cache.Service) {
	var ios []ssd.IO
	if svc != nil {
		ios = svc.SSDOutstanding()
	}
	reads, issued := 0, 0
	for i, x := range ios {
		if x.Op != "write" {
			reads++
		}
		if x.Issued {
			issued++
		}
		if i < maxStuckLines {
			log.Error("shutdown: ssd i/o still outstanding", slog.String("op", x.Op), slog.Bool("in_kernel", x.Issued),
				slog.Uint64("slot", uint64(x.Slot)), slog.Int64("offset", x.Offset), slog.Uint64("bytes", x.Bytes),
				slog.Duration("age", x.Age.Round(time.Millisecond)))
		}
	}
	log.Error("shutdown forced: exiting without freeing memory outstanding reads may write",
		slog.String("reason", why), slog.Duration("shutdown_timeout", wait),
		slog.Int("stuck_reads", reads), slog.Int("ssd_ios", len(ios)), slog.Int("in_kernel", issued),
		slog.Int("not_logged", max(0, len(ios)-maxStuckLines)), slog.Int("exit_status", exitForced))
	os.Exit(exitForced)
}

func randomEpoch() (uint64, [16]byte) {
	var b [24]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand docs)
	var id [16]byte
	copy(id[:], b[8:])
	return binary.LittleEndian.Uint64(b[:8]) | 1, id // nonzero
}

func run(c *config, st *settings, log *slog.Logger) error {
	mode, path := st.mode, st.socket
	epoch, serviceID := randomEpoch()
	cs := st.cache
	prefaultStart := time.Now()
	var health *healthState // set before the first client can ask
	m, err := manager.New(manager.Spec{Epoch: epoch, Logger: log,
		Session: session.Spec{MaxSessions: st.maxSessions, DescCapacity: st.descBytes},
		Channel: channel.Spec{MaxSessions: st.maxSessions, PollMode: mode, SpinWindow: c.spinWindow},
		Cache:   &cs,
		Bootstrap: bootstrap.Config{Path: path, ServiceID: serviceID, HelloTimeout: c.helloTimeout,
			Health: func() *lifecyclepb.HealthReply { return health.reply() }, Version: version, MaxBufferBytes: st.maxBufBytes},
	})
	if err != nil {
		return err
	}
	disp, svc, table, srv := m.Dispatcher, m.Cache, m.Table, m.Server
	started := time.Now()
	health = newHealth(disp, svc, mode, started, serviceID)
	rs := svc.Stats()
	log.Info("ram tier ready", slog.String("capacity", humanize.IBytes(cs.Tiers.RAM.CapacityBytes)),
		slog.String("chunk", humanize.IBytes(cs.Tiers.RAM.ChunkBytes)), slog.Bool("prefault", cs.Tiers.RAM.Prefault),
		slog.String("hugepages", cs.Tiers.RAM.Hugepages.String()), slog.Bool("huge", rs.RAMHuge), slog.String("hugepages_fallback", rs.RAMFallback),
		slog.Duration("took", time.Since(prefaultStart)), slog.Int("copy_workers", cs.CopyWorkers),
		slog.String("eviction", cs.Tiers.Eviction))
	if cs.Tiers.SSD != nil {
		log.Info("ssd tier ready", slog.String("dir", cs.Tiers.SSD.Dir), slog.String("capacity", humanize.IBytes(rs.SSD.CapacityBytes)),
			slog.String("slot", humanize.IBytes(cs.Tiers.SSD.SlotBytes)), slog.Uint64("recovered_blocks", rs.SSD.Recovered),
			slog.String("admission", cs.Tiers.SSD.Admission))
	}
	var httpSrv *httpServer
	if c.httpAddr != "" {
		if httpSrv, err = startHTTP(c.httpAddr, health, table, disp, svc, log); err != nil {
			m.Close()
			return err
		}
	}
	log.Info("orbitkv-manager serving", slog.String("socket", path), slog.String("poll_mode", mode.String()),
		slog.Duration("spin_window", c.spinWindow), slog.String("http", c.httpAddr),
		slog.Uint64("epoch", epoch), slog.Uint64("max_sessions", uint64(c.maxSessions)),
		slog.String("desc_bytes", humanize.IBytes(uint64(st.descBytes))), slog.String("version", version))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	select {
	case <-ctx.Done():
		log.Info("shutdown requested; closing sessions", slog.Int("sessions", table.Len()))
	case err = <-serveErr:
		log.Error("bootstrap server stopped", slog.Any("err", err))
	}
	health.setDraining()
	// Every wait below shares one deadline: an SSD read the disk never
	// answers keeps the cache's Close waiting (its frames may still be
	// written), and the Manager then exits rather than wait with it.
	deadline := time.Now().Add(c.shutdownWait)
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }() // sessions first: each is detached and released
	if !waitUntil(deadline, closed) {
		srv.RemoveSocket() // srv.Close removes it only once every session is detached
		forceExit(log, c.shutdownWait, "sessions did not finish detaching", svc)
	}
	if !waitUntil(deadline, m.StopDispatcher()) {
		forceExit(log, c.shutdownWait, "the cache did not stop", svc)
	}
	m.Free()
	if httpSrv != nil {
		httpSrv.shutdown()
	}
	log.Info("orbitkv-manager stopped", slog.Uint64("requests", disp.Requests()), slog.Duration("uptime", time.Since(started)))
	return err
}
