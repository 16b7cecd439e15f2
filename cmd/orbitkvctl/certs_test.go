package main

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/peer"
)

// certs runs orbitkvctl with args and returns its status and output.
func certs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCertsRefuseBadInput(t *testing.T) {
	ca := t.TempDir()
	if code, _, stderr := certs(t, "certs", "ca", "--out", ca); code != 0 {
		t.Fatalf("certs ca: %d %s", code, stderr)
	}
	out := t.TempDir()
	node := func(extra ...string) []string {
		return append([]string{"certs", "node", "--ca", ca, "--out", out}, extra...)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"certs without ca or node is a usage error", []string{"certs"}, 2, "certs: give ca or node"},
		{"certs ca without --out is a usage error", []string{"certs", "ca"}, 2, "give --out DIR"},
		{"certs ca refuses 0 days", []string{"certs", "ca", "--out", t.TempDir(), "--days", "0"}, 2, "--days must be between 1 and 36500"},
		{"certs ca does not overwrite a CA", []string{"certs", "ca", "--out", ca}, 1, filepath.Join(ca, "ca.crt") + " exists"},
		{"certs node without --name is a usage error", node("--ip", "127.0.0.2"), 2, "give --name NODE"},
		{"certs node without an address is a usage error", node("--name", "n1"), 2, "at least one --ip or --dns"},
		{"certs node refuses a name with a slash", node("--name", "a/b", "--ip", "127.0.0.2"), 2, `--name: node id "a/b": want 1..64 letters`},
		{"certs node refuses the name ca, whose certificate would be ca.crt", node("--name", "ca", "--ip", "127.0.0.2"), 2, `--name "ca" is reserved`},
		{"certs node refuses an IP that does not parse", node("--name", "n1", "--ip", "127.0.0.300"), 2, `--ip "127.0.0.300": not an IP address`},
		{"certs node refuses a DNS name with a colon", node("--name", "n1", "--dns", "a:b"), 2, `--dns "a:b": not a DNS name`},
		{"certs node without the CA's files names them", []string{"certs", "node", "--ca", t.TempDir(), "--out", out, "--name", "n1", "--ip", "127.0.0.2"}, 1, "the CA certificate: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := certs(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("run(%q) = %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.stderr)
			}
		})
	}
	t.Run("certs node does not overwrite a node's files", func(t *testing.T) {
		if code, _, stderr := certs(t, node("--name", "n1", "--ip", "127.0.0.2")...); code != 0 {
			t.Fatalf("first: %d %s", code, stderr)
		}
		code, _, stderr := certs(t, node("--name", "n1", "--ip", "127.0.0.2")...)
		if code != 1 || !strings.Contains(stderr, filepath.Join(out, "n1.crt")+" exists") {
			t.Errorf("second: %d %q", code, stderr)
		}
	})
	t.Run("certs node refuses an out directory of another CA", func(t *testing.T) {
		other := t.TempDir()
		if code, _, stderr := certs(t, "certs", "ca", "--out", other); code != 0 {
			t.Fatalf("certs ca: %d %s", code, stderr)
		}
		code, _, stderr := certs(t, "certs", "node", "--ca", other, "--out", out, "--name", "n9", "--ip", "127.0.0.2")
		if code != 1 || !strings.Contains(stderr, "is another CA's certificate") {
			t.Errorf("got %d %q", code, stderr)
		}
	})
}

// The CA and node certificates certs writes load with peer.LoadTLS, and
// two nodes complete a mutual TLS handshake with them.
func TestCertsRoundTrip(t *testing.T) {
	caDir, nodes := filepath.Join(t.TempDir(), "ca"), filepath.Join(t.TempDir(), "nodes")
	if code, stdout, stderr := certs(t, "certs", "ca", "--out", caDir); code != 0 || !strings.Contains(stdout, "mode 0600") {
		t.Fatalf("certs ca: %d %q %q", code, stdout, stderr)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if code, _, stderr := certs(t, "certs", "node", "--ca", caDir, "--name", n, "--ip", "127.0.0.1", "--dns", n+".local", "--out", nodes); code != 0 {
			t.Fatalf("certs node %s: %d %s", n, code, stderr)
		}
	}
	t.Run("keys are mode 0600 and directories 0700", func(t *testing.T) {
		for path, want := range map[string]os.FileMode{
			filepath.Join(caDir, "ca.key"): 0o600, filepath.Join(nodes, "node-1.key"): 0o600, filepath.Join(nodes, "node-2.key"): 0o600,
			filepath.Join(caDir, "ca.crt"): 0o644, filepath.Join(nodes, "ca.crt"): 0o644, caDir: 0o700, nodes: 0o700,
		} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
			}
		}
	})
	t.Run("the node directory holds no CA key", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(nodes, "ca.key")); err == nil {
			t.Error("ca.key was copied next to the node certificates")
		}
	})
	load := func(n string) (server, client *tls.Config) {
		s, c, err := peer.LoadTLS(filepath.Join(nodes, "ca.crt"), filepath.Join(nodes, n+".crt"), filepath.Join(nodes, n+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	serverTLS, _ := load("node-1")
	_, clientTLS := load("node-2")
	t.Run("two nodes complete a mutual TLS 1.3 handshake", func(t *testing.T) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		seen := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				seen <- err.Error()
				return
			}
			defer c.Close()
			tc := c.(*tls.Conn)
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err != nil {
				seen <- err.Error()
				return
			}
			id, _ := peer.CertNodeID(tc.ConnectionState().PeerCertificates[0])
			seen <- id
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if id := <-seen; id != "node-2" {
			t.Errorf("the server saw %q, want node-2", id)
		}
		if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
			t.Errorf("version %s, want TLS 1.3", tls.VersionName(v))
		}
	})
}
