package identity

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Namespace is the 16-byte fingerprint of a Spec (see the package doc for
// the encoding): the wire type abi.Namespace (struct okv_namespace), whose
// String is 32 lowercase hex digits. The zero Namespace is never the
// fingerprint of a valid Spec in practice and the Manager refuses it.
type Namespace = abi.Namespace

// MaxStringBytes is the largest string field of a Spec, in bytes.
const MaxStringBytes = 1024

// domainTag starts the hashed bytes (package doc, offset 0).
const domainTag = "orbitkv.namespace.v1"

// ErrInvalidSpec is wrapped by every error of Validate.
var ErrInvalidSpec = errors.New("identity: invalid namespace spec")

// Spec is the cache identity of an engine's KV blocks: a plain value,
// validated without side effects. Field order is the encoding order.
type Spec struct {
	ModelID         string // e.g. "meta-llama/Llama-3.1-8B"
	WeightsRevision string // commit or checksum of the weights
	Dtype           string // KV dtype: "bfloat16", "fp8_e4m3"
	KVLayout        string // engine layout name, e.g. "vllm-nhd"
	BlockTokens     uint32 // tokens per block, ≥ 1
	TPRank, TPSize  uint32 // tensor parallel; size ≥ 1, rank < size
	PPRank, PPSize  uint32 // pipeline parallel
	CPRank, CPSize  uint32 // context parallel
	AdapterID       string // LoRA/adapter id; "" = none
	TenantSalt      string // isolates tenants sharing a model
}

// Validate checks the limits of the encoding: strings of at most
// MaxStringBytes bytes without NUL, BlockTokens ≥ 1, every size ≥ 1 and
// every rank below its size. The error wraps ErrInvalidSpec and names the
// field and the limit.
func (s Spec) Validate() error {
	for _, f := range s.stringFields() {
		if len(f.v) > MaxStringBytes {
			return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidSpec, f.name, len(f.v), MaxStringBytes)
		}
		if i := strings.IndexByte(f.v, 0); i >= 0 {
			return fmt.Errorf("%w: %s has a NUL byte at offset %d; C strings cannot carry it", ErrInvalidSpec, f.name, i)
		}
	}
	if s.BlockTokens == 0 {
		return fmt.Errorf("%w: BlockTokens is 0, want ≥ 1", ErrInvalidSpec)
	}
	for _, p := range []struct {
		name       string
		rank, size uint32
	}{{"TP", s.TPRank, s.TPSize}, {"PP", s.PPRank, s.PPSize}, {"CP", s.CPRank, s.CPSize}} {
		if p.size == 0 {
			return fmt.Errorf("%w: %sSize is 0, want ≥ 1", ErrInvalidSpec, p.name)
		}
		if p.rank >= p.size {
			return fmt.Errorf("%w: %sRank %d, want below %sSize %d", ErrInvalidSpec, p.name, p.rank, p.name, p.size)
		}
	}
	return nil
}

type namedString struct{ name, v string }

func (s Spec) stringFields() [6]namedString {
	return [6]namedString{
		{"ModelID", s.ModelID}, {"WeightsRevision", s.WeightsRevision}, {"Dtype", s.Dtype},
		{"KVLayout", s.KVLayout}, {"AdapterID", s.AdapterID}, {"TenantSalt", s.TenantSalt},
	}
}

// Fingerprint validates s and returns its Namespace: the first 16 bytes of
// SHA-256 over the encoding in the package doc. Deterministic across
// processes, hosts and languages. Errors: those of Validate.
func (s Spec) Fingerprint() (Namespace, error) {
	if err := s.Validate(); err != nil {
		return Namespace{}, err
	}
	h := sha256.New()
	var b [8]byte
	putString := func(v string) {
		binary.LittleEndian.PutUint32(b[:4], uint32(len(v)))
		h.Write(b[:4])
		h.Write([]byte(v))
	}
	putInt := func(v uint32) {
		binary.LittleEndian.PutUint32(b[:4], 4)
		binary.LittleEndian.PutUint32(b[4:], v)
		h.Write(b[:8])
	}
	h.Write([]byte(domainTag))
	putString(s.ModelID)
	putString(s.WeightsRevision)
	putString(s.Dtype)
	putString(s.KVLayout)
	for _, v := range []uint32{s.BlockTokens, s.TPRank, s.TPSize, s.PPRank, s.PPSize, s.CPRank, s.CPSize} {
		putInt(v)
	}
	putString(s.AdapterID)
	putString(s.TenantSalt)
	var n Namespace
	copy(n[:], h.Sum(nil))
	return n, nil
}
