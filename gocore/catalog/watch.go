package catalog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rebuildPageKeys is how many keys one range read of a rebuild returns.
const rebuildPageKeys = 64

// watchState is the watch goroutine's own: the records the index was
// built from. Nothing else touches it.
type watchState struct {
	records map[string]*record           // inventory key → what it indexed
	epochs  map[string]map[uint64]Member // node → live member records by epoch
	owners  map[owner]*ownerRef          // interned owners
	logged  map[string]struct{}          // malformed keys already logged
}

type record struct {
	owner  *owner
	groups []nsGroup
}

type ownerRef struct {
	o    *owner
	refs int
}

func (w *watchState) init() {
	w.records = map[string]*record{}
	w.epochs = map[string]map[uint64]Member{}
	w.owners = map[owner]*ownerRef{}
	w.logged = map[string]struct{}{}
}

// watchLoop keeps the index: a range read of the whole prefix, then a
// Watch from the revision after it. A stream that ends (etcd member lost,
// no leader, client reconnect) resumes from the last revision seen; a
// resume refused as compacted (ErrCompacted) rebuilds from a range read,
// which also removes what was deleted meanwhile.
func (c *Catalog) watchLoop() {
	defer c.wg.Done()
	r := newRetry(2 * c.spec.DialTimeout)
	var rev int64 // the revision the index reflects; 0: rebuild first
	for c.ctx.Err() == nil {
		if rev == 0 {
			var err error
			if rev, err = c.rebuild(); err != nil {
				c.log.Debug("catalog rebuild failed; retrying", slog.Any("err", err))
				if !c.sleep(r.delay()) {
					return
				}
				continue
			}
			c.st.rebuilds.Add(1)
			c.st.revision.Store(rev)
			c.log.Info("catalog index rebuilt from a range read", slog.Int64("revision", rev),
				slog.Int("members", len(c.members.Load().list)), slog.Int64("entries", c.entries.Load()))
		}
		var compacted, progressed bool
		rev, compacted, progressed = c.follow(rev)
		switch {
		case c.ctx.Err() != nil:
			return
		case compacted:
			rev = 0
			c.st.compactions.Add(1)
			c.log.Info("catalog watch behind a compaction; rebuilding")
			continue
		}
		c.st.resumes.Add(1)
		if progressed {
			r.reset()
		}
		if !c.sleep(r.delay()) {
			return
		}
	}
}

// follow watches the prefix from rev+1 and applies every event until the
// stream ends; it returns the last revision applied, whether the stream
// ended on a compaction, and whether it delivered anything before.
func (c *Catalog) follow(rev int64) (last int64, compacted, progressed bool) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
	defer cancel()
	wch := c.cli.Watch(ctx, c.spec.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return rev, true, progressed
		}
		if err := resp.Err(); err != nil {
			c.log.Debug("catalog watch ended; resuming", slog.Int64("revision", rev), slog.Any("err", err))
			return rev, false, progressed
		}
		progressed = true
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				c.apply(ev.Kv.Key, nil)
			} else {
				c.apply(ev.Kv.Key, ev.Kv.Value)
			}
			rev = ev.Kv.ModRevision
		}
		if len(resp.Events) == 0 && resp.Header.Revision > rev {
			rev = resp.Header.Revision // progress: nothing under the prefix changed up to it
		}
		c.st.revision.Store(rev)
	}
	return rev, false, progressed
}

// rebuild reads the whole prefix at one revision, in pages, and makes the
// index match it: records it no longer holds are removed, the others
// applied. It returns the revision read.
func (c *Catalog) rebuild() (int64, error) {
	end := clientv3.GetPrefixRangeEnd(c.spec.Prefix)
	key, rev := c.spec.Prefix, int64(0)
	kvs := map[string][]byte{}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(rebuildPageKeys)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ctx, cancel := c.opCtx()
		resp, err := c.cli.Get(ctx, key, opts...)
		cancel()
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			kvs[string(kv.Key)] = kv.Value
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	for k := range c.watch.records {
		if _, ok := kvs[k]; !ok {
			c.apply([]byte(k), nil)
		}
	}
	for node, es := range c.watch.epochs {
		for ep := range es {
			if _, ok := kvs[memberKey(c.spec.Prefix, node, ep)]; !ok {
				c.apply([]byte(memberKey(c.spec.Prefix, node, ep)), nil)
			}
		}
	}
	for k, v := range kvs {
		c.apply([]byte(k), v)
	}
	return rev, nil
}

