package channel

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// Transport is how the 64-byte requests and responses of every session
// move (--channel-transport): through the session slot's request and
// response lines (shm, the default; docs/channel.md) or through a
// request-response service of iceoryx2 0.10 per session (iceoryx2;
// docs/iceoryx2.md). Descriptors, epochs, generations, fencing and the
// teardown on socket close are the same on both.
type Transport int

// Transports.
const (
	TransportShm Transport = iota
	TransportIceoryx2
)

// String returns the flag value: "shm" or "iceoryx2".
func (t Transport) String() string {
	switch t {
	case TransportShm:
		return "shm"
	case TransportIceoryx2:
		return "iceoryx2"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// ParseTransport parses the --channel-transport value: shm or iceoryx2.
func ParseTransport(s string) (Transport, error) {
	for _, t := range []Transport{TransportShm, TransportIceoryx2} {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown channel transport %q (want shm or iceoryx2)", s)
}

// Iceoryx2Built reports whether this binary can serve TransportIceoryx2.
const Iceoryx2Built = native.Iceoryx2Built

// DefaultServicePrefix is Spec.ServicePrefix's default (--channel-service).
const DefaultServicePrefix = "orbitkv"

// MaxServicePrefix is the longest Spec.ServicePrefix in bytes: a service
// name is PREFIX/EPOCH/TOKEN (16 and 32 hex digits) and must fit
// abi.BootExtServiceMax.
const MaxServicePrefix = abi.BootExtServiceMax - 1 - 16 - 1 - 32

// checkServicePrefix refuses a prefix iceoryx2 or the reply cannot carry.
func checkServicePrefix(p string) error {
	ok := p != "" && len(p) <= MaxServicePrefix
	for _, c := range []byte(p) {
		if c <= 0x20 || c > 0x7e {
			ok = false
		}
	}
	return limit.Check(ok, "channel.ServicePrefix", p,
		fmt.Sprintf("1..%d bytes of printable ASCII without spaces", MaxServicePrefix))
}

// serviceName is a fresh name of one session's iceoryx2 service:
// PREFIX/EPOCH/TOKEN, TOKEN 128 random bits. The name is the session's
// capability (the 64-byte message carries no token), and the epoch makes
// it unique per Manager incarnation.
func serviceName(prefix string, epoch uint64) string {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		panic(fmt.Sprintf("channel: crypto/rand: %v", err)) // never fails on Linux (getrandom)
	}
	return fmt.Sprintf("%s/%016x/%s", prefix, epoch, hex.EncodeToString(tok[:]))
}
