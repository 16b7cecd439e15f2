package suite

import (
	"os"
)

// PlotFlag adds --plot DIR to a suite that draws plots; the directory
// lands in the suiteCommon and parse checks that it can be written.
func (f *Flags) PlotFlag(what string) {
	f.StringVar(&f.common.PlotDir, "plot", "", "write PNG plots ("+what+") into `dir`, made if missing")
}

// checkPlotDir makes dir (--plot) if it is missing and proves a file can be
// created in it, so a long run does not end in a directory it cannot
// write. "" (no --plot) is accepted. Errors are *UsageError naming --plot.
func checkPlotDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Usagef("--plot %s: cannot make the directory: %v", dir, err)
	}
	f, err := os.CreateTemp(dir, ".orbitkv-bench-plot-*")
	if err != nil {
		return Usagef("--plot %s: the directory is not writable: %v", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
