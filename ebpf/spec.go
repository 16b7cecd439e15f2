package ebpf

import (
	"errors"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// MaxPeers is the most distinct transfer peers the probes keep histograms
// for (MAX_PEERS in bpf/probes.c).
const MaxPeers = 256

// PeerLabelRange bounds a peer label's length, bytes: it becomes the
// "peer" label of the transfer histograms.
var PeerLabelRange = limit.Range[int]{Field: "ebpf.peer (bytes)", Min: 1, Max: 128}

// ErrTooManyPeers: RegisterTransfer was given a MaxPeers+1st peer.
var ErrTooManyPeers = errors.New("too many transfer peers")

// ErrUnknownPeer: Transfer was asked for a peer never registered.
var ErrUnknownPeer = errors.New("unknown transfer peer")

// Spec is what Load loads; its zero value measures this process as the
// Manager.
type Spec struct {
	// ManagerPID is the process id of the Manager, as the initial pid
	// namespace numbers it (the probes compare it with the kernel's
	// tgid): its Unix stream sockets and eventfd writes are measured.
	// 0: this process (then the Manager must run in the initial pid
	// namespace).
	ManagerPID int
}

// Validate checks s without privileges.
func (s Spec) Validate() error {
	return limit.Check(s.ManagerPID >= 0, "ebpf.ManagerPID", s.ManagerPID, "0 (this process) or a process id")
}

func checkPeer(peer string) error {
	if err := PeerLabelRange.Check(len(peer)); err != nil {
		return fmt.Errorf("transfer peer %q: %w", peer, err)
	}
	return nil
}
