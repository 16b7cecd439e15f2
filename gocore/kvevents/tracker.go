package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// Key names a block as the Manager's index does (gocore/index.Key has
// the same fields).
type Key struct {
	NS   abi.Namespace
	Hash abi.BlockHash
}

// NoStream is the domain of blocks no stream announces (a block whose
// tenant is unknown: recovered from the SSD tier without a record of it).
const NoStream = -1

// Domain is a stream of its own: one per tenant domain where tenants are
// configured (Spec.Domains), its sockets at the endpoint path with
// "."+Name appended, group GID and mode 0660.
type Domain struct {
	Name string
	GID  int
}

// Spec configures the event streams. The zero Endpoint is off: no
// Tracker is made.
type Spec struct {
	// Endpoint is the PUB socket, "tcp://HOST:PORT" or "ipc://PATH"
	// (--kv-events); ReplayEndpoint the ROUTER replay socket, "" none
	// (--kv-events-replay).
	Endpoint, ReplayEndpoint string
	// Topic is the first frame of every message (--kv-events-topic).
	Topic string
	// Domains, when set, makes one stream per domain instead of one for
	// the node; both endpoints must then be ipc://. Index i is the
	// domain index the tiers pass (tenant.Domain.Index).
	Domains []Domain
	// NodeGID, without Domains and when above 0, makes the node stream's
	// ipc:// sockets mode 0660 in that group (0: mode 0600, the Manager's
	// uid and root only).
	NodeGID int
	// QueueEvents bounds the events waiting for a stream's goroutine
	// (--kv-events-queue); past it events are dropped, counted, and the
	// stream resyncs (AllBlocksCleared and every block held).
	QueueEvents int
	// BatchEvents is the most events one published batch carries.
	BatchEvents int
	// FlushInterval is how long an event may wait for its batch.
	FlushInterval time.Duration
	// ReplayBatches is how many published batches the replay socket
	// keeps (vLLM's buffer_steps); ReplayBytes bounds the bytes of the
	// buffers they are kept in (the oldest go first past either bound;
	// the newest is kept whatever its size).
	ReplayBatches, ReplayBytes int
	// SubscriberQueue is how many messages, and SubscriberBytes how many
	// bytes of them, a subscriber may fall behind before it is
	// disconnected (a message is queued on an empty queue whatever its
	// size). Subscribers share the published messages, so the memory they
	// pin together is at most one subscriber's bound.
	SubscriberQueue, SubscriberBytes int
	// MinResyncInterval is the least time between two resyncs of a
	// stream.
	MinResyncInterval time.Duration
}

// Defaults of Spec's zero fields.
const (
	DefaultQueueEvents       = 1 << 16
	DefaultBatchEvents       = 1024
	DefaultFlushInterval     = 10 * time.Millisecond
	DefaultReplayBatches     = 10000
	DefaultReplayBytes       = 256 << 20
	DefaultSubscriberQueue   = 4096
	DefaultSubscriberBytes   = 256 << 20
	DefaultMinResyncInterval = time.Second
)

func (s *Spec) fill() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.QueueEvents, DefaultQueueEvents)
	def(&s.BatchEvents, DefaultBatchEvents)
	def(&s.ReplayBatches, DefaultReplayBatches)
	def(&s.SubscriberQueue, DefaultSubscriberQueue)
	def(&s.ReplayBytes, DefaultReplayBytes)
	def(&s.SubscriberBytes, DefaultSubscriberBytes)
	if s.FlushInterval == 0 {
		s.FlushInterval = DefaultFlushInterval
	}
	if s.MinResyncInterval == 0 {
		s.MinResyncInterval = DefaultMinResyncInterval
	}
}

