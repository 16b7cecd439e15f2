//go:build cgo

package native

import (
	"errors"
	"testing"
)

func TestBlockHashes(t *testing.T) {
	t.Run("a batch copies its hashes and reports their count", func(t *testing.T) {
		hashes := []BlockHash{{1}, {2}, {3}}
		b, err := NewBlockHashes(hashes)
		if err != nil {
			t.Fatalf("NewBlockHashes: %v", err)
		}
		hashes[0] = BlockHash{9} // the batch holds its own copy
		if got := b.Len(); got != 3 {
			t.Errorf("Len = %d, want 3", got)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = b.Len() }); allocs != 0 {
			t.Errorf("Len allocates %v times", allocs)
		}
		b.Free()
		if got := b.Len(); got != 0 {
			t.Errorf("Len after Free = %d, want 0", got)
		}
		b.Free() // a second Free is a no-op
	})
	t.Run("an empty batch is refused with -EINVAL", func(t *testing.T) {
		b, err := NewBlockHashes(nil)
		var ce *ClientError
		if b != nil || !errors.As(err, &ce) || ce.Code != -22 {
			t.Fatalf("NewBlockHashes(nil) = %v, %v; want *ClientError -EINVAL", b, err)
		}
	})
	t.Run("ticket calls on a closed client fail with CodeClosed", func(t *testing.T) {
		var c Client
		b, err := NewBlockHashes([]BlockHash{{1}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		_, _, err = c.Submit(QuerySpec{NS: Namespace{1}, Hashes: b})
		var ce *ClientError
		if !errors.As(err, &ce) || ce.Code != CodeClosed {
			t.Errorf("Submit on a closed client: %v, want CodeClosed", err)
		}
		if _, err := c.OpPoll(1, 1); !errors.As(err, &ce) || ce.Code != CodeClosed {
			t.Errorf("OpPoll on a closed client: %v, want CodeClosed", err)
		}
	})
}
