// Package manager builds a whole Manager from one Spec: the session table
// (gocore/session), the channel dispatcher (gocore/channel) serving the
// cache service (gocore/cache: tiers, leases, tickets, copy engine) and
// the bootstrap server (gocore/bootstrap). cmd/orbitkv-manager turns flags
// into a Spec; tests and harnesses use the same wiring. Dependencies run
// one way: the Manager wires the transport (channel) to its handler
// (cache); neither knows the other's package.
package manager

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/session"
)

// Spec configures a Manager; a plain value. Bootstrap.Table, .Dispatcher
// and .Epoch are filled in by New; Cache.Epoch and Cache.Logger too.
type Spec struct {
	Epoch     uint64 // nonzero; stamped on every response
	Session   session.Spec
	Channel   channel.Spec
	Cache     *cache.Spec // nil: only Ping and Shutdown are served
	Bootstrap bootstrap.Config
	Logger    *slog.Logger
}

// Validate checks every part of s; the error names the part and the limit.
func (s Spec) Validate() error {
	if s.Epoch == 0 {
		return errors.New("manager spec: epoch must be nonzero")
	}
	ss, cs := s.Session, s.Channel
	ss.Epoch, cs.Epoch = s.Epoch, s.Epoch
	errs := []error{ss.Validate(), cs.Validate()}
	if s.Cache != nil {
		errs = append(errs, s.Cache.Validate())
	}
	if s.Bootstrap.Path == "" {
		errs = append(errs, errors.New("manager spec: bootstrap socket path is empty"))
	}
	return errors.Join(errs...)
}

// Manager is one running Manager: its dispatcher runs on its own
// goroutine from New on; Serve accepts clients; Close stops everything.
type Manager struct {
	Table      *session.Table
	Dispatcher *channel.Dispatcher
	Cache      *cache.Service // nil without Spec.Cache
	Server     *bootstrap.Server
	log        *slog.Logger
}

// New validates s, creates the RAM tier (committing its memory), the copy
// engine and the dispatcher, starts the dispatcher and binds the
// bootstrap socket. Errors name the part that failed.
func New(s Spec) (*Manager, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	s.Session.Epoch, s.Channel.Epoch = s.Epoch, s.Epoch
	if s.Channel.Logger == nil {
		s.Channel.Logger = s.Logger
	}
	table, err := session.NewTable(s.Session)
	if err != nil {
		return nil, err
	}
	disp, err := channel.New(s.Channel)
	if err != nil {
		return nil, err
	}
	m := &Manager{Table: table, Dispatcher: disp, log: s.Logger}
	if s.Cache != nil {
		cs := *s.Cache
		cs.Epoch = s.Epoch
		if cs.Logger == nil {
			cs.Logger = s.Logger
		}
		if m.Cache, err = cache.New(cs, disp.Poller()); err != nil {
			disp.Close()
			return nil, err
		}
		disp.SetHandler(m.Cache)
	}
	go disp.Run()
	bc := s.Bootstrap
	bc.Epoch, bc.Table, bc.Dispatcher = s.Epoch, table, disp
	if bc.Logger == nil {
		bc.Logger = s.Logger
	}
	if m.Server, err = bootstrap.New(bc); err != nil {
		m.stopDispatcher()
		return nil, fmt.Errorf("bootstrap socket %s: %w", bc.Path, err)
	}
	return m, nil
}

// Serve accepts bootstrap connections until Close; see bootstrap.Server.Serve.
func (m *Manager) Serve() error { return m.Server.Serve() }

// Close shuts down in the order DESIGN.md §5.1 needs: every session is
// detached and released first, then the dispatcher stops and the cache
// waits for its copies and SSD I/O and frees the RAM tier. It has no
// deadline (see cache.Service.Close); CloseSessions and StopDispatcher let
// a caller bound each step.
func (m *Manager) Close() {
	m.CloseSessions()
	m.stopDispatcher()
}

// CloseSessions closes the bootstrap server and every session.
func (m *Manager) CloseSessions() { m.Server.Close() }

// StopDispatcher asks the dispatcher to stop; Done is closed once it (and
// with it the cache service) stopped; then call Free.
func (m *Manager) StopDispatcher() <-chan struct{} {
	m.Dispatcher.Stop()
	return m.Dispatcher.Done()
}

// Free releases the dispatcher's poll loop and doorbell after it stopped.
func (m *Manager) Free() { m.Dispatcher.Close() }

func (m *Manager) stopDispatcher() {
	<-m.StopDispatcher()
	m.Free()
}
