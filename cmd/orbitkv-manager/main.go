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
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"github.com/orbitkv/orbitkv/hugepages"
)

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
	fs.StringVar(&c.maxBufBytes, "max-buffer-bytes", "32TiB", "engine buffer bytes all sessions together may register for the Manager to map (`size`, at most 64TiB); it bounds the Manager's virtual address space, not its memory")
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

// defaultCopyWorkers is one copy thread per CPU beyond the dispatcher's,
// at least 2 (so one large job is split across two threads) and at most 4.
func defaultCopyWorkers() int { return max(2, min(4, runtime.NumCPU()-1)) }

// flagOf names the flag that sets each Spec field, so a limit the Spec
// declares (limit.Error), or a value the system refused at start
// (limit.Refused), is reported as the flag the user typed.
var flagOf = map[string]string{
	"session.MaxSessions": "max-sessions", "channel.MaxSessions": "max-sessions",
	"session.DescCapacity": "desc-bytes", "channel.SpinWindow": "spin-window",
	"bootstrap.Path": "bootstrap-socket", "bootstrap.HelloTimeout": "hello-timeout",
	"bootstrap.MaxBufferBytes": "max-buffer-bytes",
	"manager.HTTPAddr":         "http-addr", "manager.ShutdownTimeout": "shutdown-timeout",
	"cache.MaxOpsPerSession": "max-ops-per-session", "cache.MaxOps": "max-ops",
	"cache.OpExpiry": "op-expiry", "cache.CopyWorkers": "copy-workers",
	"tier.Eviction": "eviction", "ram.CapacityBytes": "ram-capacity", "ram.ChunkBytes": "ram-chunk-bytes",
	"ram.Hugepages": "hugepages", "ssd.Dir": "ssd-dir", "ssd.CapacityBytes": "ssd-capacity",
	"ssd.SlotBytes": "ssd-slot-bytes", "ssd.IOWorkers": "ssd-io-workers", "ssd.Admission": "ssd-admission",
}

// checks collects the errors of the flags, at most one per flag, in the
// order found, so every mistake is reported at once.
type checks struct {
	fs   *flag.FlagSet
	seen map[string]bool
	errs []error
}

func newChecks(fs *flag.FlagSet) *checks { return &checks{fs: fs, seen: map[string]bool{}} }

// fail records err for flag name unless that flag already has one.
func (k *checks) fail(name string, err error) {
	if !k.seen[name] {
		k.seen[name] = true
		k.errs = append(k.errs, err)
	}
}

// add records the errors in err: each limit.Error or limit.Refused as the
// flag that set its field, with the value as typed ("--desc-bytes 3KiB:
// want ..."); every other error as it is.
func (k *checks) add(err error) {
	fields, others := limit.Split(err)
	for _, f := range fields {
		var field, tail string
		var value any
		switch e := f.(type) {
		case *limit.Error:
			field, value, tail = e.Field, e.Value, "want "+e.Want
		case *limit.Refused:
			field, value, tail = e.Field, e.Value, e.Err.Error()
		}
		name, ok := flagOf[field]
		if !ok {
			k.errs = append(k.errs, f)
			continue
		}
		v := k.fs.Lookup(name).Value.String()
		_, quoted := value.(string)
		switch {
		case v == "" && value != "":
			v = limit.Format(value) + " (derived)" // --bootstrap-socket from --listen
		case quoted:
			v = strconv.Quote(v)
		}
		k.fail(name, fmt.Errorf("--%s %s: %s", name, v, tail))
	}
	k.errs = append(k.errs, others...)
}

func (k *checks) err() error { return errors.Join(k.errs...) }

// size parses a size flag; a flag that does not parse is recorded and
// reads 0.
func (k *checks) size(name, v, examples string) uint64 {
	n, err := humanize.ParseBytes(v)
	if err != nil {
		k.fail(name, fmt.Errorf("--%s %q: not a size (examples: %s; KiB = 1024 bytes, kB = 1000)", name, v, examples))
	}
	return n
}

