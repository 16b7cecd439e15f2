package failpoint

import "sync"

// Queue hands the continuations of held operations back to the goroutine
// that owns their state (the dispatcher). An operation held by Pause
// registers a continuation; Resume, from the failpoint HTTP goroutine,
// queues it and rings the owner, which runs the queue with Run. After
// Close nothing is queued or rung any more (the owner's ring may be
// freed). Safe for concurrent use; the zero value is not: use NewQueue.
type Queue[A any] struct {
	ring   func()
	mu     sync.Mutex
	closed bool
	q      []func(A) // resumed continuations, oldest first
}

// NewQueue returns a queue that calls ring (safe from any goroutine) when
// a continuation is queued.
func NewQueue[A any](ring func()) *Queue[A] { return &Queue[A]{ring: ring} }

// Pause holds the operation at name when it is armed (true): cont then runs
// on the owner's goroutine, through Run, once name is resumed.
func (q *Queue[A]) Pause(name Name, cont func(A)) bool {
	return Pause(name, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.closed {
			return // the owner closed: its ring may be freed, nothing runs any more
		}
		q.q = append(q.q, cont)
		q.ring() // under mu: Close cannot return meanwhile
	})
}

// Run runs at most limit queued continuations with arg, oldest first; it
// returns how many ran and whether more are queued.
func (q *Queue[A]) Run(limit int, arg A) (ran int, more bool) {
	for {
		q.mu.Lock()
		if len(q.q) == 0 || ran == limit {
			more = len(q.q) > 0
			q.mu.Unlock()
			return ran, more
		}
		cont := q.q[0]
		q.q[0] = nil
		q.q = q.q[1:]
		q.mu.Unlock()
		cont(arg)
		ran++
	}
}

// Close drops every later resume: from its return on, ring is never called.
func (q *Queue[A]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}
