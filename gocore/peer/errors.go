package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The errors of peer control. Server and client translate them to and from
// gRPC codes through codeTable only; each is wrapped with what went wrong.
var (
	// ErrInvalidRequest is a request field outside its limit; the message
	// names the field and the limit.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnauthenticated is a call without a verified client certificate
	// naming a node id.
	ErrUnauthenticated = errors.New("peer not authenticated")
	// ErrEpochMismatch is an OpenTransfer whose expect_epoch is not the
	// source's epoch (the source restarted, or the catalog is stale).
	ErrEpochMismatch = errors.New("epoch mismatch")
	// ErrPeerLimit is an OpenTransfer of a peer that holds its most
	// transfers (ServerSpec.MaxPeerTransfers) or bytes (MaxPeerBytes).
	ErrPeerLimit = errors.New("peer limit reached")
	// ErrUnknownTransfer is a ReleaseTransfer of a transfer that is not open
	// for the calling peer (released, expired, dropped with its
	// connection, or opened by another peer).
	ErrUnknownTransfer = errors.New("unknown transfer")
	// ErrUnavailable is a source that cannot serve now: it is closing, its
	// Source or transfer server refused, or there is no connection.
	ErrUnavailable = errors.New("peer unavailable")
	// ErrSourceBroken is a Source that broke its contract (a run that is
	// not a prefix of the hashes, chunks that do not add up to a block's
	// length, more than maxBytes). The source logs it.
	ErrSourceBroken = errors.New("source broke its contract")
	// ErrBadReply is a reply the client refuses (client side only): a field
	// that does not fit the request, named in the message.
	ErrBadReply = errors.New("bad reply from peer")
)

// codeTable is the one mapping between this package's errors and gRPC
// codes, in both directions (doc.go lists it). The first entry whose error
// matches wins on the server; the first entry with the code wins on the
// client.
var codeTable = []struct {
	err  error
	code codes.Code
}{
	{ErrInvalidRequest, codes.InvalidArgument},
	{ErrUnauthenticated, codes.Unauthenticated},
	{ErrEpochMismatch, codes.FailedPrecondition},
	{ErrPeerLimit, codes.ResourceExhausted},
	{ErrUnknownTransfer, codes.NotFound},
	{ErrUnavailable, codes.Unavailable},
	{ErrSourceBroken, codes.Internal},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// toStatus is err as a gRPC status error (server side): its code from
// codeTable, Internal when none matches; the message is err's text.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// fromStatus is a gRPC error as this package's error (client side): the
// codeTable error of its code wrapped with the status message; a code
// outside the table keeps the status error as it is.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, e := range codeTable {
		if e.code == st.Code() {
			// The server's message starts with the same error's text.
			msg := st.Message()
			if rest, ok := strings.CutPrefix(msg, e.err.Error()); ok {
				return fmt.Errorf("%w%s", e.err, rest)
			}
			return fmt.Errorf("%w: %s", e.err, msg)
		}
	}
	return err
}