// spec turns the flags into a manager.Spec. It checks only what a Spec
// cannot: that each value parses, and that flags whose Spec field takes 0
// as "the default" are not 0 (their defaults are spelled out in --help:
// CheckSet of the field's declared Range). The limits are the Spec's.
func spec(c *config, k *checks, log *slog.Logger) manager.Spec {
	epoch, serviceID := randomEpoch()
	s := manager.Spec{Epoch: epoch, HTTPAddr: c.httpAddr, ShutdownTimeout: c.shutdownWait, Logger: log,
		Session:   session.Spec{MaxSessions: uint32(min(c.maxSessions, math.MaxUint32))},
		Channel:   channel.Spec{SpinWindow: c.spinWindow},
		Bootstrap: bootstrap.Config{Path: c.socket, ServiceID: serviceID, HelloTimeout: c.helloTimeout, Version: buildinfo.Get().Version},
	}
	var err error
	if s.Channel.PollMode, err = channel.ParsePollMode(c.pollMode); err != nil {
		k.fail("poll-mode", fmt.Errorf("--poll-mode: %w", err))
	}
	s.Session.DescCapacity = uint32(min(k.size("desc-bytes", c.descBytes, "64KiB, 1MiB"), math.MaxUint32))
	s.Bootstrap.MaxBufferBytes = k.size("max-buffer-bytes", c.maxBufBytes, "32TiB, 512GiB")
	if s.Bootstrap.Path == "" {
		if s.Bootstrap.Path, err = lifecycle.SocketPath(c.listen); err != nil {
			k.fail("listen", fmt.Errorf("--listen %q: %w", c.listen, err))
		}
	}
	cs := cache.Spec{CopyWorkers: c.copyWorkers, MaxOpsPerSession: c.maxOpsSess, MaxOps: c.maxOps, OpExpiry: c.opExpiry,
		Clock: failpoint.Clock, Tiers: tier.Spec{Eviction: c.eviction, RAM: ram.Spec{Prefault: c.prefault}}}
	cs.Tiers.RAM.CapacityBytes = k.size("ram-capacity", c.ramCapacity, "4GiB, 512MiB")
	cs.Tiers.RAM.ChunkBytes = k.size("ram-chunk-bytes", c.chunkBytes, "16KiB, 2MiB")
	if cs.Tiers.RAM.Hugepages, err = hugepages.ParseMode(c.hugepages); err != nil {
		k.fail("hugepages", fmt.Errorf("--hugepages %q: want require, prefer or off", c.hugepages))
	}
	if c.leaseBudget != "" {
		if cs.LeaseBudget = k.size("lease-budget", c.leaseBudget, "4GiB, 512MiB"); cs.LeaseBudget == 0 {
			k.fail("lease-budget", fmt.Errorf("--lease-budget %q: want a size above 0 (examples: 4GiB, 512MiB)", c.leaseBudget))
		}
	}
	if cs.Tiers.WarmupBudget = k.size("warmup-budget", c.warmupBudget, "256MiB, 1GiB"); cs.Tiers.WarmupBudget == 0 {
		k.fail("warmup-budget", fmt.Errorf("--warmup-budget %q: want a size above 0 (examples: 256MiB, 1GiB)", c.warmupBudget))
	}
	k.add(errors.Join(
		manager.ShutdownTimeoutRange.CheckSet(c.shutdownWait),
		bootstrap.HelloTimeoutRange.CheckSet(c.helloTimeout),
		bootstrap.MaxBufferBytesRange.CheckSet(s.Bootstrap.MaxBufferBytes),
		cache.MaxOpsPerSessionRange.CheckSet(c.maxOpsSess),
		cache.MaxOpsRange.CheckSet(c.maxOps),
		cache.OpExpiryRange.CheckSet(c.opExpiry),
		limit.Check(c.eviction != "", "tier.Eviction", c.eviction, "one of "+strings.Join(evict.Names(), ", ")),
	))
	if c.ssdDir != "" {
		sp := ssd.Spec{Dir: c.ssdDir, Admission: c.ssdAdmission, IOWorkers: c.ssdWorkers}
		k.add(ssd.IOWorkersRange.CheckSet(c.ssdWorkers))
		sp.CapacityBytes = k.size("ssd-capacity", c.ssdCapacity, "64GiB, 2TiB")
		sp.SlotBytes = k.size("ssd-slot-bytes", c.ssdSlot, "64KiB, 2MiB")
		cs.Tiers.SSD = &sp
	}
	s.Cache = &cs
	return s
}

// validate builds the Spec from the flags and validates it once; it
// reports every flag in error, each naming its limit.
func validate(c *config, fs *flag.FlagSet, log *slog.Logger) (manager.Spec, error) {
	k := newChecks(fs)
	s := spec(c, k, log)
	k.add(s.Validate())
	return s, k.err()
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
		fmt.Print(buildinfo.Get().String("orbitkv-manager"))
		fmt.Printf("abi: %d, bootstrap protocol: %d\n", abi.Version, abi.BootstrapVersion)
		return
	}
	log, err := newLogger(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orbitkv-manager:", err)
		os.Exit(2)
	}
	s, err := validate(c, fs, log)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "orbitkv-manager:", line)
		}
		os.Exit(2)
	}
	logBuild(log)
	m, err := manager.New(s)
	if err != nil {
		k := newChecks(fs)
		k.add(err)
		log.Error("manager failed", slog.Any("err", k.err()))
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch err := m.Run(ctx); {
	case errors.Is(err, manager.ErrShutdownForced):
		os.Exit(exitForced) // nothing freed: the process exit unmaps it
	case err != nil:
		log.Error("manager failed", slog.Any("err", err))
		os.Exit(1)
	}
}

// logBuild logs the build on the first line of a start; a failpoint build
// logs a warning, so it is never mistaken for a production binary.
func logBuild(log *slog.Logger) {
	b := buildinfo.Get()
	attrs := []any{slog.String("version", b.Version), slog.String("commit", b.Commit),
		slog.String("built", b.Date), slog.String("go", b.GoVersion), slog.Bool("failpoints", b.Failpoints)}
	if b.Failpoints {
		log.Warn("orbitkv-manager starting: failpoint build (tests only)", attrs...)
		return
	}
	log.Info("orbitkv-manager starting", attrs...)
}

// exitForced is the exit status of a shutdown that ran past --shutdown-timeout.
const exitForced = 3

func randomEpoch() (uint64, [16]byte) {
	var b [24]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand docs)
	var id [16]byte
	copy(id[:], b[8:])
	return binary.LittleEndian.Uint64(b[:8]) | 1, id // nonzero
}
