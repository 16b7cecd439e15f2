package lifecycle

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// The same cases are in native/tests/test_lifecycle.c (socket_path_cases)
// for okv_socket_path; keep the two tables in step.
func TestSocketPath(t *testing.T) {
	long := strings.Repeat("h", 107-len("/tmp/orbitkv--7470.sock"))
	tests := []struct {
		name  string
		addr  string
		want  string
		errno syscall.Errno
	}{
		{"an IPv4 address maps to the documented path", "127.0.0.1:7470", "/tmp/orbitkv-127.0.0.1-7470.sock", 0},
		{"a host name is kept as is", "localhost:1", "/tmp/orbitkv-localhost-1.sock", 0},
		{"a bracketed IPv6 host loses its brackets", "[::1]:7470", "/tmp/orbitkv-::1-7470.sock", 0},
		{"port 65535 is the largest accepted", "10.0.0.1:65535", "/tmp/orbitkv-10.0.0.1-65535.sock", 0},
		{"port 0 is accepted", "h:0", "/tmp/orbitkv-h-0.sock", 0},
		{"leading zeros of the port are dropped", "h:007470", "/tmp/orbitkv-h-7470.sock", 0},
		{"a path of exactly 107 bytes is accepted", long + ":7470", "/tmp/orbitkv-" + long + "-7470.sock", 0},
		{"a path of 108 bytes is too long", long + "x:7470", "", syscall.ENAMETOOLONG},
		{"an address without a colon has no port", "127.0.0.1", "", syscall.EINVAL},
		{"an empty port is refused", "127.0.0.1:", "", syscall.EINVAL},
		{"a non-numeric port is refused", "127.0.0.1:http", "", syscall.EINVAL},
		{"a signed port is refused", "127.0.0.1:+80", "", syscall.EINVAL},
		{"port 65536 exceeds the limit", "127.0.0.1:65536", "", syscall.EINVAL},
		{"a huge port does not overflow", "h:99999999999999999999", "", syscall.EINVAL},
		{"an empty host is refused", ":7470", "", syscall.EINVAL},
		{"empty brackets are an empty host", "[]:7470", "", syscall.EINVAL},
		{"a slash in the host is refused", "a/b:7470", "", syscall.EINVAL},
		{"a path-traversing host is refused", "../../etc:7470", "", syscall.EINVAL},
		{"an unbracketed IPv6 host is refused", "::1:7470", "", syscall.EINVAL},
		{"an unclosed bracket is refused", "[::1:7470", "", syscall.EINVAL},
		{"a bracketed host without port is refused", "[::1]", "", syscall.EINVAL},
		{"text between bracket and colon is refused", "[::1]x:7470", "", syscall.EINVAL},
		{"a stray closing bracket is refused", "a]:7470", "", syscall.EINVAL},
		{"an empty address is refused", "", "", syscall.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SocketPath(tt.addr)
			if tt.errno != 0 {
				if !errors.Is(err, tt.errno) {
					t.Fatalf("SocketPath(%q) = %q, %v; want an error wrapping %v", tt.addr, got, err, tt.errno)
				}
				if !strings.Contains(err.Error(), tt.addr) {
					t.Errorf("error %q does not name the address %q", err, tt.addr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SocketPath(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
			}
			if len(got) > MaxSocketPath {
				t.Fatalf("path %q is %d bytes, over %d", got, len(got), MaxSocketPath)
			}
		})
	}
}
