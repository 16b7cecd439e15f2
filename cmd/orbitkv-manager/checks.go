package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// flagOf names the flag (and so the config key and environment variable)
// that sets each Spec field, so a limit the Spec declares (limit.Error),
// or a value the system refused at start (limit.Refused), is reported as
// the setting the user wrote.
var flagOf = map[string]string{
	"session.MaxSessions": "max-sessions", "channel.MaxSessions": "max-sessions",
	"session.DescCapacity": "desc-bytes", "channel.SpinWindow": "spin-window",
	"channel.Transport": "channel-transport", "channel.ServicePrefix": "channel-service",
	"bootstrap.Path": "bootstrap-socket", "bootstrap.HelloTimeout": "hello-timeout",
	"bootstrap.MaxBufferBytes": "max-buffer-bytes", "discover.Bytes": "discover-bytes",
	"manager.OperatorSocket": "operator-socket", "manager.OperatorGroup": "operator-group",
	"manager.HTTPAddr": "http-addr", "manager.ShutdownTimeout": "shutdown-timeout",
	"cache.MaxOpsPerSession": "max-ops-per-session", "cache.MaxOps": "max-ops",
	"cache.OpExpiry": "op-expiry", "cache.LeaseIdleTimeout": "lease-idle-timeout", "session.MaxSessionsPerPID": "max-sessions-per-pid", "cache.CopyWorkers": "copy-workers", "cache.CopyBackend": "copy-backend",
	"tier.Eviction": "eviction", "ram.CapacityBytes": "ram-capacity", "ram.ChunkBytes": "ram-chunk-bytes",
	"ram.Hugepages": "hugepages", "ssd.Dir": "ssd-dir", "ssd.CapacityBytes": "ssd-capacity",
	"ssd.SlotBytes": "ssd-slot-bytes", "ssd.IOWorkers": "ssd-io-workers", "ssd.Admission": "ssd-admission",
	"profiling.URL": "pyroscope-url", "profiling.AppName": "pyroscope-app-name", "profiling.TenantID": "pyroscope-tenant-id",
	"profiling.BasicAuthUser": "pyroscope-basic-auth-user", "profiling.BasicAuthPassword": "pyroscope-password-file",
	"profiling.UploadInterval": "pyroscope-upload-interval", "manager.EBPF": "ebpf",
	"kvevents.Spec.Endpoint": "kv-events", "kvevents.Spec.ReplayEndpoint": "kv-events-replay",
	"kvevents.Spec.QueueEvents": "kv-events-queue", "kvevents.Spec.Domains": "kv-events",
}

// checks collects the errors of the settings, at most one per setting, in
// the order found, so every mistake is reported at once. Each names the
// setting as the user set it (flag, environment variable, or file and
// line; source.label).
type checks struct {
	o    *options
	seen map[string]bool
	errs []error
}

func newChecks(o *options) *checks { return &checks{o: o, seen: map[string]bool{}} }

// fail records "<setting> <value>: <tail>" for setting name unless it
// already has an error; value is as the message shows it (quoted or not).
func (k *checks) fail(name, value, tail string) {
	if !k.seen[name] {
		k.seen[name] = true
		k.errs = append(k.errs, fmt.Errorf("%s: %s", k.o.sourceOf(name).label(name, value), tail))
	}
}

// add records the errors in err: each limit.Error or limit.Refused as the
// setting of its field, with the value as written ("--desc-bytes 3KiB:
// want ..."); every other error as it is.
func (k *checks) add(err error) {
	fields, others := limit.Split(err)
	for _, f := range fields {
		var field, tail string
		var value any
		switch e := f.(type) {
		case *limit.Error:
			field, value, tail = e.Field, e.Value, "want "+e.Want
		case *limit.Refused:
			field, value, tail = e.Field, e.Value, e.Err.Error()
		}
		name, ok := flagOf[field]
		if !ok {
			k.errs = append(k.errs, f)
			continue
		}
		v := shown(name, k.o.fs.Lookup(name).Value.String())
		_, quoted := value.(string)
		switch {
		case v == "" && value != "":
			v = limit.Format(value) + " (derived)" // --bootstrap-socket from --listen
		case quoted:
			v = strconv.Quote(v)
		}
		k.fail(name, v, tail)
	}
	k.errs = append(k.errs, others...)
}

func (k *checks) err() error { return errors.Join(k.errs...) }

// size parses the size setting name (value v); a value that does not
// parse is recorded and reads 0.
func (k *checks) size(name, v, examples string) uint64 {
	n, err := limit.ParseSize(name, v)
	var le *limit.Error
	switch {
	case !errors.As(err, &le):
	case errors.Is(err, limit.ErrAmbiguousUnit):
		k.fail(name, strconv.Quote(v), le.Err.Error()) // it says what to write
	default:
		k.fail(name, strconv.Quote(v), fmt.Sprintf("%v (examples: %s; %s)", le.Err, examples, limit.SizeHint))
	}
	return n
}

// shown is setting name's value v as errors and --print-config write it:
// a password in the --pyroscope-url (which Validate refuses) as "xxxxx".
func shown(name, v string) string {
	if name != "pyroscope-url" {
		return v
	}
	if u, err := url.Parse(v); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(v, "@"); at >= 0 {
		return "xxxxx" + v[at:] // unparsable: whatever precedes the host may be a password
	}
	return v
}
