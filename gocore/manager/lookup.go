package manager

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tenant"
)

// LookupPath is the HTTP lookup's path (POST).
const LookupPath = "/v1/lookup"

// Bounds of POST /v1/lookup's request (the HTTP port is loopback only, but
// any local process reaches it).
const (
	// LookupMaxBodyBytes bounds the request body: 4 MiB.
	LookupMaxBodyBytes = 4 << 20
	// LookupMaxHashes bounds "block_hashes".
	LookupMaxHashes = 1 << 16
	// LookupMaxTokens bounds "token_ids" (the body's bound is met first
	// by any JSON of this many numbers: it exists for decoders of other
	// bodies, the gRPC Lookup's among them).
	LookupMaxTokens = 16 << 20
)

// lookupQuery is a checked POST /v1/lookup request: a chain of engine
// block hashes, or token ids cut into blocks of BlockSize, in namespace NS
// as the Manager keys it (nil: any namespace).
type lookupQuery struct {
	NS        *abi.Namespace
	Hashes    []uint64 // nil for a token lookup
	Tokens    []uint32 // nil for a hash lookup
	BlockSize int      // 1..abi.RecordMaxTokens with Tokens, else 0
	Nodes     bool     // also ask every live peer of the cluster
}

// blocks is how many blocks the chain has: every hash, or the whole
// blocks of Tokens (a trailing partial block is not looked up).
func (q *lookupQuery) blocks() int {
	if q.Tokens != nil {
		return len(q.Tokens) / q.BlockSize
	}
	return len(q.Hashes)
}

// lookupError is a refused request: the JSON field at fault and what it
// wants; answered 400 {"error": "FIELD: WANT"}.
type lookupError struct{ field, want string }

func (e *lookupError) Error() string { return e.field + ": " + e.want }

func refuse(field, format string, args ...any) error {
	return &lookupError{field, fmt.Sprintf(format, args...)}
}

// lookupBody is the JSON body of POST /v1/lookup; unknown fields are
// refused. Pointers tell an absent field from a zero one.
type lookupBody struct {
	Namespace   *string  `json:"namespace"`
	BlockHashes []uint64 `json:"block_hashes"`
	TokenIDs    []uint32 `json:"token_ids"`
	BlockSize   *int     `json:"block_size"`
	Nodes       bool     `json:"nodes"`
}

// decodeLookup checks a POST /v1/lookup body (at most LookupMaxBodyBytes,
// the caller's bound) against its limits. Errors are *lookupError naming
// the field and the limit:
//
//   - body: one JSON object, nothing after it, no field but those below;
//   - namespace: exactly 32 hex digits, not all zero (optional: absent
//     matches any namespace): the namespace as the engine sends it;
//   - block_hashes: at most LookupMaxHashes unsigned 64-bit integers;
//   - token_ids: at most LookupMaxTokens unsigned 32-bit integers, with
//     block_size 1..abi.RecordMaxTokens;
//   - exactly one of block_hashes and token_ids.
func decodeLookup(body []byte) (lookupQuery, error) {
	var b lookupBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return lookupQuery{}, jsonRefusal(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return lookupQuery{}, refuse("body", "one JSON object and nothing after it")
	}
	q := lookupQuery{Nodes: b.Nodes}
	switch {
	case b.BlockHashes != nil && b.TokenIDs != nil:
		return q, refuse("block_hashes", "give block_hashes or token_ids, not both")
	case b.BlockHashes == nil && b.TokenIDs == nil:
		return q, refuse("block_hashes", "give block_hashes (engine block hashes) or token_ids with block_size")
	case b.BlockHashes != nil:
		if len(b.BlockHashes) > LookupMaxHashes {
			return q, refuse("block_hashes", "%d hashes; at most %d", len(b.BlockHashes), LookupMaxHashes)
		}
		if b.BlockSize != nil {
			return q, refuse("block_size", "only with token_ids")
		}
		q.Hashes = b.BlockHashes
	default:
		if len(b.TokenIDs) > LookupMaxTokens {
			return q, refuse("token_ids", "%d tokens; at most %d", len(b.TokenIDs), LookupMaxTokens)
		}
		if b.BlockSize == nil {
			return q, refuse("block_size", "needed with token_ids: tokens per block, 1..%d", abi.RecordMaxTokens)
		}
		if *b.BlockSize < 1 || *b.BlockSize > abi.RecordMaxTokens {
			return q, refuse("block_size", "%d; want 1..%d (OKV_RECORD_MAX_TOKENS)", *b.BlockSize, abi.RecordMaxTokens)
		}
		q.Tokens, q.BlockSize = b.TokenIDs, *b.BlockSize
	}
	if b.Namespace == nil {
		return q, nil
	}
	ns, err := parseLookupNamespace(*b.Namespace)
	if err != nil {
		return q, err
	}
	q.NS = &ns
	return q, nil
}