// Validate checks the endpoints' forms and the bounds.
func (s *Spec) Validate() error {
	if s.Endpoint == "" {
		if s.ReplayEndpoint != "" {
			return &limit.Error{Field: "kvevents.Spec.ReplayEndpoint", Value: s.ReplayEndpoint, Want: "a replay socket needs an event endpoint (Endpoint)"}
		}
		return nil
	}
	for _, e := range []struct{ field, v string }{{"Endpoint", s.Endpoint}, {"ReplayEndpoint", s.ReplayEndpoint}} {
		if e.v == "" {
			continue
		}
		network, _, err := parseEndpoint(e.v)
		if err != nil {
			return &limit.Error{Field: "kvevents.Spec." + e.field, Value: e.v, Want: err.Error()}
		}
		if len(s.Domains) > 0 && network != "unix" {
			return &limit.Error{Field: "kvevents.Spec." + e.field, Value: e.v, Want: "with tenants each tenant's stream is an ipc:// socket whose group decides who reads it; a TCP port cannot tell tenants apart"}
		}
	}
	if s.Endpoint == s.ReplayEndpoint && !strings.HasSuffix(s.Endpoint, ":0") {
		return &limit.Error{Field: "kvevents.Spec.ReplayEndpoint", Value: s.ReplayEndpoint, Want: "must differ from the event endpoint"}
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"QueueEvents", s.QueueEvents}, {"BatchEvents", s.BatchEvents}, {"ReplayBatches", s.ReplayBatches}, {"SubscriberQueue", s.SubscriberQueue}} {
		if n.v < 0 || n.v > 1<<24 {
			return &limit.Error{Field: "kvevents.Spec." + n.field, Value: fmt.Sprint(n.v), Want: "0 (default) to 16777216"}
		}
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"ReplayBytes", s.ReplayBytes}, {"SubscriberBytes", s.SubscriberBytes}} {
		if n.v < 0 || n.v > 1<<40 {
			return &limit.Error{Field: "kvevents.Spec." + n.field, Value: fmt.Sprint(n.v), Want: "0 (default) to 1 TiB"}
		}
	}
	return nil
}

// parseEndpoint splits "tcp://HOST:PORT" or "ipc://PATH" (an absolute
// path) into a net.Listen network and address.
func parseEndpoint(e string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(e, "tcp://"):
		addr = strings.TrimPrefix(e, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("tcp://HOST:PORT: %v", err)
		}
		if strings.HasPrefix(addr, "*:") {
			addr = addr[1:]
		}
		return "tcp", addr, nil
	case strings.HasPrefix(e, "ipc://"):
		addr = strings.TrimPrefix(e, "ipc://")
		if !strings.HasPrefix(addr, "/") {
			return "", "", errors.New("ipc://PATH needs an absolute path")
		}
		return "unix", addr, nil
	}
	return "", "", errors.New("want tcp://HOST:PORT or ipc:///ABSOLUTE/PATH")
}

// entry is what the Tracker keeps of a block with a record: the record,
// the media it is held on now, and the stream that announces it.
// Entries and their records are reused once the block is forgotten
// (entryPool, recordSlab): nothing outside t.mu holds either.
type entry struct {
	key    Key
	rec    []byte // abi block record, in the Tracker's recordSlab
	media  Medium
	domain int32
	engine uint64 // the record's engine hash
	tk     uint64 // its byTokens key (tokensKey)
	// nextHash and nextTokens chain the entries of one byHash and one
	// byTokens key (the same block in several namespaces: TP ranks).
	nextHash, nextTokens *entry
}

