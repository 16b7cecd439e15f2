// Package buildinfo holds what a binary knows about its own build: the
// version (ci/version.sh semver: VERSION of the tree, with -dev.N+gHASH
// between releases and .dirty for a modified tree), the commit, the build
// date, the Go version and whether it was built with failpoints.
//
// The Makefile sets Version, Commit and Date for every binary it builds
// (orbitkv-manager, orbitkvctl, orbitkv-bench, the failpoint builds) with
//
//	-ldflags "-X github.com/orbitkv/orbitkv/gocore/buildinfo.Version=... \
//	          -X github.com/orbitkv/orbitkv/gocore/buildinfo.Commit=... \
//	          -X github.com/orbitkv/orbitkv/gocore/buildinfo.Date=..."
//
// A plain `go build` leaves them empty; Get then falls back to the VCS
// stamp the go command embeds (vcs.revision, vcs.time, vcs.modified) and
// to "dev". Failpoints is a constant of the build tag `failpoints`, not a
// link-time value, so a failpoint build says so however it was built.
//
// The package imports nothing of the module, so every binary and package
// may import it (gocore/manager exports it as orbitkv_build_info).
package buildinfo
