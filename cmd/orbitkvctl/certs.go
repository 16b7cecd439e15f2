package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orbitkv/orbitkv/gocore/peer"
)

// The files of a certificate directory.
const (
	caCertName = "ca.crt"
	caKeyName  = "ca.key"
)

// maxDays bounds --days (100 years).
const maxDays = 36500

func certsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs ca|node",
		Short: "Make a cluster CA and node certificates for the Managers' peer control (mutual TLS)",
		Long: `certs makes the certificates of peer control, the gRPC service Managers use
between them, which is mutual TLS 1.3 under one cluster CA: a Manager serves and
calls only peers whose certificate that CA signed, and a node's id is its
certificate's subject common name. Keys are ECDSA P-256 (PKCS #8 PEM) and are
written with mode 0600; existing files are never overwritten.

  orbitkvctl certs ca --out DIR
  orbitkvctl certs node --ca DIR --name NODE --ip 127.0.0.2 --out DIR

Keep ca.key off the nodes: a node needs ca.crt, NODE.crt and NODE.key only.
These are meant for tests, demos and small clusters; operators may bring
certificates of their own PKI instead (see gocore/peer's documentation: a PEM
CA, and per node a certificate naming the node id as its common name, with the
server and client extended key usages and the node's addresses).`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("certs: give ca or node")
		},
	}
	cmd.AddCommand(certsCACmd(), certsNodeCmd())
	return cmd
}

