package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/internal/syncbuf"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

var testNS = abi.Namespace{'n', 's'}

// rig is a source node "src" serving peer control on loopback.
type rig struct {
	ca  *testCA
	src *memSource
	seg *dataPath
	srv *Server
}

func newRig(t *testing.T, edit func(*ServerSpec)) *rig {
	t.Helper()
	r := &rig{ca: newTestCA(t, "test cluster CA"), src: newMemSource(t, testNS), seg: newDataPath(t)}
	serverTLS, _ := r.ca.tls(t, "src")
	spec := ServerSpec{
		Listen: "127.0.0.1:0", TLS: serverTLS, Source: r.src, Transfer: r.seg.srv,
		Epoch: 7, NodeID: "src", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&spec)
	}
	srv, err := Serve(spec)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	t.Cleanup(func() {
		srv.Close()
		if n := r.src.livePins(); n != 0 {
			t.Errorf("after Close %d pins are still held", n)
		}
		if n := r.seg.segments(); n != 0 {
			t.Errorf("after Close %d segments are still registered", n)
		}
	})
	return r
}

// dial is a Client of the rig's server with a new certificate of its CA
// named node.
func (r *rig) dial(t *testing.T, node string) *Client {
	t.Helper()
	_, clientTLS := r.ca.tls(t, node)
	c, err := Dial(r.srv.Addr(), clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenReadRelease(t *testing.T) {
	r := newRig(t, nil)
	lengths := []int{10000, 4096, 1, 20000}
	want := map[abi.BlockHash][]byte{}
	for i, n := range lengths {
		want[hash(i)] = r.src.put(hash(i), n)
	}
	c := r.dial(t, "req")
	// hash(9) is not resident: the run stops there and hash(3) after it is
	// not part of it.
	asked := []abi.BlockHash{hash(0), hash(1), hash(2), hash(9), hash(3)}
	tr, err := c.OpenTransfer(ctx5(t), testNS, asked, 1<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the run is the resident leading blocks with their lengths and offsets", func(t *testing.T) {
		if len(tr.Blocks) != 3 {
			t.Fatalf("run of %d blocks, want 3", len(tr.Blocks))
		}
		var off uint64
		for i, b := range tr.Blocks {
			if b.Hash != asked[i] || b.Length != uint64(lengths[i]) || b.Offset != off || b.Layers != uint32(lengths[i]%61+1) {
				t.Errorf("block %d = %+v, want hash %x length %d offset %d layers %d", i, b, asked[i], lengths[i], off, lengths[i]%61+1)
			}
			off += b.Length
		}
		if tr.Bytes != off || tr.Epoch != 7 || tr.DataAddr != r.seg.srv.Addr() || tr.ID == 0 {
			t.Errorf("transfer %+v: want %d bytes at epoch 7 on %s with an id", tr, off, r.seg.srv.Addr())
		}
	})
	t.Run("the deadline is the lease's length from the call", func(t *testing.T) {
		if d := time.Until(tr.Deadline); d <= 0 || d > DefaultLeaseTTL {
			t.Errorf("deadline in %v, want within (0, %v]", d, DefaultLeaseTTL)
		}
	})
	t.Run("each block read from the segment has the bytes and the CRC32C announced", func(t *testing.T) {
		for _, b := range tr.Blocks {
			got, err := r.seg.read(tr, tr.Capability, b.Offset, b.Length)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[b.Hash]) {
				t.Errorf("block %x: bytes differ from the source's", b.Hash)
			}
			if CRC32C(got) != b.CRC32C {
				t.Errorf("block %x: CRC32C %08x, announced %08x", b.Hash, CRC32C(got), b.CRC32C)
			}
		}
	})
	t.Run("a wrong capability reads nothing", func(t *testing.T) {
		bad := tr.Capability
		bad[0] ^= 1
		if _, err := r.seg.read(tr, bad, 0, 1); !errors.Is(err, transfer.ErrUnknownSegment) {
			t.Errorf("read with a wrong capability: %v, want ErrUnknownSegment (a wrong capability is answered as an unknown segment)", err)
		}
	})
	t.Run("release unregisters the segment and unpins", func(t *testing.T) {
		if err := c.ReleaseTransfer(ctx5(t), tr.ID); err != nil {
			t.Fatal(err)
		}
		r.src.waitUnpin(t, 30*time.Second, "release")
		if n := r.seg.segments(); n != 0 {
			t.Errorf("%d segments registered after the release", n)
		}
		if _, err := r.seg.read(tr, tr.Capability, 0, 1); err == nil {
			t.Error("the segment still reads after the release")
		}
		if st := r.srv.Stats(); st.Released != 1 || st.Open != 0 || st.Opened != 1 || st.OpenedBytes != tr.Bytes {
			t.Errorf("stats %+v: want 1 opened (%d bytes) and released, none open", st, tr.Bytes)
		}
	})
	t.Run("a second release is an unknown transfer", func(t *testing.T) {
		if err := c.ReleaseTransfer(ctx5(t), tr.ID); !errors.Is(err, ErrUnknownTransfer) {
			t.Errorf("second release: %v, want ErrUnknownTransfer", err)
		}
	})
}

