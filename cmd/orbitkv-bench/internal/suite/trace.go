package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultTrace is the main job's trace, relative to the repository root.
const DefaultTrace = "bench/traces/mooncake-conversation.jsonl.gz"

// FindTrace returns --trace, else the default trace found from this
// binary's directory (bin/../bench/traces/…), else from the working
// directory. A missing file is an error naming every path tried.
func FindTrace(flagValue string) (string, error) {
	if flagValue != "" {
		if _, err := os.Stat(flagValue); err != nil {
			return "", fmt.Errorf("--trace %s: %w", flagValue, err)
		}
		return flagValue, nil
	}
	var tried []string
	if self, err := os.Executable(); err == nil {
		tried = append(tried, filepath.Join(filepath.Dir(self), "..", DefaultTrace))
	}
	tried = append(tried, DefaultTrace)
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(p), nil
		}
	}
	return "", fmt.Errorf("no trace file (tried %s); pass --trace FILE", strings.Join(tried, ", "))
}

// ElapsedSeconds is d in seconds, rounded to the microsecond.
func ElapsedSeconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }
