// Command orbitkv-etcd is a single-member etcd server built from etcd's
// embed package (go.etcd.io/etcd/server/v3/embed), for `make demo-cluster`
// and `orbitkv-bench replay --nodes` on a machine without an etcd of its
// own. It is a real etcd (the same server code, the same v3 API), with
// defaults for a throw-away local catalog: one member, plain HTTP on
// loopback, data under --data-dir. Production clusters run their own etcd.
//
// It prints "orbitkv-etcd serving CLIENT_URL" on stdout once the member
// serves, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyTimeout bounds the wait for the member to serve.
const readyTimeout = 30 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orbitkv-etcd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("orbitkv-etcd", flag.ContinueOnError)
	dir := fs.String("data-dir", "", "data `directory` of the member (required; created if missing)")
	client := fs.String("listen-client", "127.0.0.1:2379", "client `host:port` (plain HTTP)")
	peer := fs.String("listen-peer", "127.0.0.1:2380", "peer `host:port` (plain HTTP; a single member talks to no one)")
	verbose := fs.Bool("verbose", false, "log etcd's warnings to stderr")
	noFsync := fs.Bool("unsafe-no-fsync", false, "do not fsync etcd's log (a crash may lose its last writes): for a throw-away catalog on a slow disk, as the bench's; the catalog holds candidate ownership under leases that Managers renew and re-advertise, never KV data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--data-dir: want a directory")
	}
	cu, err := url.Parse("http://" + *client)
	if err != nil || cu.Port() == "" {
		return fmt.Errorf("--listen-client %q: want host:port", *client)
	}
	pu, err := url.Parse("http://" + *peer)
	if err != nil || pu.Port() == "" {
		return fmt.Errorf("--listen-peer %q: want host:port", *peer)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "orbitkv", *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = *noFsync
	lg := zap.NewNop()
	if *verbose {
		if lg, err = zap.NewDevelopment(zap.IncreaseLevel(zap.WarnLevel)); err != nil {
			return err
		}
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		return fmt.Errorf("etcd did not serve within %v", readyTimeout)
	}
	fmt.Printf("orbitkv-etcd serving %s\n", cu)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
