package bootstrap

import (
	"fmt"
	"net"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// tenantUse is what one tenant's sessions hold of the Manager-wide
// session and discovery-table limits, under Server.mu.
type tenantUse struct {
	share    tenant.Share
	sessions uint32
	// tables counts the references the tenant's sessions hold on each
	// discovery table (a namespace of the tenant's domain); its length is
	// the tables the tenant holds.
	tables map[abi.Namespace]int
	// buffers and bufferBytes are the engine buffers its sessions
	// registered (reserveBuffers).
	buffers     uint32
	bufferBytes uint64
}

// admitTenant finds the tenant of the peer of c (cred from SO_PEERCRED):
// its groups (SO_PEERGROUPS) and, when a selector needs it, its cgroup are
// read from the kernel. The error is the refusal's text.
func (s *Server) admitTenant(c *net.UnixConn, cred unixsock.Cred) (*tenant.Tenant, error) {
	p := tenant.Peer{PID: cred.PID, UID: cred.UID, GID: cred.GID}
	var err error
	if p.Groups, err = unixsock.PeerGroups(c, cred.PID); err != nil {
		return nil, err
	}
	if s.cfg.Tenants.NeedsCgroup() {
		if p.Cgroup, err = unixsock.PeerCgroup(c, cred.PID); err != nil {
			return nil, err
		}
	}
	return s.cfg.Tenants.Match(p)
}

// takeSession counts one more session of t, or says why its share is full.
func (s *Server) takeSession(t *tenant.Tenant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &s.tenants[t.Index]
	if u.sessions >= u.share.Sessions {
		return fmt.Errorf("tenant %q holds %d sessions, its share of the Manager's %d (--tenant-quota %s:sessions=N)",
			t.Name, u.sessions, s.cfg.Table.Spec().MaxSessions, t.Name)
	}
	u.sessions++
	return nil
}

// dropSession gives back takeSession's count.
func (s *Server) dropSession(t *tenant.Tenant) {
	s.mu.Lock()
	s.tenants[t.Index].sessions--
	s.mu.Unlock()
}

// takeTable counts one more reference of t's sessions on table ns, or
// says why t's share of tables is full (a table t holds already is always
// granted: it costs nothing more).
func (s *Server) takeTable(t *tenant.Tenant, ns abi.Namespace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &s.tenants[t.Index]
	if u.tables[ns] == 0 && uint32(len(u.tables)) >= u.share.Tables {
		return fmt.Errorf("tenant %q maps %d discovery indexes, its share of the Manager's %d (--tenant-quota %s:tables=N)",
			t.Name, len(u.tables), s.cfg.MaxTables, t.Name)
	}
	if u.tables == nil {
		u.tables = map[abi.Namespace]int{}
	}
	u.tables[ns]++
	return nil
}

// dropTable gives back one takeTable reference.
func (s *Server) dropTable(t *tenant.Tenant, ns abi.Namespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &s.tenants[t.Index]
	if u.tables[ns]--; u.tables[ns] <= 0 {
		delete(u.tables, ns)
	}
}

// TenantUse is one tenant's use of the session and discovery-table limits
// (for the operator socket's per-tenant figures).
type TenantUse struct {
	Name                          string
	Sessions, SessionsShare       uint32
	Tables, TablesShare           uint32
	Buffers, BuffersShare         uint32
	BufferBytes, BufferBytesShare uint64
}

// TenantUses returns every tenant's use, in the order of the Set; nil
// without tenants.
func (s *Server) TenantUses() []TenantUse {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TenantUse
	for i, t := range s.cfg.Tenants.All() {
		u := s.tenants[i]
		out = append(out, TenantUse{Name: t.Name, Sessions: u.sessions, SessionsShare: u.share.Sessions,
			Tables: uint32(len(u.tables)), TablesShare: u.share.Tables, Buffers: u.buffers, BuffersShare: u.share.Buffers,
			BufferBytes: u.bufferBytes, BufferBytesShare: u.share.BufferBytes})
	}
	return out
}
