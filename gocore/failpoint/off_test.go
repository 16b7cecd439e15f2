//go:build !failpoints

package failpoint

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// An ordinary build serves none of the fault controls: every one of them
// answers 404, the device fault of the CUDA backend included, and nothing
// can be armed.
func TestAnOrdinaryBuildServesNoFaultControls(t *testing.T) {
	SetDeviceFault(func(string) error { t.Error("an ordinary build armed a device fault"); return nil })
	for _, path := range []string{
		"/debug/failpoints/cuda-device-fault?module=/etc/hostname",
		"/debug/failpoints/arm?name=copy-complete",
		"/debug/failpoints/drop-wakeups?on=1",
		"/debug/clock/advance?by=61s",
	} {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", path, rec.Code)
		}
	}
	if Enabled || Pause(CopyComplete, func() {}) || WakeupsDropped() {
		t.Error("an ordinary build reports failpoints enabled, a pause held, or wake-ups dropped")
	}
}
