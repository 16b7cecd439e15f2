package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

// Client is a requester's connection to one peer's control server. Its
// methods are safe from any goroutine; transfers it opened are released by
// the source when it is closed.
type Client struct {
	addr string
	cc   *grpc.ClientConn
	pc   peerpb.PeerClient
}

// Dial makes a client of the peer control server at addr (host:port) with
// the client side of the cluster's mutual TLS (LoadTLS's client config):
// the server's certificate must chain to the CA and name addr's host. It
// connects lazily (the first call connects) and reconnects as needed.
// Errors: a bad address or config.
func Dial(addr string, cfg *tls.Config) (*Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("peer %q: want host:port: %w", addr, err)
	}
	if cfg == nil || len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		return nil, fmt.Errorf("peer %s: want a client TLS config with this node's certificate (LoadTLS)", addr)
	}
	if cfg.MinVersion != 0 && cfg.MinVersion < tls.VersionTLS13 {
		return nil, fmt.Errorf("peer %s: TLS MinVersion %s: want TLS 1.3", addr, tls.VersionName(cfg.MinVersion))
	}
	c := cfg.Clone()
	c.MinVersion = tls.VersionTLS13
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(c)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}))
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	return &Client{addr: addr, cc: cc, pc: peerpb.NewPeerClient(cc)}, nil
}

// DialNode is Dial that also requires the server's certificate to name
// node (the catalog's node id for addr): a connection to another node
// of the cluster, one that took over addr, fails its handshake
// (ErrUnavailable on the first call, naming both ids).
func DialNode(addr, node string, cfg *tls.Config) (*Client, error) {
	if err := CheckNodeID(node); err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	if cfg == nil {
		return Dial(addr, cfg)
	}
	c := cfg.Clone()
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no server certificate", ErrUnauthenticated)
		}
		got, err := CertNodeID(cs.PeerCertificates[0])
		if err != nil {
			return err
		}
		if got != node {
			return fmt.Errorf("%w: %s is node %s, not %s", ErrUnauthenticated, addr, got, node)
		}
		return nil
	}
	return Dial(addr, c)
}

// Close closes the connection; the source releases every transfer opened
// on it.
func (c *Client) Close() error { return c.cc.Close() }

// Block is one block of an open transfer's run.
type Block struct {
	Hash   abi.BlockHash
	Length uint64 // bytes
	CRC32C uint32 // CRC-32C (Castagnoli) of its bytes, as the source computed it
	Offset uint64 // where its bytes start in the segment
	Layers uint32 // the model layers it spans; 0: the source did not say
}

// Transfer is an open transfer: the run the source pinned and how to read
// it on the transfer engine (OpenSegment(DataAddr, SegmentID, Capability)).
type Transfer struct {
	ID         uint64 // for ReleaseTransfer; 0 with an empty run (nothing held)
	SegmentID  uint64
	Capability Capability
	DataAddr   string
	Epoch      uint64
	Blocks     []Block // a prefix of the hashes asked for; maybe empty
	// Bytes is the run's length, the sum of the blocks' lengths.
	Bytes uint64
	// Deadline is when the source ends the transfer, on this host's clock:
	// the call's start plus the lease's length the source reported (never
	// later than the source's own deadline, whatever the clocks say).
	Deadline time.Time
}

// OpenTransfer asks the peer to pin the longest resident leading run of
// hashes in ns, at most maxBytes, if it is at epoch expectEpoch. A run
// shorter than hashes (even empty) is an answer, not an error. Errors (all
// misses for the requester): this package's Err… values (errors.Is),
// ErrBadReply for a reply that does not fit the request.
func (c *Client) OpenTransfer(ctx context.Context, ns abi.Namespace, hashes []abi.BlockHash, maxBytes, expectEpoch uint64) (*Transfer, error) {
	start := time.Now()
	req := &peerpb.OpenTransferRequest{Namespace: ns[:], Hashes: make([][]byte, len(hashes)), MaxBytes: maxBytes, ExpectEpoch: expectEpoch}
	flat := make([]byte, 0, len(hashes)*len(abi.BlockHash{}))
	for i := range hashes {
		flat = append(flat, hashes[i][:]...)
		req.Hashes[i] = flat[len(flat)-len(hashes[i]):]
	}
	rep, err := c.pc.OpenTransfer(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("peer %s: OpenTransfer: %w", c.addr, fromStatus(err))
	}
	t, err := parseReply(rep, hashes, maxBytes, expectEpoch, start)
	if err != nil {
		if rep.GetTransferId() != 0 {
			// Let the source go of what it holds for a reply we refuse.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = c.pc.ReleaseTransfer(rctx, &peerpb.ReleaseTransferRequest{TransferId: rep.GetTransferId()})
			cancel()
		}
		return nil, fmt.Errorf("peer %s: OpenTransfer: %w", c.addr, err)
	}
	return t, nil
}

