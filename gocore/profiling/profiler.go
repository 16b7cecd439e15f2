package profiling

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grafana/pyroscope-go"
)

// MutexFraction is the runtime's mutex profile fraction while pushing
// (runtime.SetMutexProfileFraction): on average one contention event in
// MutexFraction is recorded, which keeps the cost to a fraction of a
// percent of the contention itself.
const MutexFraction = 10

// BlockRate is the runtime's block profile rate while pushing
// (runtime.SetBlockProfileRate), in nanoseconds: on average one blocking
// event is recorded per BlockRate spent blocked, so every block of 10 µs
// or longer is seen and shorter ones in proportion. The dispatcher waits
// in C (futex, spin), not on Go channels, so its waits cost nothing here.
const BlockRate = 10_000

// uploadTimeout bounds one upload (connect, send, answer). Stop may wait
// this long for an upload in flight to a server that does not answer.
const uploadTimeout = 10 * time.Second

// profileTypes are every profile pushed: CPU, heap (allocated and in-use
// objects and bytes), goroutines, mutex contention and blocking.
var profileTypes = []pyroscope.ProfileType{
	pyroscope.ProfileCPU,
	pyroscope.ProfileAllocObjects, pyroscope.ProfileAllocSpace,
	pyroscope.ProfileInuseObjects, pyroscope.ProfileInuseSpace,
	pyroscope.ProfileGoroutines,
	pyroscope.ProfileMutexCount, pyroscope.ProfileMutexDuration,
	pyroscope.ProfileBlockCount, pyroscope.ProfileBlockDuration,
}

// Profiler is a running push. Its methods are safe for concurrent use.
type Profiler struct {
	p         *pyroscope.Profiler
	up        *uploads
	prevMutex int
	stop      sync.Once
}

