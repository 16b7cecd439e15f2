// Package ratelog bounds how many log lines a source of refusals may
// write: a Limiter admits at most Burst lines per window of Every and
// counts the rest, so that the next line admitted can report them. A
// flood of bad requests or connections (thousands a second) thus costs a
// few lines a second, and none goes uncounted.
//
// It owns no logger and no message: callers log the line themselves when
// Allow admits it, with their own message and fields (the count of lines
// suppressed meanwhile among them). It imports only the standard library;
// any package of the Manager may import it.
//
// golang.org/x/time/rate is not used: its token bucket of burst B and rate
// B a second admits up to 2B lines in one second (a full bucket, then its
// refill), where callers document "at most B a second", and it keeps no
// count of what it refused.
package ratelog
