package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long Start and WaitReady wait for members to
// serve.
const StartTimeout = 30 * time.Second

var clusterSeq atomic.Int64

// Member is one etcd server of a Cluster.
type Member struct {
	Name      string
	Dir       string  // data directory, kept across Stop and Start
	ClientURL url.URL // http://127.0.0.1:port
	PeerURL   url.URL
	etcd      *embed.Etcd // nil while stopped
}

// Cluster is n etcd members of one cluster in this process. Its methods
// are for the test goroutine.
type Cluster struct {
	t       testing.TB
	tls     *TLS                // nil: plain http client URLs
	edit    func(*embed.Config) // Options.Config
	token   string
	initial string // the initial-cluster flag: name=peerURL,...
	Members []*Member
}

// Start starts an n-member cluster and waits (StartTimeout) until every
// member serves; the test's Cleanup stops it, and TempDir removes the
// data. With ETCDTEST_LOG=1 the servers log warnings to stderr.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// Options changes what StartWith starts.
type Options struct {
	// TLS, when set, makes the client URLs https, requiring a client
	// certificate of its CA (peers still talk plain http); Client then
	// uses TLS.Client.
	TLS *TLS
	// Config, when set, edits each member's configuration last (limits
	// such as MaxRequestBytes or MaxTxnOps).
	Config func(*embed.Config)
}

// StartWith is Start with Options.
func StartWith(t testing.TB, n int, o Options) *Cluster {
	t.Helper()
	tc := o.TLS
	ports := freePorts(t, 2*n)
	root := t.TempDir()
	scheme := "http"
	if tc != nil {
		scheme = "https"
	}
	c := &Cluster{t: t, tls: tc, edit: o.Config, token: fmt.Sprintf("etcdtest-%d-%d", os.Getpid(), clusterSeq.Add(1))}
	var initial []string
	for i := 0; i < n; i++ {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			Dir:       filepath.Join(root, fmt.Sprintf("m%d", i)),
			ClientURL: url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			PeerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL.String())
	}
	c.initial = strings.Join(initial, ",")
	t.Cleanup(c.Close)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	c.StartMembers(all...)
	c.WaitReady(all...)
	return c
}

// freePorts asks the OS for n distinct free ports on 127.0.0.1 (all held
// at once, then released for etcd to bind).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("etcdtest: a free port: %v", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func (c *Cluster) config(m *Member) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.Name, m.Dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.ClientURL}, []url.URL{m.ClientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.PeerURL}, []url.URL{m.PeerURL}
	cfg.InitialCluster, cfg.InitialClusterToken = c.initial, c.token
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored once Dir holds a WAL
	cfg.UnsafeNoFsync = true                     // test data: no fsync on a loaded VM
	cfg.EnableGRPCGateway = false
	if c.tls != nil {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = c.tls.ServerCertFile, c.tls.ServerKeyFile
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = c.tls.CAFile, true
	}
	lg := zap.NewNop()
	if os.Getenv("ETCDTEST_LOG") == "1" {
		lg, _ = zap.NewDevelopment(zap.IncreaseLevel(zap.WarnLevel))
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg.With(zap.String("member", m.Name)))
	if c.edit != nil {
		c.edit(cfg)
	}
	return cfg
}

// StartMembers starts the named members (stopped ones, or at Start),
// without waiting: a member serves once a quorum runs (WaitReady).
func (c *Cluster) StartMembers(idx ...int) {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(idx))
	for j, i := range idx {
		m := c.Members[i]
		if m.etcd != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.etcd, errs[j] = embed.StartEtcd(c.config(m))
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			c.t.Fatalf("etcdtest: starting member %s: %v", c.Members[idx[j]].Name, err)
		}
	}
}

// WaitReady waits until each named member serves (StartTimeout).
func (c *Cluster) WaitReady(idx ...int) {
	c.t.Helper()
	deadline := time.After(StartTimeout)
	for _, i := range idx {
		m := c.Members[i]
		if m.etcd == nil {
			c.t.Fatalf("etcdtest: member %s is stopped", m.Name)
		}
		select {
		case <-m.etcd.Server.ReadyNotify():
		case err := <-m.etcd.Err():
			c.t.Fatalf("etcdtest: member %s failed: %v", m.Name, err)
		case <-deadline:
			c.t.Fatalf("etcdtest: member %s not serving after %v", m.Name, StartTimeout)
		}
	}
}

// Stop stops the named members, the others at once and then the raft
// leader (a leader that stops hands its leadership over first, which
// takes etcd's request timeout when the others are stopping too); their
// data and ports stay theirs.
func (c *Cluster) Stop(idx ...int) {
	leader := c.Leader()
	var wg sync.WaitGroup
	for _, i := range idx {
		if m := c.Members[i]; i != leader && m.etcd != nil {
			wg.Add(1)
			go func(e *embed.Etcd) {
				defer wg.Done()
				e.Close()
			}(m.etcd)
			m.etcd = nil
		}
	}
	wg.Wait()
	for _, i := range idx {
		if m := c.Members[i]; i == leader && m.etcd != nil {
			m.etcd.Close()
			m.etcd = nil
		}
	}
}

// Close stops every member (the test's Cleanup calls it).
func (c *Cluster) Close() {
	all := make([]int, len(c.Members))
	for i := range all {
		all[i] = i
	}
	c.Stop(all...)
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL.String())
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.Members[i].ClientURL.String() }

// Leader returns the index of the member that is the raft leader, or -1.
func (c *Cluster) Leader() int {
	for i, m := range c.Members {
		if m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Client returns an etcd client of every member (with the cluster's
// client certificate under Options.TLS), closed at the test's Cleanup: for a
// test's own reads, writes and compactions.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.tls != nil {
		cfg.TLS = c.tls.Client
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.t.Fatalf("etcdtest: client: %v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// Compact compacts the cluster's history up to its current revision and
// returns that revision: a Watch behind it is refused as compacted.
func (c *Cluster) Compact(ctx context.Context, cli *clientv3.Client) int64 {
	c.t.Helper()
	resp, err := cli.Get(ctx, "etcdtest-compact-probe")
	if err != nil {
		c.t.Fatalf("etcdtest: current revision: %v", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		c.t.Fatalf("etcdtest: compacting to %d: %v", resp.Header.Revision, err)
	}
	return resp.Header.Revision
}
