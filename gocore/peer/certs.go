package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// clockSkew is how far before now a new certificate's validity starts, so a
// peer whose clock is a little behind accepts it at once.
const clockSkew = time.Hour

// NewCA makes a cluster CA: an ECDSA P-256 key and a self-signed CA
// certificate named commonName, valid from now for validity (at least a
// day). It returns both in PEM (the key as PKCS #8 "PRIVATE KEY"); the key
// must be kept secret (mode 0600).
func NewCA(commonName string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("CA name: want a name")
	}
	if validity < 24*time.Hour {
		return nil, nil, fmt.Errorf("CA validity %v: want at least a day", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"OrbitKV"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return sign(tmpl, tmpl, key, key)
}

// NodeCertSpec describes a node certificate.
type NodeCertSpec struct {
	// Name is the node id (CheckNodeID), the subject common name.
	Name string
	// IPs and DNSNames are the names the node's peer control is dialled by
	// (subject alternative names); at least one of them.
	IPs      []net.IP
	DNSNames []string
	// Validity is how long the certificate is valid from now (at least an
	// hour).
	Validity time.Duration
}

// NewNodeCert makes a node certificate signed by the CA (caCertPEM,
// caKeyPEM as NewCA wrote them, or an operator's own CA with an ECDSA,
// RSA or Ed25519 key): an ECDSA P-256 key and a certificate for both
// server and client authentication, in PEM.
func NewNodeCert(caCertPEM, caKeyPEM []byte, s NodeCertSpec, now time.Time) (certPEM, keyPEM []byte, err error) {
	if err := CheckNodeID(s.Name); err != nil {
		return nil, nil, err
	}
	if len(s.IPs) == 0 && len(s.DNSNames) == 0 {
		return nil, nil, errors.New("node certificate: want at least one IP address or DNS name the node is dialled by")
	}
	if s.Validity < time.Hour {
		return nil, nil, fmt.Errorf("node certificate validity %v: want at least an hour", s.Validity)
	}
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate and key: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !caCert.IsCA {
		return nil, nil, fmt.Errorf("CA certificate %q is not a CA", caCert.Subject.CommonName)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.Name, Organization: []string{"OrbitKV"}},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(s.Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: s.IPs,
		DNSNames:    s.DNSNames,
	}
	return signWith(tmpl, caCert, ca.PrivateKey)
}

// signWith makes a new ECDSA P-256 key and signs tmpl for it with
// parentKey.
func signWith(tmpl, parent *x509.Certificate, parentKey any) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return sign(tmpl, parent, key, parentKey)
}

// sign fills tmpl's serial number (128 random bits), signs it with
// parentKey and returns the certificate and key in PEM.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey any) (certPEM, keyPEM []byte, err error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}
