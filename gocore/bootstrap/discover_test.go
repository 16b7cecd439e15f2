package bootstrap

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

func TestDecodeMapDiscovery(t *testing.T) {
	good := make([]byte, 16)
	good[3] = 7
	tests := []struct {
		name      string
		body      []byte
		malformed bool
		nsErr     bool
	}{
		{name: "a 16-byte namespace decodes", body: mustMarshal(t, &lifecyclepb.MapDiscoveryRequest{ClientToken: 9, Namespace: good})},
		{name: "a 15-byte namespace is refused", body: mustMarshal(t, &lifecyclepb.MapDiscoveryRequest{Namespace: good[:15]}), nsErr: true},
		{name: "an all-zero namespace is refused", body: mustMarshal(t, &lifecyclepb.MapDiscoveryRequest{Namespace: make([]byte, 16)}), nsErr: true},
		{name: "an empty body has no namespace", body: nil, nsErr: true},
		{name: "bytes that are not protobuf are malformed", body: []byte{0xff, 0xff, 0xff}, malformed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, token, err := decodeMapDiscovery(tt.body)
			var nerr *nsError
			switch {
			case tt.malformed:
				if !errors.Is(err, lifecycle.ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
			case tt.nsErr:
				if !errors.As(err, &nerr) {
					t.Fatalf("err = %v, want a namespace error", err)
				}
			default:
				if err != nil || ns[3] != 7 || token != 9 {
					t.Fatalf("decode = %x, %d, %v", ns, token, err)
				}
			}
		})
	}
}

// FuzzDecodeMapDiscovery: any body decodes to a valid namespace, a
// namespace error or ErrMalformed, never a panic; a valid namespace
// re-encodes to the same fields.
func FuzzDecodeMapDiscovery(f *testing.F) {
	f.Add([]byte{})
	f.Add(mustMarshalF(&lifecyclepb.MapDiscoveryRequest{ClientToken: 1, Namespace: []byte("0123456789abcdef")}))
	f.Add([]byte{0x12, 0x10})
	f.Fuzz(func(t *testing.T, body []byte) {
		ns, token, err := decodeMapDiscovery(body)
		var nerr *nsError
		if err != nil {
			if !errors.Is(err, lifecycle.ErrMalformed) && !errors.As(err, &nerr) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		again := mustMarshalF(&lifecyclepb.MapDiscoveryRequest{ClientToken: token, Namespace: ns[:]})
		ns2, token2, err := decodeMapDiscovery(again)
		if err != nil || ns2 != ns || token2 != token {
			t.Fatalf("round trip: %x %d %v", ns2, token2, err)
		}
	})
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustMarshalF(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
