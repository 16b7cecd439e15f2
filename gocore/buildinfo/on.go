//go:build failpoints

package buildinfo

// Failpoints reports whether this binary was built with the tag
// `failpoints` (gocore/failpoint's pause points and endpoints).
const Failpoints = true
