package peer

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/ratelog"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

// castagnoli is the CRC-32C table of every block checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
// preface.
const HandshakeTimeout = 5 * time.Second

// KeepaliveTime and KeepaliveTimeout are the server's and client's HTTP/2
// pings on a quiet connection: a peer that answers none within
// KeepaliveTimeout is cut off, and its transfers released (ConnEnd), even
// when the network dropped it without a FIN.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// Server serves peer control on one listener until Close.
type Server struct {
	spec ServerSpec
	log  *slog.Logger
	ln   net.Listener
	grpc *grpc.Server
	done chan struct{}

	nextID atomic.Uint64

	mu        sync.Mutex
	closed    bool
	transfers map[uint64]*hold
	peers     map[string]*usage
	ending    sync.WaitGroup // releases in progress (UnregisterSegment, Unpin)

	st       counters
	refusals ratelog.Limiter // refusalLogsPerSecond refused-handshake lines a second
}

// Serve validates s, listens on s.Listen and serves peer control on its own
// goroutine until Close. Errors: s's *limit.Error values (errors.Join), or
// the listen error naming the address.
func Serve(s ServerSpec) (*Server, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	tcp, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return nil, fmt.Errorf("peer control: listen %s: %w", s.Listen, err)
	}
	cfg := s.TLS.Clone()
	cfg.MinVersion = tls.VersionTLS13
	srv := &Server{
		spec:      s,
		log:       s.Logger.With(slog.String("component", "peer"), slog.String("self", s.NodeID)),
		done:      make(chan struct{}),
		transfers: map[uint64]*hold{},
		peers:     map[string]*usage{},
		refusals:  ratelog.Limiter{Burst: refusalLogsPerSecond, Every: time.Second},
	}
	// The caps sit below TLS: a connection counts from accept, so ones
	// that never finish a handshake count too, and mtls takes an
	// authenticated one out of the handshake pool.
	srv.ln = newGate(tcp, s.MaxConns, s.MaxHandshakes, s.MaxHandshakesPerHost, &srv.st.open, &srv.st.handshakesEvicted)
	ln := srv.ln
	srv.grpc = grpc.NewServer(
		grpc.Creds(mtls{TransportCredentials: credentials.NewTLS(cfg), s: srv}),
		grpc.StatsHandler(connHandler{srv}),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
		grpc.WaitForHandlers(true),
		grpc.MaxConcurrentStreams(uint32(s.MaxConcurrentStreams)),
	)
	peerpb.RegisterPeerServer(srv.grpc, service{s: srv})
	go func() {
		defer close(srv.done)
		if err := srv.grpc.Serve(ln); err != nil {
			srv.log.Error("peer control stopped", slog.Any("err", err))
		}
	}()
	srv.log.Info("peer control serving", slog.String("addr", ln.Addr().String()), slog.Uint64("epoch", s.Epoch))
	return srv, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving: calls in flight are cancelled and waited for, every
// connection is closed, and every open transfer is released (segment
// unregistered, then unpinned) before it returns. It returns nil; a second
// Close does nothing more.
func (s *Server) Close() error {
	s.mu.Lock()
	was := s.closed
	s.closed = true
	s.mu.Unlock()
	if was {
		<-s.done
		return nil
	}
	s.grpc.Stop()
	<-s.done
	s.mu.Lock()
	ids := make([]uint64, 0, len(s.transfers))
	for id := range s.transfers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.end(id, "", endClosed)
	}
	s.ending.Wait()
	return nil
}

// service is the gRPC face of a Server.
type service struct {
	peerpb.UnimplementedPeerServer
	s *Server
}

// OpenTransfer serves one OpenTransferRequest (proto/peer.proto).
func (v service) OpenTransfer(ctx context.Context, req *peerpb.OpenTransferRequest) (*peerpb.OpenTransferReply, error) {
	rep, err := v.s.open(ctx, req)
	return rep, toStatus(err)
}

// ReleaseTransfer serves one ReleaseTransferRequest.
func (v service) ReleaseTransfer(ctx context.Context, req *peerpb.ReleaseTransferRequest) (*peerpb.ReleaseTransferReply, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if !v.s.end(req.GetTransferId(), c.node, endReleased) {
		return nil, toStatus(fmt.Errorf("%w: transfer %d is not open for peer %q", ErrUnknownTransfer, req.GetTransferId(), c.node))
	}
	return &peerpb.ReleaseTransferReply{}, nil
}

