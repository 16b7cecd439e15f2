package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseTransferFlagsDefaults(t *testing.T) {
	cfg, err := parseTransferFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{64 << 10, 256 << 10, 1 << 20, 4 << 20}; !slices.Equal(cfg.sizes, want) {
		t.Errorf("sizes = %v, want %v", cfg.sizes, want)
	}
	if cfg.blocks != 32 || cfg.engine.Rails != 0 || cfg.engine.SliceBytes != 0 || cfg.engine.Window != 0 {
		t.Errorf("defaults = %+v, want 32 blocks and the engine's own defaults", cfg)
	}
}

func TestParseTransferFlagsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a slice below 4KiB", []string{"--slice-bytes", "1KiB"}, "--slice-bytes 1024: want 4KiB..16MiB"},
		{"a slice that is not a size", []string{"--slice-bytes", "big"}, `--slice-bytes: "big" is not a size`},
		{"a slice beyond the wire's bound", []string{"--slice-bytes", "32MiB"}, "at most 16MiB"},
		{"too many rails", []string{"--rails", "65"}, "--rails 65: want 1..64"},
		{"a negative window", []string{"--window", "-1"}, "--window -1: want 1..64"},
		{"zero blocks", []string{"--blocks", "0"}, "--blocks must be between 1 and 4096"},
		{"a Manager binary (the suite starts none)", []string{"--manager-bin", "/bin/true"}, "the transfer suite starts none"},
		{"a batch over 2GiB", []string{"--sizes", "256MiB", "--blocks", "9"}, "more than 2GiB per batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a usage error naming the flag", func(t *testing.T) {
			_, err := parseTransferFlags(tt.args, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestTransferReportsEveryRowAndSubject(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--sizes", "64KiB,256KiB", "--blocks", "4", "--iters", "2", "--warmup", "0", "--repeats", "1", "--json"}
	if err := runTransfer(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding %s: %v", out.Bytes(), err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	for i, row := range rep.Rows {
		if row["block_bytes"] != float64([]int{64 << 10, 256 << 10}[i]) {
			t.Errorf("row %d: block_bytes %v", i, row["block_bytes"])
		}
		for _, k := range []string{"orbitkv_gbps", "tcp_stream_gbps", "one_slice_gbps"} {
			if v, ok := row[k].(float64); !ok || v <= 0 {
				t.Errorf("row %d: %s = %v, want a positive GB/s", i, k, row[k])
			}
		}
		if _, ok := row["mooncake_gbps"]; ok {
			t.Errorf("row %d has mooncake_gbps before anything measures it", i)
		}
	}
}

func TestTransferTableStatesTheTargets(t *testing.T) {
	rep := &transferReport{SliceBytes: 256 << 10, Baseline: transferBaseline, Rows: []transferSize{
		{BlockBytes: 64 << 10, BatchBytes: 2 << 20, OrbitKVGBps: 1, TCPStreamGBps: 2, OneSliceGBps: 1, StreamRatio: 0.5, OneSliceRatio: 1},
		{BlockBytes: 1 << 20, BatchBytes: 32 << 20, OrbitKVGBps: 3, TCPStreamGBps: 3, OneSliceGBps: 1, StreamRatio: 1, OneSliceRatio: 3},
		{BlockBytes: 4 << 20, BatchBytes: 128 << 20, OrbitKVGBps: 2, TCPStreamGBps: 3, OneSliceGBps: 1, StreamRatio: 0.67, OneSliceRatio: 2},
	}}
	var out bytes.Buffer
	if err := writeTransferTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1.0 MiB orbitkv ≥ 0.90x tcp stream        1.00x  ok",
		"1.0 MiB orbitkv ≥ 3x one slice in flight  3.00x  ok",
		"4.0 MiB orbitkv ≥ 0.90x tcp stream        0.67x  MISSED",
		"4.0 MiB orbitkv ≥ 3x one slice in flight  2.00x  MISSED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "64 KiB orbitkv ≥") {
		t.Error("a target is stated for 64 KiB blocks; the targets are for 1-4 MiB")
	}
}
