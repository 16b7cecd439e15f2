// Package pyroscopetest is a Pyroscope server's push endpoint for tests:
// a local HTTP receiver of POST /ingest, as Grafana Pyroscope serves it
// and pyroscope-go's upstream/remote client sends it, that parses every
// pushed profile with github.com/google/pprof/profile. No Pyroscope
// server can be installed on the build machines, so the tests of
// gocore/profiling and gocore/manager push to this instead. Tests only:
// the Manager binary never links it.
package pyroscopetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// maxPushBytes bounds one push's body; a Manager's profiles are a few
// hundred KiB at most.
const maxPushBytes = 64 << 20

// Push is one accepted upload.
type Push struct {
	// App is the application name and Labels the tags, both parsed from
	// the name parameter ("app{k=v,...}").
	App    string
	Labels map[string]string
	// From and Until are the interval the profile covers.
	From, Until time.Time
	// SpyName, Units and Aggregation are the query parameters of those
	// names (spyName, units, aggregationType).
	SpyName, Units, Aggregation string
	// Profile is the parsed pprof profile of the "profile" part.
	Profile *profile.Profile
	// Config is the "sample_type_config" part: per sample type, its
	// display name, units and aggregation (absent for a CPU profile).
	Config map[string]SampleType
	// Header is the request's header (X-Scope-OrgID, Authorization).
	Header http.Header
}

// SampleType is one entry of a push's sample_type_config part.
type SampleType struct {
	DisplayName string `json:"display-name"`
	Units       string `json:"units"`
	Aggregation string `json:"aggregation"`
}

// Types names the profile types the push carries, as pyroscope-go names
// them (cpu, alloc_space, goroutine, mutex_count, block_duration, ...):
// the display name of each sample type, else its pprof name, with the CPU
// profile's "samples" and "cpu" sample types read as "cpu".
func (p Push) Types() []string {
	var out []string
	for _, st := range p.Profile.SampleType {
		name := st.Type
		if c, ok := p.Config[st.Type]; ok && c.DisplayName != "" {
			name = c.DisplayName
		}
		if name == "samples" && p.Config == nil {
			continue // the CPU profile's count, beside "cpu"
		}
		out = append(out, name)
	}
	return out
}

// Receiver is a running ingest endpoint. Its methods are safe for
// concurrent use.
type Receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	pushes []Push
	errs   []error // requests it refused as malformed
	status int     // the answer to well-formed pushes: 0 is 200
}

// New starts a Receiver; the test's Cleanup stops it and fails the test
// if any request was malformed.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.srv.Close()
		for _, err := range r.Errors() {
			t.Errorf("pyroscope receiver: malformed push: %v", err)
		}
	})
	return r
}

// URL is the base URL to push to (profiles arrive at URL/ingest).
func (r *Receiver) URL() string { return r.srv.URL }

// Answer makes the receiver answer every well-formed push from now on
// with status (0 or 200: accept and record it; anything else: refuse it
// unrecorded, as an overloaded or misconfigured server would).
func (r *Receiver) Answer(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// Pushes returns a copy of the pushes accepted so far, in arrival order.
func (r *Receiver) Pushes() []Push {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Push(nil), r.pushes...)
}

// Errors returns what was wrong with each malformed request so far.
func (r *Receiver) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Wait polls Pushes every 50 ms until done returns true of them or
// timeout passes; it reports whether done did.
func (r *Receiver) Wait(timeout time.Duration, done func([]Push) bool) bool {
	end := time.Now().Add(timeout)
	for {
		if done(r.Pushes()) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	p, err := parse(req)
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	status := r.status
	if status == 0 || status == http.StatusOK {
		r.pushes = append(r.pushes, p)
		status = http.StatusOK
	}
	r.mu.Unlock()
	if status != http.StatusOK {
		http.Error(w, "refused by the test", status)
	}
}

// parse reads one push as Pyroscope's /ingest takes it: POST, the query
// parameters name, from and until (Unix nanoseconds) and spyName, and a
// multipart/form-data body with a pprof "profile" part and an optional
// "sample_type_config" JSON part.
func parse(req *http.Request) (Push, error) {
	var p Push
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/ingest") {
		return p, fmt.Errorf("%s %s: want POST .../ingest", req.Method, req.URL.Path)
	}
	q := req.URL.Query()
	var err error
	if p.App, p.Labels, err = parseName(q.Get("name")); err != nil {
		return p, err
	}
	for _, f := range []struct {
		key string
		to  *time.Time
	}{{"from", &p.From}, {"until", &p.Until}} {
		ns, err := strconv.ParseInt(q.Get(f.key), 10, 64)
		if err != nil {
			return p, fmt.Errorf("query %s=%q: want Unix nanoseconds", f.key, q.Get(f.key))
		}
		*f.to = time.Unix(0, ns)
	}
	if p.Until.Before(p.From) {
		return p, fmt.Errorf("until %v is before from %v", p.Until, p.From)
	}
	if p.SpyName = q.Get("spyName"); p.SpyName == "" {
		return p, errors.New("no spyName")
	}
	p.Units, p.Aggregation, p.Header = q.Get("units"), q.Get("aggregationType"), req.Header.Clone()
	mt, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return p, fmt.Errorf("Content-Type %q: want multipart/form-data with a boundary", req.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(io.LimitReader(req.Body, maxPushBytes), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return p, fmt.Errorf("multipart body: %w", err)
		}
		switch part.FormName() {
		case "profile":
			if p.Profile, err = profile.Parse(part); err != nil {
				return p, fmt.Errorf("profile part: %w", err)
			}
		case "sample_type_config":
			if err := json.NewDecoder(part).Decode(&p.Config); err != nil {
				return p, fmt.Errorf("sample_type_config part: %w", err)
			}
		default:
			return p, fmt.Errorf("unexpected part %q", part.FormName())
		}
	}
	if p.Profile == nil {
		return p, errors.New("no profile part")
	}
	return p, nil
}

// parseName splits "app{k=v,k2=v2}" into the app and its labels.
func parseName(name string) (string, map[string]string, error) {
	app, rest, ok := strings.Cut(name, "{")
	if !ok || app == "" || !strings.HasSuffix(rest, "}") {
		return "", nil, fmt.Errorf("name %q: want app{key=value,...}", name)
	}
	labels := map[string]string{}
	if rest = strings.TrimSuffix(rest, "}"); rest != "" {
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return "", nil, fmt.Errorf("name %q: label %q is not key=value", name, kv)
			}
			labels[k] = v
		}
	}
	return app, labels, nil
}
