package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/failpoint"
)

func TestFillFromVCS(t *testing.T) {
	stamp := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}}
	tests := []struct {
		name     string
		linked   Info
		settings []debug.BuildSetting
		want     Info
	}{
		{"the VCS stamp fills what -X left empty", Info{}, stamp, Info{Commit: "abc123", Date: "2026-12-01T10:00:00Z"}},
		{"a modified tree marks the commit dirty", Info{}, append(stamp, debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
			Info{Commit: "abc123-dirty", Date: "2026-12-01T10:00:00Z"}},
		{"values set with -X win over the VCS stamp", Info{Commit: "fff", Date: "2026-12-02T00:00:00Z"}, stamp,
			Info{Commit: "fff", Date: "2026-12-02T00:00:00Z"}},
		{"no VCS stamp leaves the fields empty", Info{}, nil, Info{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.linked
			fillFromVCS(&got, tc.settings)
			if got != tc.want {
				t.Fatalf("fillFromVCS = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGetFillsEveryField(t *testing.T) {
	i := Get()
	for name, v := range map[string]string{"Version": i.Version, "Commit": i.Commit, "Date": i.Date} {
		if v == "" {
			t.Errorf("Get().%s is empty", name)
		}
	}
	if i.GoVersion != runtime.Version() {
		t.Errorf("Get().GoVersion = %q, want %q", i.GoVersion, runtime.Version())
	}
	if i.Failpoints != failpoint.Enabled {
		t.Errorf("Get().Failpoints = %v, but failpoint.Enabled = %v in the same build", i.Failpoints, failpoint.Enabled)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name       string
		failpoints bool
		want       []string
		wantNot    string
	}{
		{"an ordinary build names version, commit, date and Go", false,
			[]string{"orbitkv-manager v1.2-3-gabc\n", "commit: abc\n", "built: 2026-12-01T10:00:00Z\n", "go1.26.8\n"}, "failpoints"},
		{"a failpoint build says so", true, []string{"orbitkv-manager v1.2-3-gabc\n", "failpoints: on"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Info{Version: "v1.2-3-gabc", Commit: "abc", Date: "2026-12-01T10:00:00Z", GoVersion: "go1.26.8", Failpoints: tc.failpoints}.String("orbitkv-manager")
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("String = %q, want it to contain %q", s, w)
				}
			}
			if tc.wantNot != "" && strings.Contains(s, tc.wantNot) {
				t.Errorf("String = %q, want no %q", s, tc.wantNot)
			}
		})
	}
}
