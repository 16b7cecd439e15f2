package ssd

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// progressLog records Spec.Progress calls; safe from the I/O workers.
type progressLog struct {
	mu    sync.Mutex
	calls []string
}

func (p *progressLog) record(step string, done, total uint64, unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := UnitBytes
	if step == StepVerify {
		want = UnitBlocks
	}
	if unit != want {
		p.calls = append(p.calls, fmt.Sprintf("%s in %s, want %s", step, unit, want))
		return
	}
	p.calls = append(p.calls, fmt.Sprintf("%s %d/%d", step, done, total))
}

func (p *progressLog) of(step string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if len(c) > len(step) && c[:len(step)] == step {
			out = append(out, c[len(step)+1:])
		}
	}
	return out
}

// Open reports each long step through Spec.Progress: the data file's
// preallocation (bytes), the index replay (bytes of the log) and the
// verification of recovered blocks (one call per block), each from 0 to
// its total, in that order.
func TestOpenReportsItsProgress(t *testing.T) {
	dir := directDir(t)
	spec := testSpec(dir, 16)
	var first progressLog
	spec.Progress = first.record
	st := mustOpen(t, spec)
	file := uint64(spec.Slots()) * (HeaderBytes + spec.SlotBytes)
	if got, want := first.of(StepPreallocate), []string{fmt.Sprintf("0/%d", file), fmt.Sprintf("%d/%d", file, file)}; !slices.Equal(got, want) {
		t.Errorf("a new store's preallocation progress = %q, want %q", got, want)
	}
	if got := first.of(StepReplay); len(got) != 0 {
		t.Errorf("a new store (a new MAC key: nothing to replay) reported replay progress %q", got)
	}
	if got, want := first.of(StepVerify), []string{"0/0"}; !slices.Equal(got, want) {
		t.Errorf("a new store's verification progress = %q, want %q (nothing to verify)", got, want)
	}
	for i := range 5 {
		if err := writeBlock(t, st, key(7, uint64(i)), Meta{Bytes: 4096, Layers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	var second progressLog
	spec.Progress = second.record
	spec.VerifyOnOpen = 4 // of the 5 blocks
	st = mustOpen(t, spec)
	defer st.Close()
	index := uint64(6 * RecordBytes) // the header record and one per block
	if got, want := second.of(StepReplay), []string{fmt.Sprintf("0/%d", index), fmt.Sprintf("%d/%d", index, index)}; !slices.Equal(got, want) {
		t.Errorf("the reopen's replay progress = %q, want %q", got, want)
	}
	if got, want := second.of(StepVerify), []string{"0/4", "1/4", "2/4", "3/4", "4/4"}; !slices.Equal(got, want) {
		t.Errorf("the reopen's verification progress = %q, want %q", got, want)
	}
	steps := []string{}
	second.mu.Lock()
	for _, c := range second.calls {
		for _, s := range []string{StepPreallocate, StepReplay, StepVerify} {
			if len(c) > len(s) && c[:len(s)] == s && (len(steps) == 0 || steps[len(steps)-1] != s) {
				steps = append(steps, s)
			}
		}
	}
	second.mu.Unlock()
	if want := []string{StepPreallocate, StepReplay, StepVerify}; !slices.Equal(steps, want) {
		t.Errorf("steps reported in the order %q, want %q", steps, want)
	}
	if s := st.Stats(); s.Recovered != 5 {
		t.Errorf("Recovered = %d after the reopen, want 5", s.Recovered)
	}
}

// A data file larger than PreallocateStep is preallocated in steps, each
// reported.
func TestPreallocationIsReportedPerStep(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2.5 GiB of disk (sparse where the filesystem cannot preallocate)")
	}
	dir := directDir(t)
	const slotBytes = 1 << 20
	spec := Spec{Dir: dir, SlotBytes: slotBytes, VerifyOnOpen: -1}
	spec.CapacityBytes = 2560 * (HeaderBytes + slotBytes) // 2.5 GiB and 10 MiB of headers
	var p progressLog
	spec.Progress = p.record
	st, err := Open(spec, nil)
	if err != nil {
		t.Skipf("no room for a 2.5 GiB data file here: %v", err)
	}
	defer st.Close()
	file := uint64(spec.Slots()) * (HeaderBytes + slotBytes)
	want := []string{fmt.Sprintf("0/%d", file), fmt.Sprintf("%d/%d", uint64(PreallocateStep), file),
		fmt.Sprintf("%d/%d", uint64(2*PreallocateStep), file), fmt.Sprintf("%d/%d", file, file)}
	if got := p.of(StepPreallocate); !slices.Equal(got, want) {
		t.Errorf("preallocation progress = %q, want %q", got, want)
	}
}
