package peer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadTLSNamesTheFileThatIsWrong(t *testing.T) {
	ca := newTestCA(t, "test CA")
	other := newTestCA(t, "other CA")
	cert, key := ca.node(t, "n1")
	otherCert, otherKey := other.node(t, "n2")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	writeFile(t, garbage, []byte("not PEM\n"), 0o600)
	missing := filepath.Join(dir, "missing.pem")
	caFile := filepath.Join(ca.dir, "ca.crt")
	for _, tc := range []struct {
		name             string
		caF, certF, keyF string
		file             TLSFile // the *TLSFileError's File
		want             []string
	}{
		{"a missing CA file is named", missing, cert, key, TLSFileCA, []string{"CA file", missing}},
		{"a CA file without PEM is named", garbage, cert, key, TLSFileCA, []string{"CA file " + garbage, "no PEM CERTIFICATE"}},
		{"a CA file holding a node certificate is refused", cert, cert, key, TLSFileCA, []string{"CA file " + cert, `"n1" is not a CA`}},
		{"a missing cert file is named", caFile, missing, key, TLSFileCert, []string{"cert file", missing}},
		{"a cert file without PEM is named", caFile, garbage, key, TLSFileCert, []string{"cert file " + garbage}},
		{"a missing key file is named", caFile, cert, missing, TLSFileKey, []string{"key file", missing}},
		{"a key file without PEM is named", caFile, cert, garbage, TLSFileKey, []string{"key file " + garbage}},
		{"a key of another certificate is named", caFile, cert, otherKey, TLSFileKey, []string{"key file " + otherKey, "does not go with cert file " + cert}},
		{"a certificate of another CA is named", caFile, otherCert, otherKey, TLSFileCert, []string{"cert file " + otherCert, "does not verify against CA file " + caFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadTLS(tc.caF, tc.certF, tc.keyF)
			if err == nil {
				t.Fatal("LoadTLS succeeded")
			}
			var fe *TLSFileError
			if !errors.As(err, &fe) || fe.File != tc.file {
				t.Errorf("error %v is not a *TLSFileError of file %d", err, tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Run("a server-only certificate is refused for client authentication", func(t *testing.T) {
		c, k := serverOnlyCert(t, ca)
		_, _, err := LoadTLS(caFile, c, k)
		if err == nil || !strings.Contains(err.Error(), "client authentication") {
			t.Errorf("LoadTLS: %v, want a refusal naming client authentication", err)
		}
	})
	t.Run("good files give mutual TLS 1.3 configs", func(t *testing.T) {
		s, c, err := LoadTLS(caFile, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		if s.ClientAuth != tls.RequireAndVerifyClientCert || s.MinVersion != tls.VersionTLS13 || c.MinVersion != tls.VersionTLS13 || c.RootCAs == nil || s.ClientCAs == nil {
			t.Errorf("configs: server %+v client %+v", s, c)
		}
	})
}

// serverOnlyCert is a certificate of ca for server authentication only.
func serverOnlyCert(t *testing.T, ca *testCA) (certFile, keyFile string) {
	t.Helper()
	pair, err := tls.X509KeyPair(ca.certPEM, ca.keyP)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(pair.Certificate[0])
	tmpl := &x509.Certificate{Subject: caCert.Subject, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	tmpl.Subject.CommonName = "server-only"
	certPEM, keyPEM, err := signWith(tmpl, caCert, pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, "so.crt"), filepath.Join(ca.dir, "so.key")
	writeFile(t, certFile, certPEM, 0o644)
	writeFile(t, keyFile, keyPEM, 0o600)
	return certFile, keyFile
}

func TestNewCertificates(t *testing.T) {
	ca := newTestCA(t, "test CA")
	now := time.Now()
	for _, tc := range []struct {
		name string
		spec NodeCertSpec
		want string
	}{
		{"a node without a name is refused", NodeCertSpec{IPs: []net.IP{net.IPv4(127, 0, 0, 2)}, Validity: time.Hour}, `node id ""`},
		{"a node name with a slash is refused", NodeCertSpec{Name: "a/b", IPs: []net.IP{net.IPv4(127, 0, 0, 2)}, Validity: time.Hour}, `node id "a/b"`},
		{"a node name starting with a dot is refused", NodeCertSpec{Name: ".a", DNSNames: []string{"x"}, Validity: time.Hour}, `node id ".a"`},
		{"a node without an address or DNS name is refused", NodeCertSpec{Name: "n", Validity: time.Hour}, "at least one IP address or DNS name"},
		{"a validity under an hour is refused", NodeCertSpec{Name: "n", DNSNames: []string{"x"}, Validity: time.Minute}, "want at least an hour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := NewNodeCert(ca.certPEM, ca.keyP, tc.spec, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewNodeCert: %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("a node certificate is ECDSA P-256 with its names and both usages", func(t *testing.T) {
		c, _, err := NewNodeCert(ca.certPEM, ca.keyP, NodeCertSpec{Name: "node-2", IPs: []net.IP{net.IPv4(127, 0, 0, 2)}, DNSNames: []string{"node-2.local"}, Validity: 48 * time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(c)
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
		for _, c := range []struct {
			what string
			ok   bool
		}{
			{"an ECDSA P-256 key", ok && pub.Curve == elliptic.P256()},
			{"the node id as common name", cert.Subject.CommonName == "node-2"},
			{"the IP address", len(cert.IPAddresses) == 1 && cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 2))},
			{"the DNS name", len(cert.DNSNames) == 1 && cert.DNSNames[0] == "node-2.local"},
			{"server and client usage", len(cert.ExtKeyUsage) == 2},
			{"no CA bit", !cert.IsCA},
			{"the validity asked for", (cert.NotAfter.Sub(now) - 48*time.Hour).Abs() < time.Second},
		} {
			if !c.ok {
				t.Errorf("the certificate has not %s: %v %v %v %v", c.what, cert.Subject, cert.IPAddresses, cert.DNSNames, cert.NotAfter)
			}
		}
	})
	t.Run("a CA without a name or under a day is refused", func(t *testing.T) {
		if _, _, err := NewCA("", 48*time.Hour, now); err == nil {
			t.Error("NewCA without a name succeeded")
		}
		if _, _, err := NewCA("x", time.Hour, now); err == nil {
			t.Error("NewCA for an hour succeeded")
		}
	})
	t.Run("a node certificate cannot be signed by a node certificate", func(t *testing.T) {
		c, k, err := NewNodeCert(ca.certPEM, ca.keyP, NodeCertSpec{Name: "n", DNSNames: []string{"x"}, Validity: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := NewNodeCert(c, k, NodeCertSpec{Name: "m", DNSNames: []string{"y"}, Validity: time.Hour}, now); err == nil || !strings.Contains(err.Error(), "is not a CA") {
			t.Errorf("signed by a node certificate: %v", err)
		}
	})
}

func TestDialChecksItsConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr string
		cfg  *tls.Config
		want string
	}{
		{"an address without a port is refused", "127.0.0.1", &tls.Config{Certificates: []tls.Certificate{{}}}, "want host:port"},
		{"no TLS config is refused", "127.0.0.1:1", nil, "client TLS config with this node's certificate"},
		{"a config without a certificate is refused", "127.0.0.1:1", &tls.Config{}, "client TLS config with this node's certificate"},
		{"TLS 1.2 is refused", "127.0.0.1:1", &tls.Config{Certificates: []tls.Certificate{{}}, MinVersion: tls.VersionTLS12}, "want TLS 1.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(tc.addr, tc.cfg)
			if err == nil {
				c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestServerSpecValidateNamesTheField(t *testing.T) {
	ca := newTestCA(t, "test CA")
	serverTLS, clientTLS := ca.tls(t, "src")
	good := ServerSpec{Listen: "127.0.0.1:0", TLS: serverTLS, Source: newMemSource(t, testNS), Transfer: newDataPath(t).srv, Epoch: 1, NodeID: "src"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	noClientAuth := serverTLS.Clone()
	noClientAuth.ClientAuth = tls.VerifyClientCertIfGiven
	for _, tc := range []struct {
		name string
		edit func(*ServerSpec)
		want string
	}{
		{"no TLS is refused", func(s *ServerSpec) { s.TLS = nil }, "peer.TLS"},
		{"TLS without required client certificates is refused", func(s *ServerSpec) { s.TLS = noClientAuth }, "peer.TLS.ClientAuth"},
		{"a client config as the server's is refused", func(s *ServerSpec) { s.TLS = clientTLS }, "peer.TLS.ClientAuth"},
		{"epoch 0 is refused", func(s *ServerSpec) { s.Epoch = 0 }, "peer.Epoch 0: want at least 1"},
		{"no Source is refused", func(s *ServerSpec) { s.Source = nil }, "peer.Source"},
		{"no transfer server is refused", func(s *ServerSpec) { s.Transfer = nil }, "peer.Transfer"},
		{"a bad node id is refused", func(s *ServerSpec) { s.NodeID = "a b" }, `peer.NodeID "a b"`},
		{"a listen address without a port is refused", func(s *ServerSpec) { s.Listen = "127.0.0.1" }, "peer.Listen"},
		{"a lease under 10ms is refused", func(s *ServerSpec) { s.LeaseTTL = time.Millisecond }, "peer.LeaseTTL 1ms: want 10ms..10m"},
		{"MaxPeerBytes below MaxTransferBytes is refused", func(s *ServerSpec) { s.MaxTransferBytes = 1 << 30 }, "peer.MaxPeerBytes 256MiB: want 1GiB..1TiB, at least peer.MaxTransferBytes"},
		{"MaxPeerTransfers above its limit is refused", func(s *ServerSpec) { s.MaxPeerTransfers = 1 << 20 }, "peer.MaxPeerTransfers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
			if srv, err := Serve(s); err == nil {
				srv.Close()
				t.Error("Serve took a spec Validate refuses")
			}
		})
	}
	t.Run("a busy address is named", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s := good
		s.Listen = ln.Addr().String()
		if srv, err := Serve(s); err == nil || !strings.Contains(err.Error(), s.Listen) {
			if srv != nil {
				srv.Close()
			}
			t.Errorf("Serve on a busy address: %v", err)
		}
	})
}

// The files orbitkvctl certs writes (NewCA, NewNodeCert) load with
// LoadTLS and authenticate both ends of a handshake, with the node ids
// the certificates name.
func TestCertificatesRoundTripThroughAHandshake(t *testing.T) {
	ca := newTestCA(t, "test CA")
	serverTLS, _ := ca.tls(t, "node-1")
	_, clientTLS := ca.tls(t, "node-2")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.HandshakeContext(context.Background()); err != nil {
			got <- err.Error()
			return
		}
		id, err := CertNodeID(tc.ConnectionState().VerifiedChains[0][0])
		if err != nil {
			id = err.Error()
		}
		got <- id
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if id, _ := CertNodeID(c.ConnectionState().PeerCertificates[0]); id != "node-1" || c.ConnectionState().Version != tls.VersionTLS13 {
		t.Errorf("client sees server %q over %s, want node-1 over TLS 1.3", id, tls.VersionName(c.ConnectionState().Version))
	}
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "node-2" {
			t.Errorf("server sees client %q, want node-2", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no handshake within 5s")
	}
}
