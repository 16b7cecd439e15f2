// Package benchtest holds the test helpers the orbitkv-bench packages
// share: golden files (-update), the Manager and bench binaries built once
// per test binary, the repository's paths, an O_DIRECT directory and small
// fixtures. Only _test.go files import it, and it imports no package of
// orbitkv-bench (a suite's tests may import it without an import cycle).
package benchtest