// parseLookupNamespace reads "namespace": 32 hex digits, not all zero.
func parseLookupNamespace(s string) (abi.Namespace, error) {
	var ns abi.Namespace
	if len(s) != 2*len(ns) {
		return ns, refuse("namespace", "%d characters; want exactly 32 hex digits", len(s))
	}
	if _, err := hex.Decode(ns[:], []byte(s)); err != nil {
		return ns, refuse("namespace", "not hex (%v); want exactly 32 hex digits", err)
	}
	if ns == (abi.Namespace{}) {
		return ns, refuse("namespace", "all zero, which no engine may use; omit namespace to match any")
	}
	return ns, nil
}

// jsonRefusal names the field of a JSON decoding error.
func jsonRefusal(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return refuse(field, "a JSON %s does not fit %s", te.Value, te.Type)
	case errors.As(err, &se):
		return refuse("body", "malformed JSON at byte %d: %v", se.Offset, se)
	case err == io.EOF:
		return refuse("body", "empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return refuse("body", "truncated JSON object")
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return refuse(strings.Trim(f, `"`), "unknown field; want namespace, block_hashes, token_ids, block_size, nodes")
	}
	return refuse("body", "%v", err)
}

// lookupReply is POST /v1/lookup's answer: the blocks asked and how many
// leading ones this node holds in RAM ("cpu"), on SSD ("storage") and on
// either ("any"); with "nodes", each live peer's answer.
type lookupReply struct {
	Blocks int `json:"blocks"`
	kvevents.Held
	Nodes []nodeHeld `json:"nodes,omitzero"` // nil unless asked: [] outside a cluster
}

// nodeHeld is one peer's answer to a lookup: its node id and its Held, or
// the error that kept it from answering.
type nodeHeld struct {
	Node string `json:"node"`
	*kvevents.Held
	Error string `json:"error,omitempty"`
}

// lookupCounts are POST /v1/lookup's requests by how they were answered
// (orbitkv_kv_lookup_requests_total).
type lookupCounts struct {
	OK, Invalid, Off atomic.Uint64
}

// lookups answers POST /v1/lookup from the events' Tracker (nil: the
// events are off) without a lease: the answer is a hint, true when made.
type lookups struct {
	events  *kvevents.Tracker
	tenants *tenant.Set
	// peers, when set (a node of a cluster), asks every live peer the
	// same chain; nil answers "nodes" with an empty list.
	peers  func(ctx context.Context, q *lookupQuery) []nodeHeld
	counts *lookupCounts
}

// serveHTTP answers POST /v1/lookup: 403 with tenants configured; 200
// with lookupReply; 400 with
// {"error": "FIELD: WANT"} for a refused request (decodeLookup, or a body
// over LookupMaxBodyBytes); 409 with {"error": ...} while the events are
// off (--kv-events): block records exist only while they are published.
func (l *lookups) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fail := func(code int, err error) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, LookupMaxBodyBytes))
	if err != nil {
		l.counts.Invalid.Add(1)
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			err = refuse("body", "over %d bytes", LookupMaxBodyBytes)
		} else {
			err = refuse("body", "read: %v", err)
		}
		fail(http.StatusBadRequest, err)
		return
	}
	if l.tenants != nil {
		// The HTTP listener is not authenticated (any local process reaches
		// it), and an answer would tell whether another tenant holds a
		// prompt's blocks.
		l.counts.Invalid.Add(1)
		fail(http.StatusForbidden, errors.New("this Manager has tenants (--tenant): lookups on the unauthenticated HTTP listener would show one tenant another's cache; a tenant reads its own event stream (docs/events.md)"))
		return
	}
	if l.events == nil {
		l.counts.Off.Add(1)
		fail(http.StatusConflict, errors.New("kv events are off (--kv-events): the Manager keeps block records only while it publishes events"))
		return
	}
	q, err := decodeLookup(body)
	if err != nil {
		l.counts.Invalid.Add(1)
		fail(http.StatusBadRequest, err)
		return
	}
	rep := lookupReply{Blocks: q.blocks(), Held: l.held(&q)}
	if q.Nodes {
		rep.Nodes = []nodeHeld{}
		if l.peers != nil {
			rep.Nodes = l.peers(r.Context(), &q)
		}
	}
	l.counts.OK.Add(1)
	json.NewEncoder(w).Encode(rep)
}

// held is this node's answer to q.
func (l *lookups) held(q *lookupQuery) kvevents.Held {
	if q.Tokens != nil {
		return l.events.LookupTokens(q.NS, q.Tokens, q.BlockSize)
	}
	return l.events.LookupHashes(q.NS, q.Hashes)
}
