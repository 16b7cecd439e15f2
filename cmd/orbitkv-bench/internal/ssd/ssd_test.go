package ssd

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestParseSSDFlagsDefaults(t *testing.T) {
	cfg, err := ParseSSDFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{256 << 10, 2 << 20}; !slices.Equal(cfg.sizes, want) {
		t.Errorf("sizes = %v, want %v", cfg.sizes, want)
	}
	if cfg.dir != "/var/tmp" || cfg.blocks != 64 || cfg.iters < 1 || cfg.ioWorkers != 4 || cfg.Json || !slices.Equal(cfg.memory, []string{"4k", "thp"}) {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestParseSSDFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a size that is not a size", []string{"--sizes", "1MiB,lots"}, `--sizes "lots": not a size`},
		{"a decimal size", []string{"--sizes", "1MB"}, `--sizes "1MB": ambiguous unit "MB": 1MB could mean 1048576 bytes (binary, as Redis reads it) or 1000000 bytes (decimal); write 1MiB, or the byte count`},
		{"a size that is not whole pages", []string{"--sizes", "1000"}, "--sizes: 1000 (1000 bytes) must be a multiple of 4KiB"},
		{"a size named twice", []string{"--sizes", "1MiB,1024KiB"}, "--sizes: 1024KiB named twice"},
		{"no size", []string{"--sizes", ","}, "--sizes names no size"},
		{"zero blocks", []string{"--blocks", "0"}, "--blocks must be between 1 and 65536"},
		{"zero iterations", []string{"--iters", "0"}, "--iters must be at least 1"},
		{"zero workers", []string{"--io-workers", "0"}, "--io-workers must be between 1 and 256"},
		{"an empty dir", []string{"--dir", ""}, "--dir is empty"},
		{"more than 16GiB per size", []string{"--sizes", "256MiB", "--blocks", "65"}, "more than 16GiB per size"},
		{"a stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"an unknown memory kind", []string{"--memory", "4k,1g"}, `--memory: "1g", want 4k or thp`},
		{"a memory kind named twice", []string{"--memory", "thp,thp"}, "--memory: thp named twice"},
		{"no memory kind", []string{"--memory", ""}, "--memory names no kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSSDFlags(tt.args, io.Discard)
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestSSDRunsAndCleansUp(t *testing.T) {
	dir := benchtest.DirectTestDir(t)
	before, _ := os.ReadDir(dir)
	var out, errOut bytes.Buffer
	err := Run([]string{"--dir", dir, "--sizes", "64KiB,256KiB", "--blocks", "8", "--iters", "2", "--memory", "4k", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("runSSD: %v\n%s", err, errOut.String())
	}
	var rep ssdReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.String(), err)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[1].BlockBytes != 256<<10 || rep.Sizes[1].Blocks != 8 || rep.Sizes[1].FileBytes != 8*(4096+256<<10) || rep.IOWorkers != 4 {
		t.Fatalf("report = %+v", rep)
	}
	for _, s := range rep.Sizes {
		if s.WriteGBps <= 0 || s.BaselineGBps <= 0 || s.ReadGBps <= 0 || s.ReadRatio <= 0 || s.ReusedBufferGBps <= 0 || s.ReusedBufferRatio <= 0 {
			t.Errorf("size %d: a throughput is not positive: %+v", s.BlockBytes, s)
		}
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("%s held %d entries before the run and %d after: the store's files are left", dir, len(before), len(after))
	}
}

func TestSSDTable(t *testing.T) {
	rep := &ssdReport{Baseline: ssdBaseline, Sizes: []ssdSize{
		{BlockBytes: 256 << 10, Memory: "4k", Blocks: 64, FileBytes: 64 * (4096 + 256<<10), WriteGBps: 1.5, BaselineGBps: 1.2, ReadGBps: 1.1, ReadRatio: 0.92, ReusedBufferGBps: 1.3, ReusedBufferRatio: 0.85},
		{BlockBytes: 2 << 20, Memory: "thp", HugeBytes: 64 << 20, Blocks: 64, FileBytes: 64 * (4096 + 2<<20), WriteGBps: 2, BaselineGBps: 1.5, ReadGBps: 1.0, ReadRatio: 0.67, ReusedBufferGBps: 2.5, ReusedBufferRatio: 0.4},
	}}
	var b bytes.Buffer
	if err := writeSSDTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"block   memory  blocks",
		"256 KiB       4k      64   16 MiB        1.50           1.20       1.10             0.92                1.30           0.85",
		"2.0 MiB  thp 50%      64  128 MiB        2.00",
		"256 KiB SSD read into 4k memory ≥ 0.80x O_DIRECT sequential read   0.92x  ok",
		"2.0 MiB SSD read into thp memory ≥ 0.80x O_DIRECT sequential read  0.67x  MISSED",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
