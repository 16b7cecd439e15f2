package manager

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// newEvents binds the KV event streams of Spec.Events (nil, nil when its
// Endpoint is empty): one for the node, its ipc:// socket in
// OperatorGroup when that is set, or one per tenant domain, each in the
// group of the domain's one principal (eventDomains).
func (m *Manager) newEvents(s Spec) (*kvevents.Tracker, error) {
	es := s.Events
	if es.Endpoint == "" {
		return nil, es.Validate()
	}
	if s.Tenants != nil {
		ds, err := eventDomains(s.Tenants)
		if err != nil {
			return nil, err
		}
		es.Domains = ds
	} else if gid, err := s.operatorGID(); err != nil {
		return nil, err
	} else if gid > 0 {
		es.NodeGID = gid
	}
	t, err := kvevents.New(es, m.log)
	if err != nil {
		return nil, err
	}
	pub, rep := t.Endpoints()
	m.log.Info("kv events: publishing", "endpoints", pub, "replay", rep, "topic", es.Topic)
	return t, nil
}

// eventDomains is one kvevents.Domain per tenant domain, in
// tenant.Domain.Index order: its socket's group is the one group that
// stands for every selector of the domain's tenants: their gid:N, or the
// primary group of their uid:N, which must be that user's private group
// (a group of the user's name: a shared primary group such as "users"
// would let its other members read the stream). A domain of several
// principals, or of a cgroup selector, has no such group, and two domains
// may not have the same group (each member could read the other's
// stream): the events cannot start.
func eventDomains(ts *tenant.Set) ([]kvevents.Domain, error) {
	var out []kvevents.Domain
	owner := map[int]string{} // gid → the domain whose socket it opens
	for _, d := range ts.Domains() {
		gid := -1
		for _, t := range ts.All() {
			if t.Domain != d {
				continue
			}
			for _, sel := range t.Selectors {
				g, err := selectorGID(sel)
				if err == nil && gid >= 0 && g != gid {
					err = fmt.Errorf("its selectors stand for groups %d and %d", gid, g)
				}
				if err != nil {
					return nil, limit.Check(false, "kvevents.Spec.Domains", d.Name,
						fmt.Sprintf("tenant domain whose event socket one group can read: %v (give the domain one gid:N selector of a group of its own, or one uid whose primary group is its private group)", err))
				}
				gid = g
			}
		}
		if other, ok := owner[gid]; ok {
			return nil, limit.Check(false, "kvevents.Spec.Domains", d.Name,
				fmt.Sprintf("tenant domain whose event socket one group can read: group %d also opens domain %s's socket, so each could read the other's stream (give each domain a group of its own)", gid, other))
		}
		owner[gid] = d.Name
		out = append(out, kvevents.Domain{Name: d.Name, GID: gid})
	}
	return out, nil
}

func selectorGID(sel tenant.Selector) (int, error) {
	switch sel.Kind {
	case tenant.ByGID:
		return int(sel.ID), nil
	case tenant.ByUID:
		u, err := user.LookupId(strconv.FormatUint(uint64(sel.ID), 10))
		if err != nil {
			return -1, fmt.Errorf("uid %d has no entry in the user database: %v", sel.ID, err)
		}
		g, err := user.LookupGroupId(u.Gid)
		if err != nil {
			return -1, fmt.Errorf("uid %d's primary group %s has no entry in the group database: %v", sel.ID, u.Gid, err)
		}
		if g.Name != u.Username {
			return -1, fmt.Errorf("uid %d (%s)'s primary group %s (%s) is not its private group (a group of the user's name), so other users may be in it", sel.ID, u.Username, u.Gid, g.Name)
		}
		return strconv.Atoi(u.Gid)
	}
	return -1, fmt.Errorf("selector %s names no group", sel)
}

// closeEvents stops the SSD tier's re-announcement and the event streams
// (once the dispatcher and the cache stopped: nothing announces after).
func (m *Manager) closeEvents() {
	if m.stopEvents != nil {
		close(m.stopEvents)
		<-m.eventsDone
		m.stopEvents = nil
	}
	if m.events != nil {
		m.events.Close()
		m.events = nil
	}
}

// ssdEvents is the SSD tier's ssd.BlockObserver: blocks resident on SSD
// are on medium STORAGE, with the record their slot header keeps.
type ssdEvents struct{ t *kvevents.Tracker }

func (e ssdEvents) Resident(k ssd.Key, _ ssd.Class, record []byte) {
	e.t.StoredPersisted(kvevents.Key{NS: k.NS, Hash: k.Hash}, kvevents.Storage, record)
}

func (e ssdEvents) Gone(k ssd.Key) {
	e.t.Removed(kvevents.Key{NS: k.NS, Hash: k.Hash}, kvevents.Storage)
}