// apply makes the index reflect key holding value (nil: deleted). A key
// or value that does not decode is counted, logged once per key, and
// indexes nothing (what the key indexed before is removed).
func (c *Catalog) apply(key, value []byte) {
	k, err := decodeKey(c.spec.Prefix, key)
	if err != nil {
		c.malformed(key, err)
		return
	}
	switch k.kind {
	case kindMember:
		c.applyMember(k, value, key)
	case kindInventory:
		if k.node == c.spec.Self.NodeID {
			return // this node's own advertisements, of any epoch, are never its candidates
		}
		c.applyInventory(k, string(key), value)
	}
}

func (c *Catalog) applyMember(k recordKey, value, key []byte) {
	es := c.watch.epochs[k.node]
	if value != nil {
		m, err := decodeMember(k, value)
		if err == nil {
			if es == nil {
				es = map[uint64]Member{}
				c.watch.epochs[k.node] = es
			}
			if es[k.epoch] == m {
				return
			}
			es[k.epoch] = m
			c.publishMembers(c.watch.epochs)
			return
		}
		c.malformed(key, err)
	}
	if _, ok := es[k.epoch]; !ok {
		return
	}
	delete(es, k.epoch)
	if len(es) == 0 {
		delete(c.watch.epochs, k.node)
	}
	c.publishMembers(c.watch.epochs)
}

func (c *Catalog) applyInventory(k recordKey, key string, value []byte) {
	old := c.watch.records[key]
	var groups []nsGroup
	if value != nil {
		v, err := decodeShard(k, value)
		if err != nil {
			c.malformed([]byte(key), err)
		} else {
			groups = v.groups
		}
	}
	if old == nil && groups == nil {
		return
	}
	var o *owner
	if old != nil {
		o = old.owner
	} else {
		o = c.watch.intern(owner{k.node, k.epoch})
	}
	var oldGroups []nsGroup
	if old != nil {
		oldGroups = old.groups
	}
	diffGroups(oldGroups, groups, func(e entry) { c.add(o, e) }, func(e entry) { c.remove(o, e) })
	if groups == nil {
		delete(c.watch.records, key)
		c.watch.release(o)
		return
	}
	c.watch.records[key] = &record{owner: o, groups: groups}
}

func (w *watchState) intern(o owner) *owner {
	r := w.owners[o]
	if r == nil {
		r = &ownerRef{o: &owner{node: o.node, epoch: o.epoch}}
		w.owners[o] = r
	}
	r.refs++
	return r.o
}

func (w *watchState) release(o *owner) {
	if r := w.owners[*o]; r != nil {
		if r.refs--; r.refs == 0 {
			delete(w.owners, *o)
		}
	}
}

func (c *Catalog) malformed(key []byte, err error) {
	c.st.malformed.Add(1)
	if _, ok := c.watch.logged[string(key)]; ok || len(c.watch.logged) >= 1024 {
		return
	}
	c.watch.logged[string(key)] = struct{}{}
	c.log.Warn("catalog record ignored", slog.String("key", clip(string(key))), slog.Any("err", err))
}

// diffGroups calls add for every entry in b but not in a and remove for
// every entry in a but not in b; both are canonical (sorted, unique).
func diffGroups(a, b []nsGroup, add, remove func(entry)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var r int
		switch {
		case i == len(a):
			r = 1
		case j == len(b):
			r = -1
		default:
			r = bytes.Compare(a[i].ns[:], b[j].ns[:])
		}
		switch {
		case r < 0:
			for _, h := range a[i].hashes {
				remove(entry{a[i].ns, h})
			}
			i++
		case r > 0:
			for _, h := range b[j].hashes {
				add(entry{b[j].ns, h})
			}
			j++
		default:
			ns, x, y := a[i].ns, a[i].hashes, b[j].hashes
			p, q := 0, 0
			for p < len(x) || q < len(y) {
				var s int
				switch {
				case p == len(x):
					s = 1
				case q == len(y):
					s = -1
				default:
					s = bytes.Compare(x[p][:], y[q][:])
				}
				switch {
				case s < 0:
					remove(entry{ns, x[p]})
					p++
				case s > 0:
					add(entry{ns, y[q]})
					q++
				default:
					p++
					q++
				}
			}
			i++
			j++
		}
	}
}
