// Package content is the block content the suites publish, restore and
// verify: the namespace every bench client shares (Namespace), the
// 16-byte block hash of a trace hash id (BlockHash), and pages filled from
// a per-(namespace, hash, layer) seed (Seed, FillPage) that VerifyPage
// checks word by word, so every restored byte is compared without keeping
// a copy. Page sizes are multiples of PageAlign (64) bytes.
package content
