package cache

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

const (
	tLayers    = 2
	tPageBytes = 8 << 10
	tPages     = 8
	tEpoch     = 77
)

// rig is a Service with real sessions, real mapped buffers and the real
// native copy engine; requests are written into the session slots as a
// client would.
type rig struct {
	t     testing.TB
	svc   *Service
	table *session.Table
	db    []byte
	gen   map[*session.Session]uint64
}

func newRig(t *testing.T, capacity uint64) *rig {
	t.Helper()
	return newRigSSD(t, capacity, nil)
}

func newRigSSD(t *testing.T, capacity uint64, ssdSpec *ssd.Spec) *rig {
	t.Helper()
	return newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: capacity}, SSD: ssdSpec}})
}

// newRigWith builds a rig from spec (Epoch, ChunkBytes and CopyWorkers are
// filled in).
func newRigWith(t testing.TB, spec Spec) *rig {
	t.Helper()
	db, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := native.NewServer(db, 8, native.PollPark, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	spec.Epoch, spec.Tiers.RAM.ChunkBytes, spec.CopyWorkers = tEpoch, 4096, 2
	svc, err := New(spec, srv)
	if err != nil {
		t.Fatal(err)
	}
	table, err := session.NewTable(session.Spec{Epoch: tEpoch, MaxSessions: 8, DescCapacity: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, svc: svc, table: table, db: db, gen: map[*session.Session]uint64{}}
	t.Cleanup(func() {
		svc.Close()
		srv.Close()
		unix.Munmap(db)
	})
	return r
}

// open attaches a session with one registered buffer of tLayers x tPages
// pages of tPageBytes.
func (r *rig) open() (*session.Session, []byte) {
	r.t.Helper()
	return r.openAs(session.Peer{PID: 1, InstanceID: "test"})
}

// openAs is open for a session of peer p.
func (r *rig) openAs(p session.Peer) (*session.Session, []byte) {
	r.t.Helper()
	s, err := r.table.Open(p)
	if err != nil {
		r.t.Fatal(err)
	}
	size := tLayers * tPages * tPageBytes
	fd, err := unix.MemfdCreate("cache-test", unix.MFD_CLOEXEC)
	if err != nil {
		r.t.Fatal(err)
	}
	unix.Ftruncate(fd, int64(size))
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		r.t.Fatal(err)
	}
	b := session.Buffer{Bytes: uint64(size), Layers: tLayers, PageBytes: tPageBytes, PageCount: tPages}
	b.SetMapping(m, 0)
	s.AddBuffers([]session.Buffer{b})
	r.svc.Attach(s)
	r.gen[s] = s.InitialGeneration
	return s, m
}

// close detaches s, waits for its copies to drain, and closes it.
func (r *rig) close(s *session.Session) {
	r.t.Helper()
	drained := false
	r.svc.Detach(s, func() { drained = true })
	deadline := time.Now().Add(5 * time.Second)
	for !drained {
		if time.Now().After(deadline) {
			r.t.Fatal("session did not drain")
		}
		r.svc.Complete(64, func(uint32, abi.Message) { r.t.Error("a reply was posted to a closing session") })
	}
	r.table.Close(s)
}

// call sends a request with the descriptor desc and returns its response,
// completing deferred publishes.
func (r *rig) call(s *session.Session, cmd abi.Command, desc []byte, arg0 uint64) abi.Message {
	r.t.Helper()
	return r.call2(s, cmd, desc, arg0, 0)
}

// call2 is call with arg1.
func (r *rig) call2(s *session.Session, cmd abi.Command, desc []byte, arg0, arg1 uint64) abi.Message {
	r.t.Helper()
	copy(s.Slot()[abi.SlotDescOffset:], desc)
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(cmd), Epoch: tEpoch,
		Generation: r.gen[s], Arg0: arg0, Arg1: arg1}
	r.gen[s] += 2
	if len(desc) > 0 {
		m.DescOffset, m.DescLength = abi.SlotDescOffset, uint32(len(desc))
	}
	resp, ok := r.svc.serveCommand(s, &m)
	deadline := time.Now().Add(5 * time.Second)
	for !ok {
		r.svc.Complete(64, func(slot uint32, msg abi.Message) {
			if slot == s.Index && msg.Generation == m.Generation+1 {
				resp, ok = msg, true
			}
		})
		if time.Now().After(deadline) {
			r.t.Fatal("deferred reply never posted")
		}
	}
	return resp
}

