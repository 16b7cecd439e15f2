//go:build !failpoints

package failpoint

import (
	"net/http"
	"time"
)

// Enabled reports whether this build has failpoints (tag `failpoints`).
const Enabled = false

// Pause never holds anything in this build: it reports false and never
// calls resume.
func Pause(Name, func()) bool { return false }

// Holding reports whether name is held (never in this build).
func Holding(Name) bool { return false }

// NoteHeld counts a withheld event (nothing in this build).
func NoteHeld(Name) {}

// WakeupsDropped reports whether eventfd wake-ups are dropped (never here).
func WakeupsDropped() bool { return false }

// SetDeviceFault does nothing in this build (no endpoint can arm a device
// fault).
func SetDeviceFault(func(module string) error) {}

// Clock is the test clock; nil in this build (use time.Now).
var Clock func() time.Time

// Handler serves nothing in this build.
func Handler() http.Handler { return http.NotFoundHandler() }
