package chart

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The PNGs --plot writes are Width × Height pixels at plotDPI:
// small enough to commit, large enough to read a legend of six lines.
const (
	Width   = 800
	Height  = 500
	plotDPI = 96
)

// errPlot is wrapped by every refusal of a chart (lineChart.check): no
// series, a series with no points, a value its axes cannot show. A --plot
// directory that cannot be made or written is a usage error instead
// (checkPlotDir), and a file that cannot be written the file system's.
var errPlot = errors.New("--plot")

// Series is one line of a chart: its legend name and points, in the
// order they are joined.
type Series struct {
	Name      string
	Xs, Ys    []float64
	Reference bool // a baseline: drawn dashed
	// Lo and hi, when set, hold the spread of each y (its lowest and
	// highest over the repeats, lo[i] ≤ ys[i] ≤ hi[i]), drawn as a bar.
	Lo, Hi []float64
	Bound  bool // a limit no subject passes: wide, light grey, no point marks; put it first, to be drawn under the lines that reach it
}

// boundColor is the colour of a bound line, lighter than every line of
// plotutil's palette so that a line lying on the bound stays visible.
var boundColor = color.RGBA{R: 0xb0, G: 0xb0, B: 0xb0, A: 0xff}

// seriesColor is the colour of the series at index i of a chart.
func seriesColor(s Series, i int) color.Color {
	if s.Bound {
		return boundColor
	}
	return plotutil.Color(i)
}

// Line is one PNG of lines. Its title is the suite's line, then the
// host and commit line (plotHost).
type Line struct {
	File           string // base name under --plot, ending in .png
	Title          string
	XLabel, YLabel string // with units
	logX           bool   // log scale on x: every x must be > 0
	XTicks         plot.Ticker
	YFromZero      bool    // y starts at 0 (throughputs, ratios), not at the data's minimum
	YMax           float64 // the y axis reaches at least this
	yTicks         plot.Ticker
	Glyphs         bool // mark each point (few points per line)
	Series         []Series
}

// plotHost is the second title line of every plot: the machine and the
// build the figures come from, as the report's metadata names them
// ("2 CPUs (AMD EPYC), commit 39f5c5504b94"; the commit cut to 12 hex
// digits, keeping a -dirty suffix), and "INVALID RUN" when the report's
// validity says so, so that a plot shown without its report still
// carries the verdict.
func plotHost(h *suite.Head) string {
	m := h.Meta
	s := fmt.Sprintf("%d CPUs", m.Cores)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	c, dirty := strings.CutSuffix(m.Commit, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	s += ", commit " + c
	if n := len(h.Validity.Reasons); !h.Validity.Valid && n > 0 {
		noun := "reasons"
		if n == 1 {
			noun = "reason"
		}
		s += fmt.Sprintf("; INVALID RUN (%d %s in the report)", n, noun)
	}
	return s
}

// Check refuses a chart that would draw nothing or misdraw: no series, a
// series with no points or unequal x and y counts, a value that is not
// finite, or an x ≤ 0 on a log axis. Errors wrap errPlot and name the
// chart's file and the series.
func (c *Line) Check() error {
	if len(c.Series) == 0 {
		return fmt.Errorf("%w: %s: no series to draw", errPlot, c.File)
	}
	for _, s := range c.Series {
		switch {
		case len(s.Xs) == 0:
			return fmt.Errorf("%w: %s: series %q has no points", errPlot, c.File, s.Name)
		case len(s.Xs) != len(s.Ys):
			return fmt.Errorf("%w: %s: series %q has %d x values and %d y values", errPlot, c.File, s.Name, len(s.Xs), len(s.Ys))
		}
		if s.Lo != nil || s.Hi != nil {
			if len(s.Lo) != len(s.Ys) || len(s.Hi) != len(s.Ys) {
				return fmt.Errorf("%w: %s: series %q has %d y values and a spread of %d and %d", errPlot, c.File, s.Name, len(s.Ys), len(s.Lo), len(s.Hi))
			}
			for i := range s.Ys {
				if !(s.Lo[i] <= s.Ys[i] && s.Ys[i] <= s.Hi[i]) {
					return fmt.Errorf("%w: %s: series %q point %d: y = %v lies outside its spread [%v, %v]", errPlot, c.File, s.Name, i, s.Ys[i], s.Lo[i], s.Hi[i])
				}
			}
		}
		for i := range s.Xs {
			x, y := s.Xs[i], s.Ys[i]
			switch {
			case math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0):
				return fmt.Errorf("%w: %s: series %q point %d (%v, %v) is not finite", errPlot, c.File, s.Name, i, x, y)
			case c.logX && x <= 0:
				return fmt.Errorf("%w: %s: series %q point %d has x = %v, which a log axis cannot show", errPlot, c.File, s.Name, i, x)
			}
		}
	}
	return nil
}

