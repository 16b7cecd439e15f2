package peer

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// LoadTLS reads the cluster CA (caFile, PEM, one or more CA certificates)
// and this node's certificate and key (certFile, keyFile, PEM) and returns
// the two sides of peer control's mutual TLS, both TLS 1.3 at least:
// server (this certificate, client certificates required and verified
// against the CA: ServerSpec.TLS) and client (this certificate, servers
// verified against the CA: Dial). The certificate must chain to the CA,
// allow both server and client authentication and name the node id in its
// subject common name (CheckNodeID). Every error is a *TLSFileError
// naming the file that is wrong (a certificate that does not verify
// against the CA is the certificate's; a key that does not go with it,
// the key's).
func LoadTLS(caFile, certFile, keyFile string) (server, client *tls.Config, err error) {
	pool, err := loadCA(caFile)
	if err != nil {
		return nil, nil, &TLSFileError{File: TLSFileCA, Path: caFile, Err: err}
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file: %w", err)}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, &TLSFileError{TLSFileKey, keyFile, fmt.Errorf("peer TLS: key file: %w", err)}
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file %s: no PEM CERTIFICATE block", certFile)}
	}
	if b, _ := pem.Decode(keyPEM); b == nil || (b.Type != "PRIVATE KEY" && b.Type != "EC PRIVATE KEY" && b.Type != "RSA PRIVATE KEY") {
		return nil, nil, &TLSFileError{TLSFileKey, keyFile, fmt.Errorf("peer TLS: key file %s: no PEM PRIVATE KEY block", keyFile)}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, &TLSFileError{TLSFileKey, keyFile, fmt.Errorf("peer TLS: key file %s does not go with cert file %s: %w", keyFile, certFile, err)}
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file %s: %w", certFile, err)}
		}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file %s: %w", certFile, err)}
		}
		inter.AddCert(c)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file %s does not verify against CA file %s for %s: %w", certFile, caFile, usageName(u), err)}
		}
	}
	if _, err := CertNodeID(leaf); err != nil {
		return nil, nil, &TLSFileError{TLSFileCert, certFile, fmt.Errorf("peer TLS: cert file %s: %w", certFile, err)}
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS13,
	}
	return server, client, nil
}

// TLSFile is one of LoadTLS's three files.
type TLSFile int

// The files of LoadTLS.
const (
	TLSFileCA   TLSFile = iota + 1 // the cluster CA (caFile)
	TLSFileCert                    // this node's certificate (certFile)
	TLSFileKey                     // this node's private key (keyFile)
)

// TLSFileError is LoadTLS's error: File is the file that is wrong, Path
// its name, Err what is wrong with it (its text names the file too).
type TLSFileError struct {
	File TLSFile
	Path string
	Err  error
}

// Error is Err's text.
func (e *TLSFileError) Error() string { return e.Err.Error() }

// Unwrap is Err.
func (e *TLSFileError) Unwrap() error { return e.Err }

// ConfigNodeID is the node id of the first certificate of c (a config
// LoadTLS made): its subject common name (CertNodeID).
func ConfigNodeID(c *tls.Config) (string, error) {
	if c == nil || len(c.Certificates) == 0 || len(c.Certificates[0].Certificate) == 0 {
		return "", fmt.Errorf("%w: no certificate in the TLS config", ErrUnauthenticated)
	}
	leaf := c.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificates[0].Certificate[0]); err != nil {
			return "", fmt.Errorf("%w: the TLS config's certificate: %v", ErrUnauthenticated, err)
		}
	}
	return CertNodeID(leaf)
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}

// loadCA reads the PEM CA certificates of file into a pool.
func loadCA(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("peer TLS: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("peer TLS: CA file %s: certificate %d: %w", file, n+1, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("peer TLS: CA file %s: certificate %q is not a CA", file, c.Subject.CommonName)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("peer TLS: CA file %s: no PEM CERTIFICATE block", file)
	}
	return pool, nil
}

// CertNodeID is the node id a certificate names: its subject common name,
// which must pass CheckNodeID.
func CertNodeID(c *x509.Certificate) (string, error) {
	id := c.Subject.CommonName
	if err := CheckNodeID(id); err != nil {
		return "", fmt.Errorf("%w: certificate subject common name: %v", ErrUnauthenticated, err)
	}
	return id, nil
}

// MaxNodeIDBytes is the longest node id.
const MaxNodeIDBytes = 64

// nodeIDWant is CheckNodeID's rule in words.
const nodeIDWant = "1..64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"

// CheckNodeID returns nil when id is a node id: 1..MaxNodeIDBytes of
// letters, digits, '.', '_' and '-', not starting with '.' or '-' (it names
// files of `orbitkvctl certs` and appears in logs and etcd keys); else an
// error quoting id and the rule.
func CheckNodeID(id string) error {
	ok := len(id) >= 1 && len(id) <= MaxNodeIDBytes && id[0] != '.' && id[0] != '-'
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("node id %q: want %s", id, nodeIDWant)
	}
	return nil
}
