package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Link-time values (-ldflags -X); empty in a build that does not set them.
var (
	// Version is ci/version.sh semver of the tree built: "0.1.0" for a
	// release, "0.1.0-dev.12+g0123456789ab" between releases, ".dirty"
	// appended for a modified tree.
	Version string
	// Commit is the full commit hash of the tree built.
	Commit string
	// Date is the build time, UTC, RFC 3339 (2026-12-01T15:48:19Z).
	Date string
)

// Info is one binary's build, every field filled (Unknown where no source
// knows it).
type Info struct {
	Version    string // ci/version.sh semver, or "dev" when no -X gave one
	Commit     string // full commit hash, with "-dirty" when the VCS stamp says modified
	Date       string // RFC 3339 build time (with -X) or commit time (VCS stamp)
	GoVersion  string // runtime.Version(), e.g. "go1.26.8"
	Failpoints bool   // built with the tag `failpoints` (tests only)
}

// Unknown fills a field of Info that no source knows.
const Unknown = "unknown"

// Get returns this binary's Info. It is safe for concurrent use and
// returns the same value on every call.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Failpoints: Failpoints}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fillFromVCS(&i, bi.Settings)
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = Unknown
	}
	if i.Date == "" {
		i.Date = Unknown
	}
	return i
}

// fillFromVCS fills the fields -X left empty from the go command's VCS
// stamp (go help buildvcs).
func fillFromVCS(i *Info, settings []debug.BuildSetting) {
	var rev, when string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if i.Commit == "" && rev != "" {
		i.Commit = rev
		if modified {
			i.Commit += "-dirty"
		}
	}
	if i.Date == "" {
		i.Date = when
	}
}

// String is the --version text of the binary named name: the version on
// the first line, then the commit, the build date, the Go version and, in
// a failpoint build, a line saying so.
func (i Info) String(name string) string {
	s := fmt.Sprintf("%s %s\ncommit: %s\nbuilt: %s\ngo: %s/%s %s\n",
		name, i.Version, i.Commit, i.Date, runtime.GOOS, runtime.GOARCH, i.GoVersion)
	if i.Failpoints {
		s += "failpoints: on (a test build: pause points and /debug/failpoints are armed; never run it in production)\n"
	}
	return s
}