func TestEmptyAndLimitedRuns(t *testing.T) {
	r := newRig(t, nil)
	r.src.put(hash(0), 8192)
	r.src.put(hash(1), 8192)
	c := r.dial(t, "req")
	for _, tc := range []struct {
		name     string
		ns       abi.Namespace
		hashes   []abi.BlockHash
		maxBytes uint64
		blocks   int
	}{
		{"a first block not resident gives an empty run", testNS, []abi.BlockHash{hash(5), hash(0)}, 1 << 20, 0},
		{"another namespace gives an empty run", abi.Namespace{'x'}, []abi.BlockHash{hash(0)}, 1 << 20, 0},
		{"max_bytes below the first block gives an empty run", testNS, []abi.BlockHash{hash(0)}, 8191, 0},
		{"max_bytes cuts the run at a block's end", testNS, []abi.BlockHash{hash(0), hash(1)}, 16383, 1},
		{"max_bytes of the whole run gives all of it", testNS, []abi.BlockHash{hash(0), hash(1)}, 16384, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := c.OpenTransfer(ctx5(t), tc.ns, tc.hashes, tc.maxBytes, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Blocks) != tc.blocks {
				t.Fatalf("run of %d blocks, want %d", len(tr.Blocks), tc.blocks)
			}
			if tc.blocks == 0 {
				if tr.ID != 0 {
					t.Errorf("an empty run has transfer id %d, want 0", tr.ID)
				}
				r.src.waitUnpin(t, 30*time.Second, "empty run")
				return
			}
			if err := c.ReleaseTransfer(ctx5(t), tr.ID); err != nil {
				t.Fatal(err)
			}
			r.src.waitUnpin(t, 30*time.Second, "release")
		})
	}
}

func TestPinsGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		end  func(t *testing.T, c *Client, tr *Transfer)
		stat func(Stats) uint64
	}{
		{"pins go at release", time.Minute, func(t *testing.T, c *Client, tr *Transfer) {
			if err := c.ReleaseTransfer(ctx5(t), tr.ID); err != nil {
				t.Fatal(err)
			}
		}, func(s Stats) uint64 { return s.Released }},
		{"pins go at the lease's expiry", 200 * time.Millisecond, func(*testing.T, *Client, *Transfer) {}, func(s Stats) uint64 { return s.Expired }},
		{"pins go when the requester's connection drops", time.Minute, func(_ *testing.T, c *Client, _ *Transfer) { c.Close() }, func(s Stats) uint64 { return s.Dropped }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(s *ServerSpec) { s.LeaseTTL = tc.ttl })
			r.src.put(hash(0), 5000)
			c := r.dial(t, "req")
			tr, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
			if err != nil || len(tr.Blocks) != 1 {
				t.Fatalf("open: %v, %+v", err, tr)
			}
			start := time.Now()
			tc.end(t, c, tr)
			r.src.waitUnpin(t, tc.ttl+30*time.Second, tc.name)
			if tc.ttl < time.Minute && time.Since(start) < tc.ttl/2 {
				t.Errorf("unpinned after %v, before the lease of %v ended", time.Since(start), tc.ttl)
			}
			if r.seg.segments() != 0 {
				t.Error("segment still registered after the pins went")
			}
			if _, err := r.seg.read(tr, tr.Capability, 0, 1); err == nil {
				t.Error("the segment still reads after the pins went")
			}
			st := r.srv.Stats()
			if got := tc.stat(st); got != 1 || st.Open != 0 || st.OpenBytes != 0 || st.Peers != 0 {
				t.Errorf("stats %+v: want this end counted once and nothing open", st)
			}
		})
	}
}

