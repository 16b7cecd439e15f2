package session

import "errors"

// ErrDraining is the refusal of a new session while the Manager drains
// (orbitkvctl drain): it is shutting down once the operations in flight
// finished.
var ErrDraining = errors.New("session: the Manager is draining (orbitkvctl drain) and admits no new session; it shuts down once operations in flight finish")

// Refuse makes every later Open fail with err (nil admits again); live
// sessions are untouched. Safe for concurrent use.
func (t *Table) Refuse(err error) {
	t.mu.Lock()
	t.refuse = err
	t.mu.Unlock()
}
