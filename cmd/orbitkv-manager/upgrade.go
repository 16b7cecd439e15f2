package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/orbitkv/orbitkv/gocore/handover"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// How long a successor waits for its predecessor's RAM tier (the
// predecessor drains, at most an hour by the operator's choice, and shuts
// down first), and for its last word once it adopted.
const (
	predecessorState = time.Hour + 5*time.Minute
	predecessorDone  = 10 * time.Second
)

// executable is the path this process was started from, which the
// operator's Upgrade starts again: the binary at that path then (a
// package upgrade replaces it). "" when it cannot be read.
func executable(log *slog.Logger) string {
	p, err := os.Executable()
	if err != nil {
		log.Warn("upgrade: the path of this executable is unknown; orbitkvctl upgrade will be refused", slog.Any("err", err))
		return ""
	}
	return p
}

// predecessor is the Manager that started this one to hand it its RAM
// tier (handover.EnvFD set; nil, nil otherwise). It says hello, waits for
// the tier while the predecessor drains and stops, and sets it as the tier
// to adopt. Without it (the predecessor died, or sent something else) this
// process must not serve: it is not the service's main process, and the
// service manager restarts the service as after any crash. The error says
// why.
func predecessor(log *slog.Logger, s *manager.Spec) (*handover.Predecessor, error) {
	p, err := handover.Join(ram.LedgerVersion)
	if err != nil || p == nil {
		return nil, err
	}
	log.Info("upgrade: started by a running Manager; waiting for it to drain and hand over its RAM tier")
	start := time.Now()
	arena, ledger, epoch, err := p.Receive(predecessorState)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("upgrade: no RAM tier from the predecessor: %w", err)
	}
	log.Info("upgrade: the predecessor handed over its RAM tier", slog.Uint64("predecessor_epoch", epoch), slog.Duration("waited", time.Since(start)))
	if s.Cache == nil {
		ram.Handed{Arena: arena, Ledger: ledger}.Close()
	} else {
		if s.Cache.Tiers.RAM.Handed != nil {
			s.Cache.Tiers.RAM.Handed.Close()
		}
		s.Cache.Tiers.RAM.Handed = &ram.Handed{Arena: arena, Ledger: ledger}
	}
	return p, nil
}

// adopted tells the predecessor what the new Manager adopted, after which
// it exits.
func adopted(log *slog.Logger, m *manager.Manager, p *handover.Predecessor) {
	var blocks, bytes uint64
	if m.Cache != nil {
		ad := m.Cache.Tiers().Arena().Adoption()
		blocks, bytes = uint64(ad.Count), ad.Bytes
	}
	if err := p.Adopted(blocks, bytes, predecessorDone); err != nil {
		log.Warn("upgrade: the predecessor did not acknowledge the adoption", slog.Any("err", err))
	}
	// The predecessor made this process the service's main one: only now
	// does systemd take its fds.
	m.StoreTier()
}
