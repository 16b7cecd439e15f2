//go:build !cgo

package native

import "errors"

// ErrNoCgo is returned by every constructor of a build without cgo: the
// OrbitKV channel is C code and cannot run without it.
var ErrNoCgo = errors.New("native: built without cgo; the OrbitKV channel needs cgo and a C compiler")