func (r *rig) wait(s *session.Session, op uint64) abi.Message {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := r.call(s, abi.CmdRestorePoll, nil, op)
		if abi.Status(resp.Code) != abi.StatusLoading {
			return resp
		}
		r.svc.Complete(64, func(uint32, abi.Message) {})
		if time.Now().After(deadline) {
			r.t.Fatal("restore never completed")
		}
	}
}

func (r *rig) idle() {
	r.t.Helper()
	st := r.svc.Stats()
	if !st.Idle() || len(r.svc.sessions) != 0 {
		r.t.Fatalf("idle invariant broken: %+v, %d sessions", st, len(r.svc.sessions))
	}
	if err := r.svc.Check(); err != nil {
		r.t.Fatal(err)
	}
}

var ns1 = abi.Namespace{1}
var ns2 = abi.Namespace{2}

func hash(i int) abi.BlockHash {
	var h abi.BlockHash
	binary.LittleEndian.PutUint64(h[:], uint64(i)+1000)
	return h
}

func queryDesc(ns abi.Namespace, hashes ...abi.BlockHash) []byte {
	b := make([]byte, 64+16*len(hashes))
	binary.LittleEndian.PutUint32(b, abi.QueryMagic)
	binary.LittleEndian.PutUint16(b[4:], abi.QuerySchema)
	binary.LittleEndian.PutUint32(b[20:], uint32(len(hashes)))
	copy(b[48:], ns[:])
	for i, h := range hashes {
		copy(b[64+16*i:], h[:])
	}
	return b
}

func publishDesc(ns abi.Namespace, layers uint32, hashes []abi.BlockHash, pages []uint32) []byte {
	b := make([]byte, 64+24*len(hashes))
	binary.LittleEndian.PutUint32(b, abi.PublishMagic)
	binary.LittleEndian.PutUint16(b[4:], abi.PublishSchema)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(hashes)))
	copy(b[16:], ns[:])
	binary.LittleEndian.PutUint32(b[36:], layers)
	for i, h := range hashes {
		copy(b[64+24*i:], h[:])
		binary.LittleEndian.PutUint32(b[64+24*i+16:], pages[i])
	}
	return b
}

func restoreDesc(lease uint64, blocks, pages []uint32) []byte {
	b := make([]byte, 64+8*len(blocks))
	binary.LittleEndian.PutUint32(b, abi.RestoreMagic)
	binary.LittleEndian.PutUint16(b[4:], abi.RestoreSchema)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(blocks)))
	binary.LittleEndian.PutUint64(b[16:], lease)
	for i := range blocks {
		binary.LittleEndian.PutUint32(b[64+8*i:], blocks[i])
		binary.LittleEndian.PutUint32(b[68+8*i:], pages[i])
	}
	return b
}

func pageOf(mem []byte, layer, page int) []byte {
	off := (layer*tPages + page) * tPageBytes
	return mem[off : off+tPageBytes]
}

func fill(mem []byte, page int, tag byte) {
	for l := 0; l < tLayers; l++ {
		p := pageOf(mem, l, page)
		for i := range p {
			p[i] = tag ^ byte(l*31) ^ byte(i*7)
		}
	}
}

func check(t *testing.T, mem []byte, page int, tag byte) {
	t.Helper()
	for l := 0; l < tLayers; l++ {
		p := pageOf(mem, l, page)
		for i := range p {
			if p[i] != tag^byte(l*31)^byte(i*7) {
				t.Fatalf("page %d layer %d byte %d: got %#x want %#x", page, l, i, p[i], tag^byte(l*31)^byte(i*7))
			}
		}
	}
}

func status(m abi.Message) abi.Status { return abi.Status(m.Code) }

