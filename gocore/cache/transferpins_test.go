package cache

import (
	"bytes"
	"errors"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Blocks pinned for a transfer to a peer: the leading resident run within
// the byte bound, with the published bytes, never evicted while pinned,
// counted in the idle invariant until released.
func TestTransferPinsHoldTheExactBlocksUntilReleased(t *testing.T) {
	blockBytes := uint64(tLayers * tPageBytes)
	cases := []struct {
		name     string
		hashes   []abi.BlockHash
		maxBytes uint64
		want     int
	}{
		{"a resident chain is pinned whole", hs(0, 3), 1 << 30, 3},
		{"the run stops at the first block not resident", []abi.BlockHash{hash(0), hash(1), hash(9), hash(2)}, 1 << 30, 2},
		{"the run stops at the byte bound", hs(0, 3), 2*blockBytes + 1, 2},
		{"a chain whose first block is not resident pins nothing", []abi.BlockHash{hash(9), hash(0)}, 1 << 30, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 4*blockBytes)
			a, amem := r.open()
			for p := 0; p < 8; p++ {
				fill(amem, p, byte(10+p))
			}
			r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 3), pg(3)), 0)
			r.close(a)
			pin, run := r.svc.PinRun(ns1, tc.hashes, tc.maxBytes)
			if len(run) != tc.want || (pin == 0) != (tc.want == 0) {
				t.Fatalf("pinned %d blocks (pin %d), want %d", len(run), pin, tc.want)
			}
			for i, pb := range run {
				if pb.Hash != tc.hashes[i] || pb.Length != blockBytes || pb.Layers != tLayers {
					t.Fatalf("block %d: %x %d bytes %d layers", i, pb.Hash, pb.Length, pb.Layers)
				}
				if got := bytes.Join(pb.Bufs, nil); !bytes.Equal(got, peerBlock(byte(10+i))) {
					t.Fatalf("block %d: pinned bytes are not the published ones", i)
				}
			}
			if tc.want == 0 {
				r.idle()
				return
			}
			if st := r.svc.Stats(); st.Idle() || st.Transfers != 1 || st.TransferPins != uint64(tc.want) {
				t.Fatalf("with a transfer pin held: idle %v, transfers %d, pinned %d", st.Idle(), st.Transfers, st.TransferPins)
			}
			if err := r.svc.Check(); err != nil {
				t.Fatalf("Check with only transfer pins held: %v", err)
			}
			// Eviction pressure: four new blocks need every frame; the
			// pinned ones stay.
			b, bmem := r.open()
			for p := 0; p < 8; p++ {
				fill(bmem, p, byte(50+p))
			}
			r.call(b, abi.CmdPublish, publishDesc(ns1, tLayers, hs(10, 4-tc.want), pg(4-tc.want)), 0)
			for i := range run {
				if r.svc.idx.Lookup(keyOf(ns1, tc.hashes[i])) == nil {
					t.Fatalf("pinned block %d was evicted", i)
				}
			}
			r.close(b)
			if err := r.svc.UnpinRun(pin); err != nil {
				t.Fatal(err)
			}
			if err := r.svc.UnpinRun(pin); !errors.Is(err, ErrNoPin) {
				t.Fatalf("second UnpinRun: %v, want ErrNoPin", err)
			}
			r.idle()
		})
	}
}
