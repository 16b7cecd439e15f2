package ssd

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
)

// storeSecret is the secret in dir's mac.key.
func storeSecret(t *testing.T, dir string) [layout.SecretBytes]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, keyName))
	if err != nil || len(b) != layout.SecretBytes {
		t.Fatalf("reading %s: %d bytes, %v", keyName, len(b), err)
	}
	return [layout.SecretBytes]byte(b)
}

// attackerKey is the key a forger without mac.key tags with: any key
// but the store's (all of them are equally wrong).
var attackerKey = []byte("not the store's mac.key, 32 byte")

// attackerTag is what a forger can put where a tag goes: HMAC-SHA256 of
// the bytes under attackerKey.
func attackerTag(parts ...[]byte) []byte {
	h := hmac.New(sha256.New, attackerKey)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// forgeSlot rewrites the data of slot (a testSpec store's) with payload,
// keeping the header's key, Meta and generation, and recomputes every
// integrity field a writer without mac.key can: the header's tag over its
// fields and the new payload, under attackerKey. (Against a CRC32C the
// same forger's recomputed checksums were all valid.)
func forgeSlot(t *testing.T, dir string, slot uint32, payload []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(slot) * (HeaderBytes + 64<<10)
	hdr := make([]byte, HeaderBytes)
	if _, err := f.ReadAt(hdr, off); err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(hdr[48:])
	copy(hdr[72:104], attackerTag(hdr[:72], payload[:n]))
	if _, err := f.WriteAt(append(hdr, payload...), off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// forgePut appends a put record for k at slot to the index log, its tag
// recomputed under attackerKey as a forger without mac.key would.
func forgePut(t *testing.T, dir string, slot uint32, k Key, m Meta, gen uint64) {
	t.Helper()
	b := make([]byte, RecordBytes)
	b[0], b[1] = layout.KindPut, layout.FormatVersion
	binary.LittleEndian.PutUint32(b[4:], slot)
	binary.LittleEndian.PutUint64(b[8:], gen)
	copy(b[16:32], k.NS[:])
	copy(b[32:48], k.Hash[:])
	binary.LittleEndian.PutUint64(b[48:], m.Bytes)
	binary.LittleEndian.PutUint32(b[56:], m.Layers)
	copy(b[64:96], attackerTag(b[:64]))
	appendTo(t, filepath.Join(dir, indexName), b)
}

// TestForgedBlockOfAnotherNamespaceIsNotServed: a writer without mac.key
// rewrites a victim namespace's blocks with another namespace's bytes,
// recomputing every check it can, while the Manager is down; after the
// restart the victim's keys are never served those bytes: the block is
// dropped and counted.
func TestForgedBlockOfAnotherNamespaceIsNotServed(t *testing.T) {
	const victim, attacker = 30, 31
	m := Meta{Bytes: 40 << 10, Layers: 1}
	forged := make([]byte, roundUp(m.Bytes))
	fill(forged, key(attacker, 0))

	t.Run("a rewritten slot fails its Read, is dropped and counted in Corrupt", func(t *testing.T) {
		dir := directDir(t)
		spec := testSpec(dir, 4)
		writeN(t, spec, victim, 2, m)
		forgeSlot(t, dir, 0, forged)
		st := mustOpen(t, spec) // VerifyOnOpen -1: the Read path alone decides
		defer st.Close()
		b, err := readBlock(t, st, key(victim, 0), m)
		if !isErr(err, ErrCorrupt) {
			t.Fatalf("Read of the forged block = %v (bytes are the attacker's: %v), want ErrCorrupt", err, same(b, key(attacker, 0), m.Bytes))
		}
		if s := st.Stats(); s.Corrupt != 1 || s.Blocks != 1 {
			t.Errorf("Stats = %+v, want 1 corrupt and 1 block left", s)
		}
		if _, ok := st.Contains(key(victim, 0)); ok {
			t.Error("the forged block is still contained after its Read failed")
		}
		mustRead(t, st, key(victim, 1), m)
	})
	t.Run("a rewritten slot is dropped at open and counted in DroppedAtOpen", func(t *testing.T) {
		dir := directDir(t)
		spec := testSpec(dir, 4)
		writeN(t, spec, victim, 2, m)
		forgeSlot(t, dir, 1, forged)
		spec.VerifyOnOpen = 100
		st := mustOpen(t, spec)
		defer st.Close()
		if s := st.Stats(); s.Recovered != 1 || s.DroppedAtOpen != 1 {
			t.Errorf("Stats = %+v, want 1 recovered and 1 dropped at open", s)
		}
		if _, ok := st.Contains(key(victim, 1)); ok {
			t.Error("the forged block is contained after open")
		}
	})
	t.Run("a forged put record naming another namespace's slot is not replayed", func(t *testing.T) {
		dir := directDir(t)
		spec := testSpec(dir, 4)
		writeN(t, spec, attacker, 1, m)           // the attacker's block, slot 0, generation 1
		forgePut(t, dir, 0, key(victim, 0), m, 1) // claimed for the victim's key
		st := mustOpen(t, spec)
		defer st.Close()
		if _, ok := st.Contains(key(victim, 0)); ok {
			t.Fatal("the forged record's key is contained after open")
		}
		if s := st.Stats(); s.Recovered != 1 || s.IndexRecords != 1 {
			t.Errorf("Stats = %+v, want the 1 genuine block and record", s)
		}
		mustRead(t, st, key(attacker, 0), m)
	})
}

// TestRestartWithTheSameKeyServesTheBlocks: the first Open makes mac.key
// (32 bytes, mode 0600); a restart reads the same key and serves every
// block; the key does not change.
func TestRestartWithTheSameKeyServesTheBlocks(t *testing.T) {
	dir := directDir(t)
	spec := testSpec(dir, 8)
	m := Meta{Bytes: 24 << 10, Layers: 2}
	writeN(t, spec, 32, 5, m)
	path := filepath.Join(dir, keyName)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("the first Open made no %s: %v", keyName, err)
	}
	if fi.Mode() != 0o600 || fi.Size() != layout.SecretBytes {
		t.Errorf("%s is %v, %d bytes; want a regular file of mode 0600, %d bytes", path, fi.Mode(), fi.Size(), layout.SecretBytes)
	}
	first := storeSecret(t, dir)
	if first == ([layout.SecretBytes]byte{}) {
		t.Error("the key is all zero")
	}
	for range 2 {
		spec.VerifyOnOpen = 100
		st := mustOpen(t, spec)
		if s := st.Stats(); s.Recovered != 5 || s.DroppedAtOpen != 0 || s.Corrupt != 0 {
			t.Errorf("Stats after a restart = %+v, want 5 recovered, none dropped", s)
		}
		for i := range 5 {
			mustRead(t, st, key(32, uint64(i)), m)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if storeSecret(t, dir) != first {
		t.Error("the key changed across restarts")
	}
}

// TestLostKeyStartsEmpty: blocks.dat and index.log without mac.key cannot
// be verified: Open makes a new key, discards the records (logged with
// their count) and starts empty; the store then works under the new key.
func TestLostKeyStartsEmpty(t *testing.T) {
	dir := directDir(t)
	spec := testSpec(dir, 8)
	m := Meta{Bytes: 8192, Layers: 1}
	writeN(t, spec, 33, 3, m)
	old := storeSecret(t, dir)
	if err := os.Remove(filepath.Join(dir, keyName)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	st, err := Open(spec, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Open without the key: %v", err)
	}
	if s := st.Stats(); s.Recovered != 0 || s.Blocks != 0 || s.IndexRecords != 0 {
		t.Errorf("Stats = %+v, want an empty store", s)
	}
	if !strings.Contains(logs.String(), "cannot be verified") || !strings.Contains(logs.String(), "records=3") {
		t.Errorf("the log does not say the 3 records were discarded:\n%s", logs.String())
	}
	if storeSecret(t, dir) == old {
		t.Error("the new key equals the lost one")
	}
	if err := writeBlock(t, st, key(34, 0), m); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = mustOpen(t, spec)
	defer st.Close()
	if s := st.Stats(); s.Recovered != 1 {
		t.Errorf("recovered %d blocks under the new key, want 1", s.Recovered)
	}
	mustRead(t, st, key(34, 0), m)
}

// TestKeyFileIsChecked: a mac.key that is not a 32-byte regular file of
// the Manager's uid, mode 0600, with one link, is refused at Open with an
// error naming its path and what is wrong; nothing else in the directory
// changes.
func TestKeyFileIsChecked(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, path string)
		root   bool   // needs root (chown to another uid)
		reason string // in the error
	}{
		{"a symbolic link", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			mustWrite(t, target, make([]byte, 32), 0o600)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, false, "is a symbolic link"},
		{"mode 0644", func(t *testing.T, p string) { mustWrite(t, p, make([]byte, 32), 0o644) }, false, "has mode 0644"},
		{"mode 0640", func(t *testing.T, p string) { mustWrite(t, p, make([]byte, 32), 0o640) }, false, "has mode 0640"},
		{"another uid's file", func(t *testing.T, p string) {
			mustWrite(t, p, make([]byte, 32), 0o600)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true, "owned by uid 65534"},
		{"a second hard link", func(t *testing.T, p string) {
			mustWrite(t, p, make([]byte, 32), 0o600)
			if err := os.Link(p, p+".other"); err != nil {
				t.Fatal(err)
			}
		}, false, "2 hard links"},
		{"a directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, false, "not a regular file"},
		{"31 bytes", func(t *testing.T, p string) { mustWrite(t, p, make([]byte, 31), 0o600) }, false, "is 31 bytes, want exactly 32"},
		{"33 bytes", func(t *testing.T, p string) { mustWrite(t, p, make([]byte, 33), 0o600) }, false, "is 33 bytes, want exactly 32"},
		{"an empty file", func(t *testing.T, p string) { mustWrite(t, p, nil, 0o600) }, false, "is 0 bytes, want exactly 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused naming the path", func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			dir := directDir(t)
			spec := testSpec(dir, 2)
			writeN(t, spec, 35, 1, Meta{Bytes: 4096, Layers: 1})
			path := filepath.Join(dir, keyName)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			tt.make(t, path)
			index, _ := os.ReadFile(filepath.Join(dir, indexName))
			st, err := Open(spec, nil)
			if err == nil {
				st.Close()
				t.Fatalf("Open accepted %s", tt.name)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Open error %q does not name %s and %q", err, path, tt.reason)
			}
			if after, _ := os.ReadFile(filepath.Join(dir, indexName)); !bytes.Equal(after, index) {
				t.Error("the refused Open changed the index log")
			}
			if _, err := os.Lstat(path); err != nil {
				t.Errorf("the refused key file is gone: %v", err)
			}
		})
	}
}

func mustWrite(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