func TestPublishThenRestoreRoundTripsBytesExactly(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	for p := 0; p < 3; p++ {
		fill(amem, p, byte(10+p))
	}
	resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2)}, []uint32{0, 1, 2}), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 3 || resp.Arg1 != 0 {
		t.Fatalf("publish: %v stored %d present %d", status(resp), resp.Arg0, resp.Arg1)
	}
	// Another session of the same namespace hits; the chain stops at the gap.
	b, bmem := r.open()
	resp = r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1), hash(2), hash(9), hash(3)), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 3 {
		t.Fatalf("query: %v hits %d", status(resp), resp.Arg0)
	}
	lease := resp.Arg1
	res := b.Slot()[abi.SlotDescOffset:]
	if binary.LittleEndian.Uint32(res) != abi.QueryResultMagic || binary.LittleEndian.Uint64(res[24:]) != 3*tLayers*tPageBytes {
		t.Fatalf("query result bytes %x", res[:40])
	}
	resp = r.call(b, abi.CmdRestore, restoreDesc(lease, []uint32{2, 0, 1}, []uint32{5, 6, 7}), 0)
	if status(resp) != abi.StatusOK {
		t.Fatalf("restore: %v", status(resp))
	}
	done := r.wait(b, resp.Arg0)
	if status(done) != abi.StatusOK || done.Arg0 != 3*tLayers*tPageBytes {
		t.Fatalf("restore poll: %v bytes %d", status(done), done.Arg0)
	}
	check(t, bmem, 5, 12)
	check(t, bmem, 6, 10)
	check(t, bmem, 7, 11)
	if again := r.call(b, abi.CmdRestorePoll, nil, resp.Arg0); status(again) != abi.StatusInvalid || abi.Field(again.Arg0) != abi.FieldOpID {
		t.Fatalf("second poll: %v %v", status(again), abi.Field(again.Arg0))
	}
	// The other namespace shares nothing.
	if resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns2, hash(0)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("namespace 2 query: %v", status(resp))
	}
	// Publishing the same hashes again stores nothing new.
	if resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}), 0); resp.Arg0 != 0 || resp.Arg1 != 1 {
		t.Fatalf("republish: stored %d present %d", resp.Arg0, resp.Arg1)
	}
	if resp := r.call(b, abi.CmdRelease, nil, lease); status(resp) != abi.StatusOK {
		t.Fatalf("release: %v", status(resp))
	}
	if resp := r.call(b, abi.CmdRelease, nil, lease); status(resp) != abi.StatusInvalid || abi.Field(resp.Arg0) != abi.FieldLeaseID {
		t.Fatalf("second release: %v", status(resp))
	}
	r.close(a)
	r.close(b)
	r.idle()
}

func TestEvictionNeverTouchesALeasedBlock(t *testing.T) {
	// 8 blocks of 2 chunks fit; publish 40 while holding a lease on block 0.
	r := newRig(t, 16*8192)
	a, amem := r.open()
	fill(amem, 0, 99)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}), 0)
	resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	if resp.Arg0 != 1 {
		t.Fatalf("query hits %d", resp.Arg0)
	}
	lease := resp.Arg1
	for i := 1; i <= 40; i++ {
		fill(amem, 1, byte(i))
		resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(i)}, []uint32{1}), 0)
		if status(resp) != abi.StatusOK || resp.Arg0 != 1 {
			t.Fatalf("publish %d: %v", i, status(resp))
		}
	}
	if r.svc.Stats().Evictions == 0 {
		t.Fatal("no eviction happened")
	}
	resp = r.call(a, abi.CmdRestore, restoreDesc(lease, []uint32{0}, []uint32{3}), 0)
	if st := r.wait(a, resp.Arg0); status(st) != abi.StatusOK {
		t.Fatalf("restore: %v", status(st))
	}
	check(t, amem, 3, 99)
	// With every frame leased, a publish is Unadmitted, not blocking.
	resp = r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(40)), 0)
	var hs []abi.BlockHash
	var ps []uint32
	for i := 0; i < 8; i++ {
		hs = append(hs, hash(100+i))
		ps = append(ps, uint32(i))
	}
	if resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs, ps), 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("publish under full pins: %v", status(resp))
	}
	r.close(a)
	r.idle()
}

