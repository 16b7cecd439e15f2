// Command orbitkv-manager is the OrbitKV node-local KV-cache Manager.
//
// It serves inference processes on this host through a Unix bootstrap
// socket (mode 0600, or 0666 with tenants admitted by their kernel
// credentials) and per-session shared-memory slots (docs/design.md §3, §5).
// Run with --help for the flags.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"github.com/orbitkv/orbitkv/hugepages"
)

// parse reads the command line args into options (flags only; layer
// adds the environment and the config file). A stray argument is an error.
func parse(args []string) (*options, error) {
	o := &options{c: &config{}}
	root := newRoot(o)
	if err := root.ParseFlags(args); err != nil {
		return nil, flagError(root, err)
	}
	if err := root.Args(root, root.Flags().Args()); err != nil {
		return nil, err
	}
	return o, nil
}

// newLogger is the logger of --log-level and --log-format.
func newLogger(o *options) (*slog.Logger, error) {
	c := o.c
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("%s: want debug, info, warn or error", o.sourceOf("log-level").label("log-level", strconv.Quote(c.logLevel)))
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		opts.ReplaceAttr = jsonAttr
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("%s: want text or json", o.sourceOf("log-format").label("log-format", strconv.Quote(c.logFormat)))
}

// jsonAttr is the JSON log's ReplaceAttr: a duration is written as a
// string with its unit ("1.5s", Go's time.Duration form, as the text log
// writes it) rather than a count of nanoseconds, and an "epoch" as a
// decimal string: epochs are random 64-bit values, and JSON readers that
// hold numbers as float64 round any above 2^53.
func jsonAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; {
	case v.Kind() == slog.KindDuration:
		a.Value = slog.StringValue(v.Duration().String())
	case a.Key == "epoch" && v.Kind() == slog.KindUint64:
		a.Value = slog.StringValue(strconv.FormatUint(v.Uint64(), 10))
	}
	return a
}

// logConfig logs, after the build line of a start, the config file the
// settings came from ("none" without one) and every setting that is not
// at its default: its value as --print-config writes it and its source
// ("flag --ram-capacity", "env ORBITKV_RAM_CAPACITY", "file PATH:LINE").
func logConfig(log *slog.Logger, o *options) {
	if o.c.configFile == "" {
		log.Info("config file", slog.String("file", "none"))
	} else {
		log.Info("config file", slog.String("file", o.c.configFile), slog.String("source", o.cfg.describe("config")))
	}
	var set []any
	o.fs.VisitAll(func(f *pflag.Flag) {
		src, ok := o.src[f.Name]
		if !ok || commandFlags[f.Name] {
			return
		}
		set = append(set, slog.Group(f.Name, slog.String("value", shown(f.Name, f.Value.String())), slog.String("source", src.describe(f.Name))))
	})
	log.Info("settings not at their defaults", append([]any{slog.Int("count", len(set))}, set...)...)
}

