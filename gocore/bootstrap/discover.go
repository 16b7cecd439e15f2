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

// MaxDiscoveryPerSession is the most namespaces whose discovery index one
// session may map (OKVI_DISCOVER_MAX_NS, the client's own limit): the
// Manager enforces it too, so one session cannot hold more than its share
// of --discover-bytes.
const MaxDiscoveryPerSession = 16

// mapDiscovery answers MapDiscovery for ns: the reply and, in
// cn.replyFiles, the index's memfd. The session holds one reference per
// namespace it was sent, given back by releaseDiscovery.
func (s *Server) mapDiscovery(cn *conn, ns abi.Namespace) (proto.Message, *appError, error) {
	if s.cfg.Discovery == nil {
		return nil, invalid("code", "this Manager serves no discovery indexes (started with --discover-bytes 0)"), nil
	}
	tn := cn.sess.Peer.Tenant
	as := ns
	ns = tn.Namespace(ns) // the table of the namespace as the tenant's blocks are keyed
	_, again := cn.discovered[ns]
	if !again && len(cn.discovered) >= MaxDiscoveryPerSession {
		return nil, invalid("namespace", "this session maps %d discovery indexes already, limit %d per session",
			len(cn.discovered), MaxDiscoveryPerSession), nil
	}
	if !again && tn != nil {
		if err := s.takeTable(tn, ns); err != nil {
			return nil, &appError{abi.StatusUnadmitted, "namespace", err.Error()}, nil
		}
	}
	f, bytes, buckets, err := s.cfg.Discovery(ns, as)
	if err != nil {
		if !again && tn != nil {
			s.dropTable(tn, ns)
		}
		return nil, &appError{abi.StatusUnadmitted, "namespace", err.Error()}, nil
	}
	if again {
		// The session holds a reference already; the table cannot go away
		// before the session closes, so the new one is given back at once.
		s.releaseOne(ns)
	} else {
		if cn.discovered == nil {
			cn.discovered = map[abi.Namespace]struct{}{}
		}
		cn.discovered[ns] = struct{}{}
	}
	cn.replyFiles = []*os.File{f}
	return &lifecyclepb.MapDiscoveryReply{Bytes: bytes, Buckets: buckets}, nil, nil
}

// releaseDiscovery gives back the session's discovery references (at
// session close, after the last reply was written).
func (s *Server) releaseDiscovery(cn *conn) {
	for ns := range cn.discovered {
		s.releaseOne(ns)
		if t := cn.sess.Peer.Tenant; t != nil {
			s.dropTable(t, ns)
		}
	}
	cn.discovered = nil
}

func (s *Server) releaseOne(ns abi.Namespace) {
	if s.cfg.ReleaseDiscovery != nil {
		s.cfg.ReleaseDiscovery(ns)
	}
}