func TestBadRequestsGetAClearStatusAndChangeNothing(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	b, _ := r.open()
	fill(amem, 0, 1)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1)}, []uint32{0, 1}), 0)
	lease := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1)), 0).Arg1
	cases := []struct {
		name  string
		s     *session.Session
		cmd   abi.Command
		desc  []byte
		arg0  uint64
		field abi.Field
		entry uint64
	}{
		{"a publish naming an unregistered buffer", a, abi.CmdPublish, func() []byte {
			d := publishDesc(ns1, tLayers, []abi.BlockHash{hash(5)}, []uint32{0})
			d[8] = 3
			return d
		}(), 0, abi.FieldBufferID, 0},
		{"a publish of a page out of range", a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(5), hash(6)}, []uint32{0, tPages}), 0, abi.FieldPage, 1},
		{"a publish of a partial layer set", a, abi.CmdPublish, publishDesc(ns1, 1, []abi.BlockHash{hash(5)}, []uint32{0}), 0, abi.FieldLayers, 0},
		{"a restore from another session's lease", b, abi.CmdRestore, restoreDesc(lease, []uint32{0}, []uint32{0}), 0, abi.FieldLeaseID, 0},
		{"a restore of a block outside the lease", a, abi.CmdRestore, restoreDesc(lease, []uint32{0, 2}, []uint32{0, 1}), 0, abi.FieldBlock, 1},
		{"a restore into a page out of range", a, abi.CmdRestore, restoreDesc(lease, []uint32{0}, []uint32{tPages}), 0, abi.FieldPage, 0},
		{"a restore naming a page twice", a, abi.CmdRestore, restoreDesc(lease, []uint32{0, 1}, []uint32{4, 4}), 0, abi.FieldPage, 1},
		{"a release of another session's lease", b, abi.CmdRelease, nil, lease, abi.FieldLeaseID, 0},
		{"a poll of an unknown operation", a, abi.CmdRestorePoll, nil, 12345, abi.FieldOpID, 0},
		{"a query whose hash count passes the descriptor", a, abi.CmdQueryBundle, func() []byte {
			d := queryDesc(ns1, hash(0))
			d[20] = 2
			return d
		}(), 0, abi.FieldCount, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := r.svc.Stats()
			resp := r.call(c.s, c.cmd, c.desc, c.arg0)
			if status(resp) != abi.StatusInvalid || abi.Field(resp.Arg0) != c.field || resp.Arg1 != c.entry {
				t.Fatalf("got %v field %v entry %d, want Invalid %v entry %d", status(resp), abi.Field(resp.Arg0), resp.Arg1, c.field, c.entry)
			}
			after := r.svc.Stats()
			if after.Blocks != before.Blocks || after.Pins != before.Pins || after.Leases != before.Leases || after.Operations != before.Operations {
				t.Fatalf("state changed: %+v → %+v", before, after)
			}
		})
	}
	// A restore into pages of an in-flight restore is refused; submit one
	// and ask again before draining completions.
	copy(a.Slot()[abi.SlotDescOffset:], restoreDesc(lease, []uint32{0, 1}, []uint32{2, 3}))
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(abi.CmdRestore), Epoch: tEpoch,
		Generation: r.gen[a], DescOffset: abi.SlotDescOffset, DescLength: 64 + 16}
	r.gen[a] += 2
	first, _ := r.svc.serveCommand(a, &m)
	resp := r.call(a, abi.CmdRestore, restoreDesc(lease, []uint32{1}, []uint32{3}), 0)
	if status(resp) != abi.StatusInvalid || abi.Field(resp.Arg0) != abi.FieldPage {
		t.Fatalf("overlapping restore: %v %v", status(resp), abi.Field(resp.Arg0))
	}
	r.wait(a, first.Arg0)
	r.close(a)
	r.close(b)
	r.idle()
}

func TestTeardownDrainsCopiesAndDiscardsHalfPublishedBlocks(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	fill(amem, 0, 5)
	// Submit a publish and tear the session down before its reply: the
	// blocks must never become visible.
	copy(a.Slot()[abi.SlotDescOffset:], publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}))
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(abi.CmdPublish), Epoch: tEpoch,
		Generation: r.gen[a], DescOffset: abi.SlotDescOffset, DescLength: 64 + 24}
	if _, ok := r.svc.serveCommand(a, &m); ok {
		t.Fatal("publish answered before its copy")
	}
	r.close(a)
	b, _ := r.open()
	if resp := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("half-published block visible: %v", status(resp))
	}
	// A session that dies holding a lease and an unpolled restore.
	fill(amem, 0, 5)
	r.call(b, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(1)}, []uint32{0}), 0)
	lease := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(1)), 0).Arg1
	r.call(b, abi.CmdRestore, restoreDesc(lease, []uint32{0}, []uint32{1}), 0)
	r.close(b)
	r.idle()
	if r.svc.Stats().Blocks != 1 {
		t.Fatalf("blocks %d, want the one completed publish", r.svc.Stats().Blocks)
	}
}