// spec turns the settings into a manager.Spec. It checks only what a Spec
// cannot: that each value parses, and that settings whose Spec field takes
// 0 as "the default" are not 0 (their defaults are spelled out in --help:
// CheckSet of the field's declared Range). The limits are the Spec's.
func spec(o *options, k *checks, log *slog.Logger) manager.Spec {
	c := o.c
	epoch, serviceID := randomEpoch()
	s := manager.Spec{Epoch: epoch, HTTPAddr: c.httpAddr, HTTPPprof: c.httpPprof, ShutdownTimeout: c.shutdownWait, Logger: log, EBPF: c.ebpf,
		OperatorSocket: c.opSocket, OperatorGroup: c.opGroup, OperatorAdmitManagerUID: c.opAdmitUID,
		Session:   session.Spec{MaxSessions: uint32(min(c.maxSessions, math.MaxUint32)), MaxSessionsPerPID: uint32(min(c.maxPerPID, math.MaxUint32))},
		Channel:   channel.Spec{SpinWindow: c.spinWindow},
		Bootstrap: bootstrap.Config{Path: c.socket, ServiceID: serviceID, HelloTimeout: c.helloTimeout, Version: buildinfo.Get().Version},
	}
	var err error
	if s.Channel.PollMode, err = channel.ParsePollMode(c.pollMode); err != nil {
		k.fail("poll-mode", strconv.Quote(c.pollMode), "want spin, adaptive or park")
	}
	if s.Channel.Transport, err = channel.ParseTransport(c.transport); err != nil {
		k.fail("channel-transport", strconv.Quote(c.transport), "want shm or iceoryx2")
	}
	s.Channel.ServicePrefix = c.service
	s.Session.DescCapacity = uint32(min(k.size("desc-bytes", c.descBytes, "64KiB, 1MiB"), math.MaxUint32))
	s.Bootstrap.MaxBufferBytes = k.size("max-buffer-bytes", c.maxBufBytes, "32TiB, 512GiB")
	if s.Discover.Bytes = k.size("discover-bytes", c.discBytes, "256MiB, 1GiB"); s.Discover.Bytes == 0 {
		s.Discover.Disabled = true
	}
	if s.Bootstrap.Path == "" {
		if s.Bootstrap.Path, err = defaultSocket(c.listen); err != nil {
			if os.Getenv(lifecycle.EnvRuntimeDirectory) != "" {
				k.add(err)                        // the error names RUNTIME_DIRECTORY, which is no setting
				k.seen["bootstrap-socket"] = true // and is the socket's only error: no path follows
			} else {
				k.fail("listen", strconv.Quote(c.listen), err.Error())
			}
		}
	}
	cs := cache.Spec{CopyWorkers: c.copyWorkers, CopyBackend: c.copyBackend, MaxOpsPerSession: c.maxOpsSess, MaxOps: c.maxOps, OpExpiry: c.opExpiry,
		LeaseIdleTimeout: cmp.Or(c.leaseIdle, cache.LeaseIdleNever), // the flag's 0 is never
		Clock:            failpoint.Clock, Tiers: tier.Spec{Eviction: c.eviction, RAM: ram.Spec{Prefault: c.prefault}}}
	cs.Tiers.RAM.CapacityBytes = k.size("ram-capacity", c.ramCapacity, "4GiB, 512MiB")
	cs.Tiers.RAM.ChunkBytes = k.size("ram-chunk-bytes", c.chunkBytes, "16KiB, 2MiB")
	if cs.Tiers.RAM.Hugepages, err = hugepages.ParseMode(c.hugepages); err != nil {
		k.fail("hugepages", strconv.Quote(c.hugepages), "want require, prefer or off")
	}
	if c.leaseBudget != "" {
		if cs.LeaseBudget = k.size("lease-budget", c.leaseBudget, "4GiB, 512MiB"); cs.LeaseBudget == 0 {
			k.fail("lease-budget", strconv.Quote(c.leaseBudget), "want a size above 0 (examples: 4GiB, 512MiB)")
		}
	}
	if cs.Tiers.WarmupBudget = k.size("warmup-budget", c.warmupBudget, "256MiB, 1GiB"); cs.Tiers.WarmupBudget == 0 {
		k.fail("warmup-budget", strconv.Quote(c.warmupBudget), "want a size above 0 (examples: 256MiB, 1GiB)")
	}
	k.add(errors.Join(
		manager.ShutdownTimeoutRange.CheckSet(c.shutdownWait),
		bootstrap.HelloTimeoutRange.CheckSet(c.helloTimeout),
		bootstrap.MaxBufferBytesRange.CheckSet(s.Bootstrap.MaxBufferBytes),
		cache.MaxOpsPerSessionRange.CheckSet(c.maxOpsSess),
		cache.MaxOpsRange.CheckSet(c.maxOps),
		cache.OpExpiryRange.CheckSet(c.opExpiry),
		session.MaxSessionsPerPIDRange.CheckSet(uint32(min(c.maxPerPID, math.MaxUint32))),
		limit.Check(c.leaseIdle == 0 || cache.LeaseIdleTimeoutRange.CheckSet(c.leaseIdle) == nil, "cache.LeaseIdleTimeout", c.leaseIdle,
			"0 (never) or "+cache.LeaseIdleTimeoutRange.Want()),
		limit.Check(c.eviction != "", "tier.Eviction", c.eviction, "one of "+strings.Join(evict.Names(), ", ")),
	))
	// The SSD settings parse even without --ssd-dir, so a bad value is
	// refused rather than ignored until the day the tier is turned on.
	sp := ssd.Spec{Dir: c.ssdDir, CreateDir: c.ssdCreateDir, Admission: c.ssdAdmission, IOWorkers: c.ssdWorkers}
	k.add(ssd.IOWorkersRange.CheckSet(c.ssdWorkers))
	sp.CapacityBytes = k.size("ssd-capacity", c.ssdCapacity, "64GiB, 2TiB")
	sp.SlotBytes = k.size("ssd-slot-bytes", c.ssdSlot, "64KiB, 2MiB")
	if c.ssdDir != "" {
		cs.Tiers.SSD = &sp
	}
	s.Cache = &cs
	if s.Tenants, err = tenant.Parse(c.tenants, c.tenantShares, c.tenantQuotas,
		func(text string) (uint64, error) { return limit.ParseSize("size", text) }); err != nil {
		// The item at fault, not the whole list, with the reason.
		if te := (*tenant.Error)(nil); errors.As(err, &te) {
			k.fail(strings.TrimPrefix(te.Flag, "--"), strconv.Quote(te.Value), fmt.Sprintf("%v; want %s", te.Err, te.Want))
		} else {
			k.add(err)
		}
	}
	s.FDStore = c.fdStore
	s.Events = kvevents.Spec{Endpoint: c.kvEvents, ReplayEndpoint: c.kvReplay, Topic: c.kvTopic, QueueEvents: c.kvQueue}
	if c.kvQueue < 1 {
		k.fail("kv-events-queue", strconv.Itoa(c.kvQueue), "want a count of 1..16777216")
	}
	k.add(s.Events.Validate())
	clusterSpec(o, k, &s)
	s.Profiling = profilingSpec(o, k, log)
	return s
}

