package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/peer"
)

// certFiles writes a CA and a node certificate for name into a test
// directory; it returns the three flags that name them.
func certFiles(t *testing.T, name string) []string {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey, err := peer.NewCA("test CA", 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := peer.NewNodeCert(caCert, caKey, peer.NodeCertSpec{Name: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.pem": caCert, "node.pem": cert, "node.key": key}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--peer-ca", filepath.Join(dir, "ca.pem"), "--peer-cert", filepath.Join(dir, "node.pem"), "--peer-key", filepath.Join(dir, "node.key")}
}

// The cluster flags become the Spec's cluster part, and each mistake is
// refused naming the flag.
func TestClusterFlagsNameTheirMistakes(t *testing.T) {
	certs := certFiles(t, "node-a")
	other := certFiles(t, "node-a") // another CA's
	base := append([]string{"--node-id", "node-a", "--etcd-endpoints", "127.0.0.1:2379, 127.0.0.2:2379"}, certs...)
	cases := []struct {
		name string
		args []string
		want string // "" : valid
	}{
		{"a node with etcd and certificates joins a cluster", base, ""},
		{"no node id is a single host", nil, ""},
		{"etcd endpoints without a node id are refused", []string{"--etcd-endpoints", "127.0.0.1:2379"}, "--etcd-endpoints \"127.0.0.1:2379\": needs --node-id"},
		{"a node without certificates is refused", []string{"--node-id", "a", "--etcd-endpoints", "127.0.0.1:2379"}, "--peer-cert \"\": --node-id needs --peer-ca"},
		{"a wildcard peer address is refused", append(append([]string{}, base...), "--peer-listen", "0.0.0.0:7472"), "--peer-listen \"0.0.0.0:7472\": want an address peers can dial"},
		{"an advertise budget below its limit is refused", append(append([]string{}, base...), "--advertise-budget", "1KiB"), "--advertise-budget 1KiB: want 4KiB..1GiB"},
		{"a fetch timeout beyond its limit is refused", append(append([]string{}, base...), "--peer-fetch-timeout", "2m"), "--peer-fetch-timeout 2m0s: want"},
		{"a bad node id is refused", append(append([]string{}, base...), "--node-id", "a b"), "--node-id \"a b\": want 1..64"},
		{"a missing key file is refused naming --peer-key", append(append([]string{}, base...), "--peer-key", "/nonexistent/key.pem"), "--peer-key \"/nonexistent/key.pem\": peer TLS: key file"},
		{"a missing CA file is refused naming --peer-ca", append(append([]string{}, base...), "--peer-ca", "/nonexistent/ca.pem"), "--peer-ca \"/nonexistent/ca.pem\": peer TLS: CA file"},
		{"a key of another certificate is refused naming --peer-key", append(append([]string{}, base...), "--peer-key", other[5]), "--peer-key \"" + other[5] + "\": peer TLS: key file"},
		{"a certificate of another CA is refused naming --peer-cert", append(append([]string{}, base...), "--peer-cert", other[3], "--peer-key", other[5]), "--peer-cert \"" + other[3] + "\": peer TLS: cert file"},
		{"a node without a key is refused naming --peer-key", []string{"--node-id", "node-a", "--etcd-endpoints", "127.0.0.1:2379", "--peer-ca", certs[1], "--peer-cert", certs[3]}, "--peer-key \"\": --node-id needs"},
		{"a node id other than the certificate's is refused naming both", append(append([]string{}, base...), "--node-id", "node-b"), "--node-id \"node-b\": --peer-cert " + certs[3] + " names node \"node-a\""},
		{"a transfer port past 65535 is refused", append(append([]string{}, base...), "--transfer-listen", "127.0.0.1:70000"), "--transfer-listen \"127.0.0.1:70000\": want a port number 0..65535"},
		{"a peer port that is not a number is refused", append(append([]string{}, base...), "--peer-listen", "127.0.0.1:http"), "--peer-listen \"127.0.0.1:http\": want a port number"},
		{"a per-peer byte bound below the per-transfer one is refused at parse", append(append([]string{}, base...), "--peer-max-transfer-bytes", "1GiB", "--peer-max-peer-bytes", "256MiB"), "--peer-max-peer-bytes 256MiB: want"},
		{"a peer connection cap of 0 is refused", append(append([]string{}, base...), "--peer-max-conns", "0"), "--peer-max-conns 0: want"},
		{"a peer stream cap past its limit is refused", append(append([]string{}, base...), "--peer-max-streams", "100000"), "--peer-max-streams 100000: want"},
		{"a handshake cap above the connection cap is refused", append(append([]string{}, base...), "--peer-max-conns", "16", "--peer-max-handshakes", "32"), "--peer-max-handshakes 32: want"},
		{"a per-host handshake cap of 0 is refused", append(append([]string{}, base...), "--peer-max-handshakes-per-host", "0"), "--peer-max-handshakes-per-host 0: want"},
		{"a per-host data connection cap of 0 is refused", append(append([]string{}, base...), "--transfer-max-conns-per-host", "0"), "--transfer-max-conns-per-host 0: want"},
		{"a prove timeout of 0 is refused", append(append([]string{}, base...), "--transfer-prove-timeout", "0s"), "--transfer-prove-timeout 0s: want"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.layer(env{}.get, nil); err != nil {
				t.Fatal(err)
			}
			s, err := validate(o, slog.New(slog.DiscardHandler))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				if tc.args != nil && (s.Cluster == nil || len(s.Cluster.Catalog.Endpoints) != 2 || s.Cluster.ServerTLS == nil || s.Cache.Tiers.PeerTimeout == 0 ||
					s.Cluster.Transfer.MaxConnsPerHost != 64 || s.Cluster.Transfer.ProveTimeout != 5*time.Second || s.Cluster.Peer.MaxConns != 256 || s.Cluster.Peer.MaxConcurrentStreams != 128 || s.Cluster.Peer.MaxHandshakes != 64 || s.Cluster.Peer.MaxHandshakesPerHost != 32) {
					t.Fatalf("cluster spec %+v", s.Cluster)
				}
				if tc.args == nil && s.Cluster != nil {
					t.Fatal("a cluster without --node-id")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
