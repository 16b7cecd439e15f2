// Package limit holds the errors every Spec's Validate (and the start of
// what a Spec describes) returns for one field: a value outside its limit
// (Error), or a value the system refused at start (Refused: a busy port, a
// socket directory another user can write). A front end that sets Spec
// fields from its own settings (the Manager's flags, a config file) finds
// them with Split and names its own setting instead of the Go field: the
// limit itself is declared once, beside the Spec it bounds. It also holds
// the one size rule of every size setting (ParseSize, size.go), so that
// the Manager and orbitkv-bench read and refuse "4G" alike.
//
// The package owns no state: its errors are plain values, safe to share
// between goroutines, and it imports only the standard library, so every
// Spec, at any layer, may return them.
package limit