// defaultSocket is the bootstrap socket when no --bootstrap-socket is
// given: $RUNTIME_DIRECTORY/manager.sock, else /run/orbitkv/manager.sock
// when that directory is this process's, else the path derived from
// listen (lifecycle.ManagerSocketPath).
func defaultSocket(listen string) (string, error) {
	return lifecycle.ManagerSocketPath(listen, os.Getenv(lifecycle.EnvRuntimeDirectory), lifecycle.RuntimeDir, os.Geteuid())
}

// profilingSpec is the push of the --pyroscope-* settings. The node id is
// the host name: one Manager serves one host. The password is read from
// --pyroscope-password-file (never a flag: the command line is public in
// /proc), without its trailing newline.
// profilingSpec builds the push's Spec from the settings, reading the
// password file; log (nil: slog.Default) gets a warning when that file is
// readable by users other than its owner.
func profilingSpec(o *options, k *checks, log *slog.Logger) profiling.Spec {
	c := o.c
	p := profiling.Spec{URL: c.pyroURL, AppName: c.pyroApp, TenantID: c.pyroTenant, BasicAuthUser: c.pyroUser,
		UploadInterval: c.pyroInterval, Version: buildinfo.Get().Version}
	p.NodeID, _ = os.Hostname()
	k.add(profiling.UploadIntervalRange.CheckSet(c.pyroInterval))
	if c.pyroApp == "" {
		k.fail("pyroscope-app-name", `""`, "want a name (default "+profiling.DefaultAppName+")")
	}
	if c.pyroPassFile != "" {
		b, mode, err := readSecret(c.pyroPassFile)
		if err != nil {
			k.fail("pyroscope-password-file", strconv.Quote(c.pyroPassFile), err.Error())
		}
		if mode&0o077 != 0 {
			if log == nil {
				log = slog.Default()
			}
			log.Warn("the Pyroscope password file is readable or writable by users other than its owner; chmod 600 it",
				slog.String("flag", "--pyroscope-password-file"), slog.String("path", c.pyroPassFile), slog.String("mode", fmt.Sprintf("%04o", mode)))
		}
		p.BasicAuthPassword = b
	}
	return p
}

// maxSecretBytes bounds a password file: a token is well under a KiB.
const maxSecretBytes = 4096

// readSecret reads a password file: a regular file of at most
// maxSecretBytes, its trailing newline (CRLF too) dropped; it must not be
// empty. mode is the file's permission bits (0 on an error).
func readSecret(path string) (secret string, mode os.FileMode, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return "", 0, err
	case !fi.Mode().IsRegular():
		return "", 0, errors.New("not a regular file")
	case fi.Size() > maxSecretBytes:
		return "", 0, fmt.Errorf("%d bytes, want at most %d", fi.Size(), maxSecretBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", 0, err
	}
	secret = strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return "", 0, errors.New("empty: want the password or token on its first line")
	}
	if strings.ContainsAny(secret, "\r\n") {
		return "", 0, errors.New("more than one line: want only the password or token")
	}
	return secret, fi.Mode().Perm(), nil
}

// validate builds the Spec from the settings and validates it once; it
// reports every setting in error, each naming its limit.
func validate(o *options, log *slog.Logger) (manager.Spec, error) {
	k := newChecks(o)
	s := spec(o, k, log)
	k.add(s.Validate())
	return s, k.err()
}

// exitError ends the command with status code (exit.go) after printing
// err, one "orbitkv-manager: " line per line of it.
type exitError struct {
	code  int
	err   error
	usage bool // also point at --help
}

func (e *exitError) Error() string { return e.err.Error() }

