package operator

import (
	"errors"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// checkServer trusts the client's own uid, root, the Manager uid it is
// given and the vouched-for owner of the runtime directory, and refuses
// anyone else naming the path, the peer's pid and uid and the fix.
func TestCheckServerTrustsTheClientsRule(t *testing.T) {
	const me, other = 1000, 4242
	if unixsock.UIDIsOverflow(me) || unixsock.UIDIsOverflow(other) {
		t.Skip("a user namespace whose overflow uid is one of the test's")
	}
	peer := func(uid uint32) unixsock.Cred { return unixsock.Cred{PID: 77, UID: uid, GID: uid} }
	for _, tc := range []struct {
		name  string
		uid   uint32
		trust Trust
		ok    bool
		want  []string
	}{
		{"its own uid", me, NoTrust, true, nil},
		{"root", 0, NoTrust, true, nil},
		{"another uid", other, NoTrust, false, []string{"/s.operator", "pid 77, uid 4242", "its own uid 1000, root;", "--manager-uid 4242", "ORBITKV_MANAGER_UID=4242", "nothing was sent"}},
		{"the Manager uid", other, Trust{ManagerUID: other, VouchedUID: -1}, true, nil},
		{"another than the Manager uid", other, Trust{ManagerUID: 5, VouchedUID: -1}, false, []string{"the Manager uid 5", "--manager-uid 4242"}},
		{"the vouched-for owner", other, Trust{ManagerUID: -1, VouchedUID: other, RuntimeDir: "/run/orbitkv"}, true, nil},
		{"another than the vouched-for owner", other, Trust{ManagerUID: -1, VouchedUID: 9, RuntimeDir: "/run/orbitkv"}, false, []string{"for the default socket in /run/orbitkv, that directory's owner;"}},
		{"an owner not vouched for", other, Trust{ManagerUID: -1, VouchedUID: -1, RuntimeDir: "/run/orbitkv"}, false, []string{"(not vouched for"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkServer("/s.operator", peer(tc.uid), tc.trust, me)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrServerRefused) {
				t.Fatalf("err = %v, want ErrServerRefused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
