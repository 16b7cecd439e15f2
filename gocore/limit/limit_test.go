package limit

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorsFindsEveryLimitInAJoinedTree(t *testing.T) {
	a := Check(false, "session.MaxSessions", 0, "1..4095")
	b := Check(false, "ssd.Admission", "third-hit", `"all" or "second-hit"`)
	err := errors.Join(a, errors.New("other"), fmt.Errorf("wrapped: %w", b), Check(true, "x.Y", 1, "any"))
	got := Errors(err)
	if len(got) != 2 || got[0].Field != "session.MaxSessions" || got[1].Field != "ssd.Admission" {
		t.Fatalf("Errors = %v, want the two limit errors in order", got)
	}
	if s := a.Error(); s != "session.MaxSessions 0: want 1..4095" {
		t.Errorf("Error() = %q", s)
	}
	if s := b.Error(); s != `ssd.Admission "third-hit": want "all" or "second-hit"` {
		t.Errorf("Error() = %q", s)
	}
	if Errors(nil) != nil || Errors(errors.New("plain")) != nil {
		t.Error("Errors of an error without limits is not empty")
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
