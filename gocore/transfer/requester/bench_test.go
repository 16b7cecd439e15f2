package requester

import (
	"context"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// BenchmarkTransfer is one batch of 32 blocks read over loopback at the
// default engine settings (orbitkv-bench transfer measures it beside its
// baselines; this is the allocation and regression view).
func BenchmarkTransfer(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run("size="+limit.Size(uint64(size)), func(b *testing.B) {
			srv, err := transfer.Listen(transfer.ServerSpec{Addr: "127.0.0.1:0"})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			e, err := NewEngine(EngineSpec{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			blocks := make([][]byte, 32)
			for i := range blocks {
				blocks[i] = pattern(size, uint64(i))
			}
			id, c, err := srv.RegisterSegment(blocks, time.Now().Add(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			h, _ := e.OpenSegment(srv.Addr(), id, c)
			arena := make([]byte, 32*size)
			e.RegisterLocalMemory(arena)
			reqs := make([]Request, 32)
			for i := range reqs {
				reqs[i] = Request{Segment: h, Offset: uint64(i * size), Dst: arena[i*size : (i+1)*size]}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(32 * size))
			for b.Loop() {
				id, err := e.SubmitTransfer(ctx, reqs)
				if err == nil {
					err = e.Wait(ctx, id)
				}
				if err != nil {
					b.Fatal(err)
				}
				e.FreeBatch(id)
			}
		})
	}
}
