package ssd

import "testing"

// ByNamespace counts each namespace's resident blocks and their bytes,
// and stops counting a deleted block.
func TestByNamespaceCountsResidentBlocksPerNamespace(t *testing.T) {
	st := mustOpen(t, testSpec(directDir(t), 8))
	defer st.Close()
	for i := range 3 {
		if err := writeBlock(t, st, key(1, uint64(i)), Meta{Bytes: 4096, Layers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeBlock(t, st, key(2, 0), Meta{Bytes: 5000, Layers: 1}); err != nil {
		t.Fatal(err)
	}
	got := st.ByNamespace()
	a, b := key(1, 0).NS, key(2, 0).NS
	if len(got) != 2 || *got[a] != (NamespaceUse{Blocks: 3, Bytes: 3 * 4096}) || *got[b] != (NamespaceUse{Blocks: 1, Bytes: 5000}) {
		t.Fatalf("ByNamespace = %d namespaces (a %+v, b %+v), want a 3 blocks of 12288 bytes, b 1 of 5000", len(got), got[a], got[b])
	}
	st.Delete(key(1, 1))
	if u := st.ByNamespace()[a]; *u != (NamespaceUse{Blocks: 2, Bytes: 2 * 4096}) {
		t.Errorf("namespace a after a Delete: %+v, want 2 blocks of 8192 bytes", *u)
	}
}