// run is the root command: the Manager, or --version / --print-config /
// --check.
func run(o *options) error {
	c := o.c
	if c.showVersion {
		fmt.Print(buildinfo.Get().String("orbitkv-manager"))
		fmt.Printf("abi: %d, bootstrap protocol: %d\n", abi.Version, abi.BootstrapVersion)
		return nil
	}
	if err := o.layer(os.LookupEnv, os.Environ()); err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	if c.printConfig {
		// A printout: the settings are validated (status 2 when one is
		// wrong) but the host is not checked; --check does that.
		o.printConfig(os.Stdout)
		_, lerr := newLogger(o)
		_, verr := validate(o, slog.New(slog.DiscardHandler))
		if err := errors.Join(lerr, verr); err != nil {
			return &exitError{code: exitConfig, err: err}
		}
		return nil
	}
	if c.check {
		return preflight(o, os.Stdout)
	}
	log, err := newLogger(o)
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	s, err := validate(o, log)
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	logBuild(log)
	logConfig(log, o)
	if err := beNotDumpable(); err != nil {
		return failed(log, "start failed", exitInternal, err)
	}
	if s.Cache != nil {
		s.Cache.Tiers.RAM.Handed = inheritedTier(log)
	}
	s.Upgrade = manager.UpgradeSpec{Executable: executable(log), Args: os.Args[1:]}
	pred, err := predecessor(log, &s)
	if err != nil {
		return failed(log, "start failed", exitInternal, err)
	}
	// Signals are caught from before the start: SIGTERM or SIGINT during
	// it stops the Manager cleanly once New returns (the step in progress,
	// such as the RAM pre-fault, finishes first), and SIGHUP is ignored
	// from the first moment (its default action would kill the Manager).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ignoreHangups(log)
	for {
		m, err := manager.New(s)
		if err != nil {
			if pred != nil {
				pred.Close() // the predecessor serves its tier again
			}
			k := newChecks(o)
			k.add(err)
			return failed(log, "start failed", classify(err), k.err())
		}
		if pred != nil {
			adopted(log, m, pred)
			pred = nil
		}
		if ctx.Err() != nil {
			log.Info("shutdown requested during the start; stopping")
			m.Close()
			log.Info("orbitkv-manager stopped")
			return nil
		}
		err = m.Run(ctx)
		var again *manager.HandoverError
		switch {
		case errors.Is(err, manager.ErrShutdownForced):
			os.Exit(exitForced) // nothing freed: the process exit unmaps it
		case errors.Is(err, manager.ErrHandedOver):
			return nil
		case errors.As(err, &again):
			// The successor is dead and reaped: the tier is this process's
			// again, served under a new epoch.
			s.Epoch, s.Bootstrap.ServiceID = randomEpoch()
			s.Cache.Tiers.RAM.Handed = &again.Handed
			log.Info("upgrade: serving the RAM tier again", slog.Uint64("epoch", s.Epoch))
			continue
		case err != nil:
			return failed(log, "orbitkv-manager stopped on an error", exitInternal, err)
		}
		return nil
	}
}

// failed logs err (the same text main prints on stderr) with its exit
// status and class, and returns the exitError that ends the command.
func failed(log *slog.Logger, msg string, code int, err error) error {
	log.Error(msg, slog.String("err", err.Error()), slog.Int("exit_status", code), slog.String("class", className[code]))
	return &exitError{code: code, err: err}
}

func main() {
	// A crash (an unrecovered panic, a fatal runtime error, SIGABRT from
	// systemd's watchdog or from the CUDA backend's fail-stop abort()) ends
	// the process by SIGABRT (or the SIGQUIT the runtime relays among its
	// threads) rather than Go's default exit status 2, which
	// is the configuration error's status (exit.go): the unit's
	// RestartPreventExitStatus=2 then never keeps a crashed Manager down.
	// The process is not dumpable (dumpable.go), so the kernel writes no
	// core of the RAM tier.
	debug.SetTraceback("crash")
	o := &options{c: &config{}}
	root := newRoot(o)
	root.RunE = func(*cobra.Command, []string) error { return run(o) }
	err := root.Execute()
	if err == nil {
		return
	}
	e, ok := err.(*exitError)
	if !ok {
		e = &exitError{code: exitConfig, err: err, usage: true} // cobra's: a flag, an argument, a subcommand
	}
	for _, line := range strings.Split(e.err.Error(), "\n") {
		fmt.Fprintln(os.Stderr, "orbitkv-manager:", line)
	}
	if e.usage {
		fmt.Fprintln(os.Stderr, "Run 'orbitkv-manager --help' for the flags.")
	}
	os.Exit(e.code)
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

func randomEpoch() (uint64, [16]byte) {
	var b [24]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand docs)
	var id [16]byte
	copy(id[:], b[8:])
	return binary.LittleEndian.Uint64(b[:8]) | 1, id // nonzero
}

// ignoreHangups logs and ignores every SIGHUP for the life of the process:
// the configuration is read once at start, and nothing of it can change
// under live sessions (sizes, sockets, policies), so there is nothing to
// reload; a restart applies a new configuration.
func ignoreHangups(log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			log.Warn("SIGHUP ignored: the configuration is read once at start and nothing is reloaded; restart the Manager to change it")
		}
	}()
}