// write draws the chart into dir/c.file as a Width × Height PNG,
// with host (plotHost) as the title's second line, through a temporary
// file renamed into place, and returns its path. Errors wrap errPlot (a
// refused chart) or are the file system's, naming --plot.
func (c *Line) write(dir, host string) (string, error) {
	if err := c.Check(); err != nil {
		return "", err
	}
	p := plot.New()
	p.Title.Text = c.Title + "\n" + host
	p.X.Label.Text, p.Y.Label.Text = c.XLabel, c.YLabel
	if c.logX {
		p.X.Scale = plot.LogScale{}
	}
	if c.XTicks != nil {
		p.X.Tick.Marker = c.XTicks
	}
	p.Add(plotter.NewGrid())
	spread := 0 // series with a spread: their bars are set side by side
	for _, s := range c.Series {
		if s.Lo != nil {
			spread++
		}
	}
	bar := 0
	for i, s := range c.Series {
		xys := make(plotter.XYs, len(s.Xs))
		for j := range s.Xs {
			xys[j] = plotter.XY{X: s.Xs[j], Y: s.Ys[j]}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return "", fmt.Errorf("%w: %s: series %q: %v", errPlot, c.File, s.Name, err)
		}
		l.Color, l.Width = seriesColor(s, i), vg.Points(1.5)
		switch {
		case s.Bound:
			l.Width = vg.Points(4)
		case s.Reference:
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		if s.Lo != nil {
			// On a log x axis the bars of one x are spread 3% of a
			// doubling apart, so that they do not hide each other.
			dodge := 1.0
			if c.logX {
				dodge = math.Exp2(0.03 * (float64(bar) - float64(spread-1)/2))
			}
			bar++
			bars, err := plotter.NewYErrorBars(spreadXYs{s, dodge})
			if err != nil {
				return "", fmt.Errorf("%w: %s: series %q: %v", errPlot, c.File, s.Name, err)
			}
			bars.Color, bars.Width, bars.CapWidth = l.Color, vg.Points(1), vg.Points(8)
			p.Add(bars)
		}
		if !c.Glyphs || s.Bound {
			p.Legend.Add(s.Name, l)
			continue
		}
		pts, err := plotter.NewScatter(xys)
		if err != nil {
			return "", fmt.Errorf("%w: %s: series %q: %v", errPlot, c.File, s.Name, err)
		}
		pts.Color, pts.Shape, pts.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(3)
		p.Add(pts)
		p.Legend.Add(s.Name, l, pts)
	}
	p.Add(legendBackdrop{}) // last: over the lines, under the legend
	if c.yTicks != nil {
		p.Y.Tick.Marker = c.yTicks
	}
	if c.YFromZero {
		p.Y.Min = 0
		p.Y.Max *= 1.05 // headroom: the highest point is not drawn on the frame
	}
	p.Y.Max = max(p.Y.Max, c.YMax)
	p.Legend.Padding = vg.Points(2)
	p.Legend.TextStyle.Color = color.Black
	// Inset from the frame so the thumbnails, drawn right of the text,
	// stay inside the image.
	p.Legend.XOffs, p.Legend.YOffs = -legendInset, legendInset

	canvas := vgimg.NewWith(vgimg.UseWH(Width*vg.Inch/plotDPI, Height*vg.Inch/plotDPI), vgimg.UseDPI(plotDPI))
	p.Draw(draw.New(canvas))
	path := filepath.Join(dir, c.File)
	tmp, err := os.CreateTemp(dir, "."+c.File+"-*")
	if err != nil {
		return "", fmt.Errorf("--plot %s: %w", dir, err)
	}
	_, err = vgimg.PngCanvas{Canvas: canvas}.WriteTo(tmp)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes 0600; a plot is for sharing
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("--plot: writing %s: %w", path, err)
	}
	return path, nil
}

// spreadXYs is a series with its spread, as plotter.NewYErrorBars reads
// it: each bar at x × dodge, YError the distance from y down to lo and up
// to hi.
type spreadXYs struct {
	s     Series
	dodge float64
}

func (e spreadXYs) Len() int { return len(e.s.Xs) }

func (e spreadXYs) XY(i int) (x, y float64) { return e.s.Xs[i] * e.dodge, e.s.Ys[i] }

func (e spreadXYs) YError(i int) (low, high float64) {
	return e.s.Ys[i] - e.s.Lo[i], e.s.Hi[i] - e.s.Ys[i]
}

// legendInset is how far the legend sits inside the data area's bottom
// right corner.
const legendInset = vg.Length(12)

