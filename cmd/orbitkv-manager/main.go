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
// declares (limit.Error) is reported as the flag the user typed.
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

// flagErrors rewrites each limit.Error in err as the flag that set the
// field, with the value as typed ("--desc-bytes 3KiB: want ..."), one per
// flag; other errors stay as they are.
func flagErrors(fs *flag.FlagSet, err error) error {
	lims := limit.Errors(err)
	if len(lims) == 0 {
		return err
	}
	var out []error
	seen := map[string]bool{}
	for _, e := range lims {
		name, ok := flagOf[e.Field]
		switch {
		case !ok:
			out = append(out, e)
		case !seen[name]:
			seen[name] = true
			v := fs.Lookup(name).Value.String()
			if _, quoted := e.Value.(string); quoted {
				v = strconv.Quote(v)
			}
			out = append(out, fmt.Errorf("--%s %s: want %s", name, v, e.Want))
		}
	}
	return errors.Join(out...)
}

// size parses a size flag; "" is 0 when empty is allowed.
func size(name, v, examples string) (uint64, error) {
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: not a size (examples: %s; KiB = 1024 bytes, kB = 1000)", name, v, examples)
	}
	return n, nil
}

// spec turns the flags into a manager.Spec. It checks only what a Spec
// cannot: that each value parses, and that flags whose Spec field takes 0
// as "default" are not 0 (their defaults are spelled out in --help). The
// limits are the Spec's (manager.Spec.Validate).
func spec(c *config, log *slog.Logger) (manager.Spec, error) {
	epoch, serviceID := randomEpoch()
	s := manager.Spec{Epoch: epoch, HTTPAddr: c.httpAddr, ShutdownTimeout: c.shutdownWait, Logger: log,
		Session:   session.Spec{MaxSessions: uint32(min(c.maxSessions, math.MaxUint32))},
		Channel:   channel.Spec{SpinWindow: c.spinWindow},
		Bootstrap: bootstrap.Config{Path: c.socket, ServiceID: serviceID, HelloTimeout: c.helloTimeout, Version: version},
	}
	var err error
	if s.Channel.PollMode, err = channel.ParsePollMode(c.pollMode); err != nil {
		return s, fmt.Errorf("--poll-mode: %w", err)
	}
	if c.shutdownWait == 0 {
		return s, errors.New("--shutdown-timeout 0s: want 1s..10m")
	}
	if c.helloTimeout == 0 {
		return s, fmt.Errorf("--hello-timeout 0s: want more than 0 and at most %v", bootstrap.MaxHelloTimeout)
	}
	desc, err := size("desc-bytes", c.descBytes, "64KiB, 1MiB")
	if err != nil {
		return s, err
	}
	s.Session.DescCapacity = uint32(min(desc, math.MaxUint32))
	if s.Bootstrap.MaxBufferBytes, err = size("max-buffer-bytes", c.maxBufBytes, "32TiB, 512GiB"); err != nil {
		return s, err
	}
	if s.Bootstrap.Path == "" {
		if s.Bootstrap.Path, err = lifecycle.SocketPath(c.listen); err != nil {
			return s, fmt.Errorf("--listen %q: %w", c.listen, err)
		}
	}
	cs := cache.Spec{CopyWorkers: c.copyWorkers, MaxOpsPerSession: c.maxOpsSess, MaxOps: c.maxOps, OpExpiry: c.opExpiry,
		Clock: failpoint.Clock, Tiers: tier.Spec{Eviction: c.eviction, RAM: ram.Spec{Prefault: c.prefault}}}
	switch {
	case c.maxOpsSess == 0:
		return s, fmt.Errorf("--max-ops-per-session 0: want 1..%d", cache.MaxOpsLimit)
	case c.maxOps == 0:
		return s, fmt.Errorf("--max-ops 0: want 1..%d", cache.MaxOpsLimit)
	case c.opExpiry == 0:
		return s, fmt.Errorf("--op-expiry 0s: want %v..%v", cache.MinOpExpiry, cache.MaxOpExpiry)
	}
	if cs.Tiers.RAM.CapacityBytes, err = size("ram-capacity", c.ramCapacity, "4GiB, 512MiB"); err != nil {
		return s, err
	}
	if cs.Tiers.RAM.ChunkBytes, err = size("ram-chunk-bytes", c.chunkBytes, "16KiB, 2MiB"); err != nil {
		return s, err
	}
	if cs.Tiers.RAM.Hugepages, err = hugepages.ParseMode(c.hugepages); err != nil {
		return s, fmt.Errorf("--hugepages %q: want require, prefer or off", c.hugepages)
	}
	if c.leaseBudget != "" {
		if cs.LeaseBudget, err = size("lease-budget", c.leaseBudget, "4GiB, 512MiB"); err != nil || cs.LeaseBudget == 0 {
			return s, fmt.Errorf("--lease-budget %q: want a size above 0 (examples: 4GiB, 512MiB)", c.leaseBudget)
		}
	}
	if cs.Tiers.WarmupBudget, err = size("warmup-budget", c.warmupBudget, "256MiB, 1GiB"); err != nil || cs.Tiers.WarmupBudget == 0 {
		return s, fmt.Errorf("--warmup-budget %q: want a size above 0 (examples: 256MiB, 1GiB)", c.warmupBudget)
	}
	if c.ssdDir != "" {
		sp := ssd.Spec{Dir: c.ssdDir, Admission: c.ssdAdmission, IOWorkers: c.ssdWorkers}
		if c.ssdWorkers == 0 {
			return s, fmt.Errorf("--ssd-io-workers 0: want 1..%d", ssd.MaxIOWorkers)
		}
		if sp.CapacityBytes, err = size("ssd-capacity", c.ssdCapacity, "64GiB, 2TiB"); err != nil {
			return s, err
		}
		if sp.SlotBytes, err = size("ssd-slot-bytes", c.ssdSlot, "64KiB, 2MiB"); err != nil {
			return s, err
		}
		cs.Tiers.SSD = &sp
	}
	s.Cache = &cs
	return s, nil
}

// validate builds the Spec from the flags and validates it once; each
// error names the flag and its limit.
func validate(c *config, fs *flag.FlagSet, log *slog.Logger) (manager.Spec, error) {
	s, err := spec(c, log)
	if err != nil {
		return s, err
	}
	return s, flagErrors(fs, s.Validate())
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
	s, err := validate(c, fs, log)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "orbitkv-manager:", line)
		}
		os.Exit(2)
	}
	m, err := manager.New(s)
	if err != nil {
		log.Error("manager failed", slog.Any("err", err))
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

// exitForced is the exit status of a shutdown that ran past --shutdown-timeout.
const exitForced = 3

func randomEpoch() (uint64, [16]byte) {
	var b [24]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand docs)
	var id [16]byte
	copy(id[:], b[8:])
	return binary.LittleEndian.Uint64(b[:8]) | 1, id // nonzero
}
