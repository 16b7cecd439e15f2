package main

import (
	"log/slog"
	"os"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
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
	// Out of the store while this process adopts them: an adoption that
	// crashes is not tried again by the next start (New stores them again
	// once the tier is made).
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		for _, name := range []string{ram.ArenaName, ram.LedgerName} {
			if err := unixsock.Notify(sock, "FDSTOREREMOVE=1\nFDNAME="+name); err != nil {
				log.Warn("fd store: removing the inherited memfd failed", slog.String("fd", name), slog.Any("err", err))
			}
		}
	}
	log.Info("fd store: a predecessor's RAM tier was passed in; adopting it",
		slog.Bool("arena", h.Arena != nil), slog.Bool("ledger", h.Ledger != nil))
	return &h
}