// Tracker keeps the block record of every block held on a medium of this
// node and turns each change of a block's media into an event on its
// stream. Stored and Removed are called by the tiers on the dispatcher
// goroutine and the SSD tier's goroutines; they take one mutex and queue,
// never wait on a subscriber. Blocks published without a record are not
// announced (counted in Unannounced).
type Tracker struct {
	spec    Spec
	log     *slog.Logger
	streams []*Stream // by domain index; [0] alone without tenants
	closers []func()

	// inMu guards the changes Stored and Removed queued and not yet
	// applied (applyLocked): pend, their records' bytes pendRecs, and
	// the spare slices the last apply left for reuse. Lock order: mu,
	// then inMu.
	inMu                sync.Mutex
	pend, sparePend     []change
	pendRecs, spareRecs []byte

	mu     sync.Mutex
	blocks map[Key]*entry
	// byHash finds blocks by engine hash (one per namespace), chained
	// by nextHash; byTokens by tokensKey, chained by nextTokens (keys
	// may collide: a match compares the record). Each is built by the
	// first lookup that needs it (LookupHashes, LookupTokens) and kept
	// from then on (nil before): a node whose routers only subscribe
	// never pays for either.
	byHash, byTokens map[uint64]*entry
	recs             recordSlab
	entries          entryPool

	seed maphash.Seed

	Unannounced atomic.Uint64 // blocks stored on a medium without a record

	closed atomic.Bool
}

// tokensKey finds a block by what a router knows of it without its
// hash: its parent's engine hash (or none) and its token ids' bytes,
// hashed under the Tracker's seed.
func (t *Tracker) tokensKey(parent uint64, hasParent bool, tokens []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	var p [9]byte
	binary.LittleEndian.PutUint64(p[:], parent)
	if hasParent {
		p[8] = 1
	}
	h.Write(p[:])
	h.Write(tokens)
	return h.Sum64()
}

// indexHashes builds byHash from the blocks kept; t.mu is held.
func (t *Tracker) indexHashes() {
	t.byHash = make(map[uint64]*entry, len(t.blocks))
	for _, e := range t.blocks {
		t.indexHash(e)
	}
}

// indexHash chains e under its engine hash; t.mu is held.
func (t *Tracker) indexHash(e *entry) {
	e.nextHash, t.byHash[e.engine] = t.byHash[e.engine], e
}

// indexTokens builds byTokens from the blocks kept; t.mu is held.
func (t *Tracker) indexTokens() {
	t.byTokens = make(map[uint64]*entry, len(t.blocks))
	for _, e := range t.blocks {
		r, _, _ := abi.ParseRecord(e.rec)
		t.indexToken(e, r)
	}
}

// indexToken chains e under its record r's tokensKey; t.mu is held.
func (t *Tracker) indexToken(e *entry, r abi.BlockRecord) {
	e.tk = t.tokensKey(r.ParentHash, r.HasParent, r.Tokens)
	e.nextTokens, t.byTokens[e.tk] = t.byTokens[e.tk], e
}

// appendCopy appends b to buf and returns buf and the copy, capped at its
// end. Copies made before buf grew keep their old array, so each copy
// stays valid until the caller reuses buf from its start.
func appendCopy(buf, b []byte) (grown, copied []byte) {
	buf = append(buf, b...)
	return buf, buf[len(buf)-len(b) : len(buf) : len(buf)]
}

// New binds the streams' sockets and starts them: each begins its epoch
// with AllBlocksCleared (sequence 0). Errors name the endpoint and the
// system call.
func New(spec Spec, log *slog.Logger) (*Tracker, error) {
	spec.fill()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	t := &Tracker{spec: spec, log: log, blocks: map[Key]*entry{}, seed: maphash.MakeSeed()}
	domains := spec.Domains
	if len(domains) == 0 {
		domains = []Domain{{GID: spec.NodeGID}}
		if spec.NodeGID == 0 {
			domains[0].GID = -1
		}
	}
	for _, d := range domains {
		pub, err := t.listen(spec.Endpoint, d)
		if err != nil {
			t.Close()
			return nil, err
		}
		var rep net.Listener
		if spec.ReplayEndpoint != "" {
			if rep, err = t.listen(spec.ReplayEndpoint, d); err != nil {
				pub.Close()
				t.Close()
				return nil, err
			}
		}
		s := newStream(t, d.Name, pub, rep)
		t.streams = append(t.streams, s)
		s.start()
	}
	return t, nil
}