func TestCloseReleasesOpenTransfers(t *testing.T) {
	r := newRig(t, nil)
	r.src.put(hash(0), 100)
	c := r.dial(t, "req")
	for range 3 {
		if _, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); err != nil {
			t.Fatal(err)
		}
	}
	r.srv.Close()
	if n := r.src.livePins(); n != 0 {
		t.Errorf("%d pins held after Close, want 0", n)
	}
	if _, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); !errors.Is(err, ErrUnavailable) {
		t.Errorf("open after Close: %v, want ErrUnavailable", err)
	}
}

func TestPerPeerBounds(t *testing.T) {
	r := newRig(t, func(s *ServerSpec) {
		s.MaxPeerTransfers = 2
		s.MaxTransferBytes = 16 << 10
		s.MaxPeerBytes = 24 << 10
	})
	for i := range 4 {
		r.src.put(hash(i), 8<<10)
	}
	all := []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}
	a, b := r.dial(t, "peer-a"), r.dial(t, "peer-b")
	first, err := a.OpenTransfer(ctx5(t), testNS, all, 1<<30, 7)
	t.Run("max_bytes above MaxTransferBytes is lowered to it", func(t *testing.T) {
		if err != nil || first.Bytes != 16<<10 {
			t.Fatalf("first open: %v, %+v; want 16KiB", err, first)
		}
	})
	second, err := a.OpenTransfer(ctx5(t), testNS, all, 1<<30, 7)
	t.Run("a peer's bytes are bounded by MaxPeerBytes", func(t *testing.T) {
		if err != nil || second.Bytes != 8<<10 {
			t.Fatalf("second open: %v, %+v; want the 8KiB left of 24KiB", err, second)
		}
	})
	t.Run("a peer's transfers are bounded by MaxPeerTransfers", func(t *testing.T) {
		_, err := a.OpenTransfer(ctx5(t), testNS, all, 1<<30, 7)
		if !errors.Is(err, ErrPeerLimit) || !strings.Contains(err.Error(), "MaxPeerTransfers") {
			t.Errorf("third open: %v, want ErrPeerLimit naming MaxPeerTransfers", err)
		}
	})
	t.Run("another peer has its own bounds", func(t *testing.T) {
		tr, err := b.OpenTransfer(ctx5(t), testNS, all, 1<<30, 7)
		if err != nil || tr.Bytes != 16<<10 {
			t.Fatalf("other peer's open: %v, %+v", err, tr)
		}
		if err := b.ReleaseTransfer(ctx5(t), tr.ID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a peer cannot release another peer's transfer", func(t *testing.T) {
		if err := b.ReleaseTransfer(ctx5(t), first.ID); !errors.Is(err, ErrUnknownTransfer) {
			t.Errorf("release of another peer's transfer: %v, want ErrUnknownTransfer", err)
		}
	})
	t.Run("a release gives the peer its share back", func(t *testing.T) {
		if err := a.ReleaseTransfer(ctx5(t), second.ID); err != nil {
			t.Fatal(err)
		}
		tr, err := a.OpenTransfer(ctx5(t), testNS, all, 1<<30, 7)
		if err != nil || tr.Bytes != 8<<10 {
			t.Fatalf("open after the release: %v, %+v", err, tr)
		}
	})
}

