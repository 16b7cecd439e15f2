package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLS is a test CA with a server certificate for 127.0.0.1 and a client
// certificate, both ECDSA P-256 and valid for an hour, written under the
// test's TempDir (keys 0600).
type TLS struct {
	CAFile, ServerCertFile, ServerKeyFile string
	// Client trusts the CA and presents the client certificate.
	Client *tls.Config
}

// NewTLS makes the CA and both certificates.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := newCert(t, "etcdtest CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid, c.KeyUsage = true, true, x509.KeyUsageCertSign
	})
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER, 0o644)
	srvKey, _, srvDER := newCert(t, "etcdtest server", caCert, caKey, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		c.DNSNames = []string{"localhost"}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	})
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", srvDER, 0o644)
	writePEM(t, filepath.Join(dir, "server-key.pem"), "EC PRIVATE KEY", marshalKey(t, srvKey), 0o600)
	cliKey, _, cliDER := newCert(t, "etcdtest client", caCert, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &TLS{
		CAFile: filepath.Join(dir, "ca.pem"), ServerCertFile: filepath.Join(dir, "server.pem"), ServerKeyFile: filepath.Join(dir, "server-key.pem"),
		Client: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}}, MinVersion: tls.VersionTLS12},
	}
}

func newCert(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, edit func(*x509.Certificate)) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func marshalKey(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, path, kind string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}
