package peer

import (
	"context"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// dataPath is the real transfer engine of a test: the source's
// transfer.Server the runs are registered on, and a requester's Engine
// that reads them back into registered memory, as the Manager does.
type dataPath struct {
	srv   *transfer.Server
	eng   *requester.Engine
	arena []byte // the requester's registered memory
}

func newDataPath(t *testing.T) *dataPath {
	t.Helper()
	srv, err := transfer.Listen(transfer.ServerSpec{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := requester.NewEngine(requester.EngineSpec{Rails: 2})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	d := &dataPath{srv: srv, eng: eng, arena: make([]byte, 1<<20)}
	if err := eng.RegisterLocalMemory(d.arena); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		srv.Close()
	})
	return d
}

// segments is how many segments the source's transfer server holds.
func (d *dataPath) segments() int { return d.srv.Stats().Segments }

// read READs n bytes at off of segment id with capability c, in at most
// 5 s; the bytes are a copy.
func (d *dataPath) read(tr *Transfer, c Capability, off, n uint64) ([]byte, error) {
	h, err := d.eng.OpenSegment(tr.DataAddr, tr.SegmentID, c)
	if err != nil {
		return nil, err
	}
	defer d.eng.CloseSegment(h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dst := d.arena[:n]
	b, err := d.eng.SubmitTransfer(ctx, []requester.Request{{Segment: h, Offset: off, Dst: dst}})
	if err != nil {
		return nil, err
	}
	defer d.eng.FreeBatch(b)
	if err := d.eng.Wait(ctx, b); err != nil {
		return nil, err
	}
	return append([]byte(nil), dst...), nil
}
