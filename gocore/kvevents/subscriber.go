package kvevents

import (
	"bufio"

	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// MaxMessageBytes bounds a frame a Subscriber reads (a resync of every
// block is one message: 64 MiB holds about 150,000 blocks of 128 tokens).
const MaxMessageBytes = 64 << 20

// Subscriber is a minimal ZMTP 3.0 SUB client of one event endpoint
// (NULL security): it subscribes to every topic and reads messages of
// three frames (topic, 8-byte sequence, payload), one at a time, on the
// caller's goroutine, with no queue of its own. The bench uses it to be a
// consumer that costs next to nothing beside what it measures; routers
// use a ZeroMQ library.
type Subscriber struct {
	nc   net.Conn
	r    *bufio.Reader
	bufs [3][]byte // the frames' buffers, reused by each Next
}

// Subscribe connects to endpoint (tcp://HOST:PORT or ipc:///PATH),
// handshakes within timeout and subscribes to every topic.
func Subscribe(endpoint string, timeout time.Duration) (*Subscriber, error) {
	network, addr, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("kv events: %s: %w", endpoint, err)
	}
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("kv events: %w", err)
	}
	s := &Subscriber{nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
	nc.SetDeadline(time.Now().Add(timeout))
	g := greeting()
	g[32] = 0 // a client
	if err := s.handshake(g); err != nil {
		nc.Close()
		return nil, fmt.Errorf("kv events: %s: %w", endpoint, err)
	}
	nc.SetDeadline(time.Time{})
	return s, nil
}

func (s *Subscriber) handshake(g []byte) error {
	if _, err := s.nc.Write(append(g, readyCommand("SUB")...)); err != nil {
		return err
	}
	var peer [greetingBytes]byte
	if _, err := io.ReadFull(s.r, peer[:]); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	if peer[0] != 0xFF || peer[9] != 0x7F || peer[10] < 3 {
		return fmt.Errorf("greeting: not ZMTP 3 (signature %x)", peer[:10])
	}
	msg, cmd, err := readMessage(s.r)
	if err != nil || !cmd {
		return fmt.Errorf("READY: %v (command %v)", err, cmd)
	}
	if typ, err := peerType(msg[0]); err != nil || typ != "PUB" {
		return fmt.Errorf("the peer is a %q socket (%v), want PUB", typ, err)
	}
	_, err = s.nc.Write(appendFrame(nil, []byte{1}, 0)) // subscribe to every topic
	return err
}

// Next reads the next message: its sequence number and payload (the
// topic is dropped). The payload is valid until the next call to Next
// (its buffer is reused: a subscriber allocates nothing per message).
// Errors: the connection's, or a message that is not three frames with
// an 8-byte sequence, or a frame over MaxMessageBytes.
func (s *Subscriber) Next() (seq int64, payload []byte, err error) {
	var frames [][]byte
	for {
		if len(frames) == len(s.bufs) {
			return 0, nil, fmt.Errorf("kv events: a message of more than 3 frames")
		}
		fl, body, err := readFrameInto(s.r, MaxMessageBytes, s.bufs[len(frames)][:0])
		if err != nil {
			return 0, nil, err
		}
		if fl&flagCommand != 0 {
			continue // ZMTP 3.1 peers may send commands (PING): not for us
		}
		s.bufs[len(frames)] = body
		frames = append(frames, body)
		if fl&flagMore == 0 {
			break
		}
	}
	if len(frames) != 3 || len(frames[1]) != 8 {
		return 0, nil, fmt.Errorf("kv events: a message of %d frames, want topic, 8-byte sequence, payload", len(frames))
	}
	return int64(binary.BigEndian.Uint64(frames[1])), frames[2], nil
}

// Close ends the subscription; a Next waiting returns an error.
func (s *Subscriber) Close() error { return s.nc.Close() }