// Start validates s and starts pushing; it does not wait for the server
// (an unreachable one is logged once, when the first upload fails). s
// must be Enabled. It sets the runtime's mutex and block profile rates
// (MutexFraction, BlockRate) until Stop. Only one Profiler may run at a
// time: the CPU profiler is the process's. Errors: s's *limit.Error
// values, or pyroscope-go's refusal to start.
//
// pyroscope-go reads PYROSCOPE_ADHOC_SERVER_ADDRESS from the environment
// and, when it is set, pushes there instead of s.URL.
func Start(s Spec, log *slog.Logger) (*Profiler, error) {
	if !s.Enabled() {
		return nil, fmt.Errorf("profiling: no URL: the push is off")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxConnsPerHost = 5 // pyroscope-go's upload threads
	ctx, cancel := context.WithCancel(context.Background())
	up := &uploads{log: log, url: s.URL, ctx: ctx, cancel: cancel, c: &http.Client{Transport: base, Timeout: uploadTimeout,
		// Redirects are not followed: Go drops the Authorization header
		// on one (as pyroscope-go's own client does not follow them).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	prevMutex := runtime.SetMutexProfileFraction(MutexFraction)
	runtime.SetBlockProfileRate(BlockRate)
	p, err := pyroscope.Start(pyroscope.Config{
		ApplicationName: s.AppName, Tags: s.tags(), ServerAddress: s.URL,
		BasicAuthUser: s.BasicAuthUser, BasicAuthPassword: s.BasicAuthPassword, TenantID: s.TenantID,
		UploadRate: s.UploadInterval, ProfileTypes: profileTypes, HTTPClient: up, Logger: &logger{log: log},
	})
	if err != nil {
		cancel()
		runtime.SetMutexProfileFraction(prevMutex)
		runtime.SetBlockProfileRate(0)
		return nil, fmt.Errorf("profiling: starting the pyroscope push: %w", err)
	}
	log.Info("profiling: pushing to pyroscope", slog.String("url", s.URL), slog.String("app", s.AppName),
		slog.Duration("interval", s.UploadInterval), slog.String("tenant", s.TenantID), slog.Bool("basic_auth", s.BasicAuthUser != ""))
	return &Profiler{p: p, up: up, prevMutex: prevMutex}, nil
}

// Stop pushes what the current interval holds, stops the push and
// restores the mutex profile fraction Start found and the block profile
// rate to 0 (the runtime's default; nothing else in the Manager sets it).
// It waits at most about uploadTimeout in all for the uploads in flight and
// queued (pyroscope-go's threads would otherwise send each queued profile
// in turn to a server that does not answer, uploadTimeout each): then it
// cancels them. It closes the push's connections. Stop after Stop does
// nothing.
func (p *Profiler) Stop() {
	p.stop.Do(func() {
		giveUp := time.AfterFunc(uploadTimeout, p.up.cancel)
		p.p.Stop()
		giveUp.Stop()
		p.up.cancel()
		p.up.c.CloseIdleConnections() // no upload comes after Stop: free its sockets
		runtime.SetMutexProfileFraction(p.prevMutex)
		runtime.SetBlockProfileRate(0)
	})
}

// Uploads returns how many uploads the server accepted (200) and how many
// failed (no answer, or another status) so far.
func (p *Profiler) Uploads() (ok, failed uint64) { return p.up.ok.Load(), p.up.failed.Load() }

// uploads is the HTTP client of the push: it counts uploads and logs the
// first failure after a success (or the start), and the first success
// after failures, never each upload.
type uploads struct {
	c *http.Client
	// ctx is every upload's; cancel ends those in flight and fails those
	// after it at once (Stop's bound on a server that does not answer).
	ctx        context.Context
	cancel     context.CancelFunc
	log        *slog.Logger
	url        string
	ok, failed atomic.Uint64
	failing    atomic.Bool
}

// maxReplyShown bounds the part of a refusal's body that is logged.
const maxReplyShown = 256

// maxReplyBytes bounds how much of any answer's body is read (pyroscope-go
// reads the body to its end): Pyroscope's answer to an upload is a few
// bytes, and a server or proxy sending more cannot grow the Manager's
// memory with it.
const maxReplyBytes = 64 << 10

// Do sends one upload (pyroscope-go's remote.HTTPClient).
func (u *uploads) Do(req *http.Request) (*http.Response, error) {
	resp, err := u.c.Do(req.WithContext(u.ctx))
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxReplyBytes), resp.Body}
	}
	switch {
	case err != nil:
		// The *url.Error's text repeats the whole ingest URL and its
		// query; the cause alone says what went wrong.
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		u.fail(slog.Any("err", cause))
	case resp.StatusCode != http.StatusOK:
		head, _ := io.ReadAll(io.LimitReader(resp.Body, maxReplyShown))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(strings.NewReader(string(head)), resp.Body), resp.Body}
		u.fail(slog.String("status", resp.Status), slog.String("reply", strings.TrimSpace(string(head))))
	default:
		u.ok.Add(1)
		if u.failing.Swap(false) {
			u.log.Info("profiling: uploads to pyroscope succeed again", slog.String("url", u.url), slog.Uint64("failed_so_far", u.failed.Load()))
		}
	}
	return resp, err
}

func (u *uploads) fail(why ...any) {
	u.failed.Add(1)
	if !u.failing.Swap(true) {
		u.log.Warn("profiling: upload to pyroscope failed; profiles are dropped until it answers, and further failures are not logged",
			append([]any{slog.String("url", u.url)}, why...)...)
	}
}

// logger routes pyroscope-go's log lines into the Manager's log: its
// information lines at debug level, and each kind of error once (upload
// failures are uploads' to log).
type logger struct {
	log  *slog.Logger
	seen sync.Map // format string → true once logged
}

func (l *logger) Infof(format string, args ...any) {
	l.log.Debug("profiling: " + fmt.Sprintf(format, args...))
}

func (l *logger) Debugf(format string, args ...any) {
	l.log.Debug("profiling: " + fmt.Sprintf(format, args...))
}

func (l *logger) Errorf(format string, args ...any) {
	if strings.HasPrefix(format, "upload profile") {
		return // uploads.Do logged it
	}
	if _, dup := l.seen.LoadOrStore(format, true); !dup {
		l.log.Warn("profiling: "+fmt.Sprintf(format, args...), slog.String("note", "logged once"))
	}
}
