//go:build cgo

package native

/*
#include <stdlib.h>
#include "orbitkv/client.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// Fingerprint computes the namespace of s with liborbitkv's
// okv_namespace_fingerprint (SHA-256 in libcrypto). gocore/identity computes
// the same bytes in Go; this wrapper exists so tests can prove the two agree
// and Go tools can use the C definition. Errors: *ClientError with
// CodeInvalid-style -EINVAL for a spec outside the limits of client.h, or an
// error for a string holding a NUL byte (C strings cannot carry it).
func Fingerprint(s NamespaceSpec) (Namespace, error) {
	var spec C.struct_okv_namespace_spec
	var toFree [6]unsafe.Pointer
	for i, f := range []struct {
		name string
		v    string
		dst  **C.char
	}{
		{"ModelID", s.ModelID, &spec.model_id}, {"WeightsRevision", s.WeightsRevision, &spec.weights_revision},
		{"Dtype", s.Dtype, &spec.dtype}, {"KVLayout", s.KVLayout, &spec.kv_layout},
		{"AdapterID", s.AdapterID, &spec.adapter_id}, {"TenantSalt", s.TenantSalt, &spec.tenant_salt},
	} {
		if j := strings.IndexByte(f.v, 0); j >= 0 {
			for _, p := range toFree[:i] {
				C.free(p)
			}
			return Namespace{}, fmt.Errorf("native: namespace %s has a NUL byte at offset %d", f.name, j)
		}
		p := C.CString(f.v)
		toFree[i] = unsafe.Pointer(p)
		*f.dst = p
	}
	defer func() {
		for _, p := range toFree {
			C.free(p)
		}
	}()
	spec.block_tokens = C.uint32_t(s.BlockTokens)
	spec.tp_rank, spec.tp_size = C.uint32_t(s.TPRank), C.uint32_t(s.TPSize)
	spec.pp_rank, spec.pp_size = C.uint32_t(s.PPRank), C.uint32_t(s.PPSize)
	spec.cp_rank, spec.cp_size = C.uint32_t(s.CPRank), C.uint32_t(s.CPSize)
	var out Namespace
	if rc := C.okv_namespace_fingerprint(&spec, (*C.struct_okv_namespace)(unsafe.Pointer(&out))); rc != 0 {
		return Namespace{}, newClientError(nil, rc)
	}
	return out, nil
}
