package integration

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
)

// ctlEvent is one line of orbitkvctl events --json.
type ctlEvent struct {
	Seq       int64    `json:"seq"`
	TS        float64  `json:"ts"`
	Type      string   `json:"type"`
	Medium    string   `json:"medium"`
	Hashes    []string `json:"block_hashes"`
	Parent    *string  `json:"parent_block_hash"`
	Tokens    []uint32 `json:"token_ids"`
	BlockSize int      `json:"block_size"`
}

// publishRecords publishes blocks of ns whose engine hashes are hashes
// (each the parent of the next, the first with parent before; 0: none),
// 4 tokens each, into pages 0.. of e's buffer.
func (e *engine) publishRecords(t *testing.T, ns client.Namespace, before uint64, hashes []uint64) {
	t.Helper()
	bhs := make([]client.BlockHash, len(hashes))
	pages := make([]uint32, len(hashes))
	recs := make([]client.BlockRecord, len(hashes))
	parent := before
	for i, h := range hashes {
		pages[i] = uint32(i)
		e.fill(pages[i], h)
		bhs[i] = bh(h)
		recs[i] = client.BlockRecord{EngineHash: h, ParentHash: parent, HasParent: parent != 0, Tokens: []uint32{uint32(h), 1, 2, 3}}
		parent = h
	}
	if r, err := e.c.PublishRecords(ns, e.id, bhs, pages, recs); err != nil || int(r.Stored) != len(hashes) {
		t.Fatalf("PublishRecords: %+v %v", r, err)
	}
}

// orbitkvctl events prints what a Manager with --kv-events publishes:
// the endpoints come from the Manager's health on the operator socket;
// --snapshot gives every block held now, --from 0 the stream from its
// start and then the live events, in sequence order without repeats.
func TestOrbitkvctlEventsPrintsTheManagersStream(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "okv.sock")
	startManagerBin(t, "orbitkv-manager", sock, "", 10*time.Second, "--hugepages", "off", "--ram-capacity", "16MiB",
		"--kv-events", "tcp://127.0.0.1:0", "--kv-events-replay", "tcp://127.0.0.1:0")
	h := ctlJSON(t, sock, "health")
	evs, _ := h["events"].([]any)
	if len(evs) != 1 || !strings.HasPrefix(evs[0].(map[string]any)["endpoint"].(string), "tcp://127.0.0.1:") {
		t.Fatalf("health events = %v, want the one stream's tcp endpoint", h["events"])
	}
	ns := namespace(t, "events")
	e := newEngine(t, sock, "events-engine")
	e.publishRecords(t, ns, 0, []uint64{101, 102, 103})

	t.Run("--snapshot prints AllBlocksCleared and every block held", func(t *testing.T) {
		out, errOut, code := ctl(t, sock, "", "events", "--snapshot", "--json", "--count", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		got := parseEvents(t, out)
		if len(got) != 2 || got[0].Type != "AllBlocksCleared" || got[1].Type != "BlockStored" || got[1].Medium != "CPU" {
			t.Fatalf("snapshot %+v, want AllBlocksCleared then a BlockStored on CPU", got)
		}
	})
	t.Run("the table names the columns and the events", func(t *testing.T) {
		out, errOut, code := ctl(t, sock, "", "events", "--snapshot", "--count", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") || !strings.Contains(lines[0], "FIRST HASH") ||
			!strings.Contains(lines[1], "AllBlocksCleared") || !strings.Contains(lines[2], "BlockStored") {
			t.Fatalf("table:\n%s", out)
		}
	})
	t.Run("--from 0 replays the stream, then prints the live events in order", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(binDir, "orbitkvctl"), "events", "--from", "0", "--json", "--count", "4", "--socket", sock)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan []ctlEvent, 1)
		go func() {
			var evs []ctlEvent
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var ev ctlEvent
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					evs = append(evs, ev)
				}
			}
			done <- evs
		}()
		// The replay gives the clear (seq 0) and the first chain; new
		// chains follow until two more events came (a publish made before
		// the subscription reached the Manager is replayed from the gap).
		var got []ctlEvent
		next := uint64(200)
	loop:
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			select {
			case got = <-done:
				break loop
			case <-time.After(200 * time.Millisecond):
				e.publishRecords(t, ns, 0, []uint64{next})
				next++
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("orbitkvctl events: %v: %s", err, stderr.String())
		}
		if len(got) != 4 {
			t.Fatalf("%d events %+v, want 4", len(got), got)
		}
		if got[0].Seq != 0 || got[0].Type != "AllBlocksCleared" {
			t.Errorf("first event %+v, want AllBlocksCleared at seq 0", got[0])
		}
		if got[1].Type != "BlockStored" || strings.Join(got[1].Hashes, ",") != "101,102,103" || got[1].BlockSize != 4 || got[1].Parent != nil {
			t.Errorf("second event %+v, want the chain 101..103 of 4-token blocks, no parent", got[1])
		}
		for i := 2; i < 4; i++ {
			if got[i].Seq <= got[i-1].Seq || got[i].Type != "BlockStored" || got[i].Hashes[0] != strconv.Itoa(200+i-2) {
				t.Errorf("event %d %+v after %+v: want block %d stored, in sequence order", i, got[i], got[i-1], 200+i-2)
			}
		}
	})
	t.Run("a Manager without events says so", func(t *testing.T) {
		sock2 := filepath.Join(t.TempDir(), "okv.sock")
		startManagerBin(t, "orbitkv-manager", sock2, "", 10*time.Second, "--hugepages", "off", "--ram-capacity", "16MiB")
		_, errOut, code := ctl(t, sock2, "", "events")
		if code != 1 || !strings.Contains(errOut, "publishes no KV events") {
			t.Fatalf("exit %d: %s; want 1 saying the Manager publishes no events", code, errOut)
		}
	})
}

func parseEvents(t *testing.T, out string) []ctlEvent {
	t.Helper()
	var evs []ctlEvent
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev ctlEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}
