package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// lmcacheResult is the JSON object bench/peers/lmcache_driver.py prints on
// success (its report()); on failure it prints {"error": "..."} instead.
type lmcacheResult struct {
	Error       string                   `json:"error"`
	Version     string                   `json:"version"`
	ServerArgv  []string                 `json:"server_argv"`
	ChunkTokens int                      `json:"chunk_tokens"`
	Lookup      map[string]peerQuantiles `json:"lookup_rtt_ns"`
	Sizes       []peerTransfer           `json:"sizes"`
}

// driverArgs is the driver's command line for cfg: the same sizes, batch
// counts, chains, lookups and iterations as the OrbitKV side.
func driverArgs(cfg *peersConfig, driver string) []string {
	join := func(v []string) string { return strings.Join(v, ",") }
	var sizes, blocks, chains []string
	for i, s := range cfg.sizes {
		sizes, blocks = append(sizes, fmt.Sprint(s)), append(blocks, fmt.Sprint(cfg.blocks[i]))
	}
	for _, n := range cfg.chains {
		chains = append(chains, fmt.Sprint(n))
	}
	return []string{driver, "--sizes", join(sizes), "--blocks", join(blocks), "--chains", join(chains),
		"--lookup-block-bytes", fmt.Sprint(peersLookupBlock), "--lookups", fmt.Sprint(cfg.lookups),
		"--iters", fmt.Sprint(cfg.iters), "--warmup", fmt.Sprint(cfg.warmup),
		"--l1-size-gb", fmt.Sprint(cfg.l1GiB)}
}

// parseDriverOutput decodes the driver's stdout: the last line that is a
// JSON object. A driver error, an exit status without a report, or a
// report missing a chain or size of cfg is an error quoting what it said.
func parseDriverOutput(cfg *peersConfig, stdout []byte, runErr error, stderrTail string) (*lmcacheResult, error) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	var res lmcacheResult
	found := false
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &res) == nil {
			found = true
			break
		}
	}
	switch {
	case found && res.Error != "":
		return nil, fmt.Errorf("the LMCache driver failed: %s", res.Error)
	case !found && runErr != nil:
		return nil, fmt.Errorf("the LMCache driver: %w; its stderr ends:\n%s", runErr, stderrTail)
	case !found:
		return nil, fmt.Errorf("the LMCache driver printed no JSON report; its stderr ends:\n%s", stderrTail)
	}
	for _, n := range cfg.chains {
		if _, ok := res.Lookup[fmt.Sprint(n)]; !ok {
			return nil, fmt.Errorf("the LMCache driver's report has no lookup of %d blocks", n)
		}
	}
	if len(res.Sizes) != len(cfg.sizes) {
		return nil, fmt.Errorf("the LMCache driver's report has %d sizes, want %d", len(res.Sizes), len(cfg.sizes))
	}
	for i, s := range res.Sizes {
		if s.BlockBytes != cfg.sizes[i] || s.Blocks != cfg.blocks[i] {
			return nil, fmt.Errorf("the LMCache driver's size %d is %d blocks of %d bytes, want %d of %d", i, s.Blocks, s.BlockBytes, cfg.blocks[i], cfg.sizes[i])
		}
	}
	return &res, nil
}

// runLMCacheDriver runs the driver with the vLLM environment's python in a
// process group of its own (the LMCache server it starts joins it), bounded
// by --lmcache-timeout: past it the whole group is killed, server included.
func runLMCacheDriver(cfg *peersConfig, stderr io.Writer) (*lmcacheResult, error) {
	python, driver := cfg.python, cfg.driver
	var err error
	if python == "" {
		if python, err = findBeside("python", "build/venv/vllm/bin/python"); err != nil {
			return nil, err
		}
	}
	if driver == "" {
		if driver, err = findBeside("driver", "bench/peers/lmcache_driver.py"); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, driverArgs(cfg, driver)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	tail := &tailWriter{max: 4000}
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(tail, &driverProgress{w: stderr})
	runErr := cmd.Run()
	// The group again: a driver killed hard leaves its server behind.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		runErr = errors.Join(runErr, fmt.Errorf("--lmcache-timeout %v passed", cfg.timeout))
	}
	return parseDriverOutput(cfg, out.Bytes(), runErr, tail.String())
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return string(t.b) }

// driverProgress passes on the driver's own progress lines
// ("lmcache_driver: ...") and drops LMCache's log and warnings; a line
// split over writes is held until its end comes.
type driverProgress struct {
	w       io.Writer
	partial string
}

func (p *driverProgress) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(p.partial+string(b), "\n")
	p.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "lmcache_driver: ") {
			io.WriteString(p.w, "peers: LMCache "+strings.TrimPrefix(l, "lmcache_driver: "))
		}
	}
	return len(b), nil
}
