package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// Trust says which uids a client accepts as the process serving the
// operator socket, besides its own euid and root: the rule of the
// bootstrap clients (lifecycle.ClientSocketPath, docs/operating.md "Socket
// paths"), so a socket path another user created (the /tmp fallback while
// /run/orbitkv is missing) is never talked to.
type Trust struct {
	// ManagerUID is the Manager's uid named by the caller (orbitkvctl
	// --manager-uid, ORBITKV_MANAGER_UID); -1: none.
	ManagerUID int64
	// VouchedUID is the owner of the runtime directory the path was
	// derived from, when lifecycle.RuntimeDirOwner vouches for it; -1:
	// none (an explicit path, the /tmp fallback, or no vouching).
	VouchedUID int64
	// RuntimeDir is the runtime directory the path was derived from, ""
	// when it was not; it only words the refusal.
	RuntimeDir string
}

// NoTrust trusts the client's own uid and root only.
var NoTrust = Trust{ManagerUID: -1, VouchedUID: -1}

// ErrServerRefused is the refusal of the process serving the operator
// socket: its uid is none the client trusts (Trust). Nothing was sent.
var ErrServerRefused = errors.New("refusing the process serving the operator socket")

// checkServer returns nil when cred may serve the operator socket at path
// under trust (euid is the client's), else an error wrapping
// ErrServerRefused that names the path, the peer's pid and uid and how to
// trust it.
func checkServer(path string, cred unixsock.Cred, trust Trust, euid uint32) error {
	uid := int64(cred.UID)
	match := cred.UID == euid || cred.UID == 0 || uid == trust.ManagerUID || uid == trust.VouchedUID
	if match && unixsock.UIDIsOverflow(cred.UID) {
		// In a user namespace without a uid map every outside uid reads
		// as the overflow uid: equal numbers prove nothing.
		return fmt.Errorf("operator socket %s: %w: its uid reads as the overflow uid %d, so it cannot be compared (a user namespace without a uid map); nothing was sent to it",
			path, ErrServerRefused, cred.UID)
	}
	if match {
		return nil
	}
	trusted := fmt.Sprintf("its own uid %d, root", euid)
	if euid == 0 {
		trusted = "its own uid 0 (root)"
	}
	if trust.ManagerUID >= 0 {
		trusted += fmt.Sprintf(", the Manager uid %d (--manager-uid or ORBITKV_MANAGER_UID)", trust.ManagerUID)
	}
	if trust.RuntimeDir != "" {
		trusted += fmt.Sprintf(" and, for the default socket in %s, that directory's owner", trust.RuntimeDir)
		if trust.VouchedUID < 0 {
			trusted += " (not vouched for: its parent must be root's and neither writable by group or others)"
		}
	}
	return fmt.Errorf("operator socket %s: %w (pid %d, uid %d): orbitkvctl trusts %s; nothing was sent to it. "+
		"If that is your Manager, name its uid: --manager-uid %d or ORBITKV_MANAGER_UID=%d; if another user created this path, remove it",
		path, ErrServerRefused, cred.PID, cred.UID, trusted, cred.UID, cred.UID)
}

// Conn is a client connection to the operator socket (Dial).
type Conn struct {
	operatorpb.OperatorClient
	cc *grpc.ClientConn

	mu      sync.Mutex
	refused error // the dialer's last refusal of the peer
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }

// Refused is the error of the dialer's latest refusal of the process
// serving the socket (wrapping ErrServerRefused), or nil: a call that
// failed Unavailable after it was refused sent nothing.
func (c *Conn) Refused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Dial connects to the operator socket at path (lazily: the first call
// connects). Every connection gRPC makes, before it writes a byte, reads
// the peer's credentials (SO_PEERCRED) and is closed unless the peer's uid
// is the client's own, root's, or one trust names; the call then fails
// Unavailable and Conn.Refused says why. Close the connection when done.
func Dial(path string, trust Trust) (*Conn, error) {
	c := &Conn{}
	euid := uint32(os.Geteuid())
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		cred, err := unixsock.PeerCred(nc.(*net.UnixConn))
		if err == nil {
			err = checkServer(path, cred, trust, euid)
		} else {
			err = fmt.Errorf("operator socket %s: %w: its credentials: %w", path, ErrServerRefused, err)
		}
		if err != nil {
			nc.Close()
			c.mu.Lock()
			c.refused = err
			c.mu.Unlock()
			return nil, err
		}
		return nc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial), grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, fmt.Errorf("operator socket %s: %w", path, err)
	}
	c.OperatorClient, c.cc = operatorpb.NewOperatorClient(cc), cc
	return c, nil
}
