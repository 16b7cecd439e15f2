// Package compare is orbitkv-bench compare: two --json reports of one
// suite, figure by figure, with the ratio and whether each difference
// lies within the noise band of the repeats (ExitInvalid with --strict on
// a regression).
package compare
