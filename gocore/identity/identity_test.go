package identity

import (
	"errors"
	"strings"
	"testing"
)

// llama and minimal are the golden vectors shared with native/tests/test_identity.c
// (libcrypto) and the Python package.
var (
	llama = Spec{
		ModelID:         "meta-llama/Llama-3.1-8B",
		WeightsRevision: "0e9e39f249a16976918f6564b8830bc894c89659",
		Dtype:           "bfloat16",
		KVLayout:        "vllm-nhd",
		BlockTokens:     16,
		TPRank:          1, TPSize: 4,
		PPRank: 0, PPSize: 1,
		CPRank: 0, CPSize: 1,
		TenantSalt: "tenant-a",
	}
	minimal = Spec{BlockTokens: 1, TPSize: 1, PPSize: 1, CPSize: 1}
)

func TestFingerprintGoldenVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"a Llama TP rank has a fixed fingerprint", llama, "c00c255d5e3eb3aff4f0fa62741ddf8c"},
		{"the smallest valid spec has a fixed fingerprint", minimal, "4a75a77c97e6b18c1fae6b3ea4379d3a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := tc.spec.Fingerprint()
			if err != nil {
				t.Fatal(err)
			}
			if got := ns.String(); got != tc.want {
				t.Errorf("fingerprint %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFingerprintSeparatesFields(t *testing.T) {
	base, err := llama.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	shifted := llama
	shifted.Dtype, shifted.KVLayout = "bfloat1", "6vllm-nhd"
	moved := llama
	moved.AdapterID, moved.TenantSalt = "tenant-a", ""
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"moving a byte between adjacent strings changes it", shifted},
		{"moving a value between string fields changes it", moved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := tc.spec.Fingerprint()
			if err != nil {
				t.Fatal(err)
			}
			if ns == base {
				t.Errorf("fingerprint %s equals the base spec's", ns)
			}
		})
	}
}

func TestValidateNamesTheFieldAndLimit(t *testing.T) {
	long := strings.Repeat("x", MaxStringBytes+1)
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
		want   string // "" = valid
	}{
		{"a 1024-byte string is accepted", func(s *Spec) { s.TenantSalt = long[:MaxStringBytes] }, ""},
		{"a 1025-byte model id is refused", func(s *Spec) { s.ModelID = long }, "ModelID is 1025 bytes, limit 1024"},
		{"a 1025-byte tenant salt is refused", func(s *Spec) { s.TenantSalt = long }, "TenantSalt is 1025 bytes"},
		{"a NUL byte is refused", func(s *Spec) { s.Dtype = "bf\x0016" }, "Dtype has a NUL byte at offset 2"},
		{"zero block tokens are refused", func(s *Spec) { s.BlockTokens = 0 }, "BlockTokens is 0"},
		{"a zero TP size is refused", func(s *Spec) { s.TPSize, s.TPRank = 0, 0 }, "TPSize is 0"},
		{"a TP rank equal to the size is refused", func(s *Spec) { s.TPRank = 4 }, "TPRank 4, want below TPSize 4"},
		{"a zero PP size is refused", func(s *Spec) { s.PPSize = 0 }, "PPSize is 0"},
		{"a PP rank beyond the size is refused", func(s *Spec) { s.PPRank = 3 }, "PPRank 3"},
		{"a zero CP size is refused", func(s *Spec) { s.CPSize = 0 }, "CPSize is 0"},
		{"a CP rank equal to the size is refused", func(s *Spec) { s.CPRank = 1 }, "CPRank 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llama
			tc.mutate(&s)
			err := s.Validate()
			_, ferr := s.Fingerprint()
			if tc.want == "" {
				if err != nil || ferr != nil {
					t.Fatalf("Validate: %v, Fingerprint: %v", err, ferr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidSpec) || !errors.Is(ferr, ErrInvalidSpec) {
				t.Errorf("errors do not wrap ErrInvalidSpec: %v / %v", err, ferr)
			}
		})
	}
}
