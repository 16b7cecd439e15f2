package limit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Error is one Spec field outside its limit.
type Error struct {
	// Field is "package.Field" of the Spec field, e.g. "session.DescCapacity".
	Field string
	// Value is the field's value as the Spec held it.
	Value any
	// Want is the limit in words, e.g. "1..4095" or "a multiple of 4KiB
	// in 4KiB..64MiB".
	Want string
	// Zero, when set, is what the value 0 stands for in the Spec (a
	// default, "1m"); a front end whose setting spells the default out
	// leaves it unsaid.
	Zero string
	// Err, when set, is why the value was refused before any limit
	// applied: it does not parse (ParseSize's "not a size", an
	// ErrAmbiguousUnit). Want is then the accepted forms, or "" when Err
	// says what to write.
	Err error
}

// Error reads "Field Value: want Want (0: Zero)"; with Err, "Field Value:
// Err (want Want)", or "Field Value: Err" when Want is "". A string Value
// is quoted.
func (e *Error) Error() string {
	if e.Err != nil {
		s := fmt.Sprintf("%s %s: %v", e.Field, Format(e.Value), e.Err)
		if e.Want != "" {
			s += " (want " + e.Want + ")"
		}
		return s
	}
	s := fmt.Sprintf("%s %s: want %s", e.Field, Format(e.Value), e.Want)
	if e.Zero != "" {
		s += " (0: " + e.Zero + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Check returns nil when ok, else an *Error for field.
func Check(ok bool, field string, value any, want string) error {
	if ok {
		return nil
	}
	return &Error{Field: field, Value: value, Want: want}
}

// Refused is a Spec field whose value the system refused when the Spec was
// put to use (binding a socket or a port, opening a directory).
type Refused struct {
	Field string // as in Error
	Value any
	Err   error
}

// Error reads "Field Value: Err".
func (e *Refused) Error() string { return fmt.Sprintf("%s %s: %v", e.Field, Format(e.Value), e.Err) }

// Unwrap returns Err.
func (e *Refused) Unwrap() error { return e.Err }

// Split walks err's tree (errors.Join and %w wrapping included) and
// returns, in order, the *Error and *Refused values in it (as error) and
// every other leaf error. A wrapper around a field error is dropped for
// the field error's sake.
func Split(err error) (fields, others []error) {
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case *Error, *Refused:
			fields = append(fields, x)
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		default:
			if inner := errors.Unwrap(e); inner != nil && hasField(inner) {
				walk(inner)
			} else {
				others = append(others, e)
			}
		}
	}
	walk(err)
	return fields, others
}

func hasField(err error) bool {
	var le *Error
	var re *Refused
	return errors.As(err, &le) || errors.As(err, &re)
}

// Format writes a Spec value as its setting is spelled: a string quoted,
// a duration without zero units ("24h", "1m", "1.5s"; zero is "0"), a
// number in decimal.
func Format(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case sizeValue:
		return Size(uint64(x))
	case time.Duration:
		if x == 0 {
			return "0"
		}
		s := x.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return fmt.Sprint(v)
}

// Number is what a Range bounds.
type Number interface {
	~int | ~int64 | ~uint32 | ~uint64
}

// Range is the limit of one numeric Spec field, declared once beside the
// Spec: its Validate calls Check, and a front end whose setting spells the
// default out (so 0 is a mistake there) calls CheckSet.
type Range[T Number] struct {
	Field    string // as in Error
	Min, Max T
	Bytes    bool   // write Min and Max as sizes (Size)
	Zero     string // what 0 stands for in the Spec; "" when 0 is only out of range
	Note     string // words after the range, e.g. "half of the address space"
}

// Want writes the range: "1..4095", "4KiB..64TiB, half of ...".
func (r Range[T]) Want() string {
	w := Format(r.Min) + ".." + Format(r.Max)
	if r.Bytes {
		w = Size(uint64(r.Min)) + ".." + Size(uint64(r.Max))
	}
	if r.Note != "" {
		w += ", " + r.Note
	}
	return w
}

// Check returns nil when v is in range, or is 0 and Zero says what 0
// stands for; else an *Error.
func (r Range[T]) Check(v T) error {
	if (v == 0 && r.Zero != "") || (v >= r.Min && v <= r.Max) {
		return nil
	}
	return &Error{Field: r.Field, Value: r.value(v), Want: r.Want(), Zero: r.Zero}
}

// CheckSet is Check for a setting that has no "0 means the default": 0
// is out of range unless Min is 0.
func (r Range[T]) CheckSet(v T) error {
	if v >= r.Min && v <= r.Max {
		return nil
	}
	return &Error{Field: r.Field, Value: r.value(v), Want: r.Want()}
}

func (r Range[T]) value(v T) any {
	if r.Bytes {
		return sizeValue(v)
	}
	return v
}

// sizeValue is a byte count that Format writes with Size.
type sizeValue uint64

// Size writes n bytes in the largest binary unit that divides it exactly
// (4KiB, 64MiB, 1GiB, 32TiB), as the Manager's size flags take it; other
// values are plain bytes.
func Size(n uint64) string {
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		shift := uint(40 - 10*i)
		if n != 0 && n%(1<<shift) == 0 {
			return strconv.FormatUint(n>>shift, 10) + u
		}
	}
	return strconv.FormatUint(n, 10) + " bytes"
}