// open is OpenTransfer: check, reserve the peer's share, pin, checksum,
// register the segment, and hold it until one of the ends (doc.go).
func (s *Server) open(ctx context.Context, req *peerpb.OpenTransferRequest) (*peerpb.OpenTransferReply, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	r, err := parseOpen(req)
	if err != nil {
		s.st.invalid.Add(1)
		return nil, err
	}
	if r.expectEpoch != s.spec.Epoch {
		s.st.epochMismatches.Add(1)
		return nil, fmt.Errorf("%w: expect_epoch %d, this node %q is at epoch %d", ErrEpochMismatch, r.expectEpoch, s.spec.NodeID, s.spec.Epoch)
	}
	reserved, err := s.reserve(c.node, r.maxBytes)
	if err != nil {
		return nil, err
	}
	pin, run, err := s.spec.Source.Pin(ctx, r.ns, r.hashes, reserved)
	if err != nil {
		s.unreserve(c.node, reserved)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: pinning: %v", ErrUnavailable, err)
	}
	total, err := checkRun(run, r.hashes, reserved)
	if err != nil {
		s.spec.Source.Unpin(pin)
		s.unreserve(c.node, reserved)
		s.log.Error("source broke its contract", slog.String("peer", c.node), slog.Any("err", err))
		return nil, err
	}
	if len(run) == 0 {
		s.spec.Source.Unpin(pin)
		s.unreserve(c.node, reserved)
		s.st.empty.Add(1)
		return &peerpb.OpenTransferReply{Epoch: s.spec.Epoch, DataAddr: s.spec.Transfer.Addr()}, nil
	}
	s.unreserveSome(c.node, reserved-total)
	blocks, bufs := describeRun(run)
	deadline := time.Now().Add(s.spec.LeaseTTL)
	seg, capability, err := s.spec.Transfer.RegisterSegment(bufs, deadline)
	if err != nil {
		s.spec.Source.Unpin(pin)
		s.unreserve(c.node, total)
		return nil, fmt.Errorf("%w: registering the segment: %v", ErrUnavailable, err)
	}
	t := &hold{id: s.nextID.Add(1), node: c.node, conn: c, pin: pin, seg: seg, bytes: total}
	if err := s.add(t, deadline); err != nil {
		s.spec.Transfer.UnregisterSegment(seg)
		s.spec.Source.Unpin(pin)
		s.unreserve(c.node, total)
		return nil, err
	}
	s.st.opened.Add(1)
	s.st.openedBytes.Add(total)
	return &peerpb.OpenTransferReply{
		TransferId:     t.id,
		SegmentId:      seg,
		Capability:     capability[:],
		DataAddr:       s.spec.Transfer.Addr(),
		Epoch:          s.spec.Epoch,
		Blocks:         blocks,
		DeadlineUnixNs: deadline.UnixNano(),
		TtlNs:          uint64(max(time.Until(deadline), 0)),
	}, nil
}

// checkRun checks the Source's answer against its contract and returns the
// run's bytes: a prefix of hashes, each block's chunks adding up to its
// length (at least 1 byte), at most maxBytes in all.
func checkRun(run []PinnedBlock, hashes []abi.BlockHash, maxBytes uint64) (uint64, error) {
	if len(run) > len(hashes) {
		return 0, fmt.Errorf("%w: %d blocks pinned for %d hashes", ErrSourceBroken, len(run), len(hashes))
	}
	var total uint64
	for i, b := range run {
		if b.Hash != hashes[i] {
			return 0, fmt.Errorf("%w: block %d has hash %x, want %x", ErrSourceBroken, i, b.Hash, hashes[i])
		}
		var n uint64
		for _, buf := range b.Bufs {
			n += uint64(len(buf))
		}
		if n != b.Length || n == 0 {
			return 0, fmt.Errorf("%w: block %d: chunks of %d bytes for a length of %d", ErrSourceBroken, i, n, b.Length)
		}
		total += n
	}
	if total > maxBytes {
		return 0, fmt.Errorf("%w: %d bytes pinned, at most %d asked", ErrSourceBroken, total, maxBytes)
	}
	return total, nil
}

// describeRun is the run's blocks as the reply lists them (CRC-32C and
// offset of each) and the segment's buffers, all chunks in order.
func describeRun(run []PinnedBlock) ([]*peerpb.Block, [][]byte) {
	blocks := make([]*peerpb.Block, len(run))
	var bufs [][]byte
	var off uint64
	for i, b := range run {
		var crc uint32
		for _, buf := range b.Bufs {
			crc = crc32Update(crc, buf)
		}
		bufs = append(bufs, b.Bufs...)
		blocks[i] = &peerpb.Block{Hash: append([]byte(nil), b.Hash[:]...), Length: b.Length, Crc32C: crc, Offset: off, Layers: b.Layers}
		off += b.Length
	}
	return blocks, bufs
}

// crc32Update extends crc over b with the Castagnoli table.
func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