// listen binds endpoint for domain d: a Unix socket of mode 0600 (0660
// and group d.GID for a tenant's stream, its path with "."+d.Name
// appended) made by gocore/unixsock, or a TCP port.
func (t *Tracker) listen(endpoint string, d Domain) (net.Listener, error) {
	network, addr, _ := parseEndpoint(endpoint)
	if network == "tcp" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("kv events: listen %s: %w", endpoint, err)
		}
		return l, nil
	}
	mode := os.FileMode(0o600)
	if d.Name != "" {
		addr += "." + d.Name
	}
	if d.GID >= 0 {
		mode = 0o660
	}
	l, remove, err := unixsock.Listen(addr, mode, d.GID)
	if err != nil {
		return nil, fmt.Errorf("kv events: socket %s: %w", addr, err)
	}
	t.closers = append(t.closers, remove)
	return l, nil
}

// Endpoints are the streams' bound addresses (tcp ports resolved), in
// domain order: the event socket and the replay socket ("" none).
func (t *Tracker) Endpoints() (pub, replay []string) {
	for _, s := range t.streams {
		pub = append(pub, endpointOf(s.pub.ln))
		r := ""
		if s.rep != nil {
			r = endpointOf(s.rep.ln)
		}
		replay = append(replay, r)
	}
	return pub, replay
}

func endpointOf(l net.Listener) string {
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return "tcp://" + a.String()
	}
	return "ipc://" + l.Addr().String()
}

// Close stops the streams (what is queued and not yet published is
// dropped) and removes their socket files; a second Close does nothing.
// The streams stay readable: Stats, Endpoints and the lookups may still be
// called (an HTTP request or a scrape during shutdown), and a block
// stored or removed after Close is queued and never published.
func (t *Tracker) Close() {
	if t.closed.Swap(true) {
		return
	}
	for _, s := range t.streams {
		s.close()
	}
	for _, c := range t.closers {
		c()
	}
}

func (t *Tracker) stream(domain int32) *Stream {
	if len(t.spec.Domains) == 0 {
		return t.streams[0]
	}
	if domain < 0 || int(domain) >= len(t.streams) {
		return nil
	}
	return t.streams[domain]
}

// Stored records that k is now held on medium m. rec is its block record
// (abi.ParseRecord's form, checked by the caller's decoder; the Tracker
// keeps a copy), or nil to use the record already kept for k; without
// either the block is not announced. domain routes it (the tenant
// domain's index; ignored without tenants; NoStream: none). A block
// already on m is not announced again.
//
// Stored and Removed only queue the change (a copy of rec beside it)
// under a mutex of their own, so the dispatcher that calls them never
// waits on the Tracker's maps: the changes are applied, in order, by the
// streams' goroutines (every FlushInterval, or at once when BatchEvents
// are pending) and by every reader before it reads. Past QueueEvents
// pending changes the caller applies them itself.
func (t *Tracker) Stored(k Key, domain int, m Medium, rec []byte) {
	t.queue(change{key: k, domain: int32(domain), medium: m, stored: true}, rec)
}

// Removed records that k left medium m; the last medium gone forgets its
// record.
func (t *Tracker) Removed(k Key, m Medium) {
	t.queue(change{key: k, medium: m}, nil)
}

// change is a Stored or Removed waiting to be applied.
type change struct {
	key    Key
	domain int32
	medium Medium
	stored bool
	rec    []byte // stored: a copy in the pending record bytes, nil none
}

func (t *Tracker) queue(c change, rec []byte) {
	t.inMu.Lock()
	if rec != nil {
		t.pendRecs, c.rec = appendCopy(t.pendRecs, rec)
	}
	t.pend = append(t.pend, c)
	n := len(t.pend)
	t.inMu.Unlock()
	switch {
	case n >= t.spec.QueueEvents:
		t.mu.Lock()
		t.applyLocked()
		t.mu.Unlock()
	case n == t.spec.BatchEvents:
		for _, s := range t.streams {
			s.kick()
		}
	}
}

