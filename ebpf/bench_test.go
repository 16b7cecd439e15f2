//go:build linux && amd64

package ebpf

import (
	"net"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The per-event cost of the probes: each benchmark runs with the probes
// off and on (`go test -bench . ./ebpf`, as root); the ratio of the two is
// the figure doc.go quotes.
func BenchmarkProbeCost(b *testing.B) {
	for _, probes := range []string{"off", "on"} {
		b.Run("op=unix-round-trip/probes="+probes, func(b *testing.B) {
			if probes == "on" {
				load(b, 0)
			}
			path := filepath.Join(b.TempDir(), "s")
			ln, err := net.Listen("unix", path)
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("unix", path)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := []byte{1}
			b.ReportAllocs()
			for b.Loop() {
				c.Write(buf)
				c.Read(buf)
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
