package copy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/copier"
)

func TestParseCopyFlagsDefaults(t *testing.T) {
	cfg, err := parseCopyFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{256 << 10, 512 << 10, 1 << 20, 2 << 20}; !slices.Equal(cfg.sizes, want) {
		t.Errorf("sizes = %v, want %v", cfg.sizes, want)
	}
	if cfg.blocks != 32 || cfg.layers != 4 || cfg.iters < 1 || cfg.Json {
		t.Errorf("defaults = %+v", cfg)
	}
	if got := copyCapacity(&cfg); got != 256<<20 {
		t.Errorf("capacity = %d, want 4 batches of 32 × 2MiB = 256MiB", got)
	}
}

func TestParseCopyFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a size that is not a size", []string{"--sizes", "1MiB,lots"}, `--sizes "lots": not a size`},
		{"a size not divisible into pages", []string{"--sizes", "1000"}, "--sizes: 1000 (1000 bytes) / --layers 4 must be a whole multiple of 64"},
		{"a size named twice", []string{"--sizes", "1MiB,1024KiB"}, "--sizes: 1024KiB named twice"},
		{"no size", []string{"--sizes", ","}, "--sizes names no size"},
		{"zero blocks", []string{"--blocks", "0"}, "--blocks must be between 1 and 4096"},
		{"zero layers", []string{"--layers", "0"}, "--layers must be between 1 and 256"},
		{"zero iterations", []string{"--iters", "0"}, "--iters must be at least 1"},
		{"a batch over 4GiB", []string{"--sizes", "256MiB", "--blocks", "17"}, "more than 4GiB per batch"},
		{"copy workers that are not a count", []string{"--manager-args", "--copy-workers two"}, `--copy-workers "two" must be a count 1..64`},
		{"zero copy workers", []string{"--manager-args", "--copy-workers=0"}, `--copy-workers "0" must be a count 1..64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseCopyFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestCopyRunsAgainstTheManager(t *testing.T) {
	dir := benchtest.Binaries(t)
	cmd := exec.Command(filepath.Join(dir, "orbitkv-bench"), "copy", "--sizes", "64KiB,256KiB", "--blocks", "8", "--iters", "3", "--warmup", "1", "--json")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("orbitkv-bench copy: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var rep copyReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[1].BlockBytes != 256<<10 || rep.Sizes[1].BatchBytes != 8*256<<10 {
		t.Fatalf("report = %+v", rep)
	}
	for _, s := range rep.Sizes {
		if s.MemcpyGBps <= 0 || s.PublishGBps <= 0 || s.RestoreGBps <= 0 {
			t.Errorf("size %d: a throughput is not positive: %+v", s.BlockBytes, s)
		}
	}
	// Three repeats (the default): five figures per size, each the median
	// of its three repeats, which the size's own keys report.
	if rep.CopyThreads != copier.DefaultWorkers() || !strings.Contains(rep.Baseline, fmt.Sprintf("%d threads", rep.CopyThreads)) {
		t.Errorf("copy_threads %d, baseline %q: want the Manager's default %d copy workers, and the baseline's as many threads", rep.CopyThreads, rep.Baseline, copier.DefaultWorkers())
	}
	if rep.Meta.Suite != "copy" || rep.Meta.Repeats != 3 || len(rep.Figures) != 2*len(copyFields) || len(rep.Validity.Checks) == 0 {
		t.Fatalf("meta %+v, %d figures, validity %+v: want copy, 3 repeats, %d figures, checks", rep.Meta, len(rep.Figures), rep.Validity, 2*len(copyFields))
	}
	for _, f := range rep.Figures {
		if len(f.Repeats) != 3 || f.Value != suite.MedianOf(f.Repeats) || f.Min > f.Value || f.Value > f.Max {
			t.Errorf("figure %+v: want the median of 3 repeats inside their range", f)
		}
	}
	if f := rep.Figures[len(copyFields)+1]; f.Name != "256 KiB/publish_gbps" || f.Value != rep.Sizes[1].PublishGBps {
		t.Errorf("figure %+v: want 256 KiB/publish_gbps equal to the size's publish_gbps %v", f, rep.Sizes[1].PublishGBps)
	}
}

func TestCopyWorkersIsTheLastManagerArgElseTheDefault(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no --copy-workers keeps the default", []string{"--ram-chunk-bytes", "16KiB"}, 2},
		{"one --copy-workers is used", []string{"--copy-workers", "3"}, 3},
		{"the last of two wins, as the Manager's flag package keeps it", []string{"--copy-workers=1", "--copy-workers", "4"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := copyWorkers(2, tt.args)
			if err != nil || got != tt.want {
				t.Errorf("copyWorkers(2, %q) = %d, %v; want %d", tt.args, got, err, tt.want)
			}
		})
	}
}

func TestParallelMemcpyCopiesEveryByteWithEachThreadCount(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		for _, n := range []uint64{1, 4095, 4096, 3*4096 + 7, 1 << 20} {
			t.Run(fmt.Sprintf("threads=%d/bytes=%d", threads, n), func(t *testing.T) {
				p := newParallelMemcpy(threads)
				defer p.Close()
				src, dst := make([]byte, n), make([]byte, n+64)
				for i := range src {
					src[i] = byte(i*7 + 3)
				}
				p.copy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
				if !bytes.Equal(dst[:n], src) {
					t.Fatalf("the copy differs from the source")
				}
				if !bytes.Equal(dst[n:], make([]byte, 64)) {
					t.Fatalf("bytes past the copy were written")
				}
			})
		}
	}
}

func TestPartBytesCoversTheBatchInWholePages(t *testing.T) {
	for _, tt := range []struct {
		n       uint64
		threads int
		want    uint64
	}{{8 << 20, 2, 4 << 20}, {8 << 20, 3, 2797568}, {100, 4, 4096}, {5, 1, 4096}} {
		got := partBytes(tt.n, tt.threads)
		if got != tt.want || got%4096 != 0 || got*uint64(tt.threads) < tt.n {
			t.Errorf("partBytes(%d, %d) = %d, want %d (whole pages covering the batch)", tt.n, tt.threads, got, tt.want)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(benchtest.Main(m)) }
