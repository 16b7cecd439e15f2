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
		{"a missing key file is refused naming it", append(append([]string{}, base...), "--peer-key", "/nonexistent/key.pem"), "--peer-cert"},
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
				if tc.args != nil && (s.Cluster == nil || len(s.Cluster.Catalog.Endpoints) != 2 || s.Cluster.ServerTLS == nil || s.Cache.Tiers.PeerTimeout == 0) {
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
