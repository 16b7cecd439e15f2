package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// holdCheckEvery is how often ping --hold checks that the Manager is alive.
const holdCheckEvery = 500 * time.Millisecond

type pingFlags struct {
	count    int
	interval time.Duration
	hold     bool
}

func pingCmd(g *globals) *cobra.Command {
	var p pingFlags
	cmd := &cobra.Command{
		Use:   "ping [--count N] [--interval D] [--hold]",
		Short: "Round-trip Ping through a session's shared-memory channel, with a summary",
		Long: `ping opens a session on the bootstrap socket (as an engine does), sends --count
Pings through its shared-memory channel, prints each round trip's latency and a
summary line (n, min, p50, p99, max). --hold keeps the session open after the
pings until SIGTERM/SIGINT (integration tests use it): SIGUSR1 sends one more
ping ("ping ok"), and the Manager is pinged every 500ms, so ping exits 1 ("the
Manager went away") when it stops answering.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.count < 1 {
				return usagef("ping: --count must be >= 1 (got %d)", p.count)
			}
			if p.interval < 0 {
				return usagef("ping: --interval must be >= 0 (got %v)", p.interval)
			}
			if _, err := g.bootstrapSocket(); err != nil {
				return err
			}
			// liborbitkv applies the same rule to what is not given, and
			// trusts the owner of /run/orbitkv when it picks the socket there.
			opts := client.Options{SocketPath: g.socket, ManagerAddr: g.manager, Role: uint32(abi.RoleTool),
				InstanceID: fmt.Sprintf("orbitkvctl-%d", os.Getpid()), Timeout: g.timeout}
			return ping(opts, p, g.output, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&p.count, "count", 5, "pings to send (`N` >= 1)")
	f.DurationVar(&p.interval, "interval", 100*time.Millisecond, "pause between pings")
	f.BoolVar(&p.hold, "hold", false, "keep the session open after the pings until SIGTERM/SIGINT")
	return cmd
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
	path := "(the default bootstrap socket)"
	if cs, perr := lifecycle.ClientSocketPath(opts.SocketPath, opts.ManagerAddr, os.Getenv, runtimeDir); perr == nil {
		path = cs.Path
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

// summarize is the summary of round trips rtts (not empty): count, min,
// p50, p99 and max, nearest-rank percentiles.
func summarize(rtts []time.Duration) *operatorpb.PingSummary {
	s := slices.Clone(rtts)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return &operatorpb.PingSummary{Count: uint64(len(s)), MinNs: uint64(s[0]), P50Ns: uint64(rank(0.50)),
		P99Ns: uint64(rank(0.99)), MaxNs: uint64(s[len(s)-1])}
}

func ping(opts client.Options, cfg pingFlags, format string, stdout io.Writer) error {
	table := format == formatTable
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
	rtts := make([]time.Duration, 0, cfg.count)
	for i := 0; i < cfg.count; i++ {
		t0 := time.Now()
		err := pingOnce()
		rtt := time.Since(t0)
		if err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		rtts = append(rtts, rtt)
		if table {
			fmt.Fprintf(stdout, "ping %d: %v\n", i, rtt)
		}
		if i+1 < cfg.count {
			time.Sleep(cfg.interval)
		}
	}
	sum := summarize(rtts)
	if err := printAs(stdout, format, sum, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "summary n=%d min=%v p50=%v p99=%v max=%v\n", sum.Count, time.Duration(sum.MinNs),
			time.Duration(sum.P50Ns), time.Duration(sum.P99Ns), time.Duration(sum.MaxNs))
		return err
	}); err != nil {
		return err
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
