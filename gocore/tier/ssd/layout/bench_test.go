package layout

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"hash/crc32"
	"testing"
)

// BenchmarkBlockMAC is the integrity check of one block as the store
// computes it on every write and read: the block in the RAM tier's 16 KiB
// chunks. mac=crc32c is the baseline (the CRC32C of layout version 1, no
// key), mac=hmac-sha256 the check of version 2 (SealSlotHeader and
// CheckSlot: the header's fields and the block), mac=gmac the candidate
// it was measured against: AES-256-GCM with the block as additional data
// and no plaintext, which crypto/cipher takes only as one contiguous
// slice (the store's blocks are scattered chunks, so the benchmark hands
// it a contiguous copy and does not time the copy). Keyed BLAKE3 was
// measured outside the module (doc.go, "Integrity").
//
//	go test -run '^$' -bench BenchmarkBlockMAC ./gocore/tier/ssd/layout
func BenchmarkBlockMAC(b *testing.B) {
	for _, size := range []int{64 << 10, 512 << 10, 2 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 31)
		}
		var chunks [][]byte
		for off := 0; off < size; off += 16 << 10 {
			chunks = append(chunks, data[off:off+16<<10])
		}
		name := fmt.Sprintf("size=%dKiB", size>>10)
		b.Run(name+"/mac=crc32c", func(b *testing.B) {
			table := crc32.MakeTable(crc32.Castagnoli)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				var c uint32
				for _, p := range chunks {
					c = crc32.Update(c, table, p)
				}
				sink32 = c
			}
		})
		b.Run(name+"/mac=hmac-sha256", func(b *testing.B) {
			mac := NewMAC(&testSecret)
			hdr := make([]byte, HeaderBytes)
			h := SlotHeader{Key: key(1, 1), Meta: Meta{Bytes: uint64(size), Layers: 1}, Gen: 1}
			mac.SealSlotHeader(hdr, h, chunks)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if !mac.CheckSlot(hdr, chunks) {
					b.Fatal("CheckSlot refuses the header it sealed")
				}
			}
		})
		b.Run(name+"/mac=gmac", func(b *testing.B) {
			block, err := aes.NewCipher(testSecret[:])
			if err != nil {
				b.Fatal(err)
			}
			gcm, err := cipher.NewGCM(block)
			if err != nil {
				b.Fatal(err)
			}
			nonce, tag := make([]byte, gcm.NonceSize()), make([]byte, 0, gcm.Overhead())
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				tag = gcm.Seal(tag[:0], nonce, nil, data)
			}
		})
	}
}

var sink32 uint32

// BenchmarkReplay is Open's replay of an index log of put records, every
// tag checked: records=N is the log's length.
func BenchmarkReplay(b *testing.B) {
	mac := NewMAC(&testSecret)
	const n = 100000
	log := mac.AppendIndexHeader(nil, 64<<10)
	for i := range n {
		log = mac.AppendRecord(log, Record{Kind: KindPut, Slot: uint32(i), Gen: uint64(i + 1), Key: key(1, uint64(i)), Meta: Meta{Bytes: 4096, Layers: 1}})
	}
	b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
		b.SetBytes(int64(len(log)))
		b.ReportAllocs()
		for b.Loop() {
			if r := Replay(mac, log, 64<<10, n); len(r.Blocks) != n {
				b.Fatalf("replayed %d blocks, want %d", len(r.Blocks), n)
			}
		}
	})
}
