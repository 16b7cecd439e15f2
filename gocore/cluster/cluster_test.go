package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

func TestValidateNamesEveryMissingField(t *testing.T) {
	err := (&Spec{PeerListen: "nohost", TransferListen: "127.0.0.1:0"}).Validate()
	if err == nil {
		t.Fatal("an empty spec passed Validate")
	}
	var fields []string
	fes, _ := limit.Split(err)
	for _, e := range fes {
		var le *limit.Error
		if errors.As(e, &le) {
			fields = append(fields, le.Field)
		}
	}
	got := strings.Join(fields, " ")
	for _, want := range []string{"manager.Cluster.NodeID", "manager.Cluster.Catalog.Endpoints", "manager.Cluster.PeerListen", "manager.Cluster.ServerTLS"} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate's errors name %q, want %s among them", got, want)
		}
	}
	if strings.Contains(got, "manager.Cluster.TransferListen") {
		t.Errorf("a valid TransferListen was refused: %v", err)
	}
}

// A peer whose fetch failed is skipped for PeerBackoff, at that epoch
// only: a restarted peer (a new epoch) is asked again at once.
func TestAFailedPeerIsBackedOffAtItsEpochOnly(t *testing.T) {
	f := newFetcher(nil, nil, nil)
	o := Owner{NodeID: "b", Addr: "127.0.0.2:1", Epoch: 5}
	f.markDown(o)
	if !f.isDown(peerKey{"b", 5}) {
		t.Fatal("a peer just marked down is not down")
	}
	if f.isDown(peerKey{"b", 6}) {
		t.Fatal("the same node at a new epoch is down")
	}
	f.down.Store(peerKey{"b", 5}, time.Now().Add(-time.Millisecond))
	if f.isDown(peerKey{"b", 5}) {
		t.Fatal("a peer past its back-off is still down")
	}
	if n := f.downs.Load(); n != 0 {
		t.Fatalf("%d entries counted after the only one expired, want 0", n)
	}
}