// applyLocked applies the pending changes in the order they came; t.mu
// is held (it orders the appliers).
func (t *Tracker) applyLocked() {
	t.inMu.Lock()
	pend, recs := t.pend, t.pendRecs
	t.pend, t.pendRecs = t.sparePend[:0], t.spareRecs[:0]
	t.inMu.Unlock()
	for _, c := range pend {
		if c.stored {
			t.storedLocked(c.key, int(c.domain), c.medium, c.rec)
		} else {
			t.removedLocked(c.key, c.medium)
		}
	}
	clear(pend) // a grown pendRecs' old arrays go with the changes
	t.sparePend, t.spareRecs = pend[:0], recs[:0]
}

func (t *Tracker) storedLocked(k Key, domain int, m Medium, rec []byte) {
	e := t.blocks[k]
	if e == nil {
		if rec == nil {
			t.Unannounced.Add(1)
			return
		}
		r, n, err := abi.ParseRecord(rec)
		if err != nil {
			t.Unannounced.Add(1)
			return
		}
		rec = rec[:n] // bytes after the record are not its
		e = t.entries.get()
		*e = entry{key: k, rec: t.recs.copy(rec), domain: int32(domain), engine: r.EngineHash}
		t.blocks[k] = e
		if t.byHash != nil {
			t.indexHash(e)
		}
		if t.byTokens != nil {
			t.indexToken(e, r)
		}
	}
	if e.media&m != 0 {
		return
	}
	e.media |= m
	if s := t.stream(e.domain); s != nil {
		s.push(item{kind: itemStored, medium: m, hash: e.engine, rec: e.rec})
	}
}

func (t *Tracker) removedLocked(k Key, m Medium) {
	e := t.blocks[k]
	if e == nil || e.media&m == 0 {
		return
	}
	e.media &^= m
	if s := t.stream(e.domain); s != nil {
		s.push(item{kind: itemRemoved, medium: m, hash: e.engine})
	}
	if e.media == 0 {
		t.forget(e)
	}
}

func (t *Tracker) forget(e *entry) {
	delete(t.blocks, e.key)
	if t.byHash != nil {
		unchain(t.byHash, e.engine, e, func(x *entry) **entry { return &x.nextHash })
	}
	if t.byTokens != nil {
		unchain(t.byTokens, e.tk, e, func(x *entry) **entry { return &x.nextTokens })
	}
	t.recs.put(e.rec)
	t.entries.put(e)
}

// unchain takes e out of the chain of m[k] (linked by next), deleting
// the key when e was its last entry.
func unchain[K comparable](m map[K]*entry, k K, e *entry, next func(*entry) **entry) {
	head := m[k]
	if head == e {
		if n := *next(e); n != nil {
			m[k] = n
		} else {
			delete(m, k)
		}
		return
	}
	for x := head; x != nil; x = *next(x) {
		if *next(x) == e {
			*next(x) = *next(e)
			return
		}
	}
}

// Record is a copy of k's block record, nil when none is kept.
func (t *Tracker) Record(k Key) []byte {
	t.mu.Lock()
	t.applyLocked()
	defer t.mu.Unlock()
	if e := t.blocks[k]; e != nil {
		return bytes.Clone(e.rec)
	}
	return nil
}

// snapshotLocked appends a stored item for every medium of every block
// s announces, its record a copy (the caller encodes them after t.mu is
// released, when the Tracker may have reused the kept ones); t.mu is
// held.
func (t *Tracker) snapshotLocked(s *Stream, out []item) []item {
	var buf []byte
	for _, e := range t.blocks {
		if t.stream(e.domain) != s {
			continue
		}
		for _, m := range []Medium{CPU, Storage} {
			if e.media&m != 0 {
				var rec []byte
				buf, rec = appendCopy(buf, e.rec)
				out = append(out, item{kind: itemStored, medium: m, hash: e.engine, rec: rec})
			}
		}
	}
	return out
}

