package lifecycle

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MaxSocketPath is the longest bootstrap socket path in bytes:
// sizeof(sockaddr_un.sun_path) - 1 = 107 on Linux, leaving room for the NUL.
const MaxSocketPath = 107

// The default socket location (docs/operating.md "Socket paths"). The
// same constants are OKV_RUNTIME_DIR, OKV_SOCKET_NAME and
// OKV_DEFAULT_MANAGER_ADDR in native/include/orbitkv/client.h.
const (
	// RuntimeDir is the directory systemd creates for the Manager's unit
	// (RuntimeDirectory=orbitkv), where clients look for SocketName.
	RuntimeDir = "/run/orbitkv"
	// SocketName is the bootstrap socket's name in a runtime directory.
	SocketName = "manager.sock"
	// DefaultListenAddr is the Manager's --listen default and the address
	// whose derived path (SocketPath) a client falls back to.
	DefaultListenAddr = "127.0.0.1:7470"
)

// The environment variables of the socket rule. The Manager reads the
// first three as the defaults of --bootstrap-socket, --operator-socket and
// --listen (ORBITKV_ and the flag name); clients and orbitkvctl read the
// same names. systemd sets RUNTIME_DIRECTORY for a unit with
// RuntimeDirectory= (systemd.exec(5)): one absolute path, or several
// separated by ':'.
const (
	EnvBootstrapSocket  = "ORBITKV_BOOTSTRAP_SOCKET"
	EnvOperatorSocket   = "ORBITKV_OPERATOR_SOCKET"
	EnvListen           = "ORBITKV_LISTEN"
	EnvRuntimeDirectory = "RUNTIME_DIRECTORY"
)

// ManagerSocketPath is the Manager's bootstrap socket when no
// --bootstrap-socket (flag, ORBITKV_BOOTSTRAP_SOCKET or config key) names
// one:
//
//  1. runtimeDirectory (the value of $RUNTIME_DIRECTORY) when not empty:
//     its first ':'-separated entry, which must be an absolute path, plus
//     "/manager.sock";
//  2. else runtimeDir/manager.sock when runtimeDir (RuntimeDir in
//     production) is a directory, not a symbolic link, owned by euid;
//  3. else SocketPath(listenAddr).
//
// Errors name the variable or address and the limit: a relative
// RUNTIME_DIRECTORY entry (syscall.EINVAL), a path over MaxSocketPath
// bytes (syscall.ENAMETOOLONG), or SocketPath's errors.
func ManagerSocketPath(listenAddr, runtimeDirectory, runtimeDir string, euid int) (string, error) {
	if runtimeDirectory != "" {
		dir, _, _ := strings.Cut(runtimeDirectory, ":")
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("%s %q: first entry %q is not an absolute path: %w",
				EnvRuntimeDirectory, runtimeDirectory, dir, syscall.EINVAL)
		}
		return checkedLength(EnvRuntimeDirectory+" "+strconv.Quote(runtimeDirectory), filepath.Join(dir, SocketName))
	}
	if st, err := os.Lstat(filepath.Clean(runtimeDir)); err == nil && st.IsDir() {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == euid {
			return checkedLength("runtime directory "+strconv.Quote(runtimeDir), filepath.Join(runtimeDir, SocketName))
		}
	}
	return SocketPath(listenAddr)
}

func checkedLength(what, p string) (string, error) {
	if len(p) > MaxSocketPath {
		return "", fmt.Errorf("lifecycle: %s: socket path %q length %d exceeds limit %d: %w",
			what, p, len(p), MaxSocketPath, syscall.ENAMETOOLONG)
	}
	return p, nil
}

// Source is the step of the client rule (ClientSocketPath) that chose a
// bootstrap socket. The values are those of enum okv_socket_source.
type Source int

// The steps of the client rule, in order.
const (
	SourceOption     Source = 1 // the caller's socket path or Manager address
	SourceEnv        Source = 2 // ORBITKV_BOOTSTRAP_SOCKET
	SourceRuntimeDir Source = 3 // a socket at RuntimeDir/manager.sock
	SourceDerived    Source = 4 // SocketPath of ORBITKV_LISTEN or DefaultListenAddr
)