// A publish whose batch names resident blocks and needs eviction must not
// evict those blocks and then lack frames for them (found by the replay at
// a small capacity).
func TestPublishNeverEvictsBlocksOfItsOwnBatch(t *testing.T) {
	r := newRig(t, 8*8192) // 4 blocks of 2 chunks
	a, amem := r.open()
	for p := 0; p < 4; p++ {
		fill(amem, p, byte(p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	// hash(0) is the least recently used; republish it with 3 new blocks.
	resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(4), hash(5), hash(6)}, []uint32{0, 1, 2, 3}), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 3 || resp.Arg1 != 1 {
		t.Fatalf("publish: %v stored %d present %d", status(resp), resp.Arg0, resp.Arg1)
	}
	if q := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(4), hash(5), hash(6)), 0); q.Arg0 != 4 {
		t.Fatalf("query hits %d, want all 4 of the batch", q.Arg0)
	} else {
		r.call(a, abi.CmdRelease, nil, q.Arg1)
	}
	r.close(a)
	r.idle()
}

// A refused restore leaves no destination page marked busy: otherwise the
// page would stay refused for the rest of the session.
func TestARefusedRestoreReleasesItsPages(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	fill(amem, 0, 3)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1)}, []uint32{0, 1}), 0)
	lease := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1)), 0).Arg1
	for _, bad := range [][2][]uint32{
		{{0, 1}, {5, 5}},  // page twice
		{{0, 9}, {6, 7}},  // block outside the lease
		{{0, 0}, {4, 99}}, // page out of range
	} {
		if resp := r.call(a, abi.CmdRestore, restoreDesc(lease, bad[0], bad[1]), 0); status(resp) != abi.StatusInvalid {
			t.Fatalf("restore %v: %v, want Invalid", bad, status(resp))
		}
	}
	resp := r.call(a, abi.CmdRestore, restoreDesc(lease, []uint32{0, 1, 0}, []uint32{5, 6, 4}), 0)
	if status(resp) != abi.StatusOK {
		t.Fatalf("restore into the pages of refused restores: %v field %v", status(resp), abi.Field(resp.Arg0))
	}
	r.wait(a, resp.Arg0)
	check(t, amem, 5, 3)
	r.call(a, abi.CmdRelease, nil, lease)
	r.close(a)
	r.idle()
}

// A hash repeated in one publish needs one frame: it must not evict a frame
// per repetition, nor be refused when one frame is free.
func TestAHashRepeatedInAPublishTakesOneFrame(t *testing.T) {
	r := newRig(t, 8*8192) // 4 blocks of 2 chunks
	a, amem := r.open()
	fill(amem, 0, 1)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2)}, []uint32{0, 1, 2}), 0)
	hs := make([]abi.BlockHash, 100)
	ps := make([]uint32, 100)
	for i := range hs {
		hs[i] = hash(9)
	}
	resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs, ps), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 1 || resp.Arg1 != 99 {
		t.Fatalf("publish of one hash 100 times: %v stored %d present %d", status(resp), resp.Arg0, resp.Arg1)
	}
	if ev := r.svc.Stats().Evictions; ev != 0 {
		t.Fatalf("%d evictions for a block that fit in the free frame", ev)
	}
	r.close(a)
	r.idle()
}

