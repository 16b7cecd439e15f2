// Package limit is the one error type every Spec's Validate returns for a
// field outside its limit. A front end that sets Spec fields from its own
// settings (the Manager's flags, a config file) finds each such error with
// Errors and names its own setting instead of the Go field: the limit
// itself is declared once, beside the Spec it bounds.
package limit

import (
	"errors"
	"fmt"
	"strconv"
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
}

// Error reads "Field Value: want Want"; a string Value is quoted.
func (e *Error) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("%s %q: want %s", e.Field, s, e.Want)
	}
	return fmt.Sprintf("%s %v: want %s", e.Field, e.Value, e.Want)
}

// Check returns nil when ok, else an *Error for field.
func Check(ok bool, field string, value any, want string) error {
	if ok {
		return nil
	}
	return &Error{Field: field, Value: value, Want: want}
}

// Errors returns every *Error in err's tree (errors.Join and %w wrapping
// included), in order.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case *Error:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		default:
			walk(errors.Unwrap(e))
		}
	}
	walk(err)
	return out
}

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