func (s Source) String() string {
	switch s {
	case SourceOption:
		return "option"
	case SourceEnv:
		return EnvBootstrapSocket
	case SourceRuntimeDir:
		return "runtime directory"
	case SourceDerived:
		return "derived"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// ClientSocket is a client's bootstrap socket as ClientSocketPath chose it.
type ClientSocket struct {
	Path   string
	Source Source
	// VouchedUID is the owner of the runtime directory, which a client
	// trusts as the Manager's uid besides its own, when Source is
	// SourceRuntimeDir and RuntimeDirOwner vouches for it; else -1.
	VouchedUID int
}

// ClientSocketPath is the bootstrap socket a client connects to (the Go
// twin of okv_resolve_socket_path, native/src/errors.c):
//
//  1. socketPath when not empty, else SocketPath(managerAddr) when
//     managerAddr is not empty (the caller's options);
//  2. else getenv(ORBITKV_BOOTSTRAP_SOCKET) when not empty;
//  3. else runtimeDir/manager.sock (RuntimeDir in production) when it
//     exists and is a socket (stat(2), following links);
//  4. else SocketPath of getenv(ORBITKV_LISTEN) when not empty, else of
//     DefaultListenAddr.
//
// A chosen path longer than MaxSocketPath bytes is refused
// (syscall.ENAMETOOLONG) naming its source; a bad address as SocketPath.
func ClientSocketPath(socketPath, managerAddr string, getenv func(string) string, runtimeDir string) (ClientSocket, error) {
	cs := ClientSocket{Source: SourceOption, VouchedUID: -1}
	var err error
	switch {
	case socketPath != "":
		cs.Path, err = checkedLength("socket path", socketPath)
	case managerAddr != "":
		cs.Path, err = SocketPath(managerAddr)
	case getenv(EnvBootstrapSocket) != "":
		cs.Source = SourceEnv
		cs.Path, err = checkedLength(EnvBootstrapSocket, getenv(EnvBootstrapSocket))
	default:
		p := filepath.Join(runtimeDir, SocketName)
		if st, serr := os.Stat(p); serr == nil && st.Mode().Type() == os.ModeSocket {
			cs.Source = SourceRuntimeDir
			if cs.Path, err = checkedLength("runtime directory "+strconv.Quote(runtimeDir), p); err == nil {
				if uid, ok := RuntimeDirOwner(runtimeDir); ok {
					cs.VouchedUID = uid
				}
			}
			break
		}
		cs.Source = SourceDerived
		addr := DefaultListenAddr
		if v := getenv(EnvListen); v != "" {
			addr = v
		}
		if cs.Path, err = SocketPath(addr); err != nil && addr != DefaultListenAddr {
			err = fmt.Errorf("%s: %w", EnvListen, err)
		}
	}
	if err != nil {
		return ClientSocket{VouchedUID: -1}, err
	}
	return cs, nil
}

// RuntimeDirOwner is the owner of runtimeDir when root vouches for it:
// runtimeDir's parent (/run in production) is a directory owned by root and
// writable by neither group nor others, and runtimeDir is a directory, not
// a symbolic link, writable by neither group nor others. Then only root
// could have made runtimeDir and only its owner (or root) can bind a
// socket in it, so a client trusts that owner as the Manager's uid. ok is
// false otherwise.
func RuntimeDirOwner(runtimeDir string) (uid int, ok bool) {
	runtimeDir = filepath.Clean(runtimeDir) // without a trailing '/', Lstat does not follow a link
	parent, err := os.Lstat(filepath.Dir(runtimeDir))
	if err != nil || !parent.IsDir() || parent.Mode().Perm()&0o022 != 0 {
		return -1, false
	}
	if ps, isStat := parent.Sys().(*syscall.Stat_t); !isStat || ps.Uid != 0 {
		return -1, false
	}
	dir, err := os.Lstat(runtimeDir)
	if err != nil || !dir.IsDir() || dir.Mode().Perm()&0o022 != 0 {
		return -1, false
	}
	ds, isStat := dir.Sys().(*syscall.Stat_t)
	if !isStat {
		return -1, false
	}
	return int(ds.Uid), true
}

// SocketPath derives the bootstrap socket path of a Manager listen address
// (docs/design.md §5.1): "127.0.0.1:7470" → "/tmp/orbitkv-127.0.0.1-7470.sock",
// "[::1]:7470" → "/tmp/orbitkv-::1-7470.sock". It is the Go twin of
// okv_socket_path in native/src/errors.c and applies the same rules:
//
//   - the address is host:port; an IPv6 host is bracketed ("[::1]:7470") and
//     the brackets are dropped from the path; an unbracketed host holds no ':';
//   - the host is non-empty and holds no '/', '[', ']' or NUL;
//   - the port is one or more ASCII digits with value <= 65535; it is written
//     in canonical decimal ("07470" → "7470") so one port has one path.
//
// Errors name the field and the limit and wrap syscall.EINVAL for a bad
// address or syscall.ENAMETOOLONG for a path longer than MaxSocketPath bytes,
// mirroring the C function's -EINVAL and -ENAMETOOLONG.
func SocketPath(listenAddr string) (string, error) {
	host, port, err := splitListenAddr(listenAddr)
	if err != nil {
		return "", fmt.Errorf("lifecycle: listen address %q: %w", listenAddr, err)
	}
	p := "/tmp/orbitkv-" + host + "-" + strconv.FormatUint(uint64(port), 10) + ".sock"
	if len(p) > MaxSocketPath {
		return "", fmt.Errorf("lifecycle: listen address %q: socket path length %d exceeds limit %d: %w",
			listenAddr, len(p), MaxSocketPath, syscall.ENAMETOOLONG)
	}
	return p, nil
}

func splitListenAddr(addr string) (host string, port uint16, err error) {
	var portText string
	if strings.HasPrefix(addr, "[") {
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("host has '[' without ']': %w", syscall.EINVAL)
		}
		host = addr[1:end]
		rest := addr[end+1:]
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("missing port after ']': %w", syscall.EINVAL)
		}
		portText = rest[1:]
	} else {
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			return "", 0, fmt.Errorf("missing port (want host:port): %w", syscall.EINVAL)
		}
		host, portText = addr[:i], addr[i+1:]
		if strings.IndexByte(host, ':') >= 0 {
			return "", 0, fmt.Errorf("host %q has ':' (bracket IPv6 hosts: [::1]:7470): %w", host, syscall.EINVAL)
		}
	}
	switch {
	case host == "":
		return "", 0, fmt.Errorf("host is empty: %w", syscall.EINVAL)
	case strings.ContainsAny(host, "/[]\x00"):
		return "", 0, fmt.Errorf("host %q has one of '/', '[', ']', NUL: %w", host, syscall.EINVAL)
	case portText == "":
		return "", 0, fmt.Errorf("port is empty: %w", syscall.EINVAL)
	}
	v := uint32(0)
	for i := 0; i < len(portText); i++ {
		c := portText[i]
		if c < '0' || c > '9' {
			return "", 0, fmt.Errorf("port %q is not decimal digits: %w", portText, syscall.EINVAL)
		}
		v = v*10 + uint32(c-'0')
		if v > 65535 {
			return "", 0, fmt.Errorf("port %q exceeds limit 65535: %w", portText, syscall.EINVAL)
		}
	}
	return host, uint16(v), nil
}
