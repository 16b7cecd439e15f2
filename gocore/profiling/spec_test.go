package profiling

import (
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

func TestValidateNamesTheFieldAndTheLimit(t *testing.T) {
	ok := Spec{URL: "http://127.0.0.1:4040"}
	tests := []struct {
		name  string
		spec  func(s *Spec)
		field string // "" = valid
		want  string // substring of the error
	}{
		{"the zero Spec is valid and off", func(s *Spec) { *s = Spec{} }, "", ""},
		{"an http URL with a port is valid", func(*Spec) {}, "", ""},
		{"an https URL with a path is valid", func(s *Spec) { s.URL = "https://profiles-prod-001.grafana.net/pyroscope" }, "", ""},
		{"a URL without a scheme is refused", func(s *Spec) { s.URL = "pyroscope:4040" }, "profiling.URL", `its scheme is "pyroscope"`},
		{"a host alone is refused for want of a scheme", func(s *Spec) { s.URL = "pyroscope" }, "profiling.URL", "it has no scheme"},
		{"another scheme is refused", func(s *Spec) { s.URL = "ftp://pyroscope:4040" }, "profiling.URL", `its scheme is "ftp"`},
		{"a URL without a host is refused", func(s *Spec) { s.URL = "http:///ingest" }, "profiling.URL", "it has no host"},
		{"a port above 65535 is refused", func(s *Spec) { s.URL = "http://pyroscope:99999" }, "profiling.URL", `its port "99999" is not 1..65535`},
		{"port 0 is refused", func(s *Spec) { s.URL = "http://pyroscope:0" }, "profiling.URL", `its port "0" is not 1..65535`},
		{"a trailing space is refused naming it", func(s *Spec) { s.URL = "http://pyroscope:4040 " }, "profiling.URL", "it has a space"},
		{"a password in the URL is refused and not repeated", func(s *Spec) { s.URL = "https://u:s3cret@host" }, "profiling.URL", "it holds a user or password"},
		{"a query is refused", func(s *Spec) { s.URL = "http://host:4040?x=1" }, "profiling.URL", "it has a query"},
		{"an upload interval under a second is refused", func(s *Spec) { s.UploadInterval = 500 * time.Millisecond }, "profiling.UploadInterval", "want 1s..5m"},
		{"an upload interval over five minutes is refused", func(s *Spec) { s.UploadInterval = time.Hour }, "profiling.UploadInterval", "want 1s..5m"},
		{"an app name with a space is refused", func(s *Spec) { s.AppName = "orbit kv" }, "profiling.AppName", "letters, digits and ._-/"},
		{"an app name with a brace is refused", func(s *Spec) { s.AppName = "okv{a=b}" }, "profiling.AppName", "letters, digits"},
		{"a tenant id with a space is refused", func(s *Spec) { s.TenantID = "team a" }, "profiling.TenantID", "printable ASCII"},
		{"a tenant id over 150 bytes is refused", func(s *Spec) { s.TenantID = strings.Repeat("a", 151) }, "profiling.TenantID", "at most 150"},
		{"a user without a password is refused", func(s *Spec) { s.BasicAuthUser = "123456" }, "profiling.BasicAuthPassword", `with the basic auth user "123456"`},
		{"a password without a user is refused", func(s *Spec) { s.BasicAuthPassword = "glc_x" }, "profiling.BasicAuthUser", "a user with the basic auth password"},
		{"a user with a colon is refused", func(s *Spec) { s.BasicAuthUser, s.BasicAuthPassword = "a:b", "p" }, "profiling.BasicAuthUser", `without spaces or ":"`},
		{"settings are checked while profiling is off", func(s *Spec) { s.URL, s.UploadInterval = "", time.Hour }, "profiling.UploadInterval", "want 1s..5m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.spec(&s)
			err := s.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			fields, _ := limit.Split(err)
			if len(fields) != 1 || fields[0].(*limit.Error).Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want one error naming %s and containing %q", err, tc.field, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "glc_x") {
				t.Fatalf("Validate = %v: the error repeats a password", err)
			}
		})
	}
}

func TestTagsNameTheNodeTheEpochAndTheVersion(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want map[string]string
	}{
		{"every tag is set", Spec{NodeID: "gpu-node-7", Epoch: 12345, Version: "v0.3-4-gabc-dirty"},
			map[string]string{"node_id": "gpu-node-7", "epoch": "12345", "version": "v0.3-4-gabc-dirty"}},
		{"characters a label value cannot hold become underscores", Spec{NodeID: "a,b{c}=d e", Epoch: 1},
			map[string]string{"node_id": "a_b_c__d_e", "epoch": "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.spec.tags()
			if len(got) != len(tc.want) {
				t.Fatalf("tags = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("tag %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
