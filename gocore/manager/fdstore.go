package manager

import (
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"os"

	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// The RAM tier in systemd's file descriptor store (docs/design.md §7.1):
// with Spec.FDStore and NOTIFY_SOCKET set, the Manager hands the RAM
// tier's two memfds (ram.ArenaName, ram.LedgerName; the FDNAMEs) to the
// store once the tier is made, after removing whatever the store held
// under those names. systemd keeps them while the service restarts after
// a crash (Restart=) and passes them to the next Manager as LISTEN_FDS,
// which adopts the tier (ram.Spec.Handed). A clean stop removes them
// (FDSTOREREMOVE=1), so the memory is freed: only a crash or an upgrade
// keeps the tier.

// StoreTier hands the RAM tier's memfds to the store; a refusal is logged
// and the Manager serves on (its tier then does not outlive a crash). New
// calls it; an upgrade's successor calls it again once it is the service's
// main process (systemd takes fds only from that process).
func (m *Manager) StoreTier() {
	sock := os.Getenv("NOTIFY_SOCKET")
	if !m.spec.FDStore || sock == "" || m.Cache == nil {
		return
	}
	f := m.Cache.Tiers().Arena().Files()
	for _, x := range []struct {
		name string
		f    *os.File
	}{{ram.ArenaName, f.Arena}, {ram.LedgerName, f.Ledger}} {
		err := unixsock.Notify(sock, "FDSTOREREMOVE=1\nFDNAME="+x.name)
		if err == nil {
			err = unixsock.Notify(sock, "FDSTORE=1\nFDNAME="+x.name, x.f)
		}
		if err != nil {
			m.log.Error("fd store: the RAM tier will not outlive a crash", slog.String("fd", x.name), slog.Any("err", err))
			return
		}
	}
	m.log.Info("fd store: the RAM tier's memfds were sent to the service manager's file descriptor store (it keeps them with FileDescriptorStoreMax=2 or more)",
		slog.String("arena", ram.ArenaName), slog.String("ledger", ram.LedgerName))
}

// unstoreTier removes the RAM tier's memfds from the store (a clean stop).
func (m *Manager) unstoreTier() {
	sock := os.Getenv("NOTIFY_SOCKET")
	if !m.spec.FDStore || sock == "" || m.Cache == nil {
		return
	}
	for _, name := range []string{ram.ArenaName, ram.LedgerName} {
		if err := unixsock.Notify(sock, "FDSTOREREMOVE=1\nFDNAME="+name); err != nil {
			m.log.Warn("fd store: removing the RAM tier's memfd failed", slog.String("fd", name), slog.Any("err", err))
		}
	}
}

// domainsTag is ram.Spec.Tag for tenants: the first 8 bytes of SHA-256
// over the tenant domains' names in order (0 without tenants), so that a
// RAM tier is adopted only by a Manager whose domain numbers mean the
// same domains.
func domainsTag(ts *tenant.Set) uint64 {
	if ts.Len() == 0 {
		return 0
	}
	h := sha256.New()
	for _, d := range ts.Domains() {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(d.Name)))
		h.Write(n[:])
		h.Write([]byte(d.Name))
	}
	return binary.LittleEndian.Uint64(h.Sum(nil))
}