func TestAPeerAtMaxPeerBytesIsRefusedNamingIt(t *testing.T) {
	r := newRig(t, func(s *ServerSpec) {
		s.MaxTransferBytes = 8 << 10
		s.MaxPeerBytes = 16 << 10
	})
	r.src.put(hash(0), 8<<10)
	c := r.dial(t, "req")
	for i := range 2 {
		if tr, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); err != nil || tr.Bytes != 8<<10 {
			t.Fatalf("open %d: %v %+v", i, err, tr)
		}
	}
	_, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
	if !errors.Is(err, ErrPeerLimit) || !strings.Contains(err.Error(), "MaxPeerBytes") {
		t.Errorf("open beyond the bytes: %v, want ErrPeerLimit naming MaxPeerBytes", err)
	}
	if st := r.srv.Stats(); st.Limited != 1 || st.Open != 2 || st.OpenBytes != 16<<10 || st.Peers != 1 {
		t.Errorf("stats %+v: want 1 limited, 2 open of 16KiB for 1 peer", st)
	}
}

func TestEpochMismatchIsAFailedPrecondition(t *testing.T) {
	r := newRig(t, nil)
	r.src.put(hash(0), 100)
	c := r.dial(t, "req")
	for _, epoch := range []uint64{6, 8} {
		_, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, epoch)
		if !errors.Is(err, ErrEpochMismatch) || !strings.Contains(err.Error(), "epoch 7") {
			t.Errorf("expect_epoch %d: %v, want ErrEpochMismatch naming epoch 7", epoch, err)
		}
	}
	if n := r.src.pins(); n != 0 {
		t.Errorf("a mismatched epoch reached the Source %d times", n)
	}
	if st := r.srv.Stats(); st.EpochMismatches != 2 {
		t.Errorf("EpochMismatches = %d, want 2", st.EpochMismatches)
	}
}

// rawClient is a gRPC client of the rig's server that sends requests as
// they are, past Client's encoding.
func (r *rig) rawClient(t *testing.T, cfg *tls.Config) peerpb.PeerClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+r.srv.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return peerpb.NewPeerClient(cc)
}

