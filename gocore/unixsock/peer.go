package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cred is the process at the other end of a Unix socket connection, as the
// kernel recorded it at connect(2) (SO_PEERCRED). In a user namespace the
// ids are as mapped into the Manager's; an unmapped one reads as the
// overflow id.
type Cred struct {
	PID      int32
	UID, GID uint32
}

// PeerCred reads c's peer credentials (getsockopt SO_PEERCRED). Errors:
// the connection's (closed), or the getsockopt error wrapped as
// "SO_PEERCRED: %w".
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var uc *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		uc, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, err
	}
	if credErr != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

// soPeerGroups is SO_PEERGROUPS (Linux 4.13+; 59 on x86-64 and arm64, the
// architectures OrbitKV builds for); golang.org/x/sys/unix lacks it.
const soPeerGroups = 59

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5+; 77 on x86-64 and arm64).
const soPeerPidfd = 77

// PeerGroups returns the supplementary groups of c's peer at connect(2)
// (SO_PEERGROUPS), or, on kernels without it, those of /proc/pid/status
// (pid is the peer's, from PeerCred; the pid could in principle have
// exited and been reused between connect and that read). Errors name the
// pid: "peer groups of pid N: ...".
func PeerGroups(c *net.UnixConn, pid int32) ([]uint32, error) {
	var groups []uint32
	var groupErr error
	if err := control(c, func(fd int) { groups, groupErr = peerGroups(fd) }); err != nil {
		return nil, err
	}
	if errors.Is(groupErr, unix.ENOPROTOOPT) {
		groups, groupErr = procGroups(pid)
	}
	if groupErr != nil {
		return nil, fmt.Errorf("peer groups of pid %d: %w", pid, groupErr)
	}
	return groups, nil
}

// PeerCgroup returns the cgroup v2 path of c's peer (the "0::" line of
// /proc/pid/cgroup). It reads the file through the peer's identity as the
// kernel holds it: a pidfd of the peer (SO_PEERPIDFD) is taken first and
// checked to be alive after the read, so a peer that exited and whose pid
// was reused meanwhile is an error, never another process's cgroup. On
// kernels without SO_PEERPIDFD it reads /proc/pid/cgroup directly (that
// race then stands). Errors name the pid.
func PeerCgroup(c *net.UnixConn, pid int32) (string, error) {
	pidfd := -1
	var fdErr error
	if err := control(c, func(fd int) {
		pidfd, fdErr = unix.GetsockoptInt(fd, unix.SOL_SOCKET, soPeerPidfd)
	}); err != nil {
		return "", err
	}
	if fdErr != nil && !errors.Is(fdErr, unix.ENOPROTOOPT) {
		return "", fmt.Errorf("cgroup of pid %d: SO_PEERPIDFD: %w", pid, fdErr)
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	if pidfd >= 0 {
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
			return "", fmt.Errorf("cgroup of pid %d: the process exited while it was read (%w)", pid, err)
		}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, nil
		}
	}
	return "", fmt.Errorf("cgroup of pid %d: /proc/%d/cgroup has no cgroup v2 (\"0::/...\") line", pid, pid)
}

// control runs f on c's descriptor.
func control(c *net.UnixConn, f func(fd int)) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return raw.Control(func(fd uintptr) { f(int(fd)) })
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

// procGroups reads the "Groups:" line of /proc/pid/status.
func procGroups(pid int32) ([]uint32, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Groups:")
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
	return nil, fmt.Errorf("/proc/%d/status has no Groups line", pid)
}

// UIDIsOverflow reports whether uid is the kernel's overflow uid
// (/proc/sys/kernel/overflowuid) in a user namespace that does not map every
// uid: there an unmapped peer of any outside uid reads as that same number,
// so an equal uid proves nothing.
func UIDIsOverflow(uid uint32) bool {
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil || strings.TrimSpace(string(b)) != strconv.FormatUint(uint64(uid), 10) {
		return false
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(m), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
			return false // the initial namespace: the overflow uid is a real uid
		}
	}
	return true
}
