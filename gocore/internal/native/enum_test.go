package native

import "testing"

func TestEnumsMatchC(t *testing.T) {
	for _, m := range EnumMismatches() {
		t.Error(m)
	}
}
