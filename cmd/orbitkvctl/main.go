// Command orbitkvctl talks to a running orbitkv-manager: health and ping.
package main

import (
	"github.com/dustin/go-humanize"

	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

const usageText = `orbitkvctl: inspect and exercise a running orbitkv-manager.

Usage:
  orbitkvctl [--socket PATH | --manager HOST:PORT] [--timeout D] health
  orbitkvctl [--socket PATH | --manager HOST:PORT] [--timeout D] ping [--count N] [--interval D] [--hold]
  orbitkvctl --version

Subcommands:
  health   print the Manager's liveness from its Health reply (lifecycle frame over
           the socket; the Manager-wide figures are on its HTTP GET /health)
  ping     round-trip Ping through the shared-memory channel; prints each
           round trip's latency; --hold keeps the session open after the
           pings until SIGTERM/SIGINT (used by integration tests): SIGUSR1
           sends one more ping, and the Manager is pinged every 500ms, so
           ping exits 1 ("Manager went away") when it stops answering

Flags:
`

const pingUsageText = `
Flags of ping:
`

// holdCheckEvery is how often ping --hold checks that the Manager is alive.
const holdCheckEvery = 500 * time.Millisecond

// config is the parsed command line.
type config struct {
	socket   string
	manager  string
	timeout  time.Duration
	version  bool
	help     bool   // --help given: print usage (of sub if set) to stdout, exit 0
	sub      string // subcommand
	count    int
	interval time.Duration
	hold     bool
}

func globalFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("orbitkvctl", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "", "bootstrap socket `path` (default: derived from --manager)")
	fs.StringVar(&c.manager, "manager", "127.0.0.1:7470", "Manager listen `host:port` the socket path is derived from")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "deadline of each call (>= 1ms)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	return fs
}

func pingFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("ping", flag.ContinueOnError)
	fs.IntVar(&c.count, "count", 5, "pings to send (`N` >= 1)")
	fs.DurationVar(&c.interval, "interval", 100*time.Millisecond, "pause between pings")
	fs.BoolVar(&c.hold, "hold", false, "keep the session open after the pings until SIGTERM/SIGINT")
	return fs
}

// writeUsage prints the usage text with the defaults of every flag.
func writeUsage(w io.Writer) {
	var c config
	fmt.Fprint(w, usageText)
	g := globalFlags(&c)
	g.SetOutput(w)
	g.PrintDefaults()
	fmt.Fprint(w, pingUsageText)
	p := pingFlags(&c)
	p.SetOutput(w)
	p.PrintDefaults()
}

func writeSubUsage(w io.Writer, sub string) {
	switch sub {
	case "ping":
		fmt.Fprintln(w, "Usage: orbitkvctl [global flags] ping [--count N] [--interval D] [--hold]")
		fmt.Fprint(w, pingUsageText)
		var c config
		p := pingFlags(&c)
		p.SetOutput(w)
		p.PrintDefaults()
		fmt.Fprintln(w, "\nDuring --hold, SIGUSR1 sends one more ping; the Manager is pinged every 500ms.")
		fmt.Fprintln(w, "orbitkvctl --help lists the global flags.")
	default:
		writeUsage(w)
	}
}

// parseArgs parses and validates the command line (without the program
// name). An error is a usage error.
func parseArgs(args []string) (config, error) {
	var c config
	g := globalFlags(&c)
	g.SetOutput(io.Discard)
	if err := g.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help = true
			return c, nil
		}
		return c, err
	}
	if c.version {
		return c, nil
	}
	if c.timeout < time.Millisecond || c.timeout > time.Hour {
		return c, fmt.Errorf("--timeout must be between 1ms and 1h (got %v)", c.timeout)
	}
	if g.NArg() == 0 {
		return c, errors.New("no subcommand (want health or ping)")
	}
	c.sub = g.Arg(0)
	rest := g.Args()[1:]
	switch c.sub {
	case "health":
		fs := flag.NewFlagSet("health", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help = true
				return c, nil
			}
			return c, fmt.Errorf("health: %w", err)
		}
		rest = fs.Args()
	case "ping":
		fs := pingFlags(&c)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help = true
				return c, nil
			}
			return c, fmt.Errorf("ping: %w", err)
		}
		rest = fs.Args()
		if c.count < 1 {
			return c, fmt.Errorf("ping: --count must be >= 1 (got %d)", c.count)
		}
		if c.interval < 0 {
			return c, fmt.Errorf("ping: --interval must be >= 0 (got %v)", c.interval)
		}
	default:
		return c, fmt.Errorf("unknown subcommand %q (want health or ping)", c.sub)
	}
	if len(rest) > 0 {
		return c, fmt.Errorf("%s: unexpected argument %q", c.sub, rest[0])
	}
	return c, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes orbitkvctl and returns the exit status: 0 on success, 2 on a
