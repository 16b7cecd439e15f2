//go:build !amd64 && !arm64

package index

import "unsafe"

// prefetch is a no-op where the package has no prefetch instruction: the
// lookups stay correct, their misses only overlap less.
func prefetch(unsafe.Pointer) {}
