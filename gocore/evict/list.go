package evict

// list is an intrusive doubly-linked list of Nodes with a sentinel. The
// front (root.next) is the newest end, the back (root.prev) the oldest, the
// end policies evict from: next points toward older nodes, prev toward
// newer ones. A node is on at most one list; n.queue names it (0 = none),
// so membership is an O(1) test.
type list struct {
	root Node
	len  int
	id   uint8 // the value n.queue holds while n is on this list
}

func (l *list) init(id uint8) {
	l.root.next, l.root.prev = &l.root, &l.root
	l.id = id
}

// pushFront links n at the newest end.
func (l *list) pushFront(n *Node) { l.linkBehind(n, &l.root) }

// linkBehind links n right on the older side of at (at is on l, or is the
// root for the newest end): n will leave just before at.
func (l *list) linkBehind(n, at *Node) {
	n.prev, n.next = at, at.next
	at.next.prev = n
	at.next = n
	n.queue = l.id
	l.len++
}

// back is the oldest node, or nil when l is empty.
func (l *list) back() *Node {
	if l.root.prev == &l.root {
		return nil
	}
	return l.root.prev
}

// remove unlinks n, which must be on l.
func (l *list) remove(n *Node) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
	n.queue = 0
	l.len--
}

// moveToFront makes n, which is on l, the newest.
func (l *list) moveToFront(n *Node) {
	if l.root.next == n {
		return
	}
	l.remove(n)
	l.pushFront(n)
}
