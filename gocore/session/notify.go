package session

import (
	"errors"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/failpoint"
)

// Notifier writes completions to one session's eventfd
// (eventfd(2): a write adds its 8-byte value to the counter and wakes
// readers) on its own goroutine, never on the dispatcher's.
//
// Why not write from the dispatcher: the eventfd's open file description,
// and with it O_NONBLOCK, is shared with the client. A client that clears
// O_NONBLOCK and fills the counter to 0xfffffffffffffffe makes the next
// write block until it reads, and a blocked dispatcher would stall every
// session and shutdown. Here only this session's goroutine can block; it
// re-asserts O_NONBLOCK before each write, so only a client racing the
// flag can block it at all. The goroutine writes through its own dup of the
// fd, so the session's fd may be closed (and its number reused) meanwhile.
//
// Notifications coalesce: one pending wakeup stands for any number of
// completions; the client's RestorePoll finds out which ended.
type Notifier struct {
	ch chan struct{}
}

var eventOne = [8]byte{1}

// NewNotifier dups s's eventfd and starts the goroutine; nil on a dup
// failure (logged; the client then relies on okv_restore_wait's 50 ms
// fallback). Stop ends it.
func (s *Session) NewNotifier(log *slog.Logger) *Notifier {
	eventFile := s.eventFile
	fd, err := unix.FcntlInt(eventFile.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		log.Error("cannot dup the session eventfd; restore completions will not be signalled", slog.Any("err", err))
		return nil
	}
	n := &Notifier{ch: make(chan struct{}, 1)}
	go n.run(fd, log)
	return n
}

func (n *Notifier) run(fd int, log *slog.Logger) {
	defer unix.Close(fd)
	for range n.ch {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_NONBLOCK)
		}
		if _, err := unix.Write(fd, eventOne[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
			// EAGAIN: the counter is saturated, so the client is notified.
			log.Warn("session eventfd write failed", slog.Any("err", err))
		}
	}
}

// Signal queues a wakeup without blocking; safe on a nil Notifier.
func (n *Notifier) Signal() {
	if n == nil || failpoint.WakeupsDropped() {
		return
	}
	select {
	case n.ch <- struct{}{}:
	default: // a wakeup is already pending
	}
}

// Stop ends the goroutine once it is idle (a write blocked by the client
// finishes first); safe on a nil Notifier.
func (n *Notifier) Stop() {
	if n != nil {
		close(n.ch)
	}
}
