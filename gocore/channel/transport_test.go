package channel

import (
	"regexp"
	"strings"
	"testing"
)

func TestTransportFlagValuesRoundTrip(t *testing.T) {
	for _, tr := range []Transport{TransportShm, TransportIceoryx2} {
		t.Run(tr.String()+" parses back to itself", func(t *testing.T) {
			got, err := ParseTransport(tr.String())
			if err != nil || got != tr {
				t.Errorf("ParseTransport(%q) = %v, %v", tr.String(), got, err)
			}
		})
	}
	t.Run("an unknown transport is refused naming both", func(t *testing.T) {
		if _, err := ParseTransport("zmq"); err == nil || !strings.Contains(err.Error(), "shm or iceoryx2") {
			t.Errorf("ParseTransport(zmq) = %v", err)
		}
	})
}

func TestSpecValidatesTheTransportAndItsServicePrefix(t *testing.T) {
	base := Spec{Epoch: 1, MaxSessions: 4}
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string // "" = valid
	}{
		{"shm is valid", func(*Spec) {}, ""},
		{"a prefix is ignored on shm", func(s *Spec) { s.ServicePrefix = "a b" }, ""},
		{"an unknown transport is refused", func(s *Spec) { s.Transport = 7 }, "channel.Transport"},
		{"a prefix with a space is refused", func(s *Spec) { s.Transport, s.ServicePrefix = TransportIceoryx2, "a b" }, iox2Or("channel.ServicePrefix")},
		{"a prefix over the limit is refused", func(s *Spec) {
			s.Transport, s.ServicePrefix = TransportIceoryx2, strings.Repeat("p", MaxServicePrefix+1)
		}, iox2Or("1..190 bytes")},
		{"a prefix at the limit is valid", func(s *Spec) {
			s.Transport, s.ServicePrefix = TransportIceoryx2, strings.Repeat("p", MaxServicePrefix)
		}, iox2Or("")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.mutate(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want ok", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// iox2Or is want where the build has the iceoryx2 transport, else the
// refusal of TransportIceoryx2.
func iox2Or(want string) string {
	if Iceoryx2Built {
		return want
	}
	return "channel.Transport"
}

func TestServiceNamesCarryPrefixEpochAndAFreshToken(t *testing.T) {
	re := regexp.MustCompile(`^orbitkv/00000000000000ab/[0-9a-f]{32}$`)
	a, b := serviceName("orbitkv", 0xab), serviceName("orbitkv", 0xab)
	for _, n := range []string{a, b} {
		if !re.MatchString(n) {
			t.Errorf("service name %q does not read PREFIX/EPOCH/TOKEN", n)
		}
	}
	if a == b {
		t.Errorf("two sessions got the same service name %q", a)
	}
	if long := serviceName(strings.Repeat("p", MaxServicePrefix), 1); len(long) != 240 {
		t.Errorf("a name of the longest prefix is %d bytes, want exactly the reply's limit 240", len(long))
	}
}