// recordSlab keeps the Tracker's block records: each in a room of its
// own length, and a forgotten record's room is kept for the next record
// of that length, so the Tracker allocates next to nothing per block in
// steady state. The rooms kept free are bounded by the bytes held: at
// most a quarter of them, or minSlabFree, whichever is more; past it a
// room is left to the garbage collector, so a peak of one length (a
// client's token count) does not stay allocated after it. Lengths are
// abi.RecordBytes: multiples of 8 up to abi.RecordBytes(abi.RecordMaxTokens).
type recordSlab struct {
	free            [abi.RecordHeaderSize/8 + abi.RecordMaxTokens/2 + 1][][]byte // by length/8
	held, freeBytes int
}

// minSlabFree is the free rooms' bytes a recordSlab may keep whatever it
// holds.
const minSlabFree = 4 << 20

// copy returns a room of len(rec) holding rec's bytes.
func (s *recordSlab) copy(rec []byte) []byte {
	n := len(rec)
	var r []byte
	if f := &s.free[n/8]; len(*f) > 0 {
		r = (*f)[len(*f)-1]
		(*f)[len(*f)-1] = nil
		*f = (*f)[:len(*f)-1]
		s.freeBytes -= n
	} else {
		r = make([]byte, n)
	}
	s.held += n
	copy(r, rec)
	return r
}

// put gives back a room copy returned.
func (s *recordSlab) put(r []byte) {
	s.held -= len(r)
	if s.freeBytes+len(r) > max(minSlabFree, s.held/4) {
		return
	}
	s.free[len(r)/8] = append(s.free[len(r)/8], r)
	s.freeBytes += len(r)
}

// entryPool reuses forgotten entries, allocated 256 at a time.
type entryPool struct{ free *entry } // chained by nextHash

func (p *entryPool) get() *entry {
	if p.free == nil {
		chunk := make([]entry, 256)
		for i := range len(chunk) - 1 {
			chunk[i].nextHash = &chunk[i+1]
		}
		p.free = &chunk[0]
	}
	e := p.free
	p.free = e.nextHash
	return e
}

func (p *entryPool) put(e *entry) {
	*e = entry{nextHash: p.free}
	p.free = e
}

// Held is how many leading blocks of a chain this node holds: in RAM
// (CPU), on SSD (Storage), and on either (Any, ≥ both).
type Held struct {
	CPU     int `json:"cpu"`
	Storage int `json:"storage"`
	Any     int `json:"any"`
}

// match is the media of the blocks of one chain position that pass the
// caller's filter.
func (t *Tracker) held(n int, at func(i int) Medium) Held {
	var h Held
	cpu, sto := true, true
	for i := range n {
		m := at(i)
		if m == 0 {
			break
		}
		h.Any++
		if cpu = cpu && m&CPU != 0; cpu {
			h.CPU++
		}
		if sto = sto && m&Storage != 0; sto {
			h.Storage++
		}
	}
	return h
}

// LookupHashes counts the leading blocks of a chain of engine hashes this
// node holds; ns nil matches any namespace, else only blocks of *ns (the
// namespace as the Manager keys it). It takes no lease: the answer is a
// hint, true when it was made.
func (t *Tracker) LookupHashes(ns *abi.Namespace, hashes []uint64) Held {
	t.mu.Lock()
	t.applyLocked()
	defer t.mu.Unlock()
	if t.byHash == nil {
		t.indexHashes()
	}
	return t.held(len(hashes), func(i int) Medium {
		var m Medium
		for e := t.byHash[hashes[i]]; e != nil; e = e.nextHash {
			if ns == nil || e.key.NS == *ns {
				m |= e.media
			}
		}
		return m
	})
}