// parseReply checks a reply against its request: the run is a prefix of
// hashes laid back to back, within maxBytes, at the epoch asked for.
func parseReply(rep *peerpb.OpenTransferReply, hashes []abi.BlockHash, maxBytes, expectEpoch uint64, start time.Time) (*Transfer, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadReply, fmt.Sprintf(format, a...))
	}
	if rep.GetEpoch() != expectEpoch {
		return nil, bad("epoch %d, asked for %d", rep.GetEpoch(), expectEpoch)
	}
	t := &Transfer{ID: rep.GetTransferId(), SegmentID: rep.GetSegmentId(), DataAddr: rep.GetDataAddr(), Epoch: rep.GetEpoch()}
	if t.ID == 0 {
		if len(rep.GetBlocks()) != 0 {
			return nil, bad("%d blocks without a transfer id", len(rep.GetBlocks()))
		}
		return t, nil
	}
	if len(rep.GetCapability()) != len(t.Capability) {
		return nil, bad("capability: %d bytes, want %d", len(rep.GetCapability()), len(t.Capability))
	}
	copy(t.Capability[:], rep.GetCapability())
	if _, _, err := net.SplitHostPort(t.DataAddr); err != nil {
		return nil, bad("data_addr %q: want host:port", t.DataAddr)
	}
	if rep.GetTtlNs() == 0 {
		return nil, bad("ttl_ns: 0")
	}
	bs := rep.GetBlocks()
	if len(bs) == 0 || len(bs) > len(hashes) {
		return nil, bad("%d blocks for %d hashes", len(bs), len(hashes))
	}
	t.Blocks = make([]Block, len(bs))
	for i, b := range bs {
		if !bytes.Equal(b.GetHash(), hashes[i][:]) {
			return nil, bad("blocks[%d].hash %x, want %x", i, b.GetHash(), hashes[i])
		}
		if b.GetOffset() != t.Bytes || b.GetLength() == 0 {
			return nil, bad("blocks[%d]: offset %d length %d, want offset %d and a length", i, b.GetOffset(), b.GetLength(), t.Bytes)
		}
		t.Blocks[i] = Block{Hash: hashes[i], Length: b.GetLength(), CRC32C: b.GetCrc32C(), Offset: b.GetOffset(), Layers: b.GetLayers()}
		t.Bytes += b.GetLength()
	}
	if t.Bytes > maxBytes {
		return nil, bad("%d bytes, at most %d asked", t.Bytes, maxBytes)
	}
	t.Deadline = start.Add(time.Duration(min(rep.GetTtlNs(), uint64(time.Hour))))
	return t, nil
}

// ReleaseTransfer ends transfer id on the peer: its pins go. Errors:
// ErrUnknownTransfer when it was not open (released, expired), the
// others of this package.
func (c *Client) ReleaseTransfer(ctx context.Context, id uint64) error {
	if id == 0 {
		return errors.New("ReleaseTransfer: transfer id 0 holds nothing")
	}
	if _, err := c.pc.ReleaseTransfer(ctx, &peerpb.ReleaseTransferRequest{TransferId: id}); err != nil {
		return fmt.Errorf("peer %s: ReleaseTransfer %d: %w", c.addr, id, fromStatus(err))
	}
	return nil
}

// CRC32C is the CRC-32C (Castagnoli) of b, the checksum Block.CRC32C
// holds, for the requester's check before a block becomes visible.
func CRC32C(b []byte) uint32 { return crc32Update(0, b) }
