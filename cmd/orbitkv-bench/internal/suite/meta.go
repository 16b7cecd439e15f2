package suite

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"golang.org/x/sys/unix"
)

// Schema is the version of the JSON every suite's --json prints
// (bench/README.md "Report format"). Version 1 was the unversioned report
// before metadata; 2 added the keys of reportHead (meta, validity,
// figures) beside the suite's own, which kept their names.
const Schema = 2

// Meta says where and how a report was made: the "meta" object of
// every --json report.
type Meta struct {
	Schema    int      `json:"schema"`     // reportSchema
	Suite     string   `json:"suite"`      // "channel", "query", …
	Version   string   `json:"version"`    // buildinfo: git describe of the bench's tree, or "dev"
	Commit    string   `json:"commit"`     // buildinfo: full commit hash (suffix -dirty), or "unknown"
	GoVersion string   `json:"go_version"` // runtime.Version()
	Kernel    string   `json:"kernel"`     // uname: sysname release version machine
	CPUModel  string   `json:"cpu_model"`  // the first "model name" of /proc/cpuinfo, "" if none
	Cores     int      `json:"cores"`      // "processor" entries of /proc/cpuinfo (logical CPUs)
	Flags     []string `json:"flags"`      // the suite's arguments as given, after the suite name
	Timestamp string   `json:"timestamp"`  // when the suite started, RFC 3339 UTC, whole seconds
	Repeats   int      `json:"repeats"`    // --repeats: how often each measurement ran
}

// newMeta collects the metadata of a run of suite with args, starting at
// start. Machine facts that cannot be read are left empty (or 0 cores);
// they never fail a run.
func newMeta(suite string, args []string, repeats int, start time.Time) Meta {
	bi := buildinfo.Get()
	cpu, _ := os.ReadFile("/proc/cpuinfo")
	model, cores := parseCPUInfo(string(cpu))
	return Meta{
		Schema: Schema, Suite: suite, Version: bi.Version, Commit: bi.Commit, GoVersion: runtime.Version(),
		Kernel: kernel(), CPUModel: model, Cores: cores, Flags: append([]string{}, args...),
		Timestamp: start.UTC().Truncate(time.Second).Format(time.RFC3339), Repeats: repeats,
	}
}

// kernel is uname's sysname, release, version and machine, space-separated
// ("Linux 6.1.0-18-amd64 #1 SMP … x86_64"), or "" if uname fails.
func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	field := func(b []byte) string { return string(bytes.TrimRight(b, "\x00")) }
	return strings.Join([]string{field(u.Sysname[:]), field(u.Release[:]), field(u.Version[:]), field(u.Machine[:])}, " ")
}

// parseCPUInfo returns the first "model name" of a /proc/cpuinfo text
// ("" if none: some architectures name it otherwise) and the number of
// "processor" entries.
func parseCPUInfo(text string) (model string, cores int) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cores++
		case "model name":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, cores
}

// CpuModel returns the first "model name" of /proc/cpuinfo, or "".
func CpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	m, _ := parseCPUInfo(string(b))
	return m
}
