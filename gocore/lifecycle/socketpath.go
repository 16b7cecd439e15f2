package lifecycle

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// MaxSocketPath is the longest bootstrap socket path in bytes:
// sizeof(sockaddr_un.sun_path) - 1 = 107 on Linux, leaving room for the NUL.
const MaxSocketPath = 107

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
