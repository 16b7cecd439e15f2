//go:build linux && amd64

package ebpf

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The per-event cost of the probes: each benchmark runs with the probes
// off and on (`go test -bench . ./ebpf`, as root); the ratio of the two is
// the figure doc.go quotes.
func BenchmarkProbeCost(b *testing.B) {
	for _, probes := range []string{"off", "on"} {
		// Both ends on one thread, so the figure is the system calls'
		// cost (and the probes'), not the scheduler's.
		b.Run("op=unix-send-receive-twice/probes="+probes, func(b *testing.B) {
			if probes == "on" {
				load(b, 0)
			}
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			buf := []byte{1}
			for b.Loop() {
				unix.Write(fds[0], buf)
				unix.Read(fds[1], buf)
				unix.Write(fds[1], buf)
				unix.Read(fds[0], buf)
			}
		})
	}
	for _, probes := range []string{"off", "on"} {
		b.Run("op=eventfd-write-read/probes="+probes, func(b *testing.B) {
			if probes == "on" {
				load(b, 0)
			}
			fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			v := [8]byte{1}
			for b.Loop() {
				unix.Write(fd, v[:])
				unix.Read(fd, v[:])
				v = [8]byte{1}
			}
		})
	}
	for _, probes := range []string{"off", "on"} {
		b.Run("op=getppid/probes="+probes, func(b *testing.B) {
			if probes == "on" {
				load(b, 0)
			}
			for b.Loop() {
				unix.Getppid()
			}
		})
	}
}
