package profiling

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// DefaultAppName is Spec.AppName's default: the application Pyroscope
// lists the Manager's profiles under.
const DefaultAppName = "orbitkv-manager"

// DefaultUploadInterval is Spec.UploadInterval's default, pyroscope-go's
// own: each profile covers this long.
const DefaultUploadInterval = 15 * time.Second

// UploadIntervalRange is the limit of Spec.UploadInterval.
var UploadIntervalRange = limit.Range[time.Duration]{Field: "profiling.UploadInterval", Min: time.Second, Max: 5 * time.Minute,
	Zero: limit.Format(DefaultUploadInterval)}

// MaxTenantIDBytes bounds Spec.TenantID (Grafana Mimir's and Pyroscope's
// limit on a tenant id).
const MaxTenantIDBytes = 150

// MaxAppNameBytes bounds Spec.AppName.
const MaxAppNameBytes = 128

// Spec configures the push; a plain value. The zero Spec pushes nothing.
type Spec struct {
	// URL is the Pyroscope server's base URL, http or https, such as
	// http://pyroscope.internal:4040 or Grafana Cloud's
	// https://profiles-prod-001.grafana.net; profiles go to URL/ingest.
	// "" turns profiling off. It must hold no user or password: those
	// are BasicAuthUser and BasicAuthPassword.
	URL string
	// AppName is the application name in Pyroscope (letters, digits and
	// "._-/"; "": DefaultAppName).
	AppName string
	// TenantID, when set, is sent as X-Scope-OrgID (a multi-tenant
	// Pyroscope; at most MaxTenantIDBytes printable characters).
	TenantID string
	// BasicAuthUser and BasicAuthPassword, both set or both empty, are
	// sent as HTTP basic authentication (Grafana Cloud: the stack's user
	// id and an access token). The password is never logged.
	BasicAuthUser, BasicAuthPassword string
	// UploadInterval is how often profiles are pushed, each covering the
	// interval before it (0: DefaultUploadInterval; 1s..5m).
	UploadInterval time.Duration
	// NodeID, Epoch and Version tag every profile (node_id, epoch,
	// version). The Manager fills Epoch and Version from its own Spec.
	NodeID  string
	Epoch   uint64
	Version string
}

// Enabled reports whether s pushes profiles (URL is set).
func (s Spec) Enabled() bool { return s.URL != "" }

// Validate checks s; with URL empty every other field is still checked,
// so a mistake is reported before the day profiling is turned on. Each
// field outside its limit is a *limit.Error naming it.
func (s Spec) Validate() error {
	errs := []error{UploadIntervalRange.Check(s.UploadInterval), checkAppName(s.AppName)}
	if s.URL != "" {
		errs = append(errs, checkURL(s.URL))
	}
	errs = append(errs, limit.Check(len(s.TenantID) <= MaxTenantIDBytes && printable(s.TenantID), "profiling.TenantID", s.TenantID,
		fmt.Sprintf("at most %d printable ASCII characters, no spaces", MaxTenantIDBytes)))
	errs = append(errs, limit.Check(printable(s.BasicAuthUser) && !strings.Contains(s.BasicAuthUser, ":"), "profiling.BasicAuthUser", s.BasicAuthUser,
		"printable ASCII without spaces or \":\""))
	switch {
	case s.BasicAuthUser != "" && s.BasicAuthPassword == "":
		errs = append(errs, &limit.Error{Field: "profiling.BasicAuthPassword", Value: "", Want: "a password with the basic auth user " + limit.Format(s.BasicAuthUser)})
	case s.BasicAuthUser == "" && s.BasicAuthPassword != "":
		// The password itself is never part of an error.
		errs = append(errs, &limit.Error{Field: "profiling.BasicAuthUser", Value: "", Want: "a user with the basic auth password"})
	}
	return errors.Join(errs...)
}

// checkURL refuses a URL that is not http(s)://host[:port][/path] without
// user information, a query or a fragment.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	problem := ""
	switch {
	case strings.ContainsAny(raw, " \t\r\n"):
		problem = "it has a space or line break (a stray one around the URL?)"
	case err != nil:
		problem = "it does not parse"
	case u.Scheme == "":
		problem = "it has no scheme"
	case u.Scheme != "http" && u.Scheme != "https":
		problem = fmt.Sprintf("its scheme is %q", u.Scheme)
	case u.Hostname() == "":
		problem = "it has no host"
	case u.Port() != "" && !validPort(u.Port()):
		problem = fmt.Sprintf("its port %q is not 1..65535", u.Port())
	case u.User != nil:
		problem = "it holds a user or password; give them as the basic auth user and password instead"
	case u.RawQuery != "" || u.Fragment != "":
		problem = "it has a query or fragment (profiles go to URL/ingest)"
	}
	if problem == "" {
		return nil
	}
	shown := "(unparsable)"
	if err == nil {
		u.User = nil // a password is never repeated back
		shown = u.String()
	}
	return &limit.Error{Field: "profiling.URL", Value: shown, Want: "an http or https URL with a host, such as http://pyroscope:4040; " + problem}
}

// validPort reports whether p, the digits url.Parse leaves as a port, is
// a TCP port, 1..65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// checkAppName allows what Pyroscope allows in a service name.
func checkAppName(name string) error {
	ok := len(name) <= MaxAppNameBytes
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/", r))
	}
	return limit.Check(ok, "profiling.AppName", name, fmt.Sprintf("at most %d letters, digits and ._-/ (\"\": %s)", MaxAppNameBytes, DefaultAppName))
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// withDefaults fills the fields whose zero value stands for a default.
func (s Spec) withDefaults() Spec {
	s.AppName = cmp.Or(s.AppName, DefaultAppName)
	s.UploadInterval = cmp.Or(s.UploadInterval, DefaultUploadInterval)
	return s
}

// tags are the labels of every profile. A value keeps only what a
// Pyroscope label value may hold unquoted: ",", "{", "}", "=" and spaces
// become "_".
func (s Spec) tags() map[string]string {
	clean := strings.NewReplacer(",", "_", "{", "_", "}", "_", "=", "_", " ", "_")
	t := map[string]string{"epoch": fmt.Sprint(s.Epoch)}
	if s.NodeID != "" {
		t["node_id"] = clean.Replace(s.NodeID)
	}
	if s.Version != "" {
		t["version"] = clean.Replace(s.Version)
	}
	return t
}