// LookupTokens is LookupHashes of the chain whose blocks are tokens cut
// into blocks of blockSize (a trailing partial block is ignored): block
// i matches a kept record of the same token ids whose parent is the
// engine hash block i-1 matched (none for block 0).
func (t *Tracker) LookupTokens(ns *abi.Namespace, tokens []uint32, blockSize int) Held {
	if blockSize < 1 {
		return Held{}
	}
	t.mu.Lock()
	t.applyLocked()
	defer t.mu.Unlock()
	if t.byTokens == nil {
		t.indexTokens()
	}
	var parent uint64
	raw := make([]byte, 4*blockSize)
	return t.held(len(tokens)/blockSize, func(i int) Medium {
		for j, tok := range tokens[i*blockSize : (i+1)*blockSize] {
			raw[4*j], raw[4*j+1], raw[4*j+2], raw[4*j+3] = byte(tok), byte(tok>>8), byte(tok>>16), byte(tok>>24)
		}
		var m Medium
		var next uint64
		for e := t.byTokens[t.tokensKey(parent, i > 0, raw)]; e != nil; e = e.nextTokens {
			r, _, _ := abi.ParseRecord(e.rec)
			if (ns == nil || e.key.NS == *ns) && r.HasParent == (i > 0) && r.ParentHash == parent && bytes.Equal(r.Tokens, raw) {
				m |= e.media
				next = r.EngineHash
			}
		}
		parent = next
		return m
	})
}

// StreamStats are one stream's counters.
type StreamStats struct {
	Name                                string
	Events, Batches, Overflows, Resyncs uint64
	SubscribersDropped, Subscribers     uint64
	Sequence                            int64 // the last published sequence number
}

// Stats are the streams' counters and the blocks kept.
func (t *Tracker) Stats() (blocks int, streams []StreamStats) {
	t.mu.Lock()
	t.applyLocked()
	blocks = len(t.blocks)
	t.mu.Unlock()
	for _, s := range t.streams {
		st := StreamStats{Name: s.name, Events: s.Events.Load(), Batches: s.Batches.Load(), Overflows: s.Overflows.Load(),
			Resyncs: s.Resyncs.Load(), SubscribersDropped: s.pub.dropped.Load(), Subscribers: uint64(s.pub.subscribers()), Sequence: s.published.Load()}
		if s.rep != nil {
			st.SubscribersDropped += s.rep.dropped.Load()
		}
		streams = append(streams, st)
	}
	return blocks, streams
}

// Persisted is k's record as the SSD tier keeps it (the slot header's
// record, at most 2 + 255 + abi.RecordBytes(abi.RecordMaxTokens) bytes):
// a format byte (1), its stream's domain name (a length byte, the
// bytes), then the block record. nil when none is kept.
func (t *Tracker) Persisted(k Key) []byte {
	t.mu.Lock()
	t.applyLocked()
	defer t.mu.Unlock()
	e := t.blocks[k]
	if e == nil {
		return nil
	}
	name := ""
	if s := t.stream(e.domain); s != nil {
		name = s.name
	}
	out := make([]byte, 0, 2+len(name)+len(e.rec))
	out = append(out, 1, byte(len(name)))
	out = append(out, name...)
	return append(out, e.rec...)
}

// StoredPersisted is Stored of a record in Persisted's form, as the SSD
// tier hands it back: its domain is the stream of that name (NoStream
// when none has it now). Malformed bytes and nil count as unannounced.
func (t *Tracker) StoredPersisted(k Key, m Medium, p []byte) {
	if len(p) < 2 || p[0] != 1 || len(p) < 2+int(p[1]) {
		t.Stored(k, NoStream, m, nil)
		return
	}
	name, rec := string(p[2:2+int(p[1])]), p[2+int(p[1]):]
	domain := NoStream
	for i, s := range t.streams {
		if s.name == name && (len(t.spec.Domains) > 0 || i == 0) {
			domain = i
		}
	}
	if _, n, err := abi.ParseRecord(rec); err != nil || n != len(rec) {
		rec = nil
	}
	t.Stored(k, domain, m, rec)
}
