package operator

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
	"golang.org/x/sys/unix"
)

// soPeerGroups is SO_PEERGROUPS (Linux 4.13+; 59 on x86-64 and arm64, the
// architectures OrbitKV builds for); golang.org/x/sys/unix lacks it.
const soPeerGroups = 59

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
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var groupErr error
	if err := raw.Control(func(fd uintptr) { p.Groups, groupErr = peerGroups(int(fd)) }); err != nil {
		return Peer{}, err
	}
	if errors.Is(groupErr, unix.ENOPROTOOPT) {
		p.Groups, groupErr = procGroups(p.PID)
	}
	if groupErr != nil {
		return Peer{}, fmt.Errorf("peer groups of pid %d: %w", p.PID, groupErr)
	}
	return p, nil
}

// peerGroups is getsockopt(SO_PEERGROUPS): the peer's supplementary groups
// at connect(2). ERANGE reports the size needed; it is retried once.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for range 2 {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soPeerGroups,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch e {
		case 0:
			return buf[:n/4], nil
		case unix.ERANGE:
			buf = make([]uint32, n/4+1)
		default:
			return nil, e
		}
	}
	return nil, unix.ERANGE
}

// procGroups reads the "Groups:" line of /proc/pid/status (the fallback of
// kernels without SO_PEERGROUPS; the pid could in principle have exited
// and been reused between connect and this read).
func procGroups(pid int32) ([]uint32, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, w := range strings.Fields(rest) {
			g, err := strconv.ParseUint(w, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/status Groups %q: %w", pid, w, err)
			}
			gs = append(gs, uint32(g))
		}
		return gs, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("/proc/%d/status has no Groups line", pid)
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