// A page being restored into cannot be published from: its bytes are not
// settled.
func TestPublishFromAPageUnderRestoreIsRefused(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	fill(amem, 0, 1)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}), 0)
	lease := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0).Arg1
	copy(a.Slot()[abi.SlotDescOffset:], restoreDesc(lease, []uint32{0}, []uint32{3}))
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(abi.CmdRestore), Epoch: tEpoch,
		Generation: r.gen[a], DescOffset: abi.SlotDescOffset, DescLength: 64 + 8}
	r.gen[a] += 2
	op, _ := r.svc.serveCommand(a, &m) // completions not drained yet: still in flight
	resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(5)}, []uint32{3}), 0)
	if status(resp) != abi.StatusInvalid || abi.Field(resp.Arg0) != abi.FieldPage {
		t.Fatalf("publish from a page under restore: %v %v", status(resp), abi.Field(resp.Arg0))
	}
	r.wait(a, op.Arg0)
	r.call(a, abi.CmdRelease, nil, lease)
	r.close(a)
	r.idle()
}

// A client that clears O_NONBLOCK on its eventfd and fills the counter
// cannot block the dispatcher: completions keep flowing for it and others.
func TestAHostileEventfdCannotBlockTheDispatcher(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	b, _ := r.open()
	fd := int(a.EventFile().Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	var max [8]byte
	binary.LittleEndian.PutUint64(max[:], 0xfffffffffffffffe)
	if _, err := unix.Write(fd, max[:]); err != nil {
		t.Fatal(err)
	}
	fill(amem, 0, 8)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}), 0)
	lease := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0).Arg1
	for i := 0; i < 3; i++ {
		op := r.call(a, abi.CmdRestore, restoreDesc(lease, []uint32{0}, []uint32{uint32(1 + i)}), 0).Arg0
		if st := r.wait(a, op); status(st) != abi.StatusOK { // completes although the eventfd is full
			t.Fatalf("restore %d: %v", i, status(st))
		}
	}
	if resp := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0); status(resp) != abi.StatusOK {
		t.Fatalf("other session's query: %v", status(resp))
	}
	r.call(a, abi.CmdRelease, nil, lease)
	r.close(a)
	r.close(b)
	r.idle()
}

// While a publish of the session still copies (its client timed out and
// moved on), the session's other cache operations are Unadmitted: the
// source pages are still being read.
func TestCacheCallsWaitForAnOutstandingPublish(t *testing.T) {
	r := newRig(t, 1<<20)
	a, amem := r.open()
	fill(amem, 0, 4)
	copy(a.Slot()[abi.SlotDescOffset:], publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}))
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(abi.CmdPublish), Epoch: tEpoch,
		Generation: r.gen[a], DescOffset: abi.SlotDescOffset, DescLength: 64 + 24}
	r.gen[a] += 2
	if _, ok := r.svc.serveCommand(a, &m); ok {
		t.Fatal("publish answered before its copy")
	}
	if resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("query during the publish: %v, want Unadmitted", status(resp))
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.svc.Stats().Blocks == 0 && time.Now().Before(deadline) {
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
	resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	if status(resp) != abi.StatusOK {
		t.Fatalf("query after the publish: %v", status(resp))
	}
	r.call(a, abi.CmdRelease, nil, resp.Arg1)
	r.close(a)
	r.idle()
}

// Leases hold block references up to a per-session and a Manager-wide
// limit; beyond them a query answers Unadmitted and holds nothing.
func TestLeasedBlocksAreBounded(t *testing.T) {
	r := newRig(t, 1<<20)
	lim := r.svc.leases.Limits()
	lim.BlocksPerSession, lim.Blocks = 5, 7
	r.svc.leases.SetLimits(lim)
	a, amem := r.open()
	b, _ := r.open()
	fill(amem, 0, 1)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2)}, []uint32{0, 1, 2}), 0)
	q := queryDesc(ns1, hash(0), hash(1), hash(2))
	if resp := r.call(a, abi.CmdQueryBundle, q, 0); status(resp) != abi.StatusOK {
		t.Fatalf("first lease: %v", status(resp))
	}
	if resp := r.call(a, abi.CmdQueryBundle, q, 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("6 references in one session: %v, want Unadmitted", status(resp))
	}
	if resp := r.call(b, abi.CmdQueryBundle, q, 0); status(resp) != abi.StatusOK {
		t.Fatalf("other session's first lease: %v", status(resp))
	}
	if resp := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1)), 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("8 references in the Manager: %v, want Unadmitted", status(resp))
	}
	if st := r.svc.Stats(); st.Leases != 2 || st.Pins != 6 {
		t.Fatalf("leases %d pins %d after refusals, want 2 and 6", st.Leases, st.Pins)
	}
	r.close(a)
	r.close(b)
	r.idle()
}

