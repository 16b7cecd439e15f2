package hugepages

import (
	"errors"
	"fmt"
)

// Mode says whether an arena must, may or must not be hugetlb-backed.
type Mode int

// Modes. The zero Mode is Off, so a Spec that says nothing gets the plain
// shmem memfd it would have got before hugepages existed.
const (
	Off     Mode = iota // ordinary shmem memfd, no madvise
	Prefer              // hugetlb if the pool has the pages, else shmem with MADV_HUGEPAGE
	Require             // hugetlb or an error wrapping ErrUnavailable
)

// ErrBadMode is wrapped by ParseMode and Spec.Validate for an unknown mode.
var ErrBadMode = errors.New("want require, prefer or off")

// ParseMode parses "require", "prefer" or "off" (the flag spelling, the
// inverse of String). Any other text is an error wrapping ErrBadMode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "require":
		return Require, nil
	case "prefer":
		return Prefer, nil
	case "off":
		return Off, nil
	}
	return Off, fmt.Errorf("hugepages mode %q: %w", s, ErrBadMode)
}

// String is the flag spelling of m ("require", "prefer", "off"), or
// "Mode(N)" for a value that is none of them.
func (m Mode) String() string {
	switch m {
	case Require:
		return "require"
	case Prefer:
		return "prefer"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) valid() bool { return m == Off || m == Prefer || m == Require }
