package suite

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
)

// progressMode is --progress: how a long suite (replay, policy, ssd)
// shows how far it got on stderr. Progress never goes to stdout, so a
// --json report there stays one JSON object.
type progressMode string

const (
	progressAuto  progressMode = "auto"  // bar when stderr is a terminal, else lines
	progressBar   progressMode = "bar"   // a bar redrawn in place, with the time left
	progressLines progressMode = "lines" // a plain line every progressEvery, and one at the end
	progressOff   progressMode = "off"
)

// ProgressFlag adds --progress (into common.progress) to a long suite.
func (f *Flags) ProgressFlag() {
	f.Var(&f.common.Progress, "progress", "how the run shows progress on stderr: auto (a bar on a terminal, else a line every 5 s), bar, lines or off")
}

// progressEvery is how often lines mode writes a line.
const progressEvery = 5 * time.Second

func (m *progressMode) String() string {
	if *m == "" {
		return string(progressAuto)
	}
	return string(*m)
}

// Type names the value in --help: one of the modes.
func (m *progressMode) Type() string { return "mode" }

func (m *progressMode) Set(v string) error {
	switch progressMode(v) {
	case progressAuto, progressBar, progressLines, progressOff:
		*m = progressMode(v)
		return nil
	}
	return fmt.Errorf("want auto, bar, lines or off, got %q", v)
}

// Progress is one long piece of work's count of done units out of total,
// shown on stderr as --progress says. add is safe for concurrent use; a
// nil *progress shows nothing, so loops call it unconditionally.
type Progress struct {
	name, unit string // "replay", "requests"
	total      int64
	Done       atomic.Int64
	out        io.Writer
	now        func() time.Time // time.Now; a test's clock
	start      time.Time

	mu   sync.Mutex // guards bar and last against the ticker
	bar  *progressbar.ProgressBar
	last time.Time // lines mode: when the last line was written

	stop chan struct{}
	wg   sync.WaitGroup
}

// StartProgress starts showing progress of total units (unit names them:
// "requests") of the work name, on stderr; mode is --progress. It returns
// nil for --progress off or nothing to count. Call finish when done.
func StartProgress(mode progressMode, stderr io.Writer, name, unit string, total int64) *Progress {
	if mode == "" || mode == progressAuto {
		mode = progressLines
		if isTerminal(stderr) {
			mode = progressBar
		}
	}
	if mode == progressOff || total <= 0 {
		return nil
	}
	p := NewProgress(stderr, name, unit, total, time.Now)
	if mode == progressBar {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription(name),
			progressbar.OptionSetItsString(unit), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }))
		return p
	}
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
	return p
}

// NewProgress is a progress in lines mode whose lines the caller (the
// ticker, or a test) asks for with tick; now is its clock.
func NewProgress(out io.Writer, name, unit string, total int64, now func() time.Time) *Progress {
	t := now()
	return &Progress{name: name, unit: unit, total: total, out: out, now: now, start: t, last: t}
}

// Add counts n more units done.
func (p *Progress) Add(n int64) {
	if p == nil {
		return
	}
	d := p.Done.Add(n)
	if p.bar != nil {
		p.mu.Lock()
		_ = p.bar.Set64(min(d, p.total))
		p.mu.Unlock()
	}
}

// tick writes a line when progressEvery passed since the last one.
func (p *Progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	fmt.Fprintln(p.out, p.line(now))
}

// line is "replay: 41% (4,950/12,031 requests), 3.1 s left": the time left
// is the time so far scaled by the units left over the units done.
func (p *Progress) line(now time.Time) string {
	done := min(p.Done.Load(), p.total)
	s := fmt.Sprintf("%s: %d%% (%s/%s %s)", p.name, done*100/p.total, humanize.Comma(done), humanize.Comma(p.total), p.unit)
	if done == 0 {
		return s + ", time left not known yet"
	}
	spent := now.Sub(p.start)
	left := time.Duration(float64(spent) * float64(p.total-done) / float64(done))
	return s + ", " + seconds(left) + " left"
}

// seconds writes d as "3.1 s" below a minute, else "2m05s".
func seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// Finish stops the display: lines mode writes a last line with the time
// taken ("replay: 100% (12,031/12,031 requests) in 7.2 s"), a bar is
// completed. Safe on nil, once.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	if p.bar != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.Done.Load() < p.total {
			_ = p.bar.Exit() // cut short (an error): the bar keeps how far it got
		} else if !p.bar.IsFinished() {
			_ = p.bar.Finish()
		}
		return
	}
	if p.stop != nil {
		close(p.stop)
		p.wg.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	done := min(p.Done.Load(), p.total)
	fmt.Fprintf(p.out, "%s: %d%% (%s/%s %s) in %s\n", p.name, done*100/p.total, humanize.Comma(done), humanize.Comma(p.total), p.unit,
		seconds(p.now().Sub(p.start)))
}

// isTerminal reports whether w is a terminal (a TCGETS ioctl answers).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// The replay's workers are processes of their own: each writes how many of
// its requests it finished, as a decimal line, to a pipe that the parent
// passes as its first extra file, and the parent adds them up.
const (
	WorkerProgressFD    = 3 // exec.Cmd.ExtraFiles[0]
	WorkerProgressEvery = 200 * time.Millisecond
)
