package limit

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSplitFindsEveryFieldErrorInAJoinedTree(t *testing.T) {
	a := Check(false, "session.MaxSessions", uint32(0), "1..4095")
	b := Check(false, "ssd.Admission", "third-hit", `"all" or "second-hit"`)
	r := &Refused{Field: "manager.HTTPAddr", Value: "127.0.0.1:1", Err: errors.New("address already in use")}
	other := errors.New("other")
	err := errors.Join(a, other, fmt.Errorf("wrapped: %w", b), Check(true, "x.Y", 1, "any"), fmt.Errorf("start: %w", r))
	fields, others := Split(err)
	if len(fields) != 3 || fields[0] != a || fields[1] != b || fields[2] != r {
		t.Fatalf("fields = %v, want the two limit errors and the refusal in order", fields)
	}
	if len(others) != 1 || others[0] != other {
		t.Fatalf("others = %v, want [other]", others)
	}
	if s := a.Error(); s != "session.MaxSessions 0: want 1..4095" {
		t.Errorf("Error() = %q", s)
	}
	if s := b.Error(); s != `ssd.Admission "third-hit": want "all" or "second-hit"` {
		t.Errorf("Error() = %q", s)
	}
	if s := r.Error(); s != `manager.HTTPAddr "127.0.0.1:1": address already in use` {
		t.Errorf("Error() = %q", s)
	}
	z := &Error{Field: "cache.MaxOps", Value: -1, Want: "1..1048576", Zero: "1024"}
	if s := z.Error(); s != "cache.MaxOps -1: want 1..1048576 (0: 1024)" {
		t.Errorf("Error() = %q", s)
	}
	if f, o := Split(nil); f != nil || o != nil {
		t.Error("Split(nil) is not empty")
	}
}

func TestFormatSpellsValuesAsSettingsDo(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{24 * time.Hour, "24h"}, {time.Minute, "1m"}, {10 * time.Minute, "10m"}, {time.Second, "1s"},
		{90 * time.Minute, "1h30m"}, {1500 * time.Millisecond, "1.5s"}, {-time.Second, "-1s"},
		{time.Duration(0), "0"}, {"a b", `"a b"`}, {uint32(7), "7"},
	} {
		if got := Format(tc.v); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestRangeChecksAndSaysItsLimit(t *testing.T) {
	expiry := Range[time.Duration]{Field: "cache.OpExpiry", Min: time.Second, Max: 24 * time.Hour, Zero: "1m"}
	if expiry.Check(0) != nil || expiry.Check(time.Hour) != nil {
		t.Error("Check refuses 0 (a default) or a value in range")
	}
	if err := expiry.Check(25 * time.Hour); err == nil || err.Error() != "cache.OpExpiry 25h: want 1s..24h (0: 1m)" {
		t.Errorf("Check(25h) = %v", err)
	}
	if err := expiry.CheckSet(0); err == nil || err.Error() != "cache.OpExpiry 0: want 1s..24h" {
		t.Errorf("CheckSet(0) = %v", err)
	}
	buf := Range[uint64]{Field: "bootstrap.MaxBufferBytes", Min: 4096, Max: 64 << 40, Bytes: true, Note: "half of the address space"}
	if err := buf.Check(65 << 40); err == nil || err.Error() != "bootstrap.MaxBufferBytes 65TiB: want 4KiB..64TiB, half of the address space" {
		t.Errorf("Check(65TiB) = %v", err)
	}
	if err := buf.Check(0); err == nil {
		t.Error("Check(0) passes a range without Zero")
	}
}

func TestSizeUsesTheLargestExactUnit(t *testing.T) {
	for n, want := range map[uint64]string{
		4096: "4KiB", 64 << 20: "64MiB", 1 << 30: "1GiB", 32 << 40: "32TiB", 1536: "1536 bytes", 0: "0 bytes", 3 << 29: "1536MiB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