// legendBackdrop veils the data area under the legend (bottom right, the
// plot's default place) in translucent white, so a line passing under the
// legend does not run through its text. The legend is drawn on the plot
// area before padding, the backdrop on the padded data area: the margin
// covers the difference.
type legendBackdrop struct{}

// Plot fills the legend's rectangle, grown by a margin, on c.
func (legendBackdrop) Plot(c draw.Canvas, p *plot.Plot) {
	const margin = 6 // points
	size := p.Legend.Rectangle(c).Size()
	if size.X == 0 {
		return
	}
	x, y := c.Max.X-legendInset, c.Min.Y+legendInset // the legend's bottom right corner (plot.Legend XOffs, YOffs)
	r := vg.Rectangle{Min: vg.Point{X: x - size.X - margin, Y: y - margin}, Max: vg.Point{X: x + margin, Y: y + size.Y + margin}}
	c.SetColor(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xd8})
	c.Fill(r.Path())
}

// fractionTicks ticks a y axis of fractions in [0, 1] every 0.1.
var fractionTicks = func() plot.ConstantTicks {
	var ts plot.ConstantTicks
	for i := 0; i <= 10; i++ {
		ts = append(ts, plot.Tick{Value: float64(i) / 10, Label: strconv.FormatFloat(float64(i)/10, 'f', -1, 64)})
	}
	return ts
}()

// ThroughputSubject is one line of a throughput chart: GB/s (10^9 bytes
// per second) at each block size of the chart, in the same order.
type ThroughputSubject struct {
	Name      string
	GBps      []float64
	lo, hi    []float64 // optional: the lowest and highest GB/s over the repeats, per size
	Reference bool      // a baseline (memcpy, a plain read): drawn dashed
}

// Throughput is GB/s against block size, one line per subject, on a
// log2 x axis ticked at the sizes measured, with a bar over each point
// from the lowest to the highest of the repeats where a subject has them.
// Any suite that measures a throughput per block size (copy, ssd, a
// transfer) draws with it.
func Throughput(file, title string, sizes []uint64, subjects []ThroughputSubject) Line {
	c := Line{File: file, Title: title, XLabel: "block size (bytes, log scale)", YLabel: "throughput (GB/s, 10^9 bytes/s)",
		logX: true, YFromZero: true, Glyphs: true}
	var ticks plot.ConstantTicks
	xs := make([]float64, len(sizes))
	for i, s := range sizes {
		xs[i] = float64(s)
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: humanize.IBytes(s)})
	}
	c.XTicks = ticks
	for _, s := range subjects {
		c.Series = append(c.Series, Series{Name: s.Name, Xs: xs, Ys: s.GBps, Lo: s.lo, Hi: s.hi, Reference: s.Reference})
	}
	return c
}

// CDFSubject is one line of a latency CDF chart.
type CDFSubject struct {
	Name   string
	Points []latency.CDFPoint // ascending latency
}

// CDF is the cumulative distribution of latencies, one line per
// subject, on a log x axis ticked 1-2-5 per decade in ns, µs and ms.
func CDF(file, title, what string, subjects []CDFSubject) Line {
	c := Line{File: file, Title: title, XLabel: what + " latency (log scale)", YLabel: "fraction of " + what + "s ≤ latency",
		logX: true, XTicks: latencyTicks{}, YFromZero: true, YMax: 1, yTicks: fractionTicks}
	for _, s := range subjects {
		ps := Series{Name: s.Name}
		for _, p := range s.Points {
			ps.Xs, ps.Ys = append(ps.Xs, p.Ns), append(ps.Ys, p.Fraction)
		}
		c.Series = append(c.Series, ps)
	}
	return c
}

// latencyTicks ticks a log axis of nanoseconds at every integer of each
// decade, labelled with their unit (500ns, 2µs, 1ms) at 1, 2 and 5 of each
// decade, or at 1 alone when the axis spans more than latencyTickDecades
// decades (an 800-pixel axis has room for about 12 labels).
type latencyTicks struct{}

// latencyTickDecades is the widest span, in decades, whose 1-2-5 labels fit.
const latencyTickDecades = 4

// Ticks returns the ticks within [lo, hi] (ns, both > 0).
func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	wide := math.Log10(hi/lo) > latencyTickDecades
	var ts []plot.Tick
	for d := math.Pow10(int(math.Floor(math.Log10(lo)))); d <= hi; d *= 10 {
		for m := 1.0; m < 10; m++ {
			v := d * m
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = formatNs(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// formatNs writes a latency in ns with the largest unit it is at least one
// of: 500ns, 2µs, 1.5ms, 2s.
func formatNs(ns float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if ns >= u.div {
			return strconv.FormatFloat(ns/u.div, 'g', 3, 64) + u.name
		}
	}
	return strconv.FormatFloat(ns, 'g', 3, 64) + "ns"
}
