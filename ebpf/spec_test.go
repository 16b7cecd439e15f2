package ebpf

import (
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    Spec
		wantErr string // "" for none
	}{
		{"the zero Spec measures this process", Spec{}, ""},
		{"a process id is accepted", Spec{ManagerPID: 4242}, ""},
		{"a negative process id is refused naming the field", Spec{ManagerPID: -1}, "ebpf.ManagerPID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate: %v, want an error naming %s", err, tc.wantErr)
			}
		})
	}
}