// ssdDir is a directory on a filesystem that takes O_DIRECT (not tmpfs), or
// the test is skipped with the reason.
func ssdDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-cache-ssd-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Blocks the RAM tier evicts are demoted to the SSD tier; a query of them
// answers Loading while they are read back, then leases them with the
// bytes they were published with.
func TestEvictedBlocksComeBackFromTheSSDTier(t *testing.T) {
	blockBytes := uint64(tLayers * tPageBytes)
	spec := &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
	r := newRigSSD(t, 4*blockBytes, spec) // 4 blocks of RAM
	if !r.svc.tiers.HasSSD() {
		t.Fatal("no SSD tier")
	}
	a, amem := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(4), hash(5), hash(6), hash(7)}, []uint32{4, 5, 6, 7}), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("demoted blocks not durable: %+v", r.svc.tiers.Counters().SSD)
		}
		time.Sleep(time.Millisecond)
	}
	q := queryDesc(ns1, hash(0), hash(1), hash(2), hash(3))
	resp := r.call(a, abi.CmdQueryBundle, q, 0)
	if status(resp) != abi.StatusLoading {
		t.Fatalf("query of demoted blocks: %v, want Loading", status(resp))
	}
	for status(resp) == abi.StatusLoading {
		if time.Now().After(deadline) {
			t.Fatal("prefetch never finished")
		}
		r.svc.Complete(64, func(uint32, abi.Message) {})
		resp = r.call(a, abi.CmdQueryBundle, q, 0)
	}
	if status(resp) != abi.StatusOK || resp.Arg0 != 4 {
		t.Fatalf("query after the prefetch: %v hits %d", status(resp), resp.Arg0)
	}
	for p := 0; p < 8; p++ {
		fill(amem, p, 0) // scribble over the sources
	}
	op := r.call(a, abi.CmdRestore, restoreDesc(resp.Arg1, []uint32{0, 1, 2, 3}, []uint32{0, 1, 2, 3}), 0).Arg0
	if st := r.wait(a, op); status(st) != abi.StatusOK {
		t.Fatalf("restore: %v", status(st))
	}
	for p := 0; p < 4; p++ {
		check(t, amem, p, byte(40+p))
	}
	r.call(a, abi.CmdRelease, nil, resp.Arg1)
	r.close(a)
	r.idle()
}

// A chain published in one Publish lies in order in the index's slabs, so
// a query of it finds most of its blocks by address (Stats.ByAddress, the
// orbitkv_index_blocks_by_address_total metric); a query that misses at
// its first hash follows nothing and adds none.
func TestAQueryOfAChainPublishedInOrderCountsBlocksFoundByAddress(t *testing.T) {
	r := newRig(t, 1<<20)
	a, _ := r.open()
	const chain = 40
	hashes := make([]abi.BlockHash, chain)
	pages := make([]uint32, chain)
	for i := range hashes {
		hashes[i], pages[i] = hash(100+i), uint32(i%tPages)
	}
	if resp := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hashes, pages), 0); status(resp) != abi.StatusOK || resp.Arg0 != chain {
		t.Fatalf("publish: %v stored %d", status(resp), resp.Arg0)
	}
	before := r.svc.Stats().ByAddress
	resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hashes...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != chain {
		t.Fatalf("query: %v hits %d", status(resp), resp.Arg0)
	}
	// The first table group (16 hashes) is probed; only the rest can follow.
	if got := r.svc.Stats().ByAddress - before; got == 0 || got > chain-16 {
		t.Fatalf("blocks found by address: %d of %d, want 1..%d", got, chain, chain-16)
	}
	if resp := r.call(a, abi.CmdRelease, nil, resp.Arg1); status(resp) != abi.StatusOK {
		t.Fatalf("release: %v", status(resp))
	}
	before = r.svc.Stats().ByAddress
	if resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(900), hash(901)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("query of unknown hashes: %v", status(resp))
	}
	if got := r.svc.Stats().ByAddress - before; got != 0 {
		t.Fatalf("a missed query counted %d blocks by address", got)
	}
	r.close(a)
	r.idle()
}
