// Package handover moves a running Manager's RAM tier to a new Manager
// process without copying it (docs/design.md §7.1, "Upgrade"): the running
// Manager (the predecessor) starts its successor with one end of a
// SOCK_SEQPACKET socket pair as fd 3 (EnvFD names it), and the two speak
// four messages over it:
//
//	successor → predecessor  Hello    its pid, the ledger layout it reads,
//	                                  one end of a new socket pair (the
//	                                  rest of the protocol runs on it) and
//	                                  its kernel-checked credentials
//	predecessor → successor  State    the arena's and the ledger's memfds
//	                                  (SCM_RIGHTS), once the predecessor
//	                                  stopped serving and freed everything
//	                                  else (sockets, ports, SSD files)
//	successor → predecessor  Adopted  blocks and bytes adopted, once it has
//	                                  made its Manager over the tier
//	predecessor → successor  Done     it told systemd the successor is the
//	                                  service's main process and exits
//
// Who it is: a process is dumpable from its exec until it makes itself
// non-dumpable (cmd/orbitkv-manager does so first), and in that window a
// process of its uid may take its fds (pidfd_getfd) or trace it. So the
// successor, once non-dumpable, makes a new socket pair and sends one end
// with Hello and SCM_CREDENTIALS; the predecessor goes on over that socket
// only if the kernel's word on the sender's pid is the pid it started,
// still running, and nothing traces it (TracerPid 0), and sends nothing on
// the first socket. These checks do not cover a process that wrote the
// successor's memory (/proc/PID/mem) in that window and left: what closes
// the window is the executable's mode (0711: a binary its user cannot read
// starts non-dumpable), which the Manager warns about when it is readable.
//
// Ownership: the tier has one writer at every moment. The predecessor
// writes it until it sends State and never after; the successor writes it
// only after State. If the successor fails (exits, or sends no Adopted in
// time), the predecessor kills it, waits until it is reaped, and only
// then serves the same tier again (Failed carries the memfds). A
// successor that gets no State (the predecessor died) starts empty.
//
// Message (32 bytes, little-endian): [8] magic "OKVHANDO", u16 protocol
// version (Version), u16 kind, u32 sender pid, u64 a, u64 b; a and b are
// Hello: the ledger layout version and 0; State: the predecessor's epoch
// and 0; Adopted: blocks and bytes; Done: 0, 0. Hello carries exactly one
// fd (the new socket), State exactly two, the others none.
//
// Who may import it: gocore/manager and cmd/orbitkv-manager.
package handover

import (
	"encoding/binary"
	"fmt"
)

// Version is the handover protocol's version; a message of another is
// refused by name.
const Version = 1

// EnvFD is the environment variable that gives the successor its end of
// the socket pair (a decimal fd; 3).
const EnvFD = "ORBITKV_HANDOVER_FD"

// MessageBytes is the size of every message.
const MessageBytes = 32

const magic = "OKVHANDO"

// Kind is a message's kind.
type Kind uint16

// The kinds, in protocol order.
const (
	Hello Kind = iota + 1
	State
	Adopted
	Done
)

func (k Kind) String() string {
	switch k {
	case Hello:
		return "hello"
	case State:
		return "state"
	case Adopted:
		return "adopted"
	case Done:
		return "done"
	}
	return fmt.Sprintf("kind %d", uint16(k))
}

// Message is one decoded message.
type Message struct {
	Kind Kind
	PID  uint32
	A, B uint64
}

// Encode is m's 32 bytes.
func (m Message) Encode() []byte {
	b := make([]byte, MessageBytes)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[8:], Version)
	binary.LittleEndian.PutUint16(b[10:], uint16(m.Kind))
	binary.LittleEndian.PutUint32(b[12:], m.PID)
	binary.LittleEndian.PutUint64(b[16:], m.A)
	binary.LittleEndian.PutUint64(b[24:], m.B)
	return b
}

// Decode checks and decodes one message that came with fds file
// descriptors; every error names the field and what it wants.
func Decode(b []byte, fds int) (Message, error) {
	var m Message
	if len(b) != MessageBytes {
		return m, fmt.Errorf("handover: message of %d bytes, want %d", len(b), MessageBytes)
	}
	if string(b[:8]) != magic {
		return m, fmt.Errorf("handover: magic %q, want %q", b[:8], magic)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != Version {
		return m, fmt.Errorf("handover: protocol version %d, want %d", v, Version)
	}
	m.Kind = Kind(binary.LittleEndian.Uint16(b[10:]))
	if m.Kind < Hello || m.Kind > Done {
		return m, fmt.Errorf("handover: kind %d, want %d..%d", uint16(m.Kind), Hello, Done)
	}
	m.PID = binary.LittleEndian.Uint32(b[12:])
	m.A, m.B = binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
	want := map[Kind]int{Hello: 1, State: 2}[m.Kind]
	if fds != want {
		return m, fmt.Errorf("handover: %s message with %d fds, want %d", m.Kind, fds, want)
	}
	return m, nil
}
