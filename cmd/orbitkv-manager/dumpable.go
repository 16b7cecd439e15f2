package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// beNotDumpable clears the process's dumpable attribute (prctl(2)
// PR_SET_DUMPABLE 0) before the Manager creates any memory: a process of
// the Manager's own uid could otherwise open /proc/<pid>/fd/* (the RAM
// tier's memfd, engines' KV buffers, every namespace's discovery table,
// read-write through the Manager's descriptors, bypassing the seals a
// session's copy carries) and read or write /proc/<pid>/mem. A process
// that is not dumpable has its /proc/<pid> entries owned by root and
// cannot be ptrace-attached by its own uid; it also leaves no core dump.
// Sessions run as the Manager's uid and are assumed hostile to each other
// (docs/channel.md, docs/discover.md), so this is not optional.
func beNotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w (without it a process of this uid could read and write the Manager's memory through /proc)", err)
	}
	return nil
}
