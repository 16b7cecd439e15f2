//go:build cgo

package native

import (
	"testing"
	"unsafe"
)

// TestEventAndReplyMatchC (cgo builds only: without cgo there is no C
// layout, and Event and Reply alias nothing): Event and Reply alias C arrays (Server.Step), so
// their Go layout must be the C layout of okvi_event and okvi_reply.
func TestEventAndReplyMatchC(t *testing.T) {
	c := Layout()
	var e Event
	var r Reply
	checkLayout(t, c, []layoutCase{
		{"an event is 80 bytes", "sizeof(okvi_event)", unsafe.Sizeof(e)},
		{"event prev_gen", "okvi_event.prev_gen", unsafe.Offsetof(e.PrevGen)},
		{"event msg", "okvi_event.msg", unsafe.Offsetof(e.Msg)},
		{"a reply is 80 bytes", "sizeof(okvi_reply)", unsafe.Sizeof(r)},
		{"reply msg", "okvi_reply.msg", unsafe.Offsetof(r.Msg)},
		{"the message inside an event is 64 bytes", "sizeof(okv_msg)", unsafe.Sizeof(e.Msg)},
		{"the event message generation", "okv_msg.generation", unsafe.Offsetof(e.Msg.Generation)},
		{"the event message arg0", "okv_msg.arg0", unsafe.Offsetof(e.Msg.Arg0)},
	})
	t.Run("every layout value is named once", func(t *testing.T) {
		if len(c) != len(layoutNames) {
			t.Errorf("Layout has %d entries for %d names (a duplicate name?)", len(c), len(layoutNames))
		}
	})
	// slot and kind precede prev_gen in both; check the Go side is packed the same.
	if unsafe.Offsetof(e.Kind) != 4 || unsafe.Offsetof(r.Reserved0) != 4 || unsafe.Offsetof(r.Reserved1) != 8 {
		t.Errorf("event/reply header offsets: kind %d reserved0 %d reserved1 %d", unsafe.Offsetof(e.Kind), unsafe.Offsetof(r.Reserved0), unsafe.Offsetof(r.Reserved1))
	}
}

// layoutCase is one Go size or offset (got) and the key in Layout of the C
// value it must equal.
type layoutCase struct {
	name string
	c    string
	got  uintptr
}

// checkLayout runs one subtest per case, comparing it with c (Layout()).
func checkLayout(t *testing.T, c map[string]uintptr, tests []layoutCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := c[tc.c]
			if !ok {
				t.Fatalf("Layout has no %q", tc.c)
			}
			if tc.got != want {
				t.Errorf("%s: Go %d, C %d", tc.c, tc.got, want)
			}
		})
	}
}
