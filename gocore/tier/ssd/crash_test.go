package ssd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// writeN writes blocks key(ns, 0..n-1) of m and closes the store.
func writeN(t *testing.T, spec Spec, ns byte, n int, m Meta) {
	t.Helper()
	st := mustOpen(t, spec)
	for i := range n {
		if err := writeBlock(t, st, key(ns, uint64(i)), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTornIndexKeepsOnlyCompleteRecords(t *testing.T) {
	const n = 6
	m := Meta{Bytes: 10000, Layers: 1}
	full := int64(RecordBytes * (1 + n))
	tests := []struct {
		name    string
		damage  func(t *testing.T, path string)
		want    int   // blocks recovered
		wantLen int64 // index bytes after Open
	}{
		{"an index cut by one byte", func(t *testing.T, p string) { os.Truncate(p, full-1) }, n - 1, full - RecordBytes},
		{"an index cut mid-record", func(t *testing.T, p string) { os.Truncate(p, full-RecordBytes/2) }, n - 1, full - RecordBytes},
		{"an index cut after one whole record", func(t *testing.T, p string) { os.Truncate(p, 2*RecordBytes+7) }, 1, 2 * RecordBytes},
		{"an index with a zeroed tail", func(t *testing.T, p string) { os.Truncate(p, full+3*RecordBytes) }, n, full},
		{"an index with half a record of garbage appended", func(t *testing.T, p string) {
			appendTo(t, p, bytes.Repeat([]byte{0xa5}, RecordBytes/2))
		}, n, full},
		{"an index whose last record has a flipped bit", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-RecordBytes+20] ^= 1
			os.WriteFile(p, b, 0o600)
		}, n - 1, full - RecordBytes},
		{"an index torn inside its header", func(t *testing.T, p string) { os.Truncate(p, RecordBytes-1) }, 0, RecordBytes},
		{"an empty index", func(t *testing.T, p string) { os.Truncate(p, 0) }, 0, RecordBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := directDir(t)
			spec := testSpec(dir, 8)
			writeN(t, spec, 10, n, m)
			path := filepath.Join(dir, indexName)
			if fi, err := os.Stat(path); err != nil || fi.Size() != full {
				t.Fatalf("index: %v, want %d bytes", err, full)
			}
			tt.damage(t, path)
			spec.VerifyOnOpen = 100
			st := mustOpen(t, spec)
			if s := st.Stats(); s.Recovered != uint64(tt.want) || s.Corrupt != 0 || s.DroppedAtOpen != 0 {
				t.Errorf("Stats = %+v, want %d recovered and none dropped", s, tt.want)
			}
			if fi, _ := os.Stat(path); fi.Size() != tt.wantLen {
				t.Errorf("index is %d bytes after Open, want %d", fi.Size(), tt.wantLen)
			}
			for i := range tt.want {
				mustRead(t, st, key(10, uint64(i)), m)
			}
			// The store goes on from the cut: a new block and a reopen keep all.
			if err := writeBlock(t, st, key(11, 0), m); err != nil {
				t.Fatal(err)
			}
			st.Close()
			st = mustOpen(t, spec)
			defer st.Close()
			if s := st.Stats(); s.Recovered != uint64(tt.want+1) {
				t.Errorf("second reopen recovered %d, want %d", s.Recovered, tt.want+1)
			}
		})
	}
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// writeRawSlot writes a complete, valid slot (header and data, sealed
// under the store's mac.key) for k at slot of a testSpec store, with
// ordinary I/O and no index record: a Write whose data reached the disk
// before a crash, but not its put record.
func writeRawSlot(t *testing.T, dir string, slot uint32, k Key, m Meta, gen uint64) {
	t.Helper()
	data := make([]byte, roundUp(m.Bytes))
	fill(data, k)
	b := make([]byte, HeaderBytes, HeaderBytes+len(data))
	secret := storeSecret(t, dir)
	layout.NewMAC(&secret).SealSlotHeader(b, layout.SlotHeader{Key: k, Meta: m, Gen: gen, Slot: slot}, [][]byte{data})
	b = append(b, data...)
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(slot)*(HeaderBytes+64<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestUnindexedSlotIsNotRecovered(t *testing.T) {
	dir := directDir(t)
	spec := testSpec(dir, 8)
	m := Meta{Bytes: 8192, Layers: 1}
	writeN(t, spec, 12, 2, m)
	writeRawSlot(t, dir, 2, key(12, 2), m, 3)                                // complete data, no record
	writeRawSlot(t, dir, 3, key(12, 3), Meta{Bytes: 32 << 10, Layers: 1}, 4) // half a slot, no record
	spec.VerifyOnOpen = 100
	st := mustOpen(t, spec)
	defer st.Close()
	if s := st.Stats(); s.Recovered != 2 {
		t.Errorf("recovered %d blocks, want the 2 with index records", s.Recovered)
	}
	for _, k := range []Key{key(12, 2), key(12, 3)} {
		if _, ok := st.Contains(k); ok {
			t.Errorf("block %x without an index record is contained", k.Hash[:1])
		}
	}
	// The unindexed slots are free: the next writes take them.
	for i := range 2 {
		if err := writeBlock(t, st, key(13, uint64(i)), Meta{Bytes: 64 << 10, Layers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []Key{key(12, 0), key(12, 1)} {
		mustRead(t, st, k, m)
	}
}

// TestOverwrittenVictimIsNotServed: the index still names a block whose
// slot a crashed Write had begun to overwrite (FIFO eviction writes no
// record). Open's check of the oldest blocks drops it; without the check,
// Read refuses it.
func TestOverwrittenVictimIsNotServed(t *testing.T) {
	dir := directDir(t)
	spec := testSpec(dir, 2)
	m := Meta{Bytes: 8192, Layers: 1}
	t.Run("without the check at open, Read refuses it", func(t *testing.T) {
		writeN(t, spec, 14, 2, m)
		writeRawSlot(t, dir, 0, key(14, 99), m, 3) // the victim's slot now holds another block
		spec.VerifyOnOpen = -1
		st := mustOpen(t, spec)
		defer st.Close()
		if _, err := readBlock(t, st, key(14, 0), m); !isErr(err, ErrCorrupt) {
			t.Errorf("Read of the overwritten victim = %v, want ErrCorrupt", err)
		}
		mustRead(t, st, key(14, 1), m)
	})
	t.Run("the check at open drops it", func(t *testing.T) {
		dir := directDir(t)
		spec := testSpec(dir, 2)
		writeN(t, spec, 14, 2, m)
		writeRawSlot(t, dir, 0, key(14, 99), m, 3)
		spec.VerifyOnOpen = 1 // the oldest block only
		st := mustOpen(t, spec)
		defer st.Close()
		if s := st.Stats(); s.Recovered != 1 || s.DroppedAtOpen != 1 || s.Corrupt != 0 {
			t.Errorf("Stats = %+v, want 1 recovered and 1 dropped at open", s)
		}
		mustRead(t, st, key(14, 1), m)
	})
}

// crashChildEnv makes the test binary a writer that a test SIGKILLs.
const crashChildEnv = "ORBITKV_SSD_CRASH_CHILD_DIR"

// TestCrashWriterChild is the child's body: it writes blocks as fast as it
// can and prints "durable N" when block N's done(nil) ran.
func TestCrashWriterChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("runs only as TestSIGKILLDuringWrites' child")
	}
	start, _ := strconv.ParseUint(os.Getenv(crashChildEnv+"_START"), 10, 64)
	spec := testSpec(dir, 64)
	spec.MaxPendingWrites = 8
	st := mustOpen(t, spec)
	srcs := make([][]byte, 8)
	for i := range srcs {
		srcs[i] = alignedBuf(t, 64<<10)
	}
	sem := make(chan int, len(srcs))
	for i := range srcs {
		sem <- i
	}
	// A buffer is reused only once its block's line is in the pipe, so at
	// most len(srcs) writes are issued and not reported to the parent.
	type ack struct {
		line string
		buf  int
	}
	out := make(chan ack, len(srcs))
	go func() {
		for a := range out {
			fmt.Println(a.line)
			sem <- a.buf
		}
	}()
	for i := start; ; i++ {
		b := <-sem
		k := key(20, i)
		fill(srcs[b], k)
		st.Write(k, crashMeta(i), [][]byte{srcs[b]}, nil, func(err error) {
			if err != nil {
				out <- ack{fmt.Sprintf("error %d %v", i, err), b}
			} else {
				out <- ack{fmt.Sprintf("durable %d", i), b}
			}
		})
	}
}

func crashMeta(i uint64) Meta { return Meta{Bytes: 4096 * (1 + i%16), Layers: 1} }

// TestSIGKILLDuringWrites kills a writing process three times; after each
// kill the store must open, serve correct bytes for every block it
// recovers, and have kept every acknowledged block that no later write
// could have evicted.
func TestSIGKILLDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := directDir(t)
	var next uint64 // the first key of the next round
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriterChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, fmt.Sprintf("%s_START=%d", crashChildEnv, next))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		durable := map[uint64]bool{}
		parse := func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "durable":
				n, _ := strconv.ParseUint(f[1], 10, 64)
				durable[n] = true
			case len(f) > 0 && f[0] == "error":
				t.Errorf("round %d: child: %s", round, line)
			}
		}
		sc := bufio.NewScanner(stdout)
		deadline := time.Now().Add(waitTimeout)
		for len(durable) < 100+round*37 && time.Now().Before(deadline) && sc.Scan() {
			parse(sc.Text())
		}
		cmd.Process.Signal(unix.SIGKILL)
		for sc.Scan() { // lines printed before the kill count too
			parse(sc.Text())
		}
		cmd.Wait()
		if len(durable) < 100 {
			t.Fatalf("round %d: the child acknowledged only %d writes", round, len(durable))
		}
		var newest uint64
		for i := range durable {
			newest = max(newest, i)
		}
		next = newest + 100

		spec := testSpec(dir, 64)
		spec.VerifyOnOpen = 1000 // every block
		st := mustOpen(t, spec)
		for _, k := range st.Keys() {
			mustRead(t, st, k, crashMeta(binary.LittleEndian.Uint64(k.Hash[:])))
		}
		// Block i is evicted only by a write that finds no free slot and i
		// the oldest of the 64 blocks, all of a later generation except up
		// to 7 older writes still in flight: so not before the 56th write
		// issued after i. Those are the acknowledged ones after it and at
		// most 8 unreported ones, so an acknowledged block with fewer than
		// 64-16 acknowledged after it must be back.
		acked := slices.Sorted(maps.Keys(durable))
		for pos, i := range acked {
			if after := len(acked) - 1 - pos; after+16 >= 64 {
				continue
			}
			if _, ok := st.Contains(key(20, i)); !ok {
				t.Errorf("round %d: block %d was acknowledged durable but is not recovered (newest acknowledged %d)", round, i, newest)
			}
		}
		if s := st.Stats(); s.Corrupt != 0 || s.Recovered < 64-8 || s.DroppedAtOpen > 8 {
			t.Errorf("round %d: Stats after the crash = %+v, want at least 64-8 recovered and at most 8 dropped", round, s)
		}
		st.Close()
	}
}
