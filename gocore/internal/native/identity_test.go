//go:build cgo

package native

import (
	"errors"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/identity"
)

// specs are the cases both implementations must hash alike.
var specs = []NamespaceSpec{
	{ModelID: "meta-llama/Llama-3.1-8B", WeightsRevision: "0e9e39f249a16976918f6564b8830bc894c89659",
		Dtype: "bfloat16", KVLayout: "vllm-nhd", BlockTokens: 16, TPRank: 1, TPSize: 4, PPSize: 1, CPSize: 1,
		TenantSalt: "tenant-a"},
	{BlockTokens: 1, TPSize: 1, PPSize: 1, CPSize: 1},
	{ModelID: "Qwen/Qwen2.5-72B-Instruct", WeightsRevision: "sha256:abc", Dtype: "fp8_e4m3", KVLayout: "sglang-hnd",
		BlockTokens: 64, TPRank: 7, TPSize: 8, PPRank: 1, PPSize: 2, CPRank: 3, CPSize: 4,
		AdapterID: "lora/sql-v3", TenantSalt: "ünïcødé salt"},
	{ModelID: "x", BlockTokens: 0xFFFFFFFF, TPRank: 0xFFFFFFFE, TPSize: 0xFFFFFFFF,
		PPSize: 1, CPSize: 1, TenantSalt: longString(identity.MaxStringBytes)},
}

func longString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return string(b)
}

func goSpec(s NamespaceSpec) identity.Spec {
	return identity.Spec{ModelID: s.ModelID, WeightsRevision: s.WeightsRevision, Dtype: s.Dtype,
		KVLayout: s.KVLayout, BlockTokens: s.BlockTokens, TPRank: s.TPRank, TPSize: s.TPSize,
		PPRank: s.PPRank, PPSize: s.PPSize, CPRank: s.CPRank, CPSize: s.CPSize,
		AdapterID: s.AdapterID, TenantSalt: s.TenantSalt}
}

// both returns the C and Go fingerprints of s, failing on an error.
func both(t *testing.T, s NamespaceSpec) (Namespace, identity.Namespace) {
	t.Helper()
	c, err := Fingerprint(s)
	if err != nil {
		t.Fatalf("C fingerprint: %v", err)
	}
	g, err := goSpec(s).Fingerprint()
	if err != nil {
		t.Fatalf("Go fingerprint: %v", err)
	}
	return c, g
}

func TestCAndGoFingerprintsAgree(t *testing.T) {
	for i, s := range specs {
		c, g := both(t, s)
		if c != Namespace(g) {
			t.Errorf("spec %d: C %x, Go %x", i, c, g)
		}
	}
}

func TestEveryFieldChangesTheFingerprint(t *testing.T) {
	base := specs[2]
	c0, g0 := both(t, base)
	for _, tc := range []struct {
		name   string
		mutate func(*NamespaceSpec)
	}{
		{"model id", func(s *NamespaceSpec) { s.ModelID += "!" }},
		{"weights revision", func(s *NamespaceSpec) { s.WeightsRevision = "sha256:abd" }},
		{"dtype", func(s *NamespaceSpec) { s.Dtype = "bfloat16" }},
		{"kv layout", func(s *NamespaceSpec) { s.KVLayout = "sglang-nhd" }},
		{"block tokens", func(s *NamespaceSpec) { s.BlockTokens = 32 }},
		{"tp rank", func(s *NamespaceSpec) { s.TPRank = 6 }},
		{"tp size", func(s *NamespaceSpec) { s.TPSize = 16 }},
		{"pp rank", func(s *NamespaceSpec) { s.PPRank = 0 }},
		{"pp size", func(s *NamespaceSpec) { s.PPSize = 3 }},
		{"cp rank", func(s *NamespaceSpec) { s.CPRank = 2 }},
		{"cp size", func(s *NamespaceSpec) { s.CPSize = 5 }},
		{"adapter id", func(s *NamespaceSpec) { s.AdapterID = "" }},
		{"tenant salt", func(s *NamespaceSpec) { s.TenantSalt = "tenant-b" }},
	} {
		t.Run("changing the "+tc.name+" changes C and Go alike", func(t *testing.T) {
			s := base
			tc.mutate(&s)
			c, g := both(t, s)
			if c == c0 || Namespace(g) == Namespace(g0) {
				t.Errorf("fingerprint unchanged: C %x, Go %x", c, g)
			}
			if c != Namespace(g) {
				t.Errorf("C %x, Go %x", c, g)
			}
		})
	}
}

func TestCAndGoRefuseTheSameSpecs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*NamespaceSpec)
	}{
		{"zero block tokens", func(s *NamespaceSpec) { s.BlockTokens = 0 }},
		{"a rank equal to its size", func(s *NamespaceSpec) { s.CPRank = s.CPSize }},
		{"a zero size", func(s *NamespaceSpec) { s.PPSize, s.PPRank = 0, 0 }},
		{"a 1025-byte string", func(s *NamespaceSpec) { s.KVLayout = longString(1025) }},
		{"a NUL byte", func(s *NamespaceSpec) { s.AdapterID = "a\x00b" }},
	} {
		t.Run(tc.name+" is refused by both", func(t *testing.T) {
			s := specs[2]
			tc.mutate(&s)
			if _, err := Fingerprint(s); err == nil {
				t.Error("C accepted it")
			}
			if _, err := goSpec(s).Fingerprint(); !errors.Is(err, identity.ErrInvalidSpec) {
				t.Errorf("Go: %v, want ErrInvalidSpec", err)
			}
		})
	}
}