func certsCACmd() *cobra.Command {
	var out, name string
	var days int
	cmd := &cobra.Command{
		Use:   "ca --out DIR",
		Short: "Make a cluster CA: DIR/ca.crt and DIR/ca.key (mode 0600)",
		Long: `ca makes a cluster CA, an ECDSA P-256 key and a self-signed CA certificate,
into DIR/ca.crt and DIR/ca.key (mode 0600). DIR is made (mode 0700) when it is
missing; existing files are not overwritten.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("certs ca: give --out DIR")
			}
			if name == "" {
				return usagef("certs ca: --name must not be empty")
			}
			if days < 1 || days > maxDays {
				return usagef("certs ca: --days must be between 1 and %d (got %d)", maxDays, days)
			}
			certPEM, keyPEM, err := peer.NewCA(name, time.Duration(days)*24*time.Hour, time.Now())
			if err != nil {
				return err
			}
			files := []outFile{{filepath.Join(out, caCertName), certPEM, 0o644}, {filepath.Join(out, caKeyName), keyPEM, 0o600}}
			if err := writeFiles(out, files); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote %s (the CA certificate, for every node)\n", files[0].path)
			fmt.Fprintf(w, "wrote %s (the CA key, mode 0600: keep it off the nodes)\n", files[1].path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "`directory` to write ca.crt and ca.key into")
	f.StringVar(&name, "name", "OrbitKV cluster CA", "the CA's subject common `name`")
	f.IntVar(&days, "days", 3650, "days the CA is valid (1..36500)")
	return cmd
}

func certsNodeCmd() *cobra.Command {
	var caDir, name, out string
	var ips, dns []string
	var days int
	cmd := &cobra.Command{
		Use:   "node --ca DIR --name NODE (--ip IP | --dns NAME)... --out DIR",
		Short: "Make a node certificate signed by the cluster CA: DIR/NODE.crt and DIR/NODE.key (mode 0600)",
		Long: `node makes a node certificate signed by the CA in --ca (its ca.crt and ca.key):
an ECDSA P-256 key and a certificate whose subject common name is the node id
--name (1..64 letters, digits, '.', '_' or '-'), valid for server and client
authentication, naming every --ip and --dns the node's peer control is dialled
by (at least one). It writes OUT/NODE.crt, OUT/NODE.key (mode 0600) and, when
OUT has none, a copy of the CA certificate OUT/ca.crt, so OUT holds what the
node needs. OUT is made (mode 0700) when it is missing; existing files are not
overwritten.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case caDir == "":
				return usagef("certs node: give --ca DIR (the directory of certs ca)")
			case out == "":
				return usagef("certs node: give --out DIR")
			case name == "":
				return usagef("certs node: give --name NODE (the node id)")
			case len(ips) == 0 && len(dns) == 0:
				return usagef("certs node: give at least one --ip or --dns the node is dialled by")
			case days < 1 || days > maxDays:
				return usagef("certs node: --days must be between 1 and %d (got %d)", maxDays, days)
			}
			if err := peer.CheckNodeID(name); err != nil {
				return usagef("certs node: --name: %v", err)
			}
			if name+".crt" == caCertName || name+".key" == caKeyName {
				return usagef("certs node: --name %q is reserved: NODE.crt would be the CA's %s in --out; choose another node id", name, caCertName)
			}
			spec := peer.NodeCertSpec{Name: name, DNSNames: dns, Validity: time.Duration(days) * 24 * time.Hour}
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return usagef("certs node: --ip %q: not an IP address", s)
				}
				spec.IPs = append(spec.IPs, ip)
			}
			for _, d := range dns {
				if d == "" || strings.ContainsAny(d, " /\\:@") {
					return usagef("certs node: --dns %q: not a DNS name", d)
				}
			}
			caCert, err := os.ReadFile(filepath.Join(caDir, caCertName))
			if err != nil {
				return fmt.Errorf("certs node: the CA certificate: %w", err)
			}
			caKey, err := os.ReadFile(filepath.Join(caDir, caKeyName))
			if err != nil {
				return fmt.Errorf("certs node: the CA key: %w", err)
			}
			certPEM, keyPEM, err := peer.NewNodeCert(caCert, caKey, spec, time.Now())
			if err != nil {
				return fmt.Errorf("certs node: with the CA of %s: %w", caDir, err)
			}
			files := []outFile{{filepath.Join(out, name+".crt"), certPEM, 0o644}, {filepath.Join(out, name+".key"), keyPEM, 0o600}}
			caCopy := filepath.Join(out, caCertName)
			switch have, err := os.ReadFile(caCopy); {
			case errors.Is(err, fs.ErrNotExist):
				files = append(files, outFile{caCopy, caCert, 0o644})
			case err != nil:
				return fmt.Errorf("certs node: %w", err)
			case !bytes.Equal(have, caCert):
				return fmt.Errorf("certs node: %s is another CA's certificate than %s: choose another --out", caCopy, filepath.Join(caDir, caCertName))
			}
			if err := writeFiles(out, files); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, f := range files {
				fmt.Fprintf(w, "wrote %s\n", f.path)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "`directory` of the CA (ca.crt and ca.key, as certs ca wrote them)")
	f.StringVar(&name, "name", "", "the node id, the certificate's subject common `name`")
	f.StringSliceVar(&ips, "ip", nil, "an IP `address` the node is dialled by (repeat or comma-separate)")
	f.StringSliceVar(&dns, "dns", nil, "a DNS `name` the node is dialled by (repeat or comma-separate)")
	f.StringVar(&out, "out", "", "`directory` to write NODE.crt, NODE.key and ca.crt into")
	f.IntVar(&days, "days", 365, "days the certificate is valid (1..36500)")
	return cmd
}

// outFile is a file certs writes.
type outFile struct {
	path string
	data []byte
	mode os.FileMode
}

// writeFiles makes dir (0700) when missing and writes files, none of which
// may exist yet; on an error it removes what it wrote.
func writeFiles(dir string, files []outFile) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	for _, f := range files {
		if _, err := os.Lstat(f.path); err == nil {
			return fmt.Errorf("certs: %s exists: remove it or choose another --out", f.path)
		}
	}
	var done []string
	for _, f := range files {
		if err := writeNew(f); err != nil {
			for _, p := range done {
				os.Remove(p)
			}
			return fmt.Errorf("certs: %w", err)
		}
		done = append(done, f.path)
	}
	return nil
}

// writeNew creates f.path (never an existing file) with f.mode and f.data.
func writeNew(f outFile) error {
	fd, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(fd, bytes.NewReader(f.data))
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The umask may only have narrowed the mode; make it exact.
		err = os.Chmod(f.path, f.mode)
	}
	if err != nil {
		os.Remove(f.path)
	}
	return err
}