func TestRequestValidationNamesTheFieldAndLimit(t *testing.T) {
	r := newRig(t, nil)
	_, clientTLS := r.ca.tls(t, "req")
	pc := r.rawClient(t, clientTLS)
	h := hash(0)
	good := func() *peerpb.OpenTransferRequest {
		return &peerpb.OpenTransferRequest{Namespace: testNS[:], Hashes: [][]byte{h[:]}, MaxBytes: 1, ExpectEpoch: 7}
	}
	tooMany := make([][]byte, MaxHashes+1)
	for i := range tooMany {
		tooMany[i] = h[:]
	}
	for _, tc := range []struct {
		name string
		edit func(*peerpb.OpenTransferRequest)
		want string
	}{
		{"a namespace of 15 bytes is refused", func(q *peerpb.OpenTransferRequest) { q.Namespace = q.Namespace[:15] }, "namespace: 15 bytes, want 16"},
		{"no namespace is refused", func(q *peerpb.OpenTransferRequest) { q.Namespace = nil }, "namespace: 0 bytes, want 16"},
		{"no hashes are refused", func(q *peerpb.OpenTransferRequest) { q.Hashes = nil }, "hashes: 0 of them, want 1..4096"},
		{"more than MaxHashes hashes are refused", func(q *peerpb.OpenTransferRequest) { q.Hashes = tooMany }, "hashes: 4097 of them, want 1..4096"},
		{"a hash of 17 bytes is refused by its index", func(q *peerpb.OpenTransferRequest) { q.Hashes = [][]byte{h[:], append(h[:], 0)} }, "hashes[1]: 17 bytes, want 16"},
		{"max_bytes 0 is refused", func(q *peerpb.OpenTransferRequest) { q.MaxBytes = 0 }, "max_bytes: 0, want at least 1"},
		{"expect_epoch 0 is refused", func(q *peerpb.OpenTransferRequest) { q.ExpectEpoch = 0 }, "expect_epoch: 0, want the source's epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := good()
			tc.edit(q)
			_, err := pc.OpenTransfer(ctx5(t), q)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Errorf("got %v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
	if n := r.src.pins(); n != 0 {
		t.Errorf("invalid requests reached the Source %d times", n)
	}
}

func TestOnlyAuthenticatedPeersOpenTransfers(t *testing.T) {
	r := newRig(t, nil)
	r.src.put(hash(0), 100)
	other := newTestCA(t, "another cluster's CA")
	_, foreignTLS := other.tls(t, "intruder")
	// The foreign node trusts our CA for the server, so only the server's
	// check of its certificate can refuse it.
	foreignTLS.RootCAs = x509.NewCertPool()
	ourCA, _ := os.ReadFile(filepath.Join(r.ca.dir, "ca.crt"))
	foreignTLS.RootCAs.AppendCertsFromPEM(ourCA)
	noCert := &tls.Config{RootCAs: foreignTLS.RootCAs, MinVersion: tls.VersionTLS13}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"a client whose certificate comes from another CA is refused", foreignTLS},
		{"a client without a certificate is refused", noCert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.srv.Stats().RefusedHandshakes
			pc := r.rawClient(t, tc.cfg)
			_, err := pc.OpenTransfer(ctx5(t), &peerpb.OpenTransferRequest{Namespace: testNS[:], Hashes: [][]byte{hashBytes(0)}, MaxBytes: 1 << 20, ExpectEpoch: 7})
			if status.Code(err) != codes.Unavailable || !errors.Is(fromStatus(err), ErrUnavailable) {
				t.Errorf("open: %v, want Unavailable (the handshake fails)", err)
			}
			// The server counts the refusal after its alert reached the client.
			for end := time.Now().Add(2 * time.Second); r.srv.Stats().RefusedHandshakes <= before && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if got := r.srv.Stats().RefusedHandshakes; got <= before {
				t.Errorf("RefusedHandshakes %d, want above %d within 2s", got, before)
			}
		})
	}
	if n := r.src.pins(); n != 0 {
		t.Errorf("refused clients reached the Source %d times", n)
	}
	t.Run("a client of the cluster CA whose certificate names no node id is refused", func(t *testing.T) {
		before := r.srv.Stats().RefusedHandshakes
		_, clientTLS := r.ca.tls(t, "member")
		pair, err := tls.X509KeyPair(r.ca.certPEM, r.ca.keyP)
		if err != nil {
			t.Fatal(err)
		}
		caCert, _ := x509.ParseCertificate(pair.Certificate[0])
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "no id/with a slash"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		certPEM, keyPEM, err := signWith(tmpl, caCert, pair.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		clientTLS.Certificates = []tls.Certificate{bad}
		_, err = r.rawClient(t, clientTLS).OpenTransfer(ctx5(t), &peerpb.OpenTransferRequest{Namespace: testNS[:], Hashes: [][]byte{hashBytes(0)}, MaxBytes: 1 << 20, ExpectEpoch: 7})
		if err == nil {
			t.Fatal("a certificate without a node id was served")
		}
		for end := time.Now().Add(2 * time.Second); r.srv.Stats().RefusedHandshakes <= before && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		if r.srv.Stats().RefusedHandshakes <= before {
			t.Error("the refusal was not counted")
		}
	})
	if n := r.src.pins(); n != 0 {
		t.Errorf("refused clients reached the Source %d times", n)
	}
	t.Run("a client of the cluster CA is served", func(t *testing.T) {
		tr, err := r.dial(t, "member").OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
		if err != nil || len(tr.Blocks) != 1 {
			t.Fatalf("open: %v, %+v", err, tr)
		}
	})
}

func TestASourceBreakingItsContractIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func([]PinnedBlock) []PinnedBlock
	}{
		{"a block of another hash", func(run []PinnedBlock) []PinnedBlock { run[0].Hash[0] ^= 1; return run }},
		{"chunks shorter than the length", func(run []PinnedBlock) []PinnedBlock { run[0].Length++; return run }},
		{"more blocks than hashes", func(run []PinnedBlock) []PinnedBlock { return append(run, run[0]) }},
	} {
		t.Run(tc.name+" is an internal error and is unpinned", func(t *testing.T) {
			r := newRig(t, nil)
			r.src.put(hash(0), 100)
			r.src.breakRun = tc.break_
			_, err := r.dial(t, "req").OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
			if !errors.Is(err, ErrSourceBroken) {
				t.Errorf("open: %v, want ErrSourceBroken", err)
			}
			r.src.waitUnpin(t, 30*time.Second, "broken run")
			if r.seg.segments() != 0 {
				t.Error("a broken run was registered")
			}
		})
	}
}

