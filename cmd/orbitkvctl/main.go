// Command orbitkvctl talks to a running orbitkv-manager: health and ping.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

const usage = `orbitkvctl: inspect and exercise a running orbitkv-manager.

Usage:
  orbitkvctl [--socket PATH | --manager HOST:PORT] health
  orbitkvctl [--socket PATH | --manager HOST:PORT] ping [--count N] [--interval D] [--hold]

Subcommands:
  health   print the Manager's Health reply (lifecycle frame over the socket)
  ping     round-trip Ping through the shared-memory channel; prints each
           round trip's latency; --hold keeps the session open until
           SIGTERM/SIGINT after the pings (used by integration tests)

Flags:
`

func main() {
	fs := flag.NewFlagSet("orbitkvctl", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	socket := fs.String("socket", "", "bootstrap socket `path` (default: derived from --manager)")
	manager := fs.String("manager", "127.0.0.1:7470", "Manager listen `host:port` the socket path is derived from")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline of each call")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		os.Exit(2)
	}
	opts := client.Options{SocketPath: *socket, ManagerAddr: *manager, Role: uint32(abi.RoleTool),
		InstanceID: fmt.Sprintf("orbitkvctl-%d", os.Getpid()), Timeout: *timeout}
	var err error
	switch fs.Arg(0) {
	case "health":
		err = health(opts)
	case "ping":
		err = ping(opts, fs.Args()[1:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want health or ping)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orbitkvctl:", err)
		os.Exit(1)
	}
}

func health(opts client.Options) error {
	c, err := client.Connect(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Health()
	if err != nil {
		return err
	}
	fmt.Printf("status     %s\nversion    %s\npid        %d\nepoch      %d\nservice_id %x\nsessions   %d\npoll_mode  %s\nrequests   %d\nuptime     %v\n",
		h.Status, h.Version, h.ManagerPID, h.Epoch, h.ServiceID, h.Sessions, h.PollMode, h.Requests, h.Uptime.Round(time.Millisecond))
	return nil
}

func ping(opts client.Options, args []string) error {
	fs := flag.NewFlagSet("ping", flag.ContinueOnError)
	count := fs.Int("count", 5, "pings to send (`N`)")
	interval := fs.Duration("interval", 100*time.Millisecond, "pause between pings")
	hold := fs.Bool("hold", false, "keep the session open after the pings until SIGTERM/SIGINT")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := client.Connect(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < *count; i++ {
		t0 := time.Now()
		echo, err := c.Ping(uint64(i))
		rtt := time.Since(t0)
		if err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if echo != uint64(i) {
			return fmt.Errorf("ping %d: echo %d", i, echo)
		}
		fmt.Printf("ping %d: %v\n", i, rtt)
		if i+1 < *count {
			time.Sleep(*interval)
		}
	}
	if *hold {
		fmt.Println("holding session; send SIGTERM to end")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
		for s := range sig {
			if s == syscall.SIGUSR1 { // ping once more on demand
				if _, err := c.Ping(1 << 40); err != nil {
					return fmt.Errorf("ping after hold: %w", err)
				}
				fmt.Println("ping ok")
				continue
			}
			break
		}
	}
	return nil
}
