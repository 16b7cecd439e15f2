package operator

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// Peer is the process at the other end of an operator connection, as the
// kernel reported it at connect(2).
type Peer struct {
	PID      int32
	UID, GID uint32
	Groups   []uint32 // supplementary groups
}

// peerOf reads c's peer credentials: SO_PEERCRED, then SO_PEERGROUPS (or
// /proc/PID/status where the kernel lacks it).
func peerOf(c *net.UnixConn) (Peer, error) {
	cred, err := unixsock.PeerCred(c)
	if err != nil {
		return Peer{}, err
	}
	p := Peer{PID: cred.PID, UID: cred.UID, GID: cred.GID}
	if p.Groups, err = unixsock.PeerGroups(c, p.PID); err != nil {
		return Peer{}, err
	}
	return p, nil
}

// ErrPeerRefused is the refusal of a peer that is not root, not in the
// operator group and (unless admitted) not of the Manager's uid.
var ErrPeerRefused = errors.New("operator socket: peer not allowed")

// Policy says who may use the operator socket: root; when GID >= 0,
// members of group GID; when AdmitUID, processes of UID. Operators are
// not engines: engines run as the Manager's uid (or as tenants' uids), so
// that uid is not admitted unless asked for, or any engine could flush
// the cache, drain the Manager or list the other engines.
type Policy struct {
	UID      uint32 // the Manager's uid
	GID      int    // the operator group; -1: none
	AdmitUID bool   // admit processes of UID too
}

// Check returns nil when p may use the socket, else an error wrapping
// ErrPeerRefused that names p and who is allowed.
func (pol Policy) Check(p Peer) error {
	if p.UID == 0 || pol.AdmitUID && p.UID == pol.UID {
		return nil
	}
	if pol.GID >= 0 && (p.GID == uint32(pol.GID) || slices.Contains(p.Groups, uint32(pol.GID))) {
		return nil
	}
	who := "root"
	if pol.AdmitUID && pol.UID != 0 {
		who += fmt.Sprintf(" or uid %d", pol.UID)
	}
	if pol.GID >= 0 {
		who += fmt.Sprintf(" or a member of group %d", pol.GID)
	}
	return fmt.Errorf("%w: pid %d uid %d gid %d is not %s (see orbitkv-manager --operator-group and --operator-admit-manager-uid)", ErrPeerRefused, p.PID, p.UID, p.GID, who)
}