// usage error, 1 on any other failure.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "orbitkvctl:", err)
		fmt.Fprintln(stderr, "Run 'orbitkvctl --help' for usage.")
		return 2
	case c.help:
		writeSubUsage(stdout, c.sub)
		return 0
	case c.version:
		fmt.Fprintf(stdout, "orbitkvctl %s (abi %d, bootstrap %d)\n", version, abi.Version, abi.BootstrapVersion)
		return 0
	}
	opts := client.Options{SocketPath: c.socket, ManagerAddr: c.manager, Role: uint32(abi.RoleTool),
		InstanceID: fmt.Sprintf("orbitkvctl-%d", os.Getpid()), Timeout: c.timeout}
	if c.sub == "health" {
		err = health(opts, stdout)
	} else {
		err = ping(opts, c, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "orbitkvctl:", err)
		return 1
	}
	return 0
}

// connect opens a session; its error names the socket tried and, for the
// usual causes, what to do.
func connect(opts client.Options) (*client.Client, error) {
	c, err := client.Connect(opts)
	if err == nil {
		return c, nil
	}
	return nil, connectError(opts, err)
}

func connectError(opts client.Options, err error) error {
	path := opts.SocketPath
	if path == "" {
		p, perr := lifecycle.SocketPath(opts.ManagerAddr)
		if perr != nil {
			p = "(socket of --manager " + opts.ManagerAddr + ")"
		}
		path = p
	}
	var ce *client.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("connect %s: %w", path, err)
	}
	hint := ""
	if ce.Code < 0 {
		switch syscall.Errno(-ce.Code) {
		case syscall.ENOENT, syscall.ECONNREFUSED:
			hint = "is orbitkv-manager running? start it or pass --socket"
		case syscall.EACCES, syscall.EPERM:
			hint = "the socket is mode 0600: run as the Manager's user"
		}
	}
	// liborbitkv's detail for a failed connect(2) restates the path and a
	// shorter hint; say each once.
	if hint != "" && (ce.Detail == "" || strings.Contains(ce.Detail, path)) {
		return fmt.Errorf("connect %s: liborbitkv: %s (%s)", path, ce.Text, hint)
	}
	if strings.Contains(ce.Detail, path) {
		return err
	}
	return fmt.Errorf("connect %s: %w", path, err)
}

func health(opts client.Options, stdout io.Writer) error {
	c, err := connect(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Health()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "status     %s\nversion    %s\npid        %d\nepoch      %d\nservice_id %x\npoll_mode  %s\nuptime     %v\nram        %s\n",
		h.Status, h.Version, h.ManagerPID, h.Epoch, h.ServiceID, h.PollMode, h.Uptime.Round(time.Millisecond), humanize.IBytes(h.RAMCapacityBytes))
	fmt.Fprintln(stdout, "Manager-wide figures (sessions, blocks, RAM used, evictions, lookups) are not shown to a")
	fmt.Fprintln(stdout, "session; operators read them at GET /health on the Manager's --http-addr (default")
	fmt.Fprintln(stdout, "http://127.0.0.1:7471/health).")
	return nil
}

func ping(opts client.Options, cfg config, stdout io.Writer) error {
	c, err := connect(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	seq := uint64(0)
	pingOnce := func() error {
		v := seq
		seq++
		echo, err := c.Ping(v)
		if err != nil {
			return err
		}
		if echo != v {
			return fmt.Errorf("echo %d, want %d", echo, v)
		}
		return nil
	}
	for i := 0; i < cfg.count; i++ {
		t0 := time.Now()
		err := pingOnce()
		rtt := time.Since(t0)
		if err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		fmt.Fprintf(stdout, "ping %d: %v\n", i, rtt)
		if i+1 < cfg.count {
			time.Sleep(cfg.interval)
		}
	}
	if !cfg.hold {
		return nil
	}
	// Subscribe before announcing the hold, so a signal sent on seeing the
	// line is caught.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sig)
	fmt.Fprintln(stdout, "holding session; send SIGTERM to end")
	tick := time.NewTicker(holdCheckEvery)
	defer tick.Stop()
	for {
		select {
		case s := <-sig:
			if s != syscall.SIGUSR1 {
				return nil
			}
			if err := pingOnce(); err != nil { // ping once more on demand
				return fmt.Errorf("ping after hold: %w", err)
			}
			fmt.Fprintln(stdout, "ping ok")
		case <-tick.C:
			if err := pingOnce(); err != nil {
				return fmt.Errorf("the Manager went away: %w", err)
			}
		}
	}
}
