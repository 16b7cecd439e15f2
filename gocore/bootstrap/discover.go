package bootstrap

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// nsError is the application error of a MapDiscovery body whose
// namespace is not 16 bytes or is all zero.
type nsError struct{ msg string }

func (e *nsError) Error() string { return e.msg }

// decodeMapDiscovery decodes a MapDiscovery body: the namespace (16 bytes,
// not all zero) and the client token. A body that is not a
// MapDiscoveryRequest is malformed (wraps lifecycle.ErrMalformed: the
// connection closes); a bad namespace is an *nsError (an application
// error: the connection stays).
func decodeMapDiscovery(body []byte) (abi.Namespace, uint64, error) {
	var req lifecyclepb.MapDiscoveryRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return abi.Namespace{}, 0, fmt.Errorf("lifecycle: MapDiscovery body: %v: %w", err, lifecycle.ErrMalformed)
	}
	var ns abi.Namespace
	raw := req.GetNamespace()
	if len(raw) != len(ns) {
		return ns, req.GetClientToken(), &nsError{fmt.Sprintf("%d bytes, want %d (a namespace fingerprint)", len(raw), len(ns))}
	}
	copy(ns[:], raw)
	if ns == (abi.Namespace{}) {
		return ns, req.GetClientToken(), &nsError{"all zero, which is never a valid namespace"}
	}
	return ns, req.GetClientToken(), nil
}

// mapDiscovery answers MapDiscovery for ns: the reply and, in
// cn.replyFiles, the index's memfd.
func (s *Server) mapDiscovery(cn *conn, ns abi.Namespace) (proto.Message, *appError, error) {
	if s.cfg.Discovery == nil {
		return nil, invalid("code", "this Manager serves no discovery indexes"), nil
	}
	f, bytes, buckets, err := s.cfg.Discovery(ns)
	if err != nil {
		return nil, &appError{abi.StatusUnadmitted, "namespace", err.Error()}, nil
	}
	cn.replyFiles = []*os.File{f}
	return &lifecyclepb.MapDiscoveryReply{Bytes: bytes, Buckets: buckets}, nil, nil
}
