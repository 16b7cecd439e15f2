package main

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// inheritedTier is the RAM tier a predecessor left in systemd's file
// descriptor store, passed to this process as LISTEN_FDS with the names
// LISTEN_FDNAMES gives (ram.ArenaName, ram.LedgerName; the Manager stored
// them, gocore/manager/fdstore.go), or nil when none was passed. Any other
// inherited fd is closed and logged. The LISTEN_ variables are unset, so
// no child inherits them.
func inheritedTier(log *slog.Logger) *ram.Handed {
	var h ram.Handed
	for _, f := range activation.Files(true) {
		switch {
		case f.Name() == ram.ArenaName && h.Arena == nil:
			h.Arena = f
		case f.Name() == ram.LedgerName && h.Ledger == nil:
			h.Ledger = f
		default:
			log.Warn("fd store: closing an inherited fd that is not the RAM tier's", slog.String("name", f.Name()))
			f.Close()
		}
	}
	if h.Arena == nil && h.Ledger == nil {
		return nil
	}
	log.Info("fd store: a predecessor's RAM tier was passed in; adopting it",
		slog.Bool("arena", h.Arena != nil), slog.Bool("ledger", h.Ledger != nil))
	return &h
}