func TestCodeTableRoundTrips(t *testing.T) {
	for _, e := range codeTable {
		t.Run(e.err.Error()+" is "+e.code.String()+" and back", func(t *testing.T) {
			s := toStatus(errors.Join(e.err))
			if status.Code(s) != e.code {
				t.Errorf("toStatus: %v, want %v", status.Code(s), e.code)
			}
			if back := fromStatus(s); !errors.Is(back, e.err) {
				t.Errorf("fromStatus(%v) = %v, want %v", s, back, e.err)
			}
		})
	}
	t.Run("an error outside the table is Internal", func(t *testing.T) {
		if c := status.Code(toStatus(errors.New("x"))); c != codes.Internal {
			t.Errorf("code %v", c)
		}
	})
}

func TestCRC32CIsCastagnoli(t *testing.T) {
	// The check value of CRC-32C (RFC 3720, iSCSI).
	if got := CRC32C([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("CRC32C(123456789) = %08x, want e3069283", got)
	}
}

func TestThePeersNodeIDIsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	r := newRig(t, func(s *ServerSpec) { s.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	c := r.dial(t, "node-42")
	if _, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1, 7); err != nil {
		t.Fatal(err)
	}
	c.Close()
	logged := func(msg string) bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="`+msg+`"`) && strings.Contains(l, "node=node-42 ") {
				return true
			}
		}
		return false
	}
	for _, msg := range []string{"peer connected", "peer disconnected"} {
		for end := time.Now().Add(2 * time.Second); !logged(msg) && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		if !logged(msg) {
			t.Errorf("the log has no %q line naming node-42:\n%s", msg, logs.String())
		}
	}
}

func TestAConnectionThatDropsWhileTheSourcePinsLeavesNoPin(t *testing.T) {
	var logs syncbuf.Buffer
	r := newRig(t, func(s *ServerSpec) { s.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	r.src.put(hash(0), 5000)
	r.src.gate, r.src.pinning = make(chan struct{}), make(chan struct{}, 1)
	c := r.dial(t, "req")
	done := make(chan error, 1)
	go func() {
		_, err := c.OpenTransfer(context.Background(), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
		done <- err
	}()
	select {
	case <-r.src.pinning:
	case <-time.After(5 * time.Second):
		t.Fatal("no Pin within 5s")
	}
	c.Close()
	<-done
	for end := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), `msg="peer disconnected"`) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	close(r.src.gate) // the Source answers after the connection ended
	r.src.waitUnpin(t, 30*time.Second, "pin answered after the drop")
	// The open gives the peer's share back just after its Unpin.
	for end := time.Now().Add(30 * time.Second); r.srv.Stats().Peers != 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if st := r.srv.Stats(); st.Open != 0 || st.Opened != 0 || st.Peers != 0 || r.seg.segments() != 0 {
		t.Errorf("stats %+v, %d segments: want nothing opened or held", st, r.seg.segments())
	}
}

func TestDialNodeChecksTheServersNodeID(t *testing.T) {
	r := newRig(t, nil)
	r.src.put(hash(0), 100)
	_, clientTLS := r.ca.tls(t, "req")
	for _, tc := range []struct {
		name string
		node string
		ok   bool
	}{
		{"the node the certificate names is served", "src", true},
		{"another node id fails the handshake", "other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DialNode(r.srv.Addr(), tc.node, clientTLS)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
			if tc.ok && err != nil {
				t.Errorf("open: %v", err)
			}
			if !tc.ok && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "is node src, not other")) {
				t.Errorf("open: %v, want ErrUnavailable naming both node ids", err)
			}
		})
	}
	if _, err := DialNode(r.srv.Addr(), "a b", clientTLS); err == nil {
		t.Error("DialNode took a bad node id")
	}
}
