package suite

import (
	"fmt"
)

// UsageError is a bad flag or argument; dispatch exits 2 on it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func Usagef(format string, a ...any) error { return &UsageError{msg: fmt.Sprintf(format, a...)} }
