// Package transfer moves the bytes of KV blocks between OrbitKV Managers:
// a transfer engine shaped like Mooncake's Transfer Engine (segments,
// registered local memory, a batch of READ requests, per-request status,
// a notification at the batch's end) over a TCP backend of its own.
//
// It owns the data path only. Which blocks move, and who may move them,
// is peer control's (gocore/peer): OpenTransfer, over mutual TLS, pins the
// blocks at the source, registers them here as one segment
// (Server.RegisterSegment) and hands the requester the segment's id, its
// capability and the Server's address; the requester (the Manager's peer
// tier) opens the segment on its requester.Engine and submits READs that land in its
// RAM tier's frames. Checking the bytes (CRC32C, against the values
// OpenTransfer returned) before a block becomes visible is the caller's
// job: this package moves bytes and never interprets them. It imports
// gocore/admission, gocore/failpoint and gocore/limit only.
//
// # Source side
//
// A Server listens on one TCP address. A segment is the concatenation of
// the buffers given to RegisterSegment (a run of blocks' chunks, in
// order); a READ addresses [offset, offset+length) of it. The Server
// writes DATA straight from those buffers (writev through net.Buffers,
// no copy in user space) and never writes them. UnregisterSegment, and
// expiry at the segment's deadline, end a segment: later READs are
// refused, and a DATA write in flight is cut short (its connection
// closes) and waited for, so that once UnregisterSegment returns the
// pinned bytes are not read any more and the caller may unpin them.
//
// # Requester side
//
// The Engine that reads segments (rails, slices, the endpoint pool,
// batches) is gocore/transfer/requester; this package holds what both
// sides share (the frame, the error table, Capability) and the Server.
//
// # Why plain TCP with a capability
//
// Data connections are plain TCP. Each READ carries the segment's
// capability, 128 bits from crypto/rand, which the Server compares in
// constant time. Peer control authenticated the requester over mutual
// TLS under the cluster CA before it issued the capability, and the
// capability admits READs of that one segment (the bytes pinned for that
// transfer) until it is unregistered or its deadline (seconds) passes;
// nothing can be written through a data connection, and a connection
// without a valid capability reads nothing. Encrypting the bulk bytes too
// would cost the data path a TLS handshake per rail and AES-GCM on every
// byte on both sides: CPU of the same order as the copies the data path
// exists to make, for bytes whose senders are already authenticated.
//
// What an observer on the path between two Managers sees: the KV bytes
// in clear (derived from users' prompts: the cluster network must be
// trusted for confidentiality), the segment ids, offsets and lengths, and
// each READ's capability. An on-path attacker who can also inject packets
// could replay a capability it saw to read that same segment again until
// it ends; it cannot read another segment, write anything, or learn
// anything of peer control. Peers themselves are trusted once
// authenticated (a lying peer can send wrong bytes; the caller's CRC32C
// catches corruption, not malice). Running the rails inside TLS (the
// same cluster CA, tls.Client and tls.Server around each connection) is
// a possible later option for networks that are not trusted; the wire
// protocol would not change.
//
// # Wire protocol
//
// Every frame on a data connection starts with one header layout of
// HeaderBytes (64) bytes, little-endian, fields at their natural
// alignment:
//
//	offset size field       meaning
//	0      4    magic       0x54564B4F ("OKVT" in memory)
//	4      1    version     1
//	5      1    op          1 READ (requester → source), 2 DATA, 3 ERROR (source → requester)
//	6      2    code        ERROR: why (1 unknown segment, 2 wrong capability,
//	                        3 expired, 4 range beyond the segment, 5 malformed
//	                        frame); 0 in READ and DATA
//	8      8    tag         the requester's slice id, echoed in the answer
//	16     8    segment     segment id, ≥ 1, echoed in the answer
//	24     8    offset      byte offset in the segment, echoed in DATA
//	32     4    length      READ: bytes asked, 1..MaxSliceBytes (16 MiB);
//	                        DATA: payload bytes that follow, equal to the READ's;
//	                        ERROR: bytes of text that follow, 0..MaxErrorTextBytes (256)
//	36     4    reserved    0
//	40     16   capability  READ: the segment's capability; 0 otherwise
//	56     8    reserved    0
//
// A DATA header is followed by length payload bytes, an ERROR header by
// length bytes of UTF-8 text. A connection carries READs one way and
// their answers, in the same order, the other way (the requester
// pipelines up to Window READs); answers are matched by order and
// checked by tag, segment, offset and length. DecodeHeader rejects a
// header that breaks any bound above, naming the field and its limit
// (and is fuzzed: FuzzDecodeHeader; FuzzServe fuzzes the Server's whole
// connection loop); the Server then checks the segment
// (exists, capability, deadline) and the range (CheckRange). A refused
// READ gets an ERROR and the connection goes on; a malformed frame gets
// an ERROR with code 5 and the connection is closed, since its framing
// can no longer be trusted. A wrong capability is answered exactly as a
// segment that does not exist, and segment ids are drawn at random
// (crypto/rand), so refusals tell a requester without the capability
// nothing of which segments are live.
//
// # Limits against requesters without a capability
//
// The data port is plain TCP; only the capability admits a READ. So that
// such a requester cannot hold the Server's connections: at most
// ServerSpec.MaxConns (256) are open, at most MaxConnsPerHost (64) from
// one remote IP address; a connection is closed after MaxRefusals (128)
// refused READs in a row, and only a READ answered with DATA moves its
// idle deadline (IdleTimeout, 2 minutes), so one that is only ever
// refused lives that long at most. A connection is unproven until one of
// its READs is admitted (it holds a capability): unproven ones may be at
// most MaxUnproven (half of MaxConns) and MaxUnprovenPerHost
// (MaxConnsPerHost), are closed ProveTimeout (5 s) after accept, and the
// oldest (of the host with the most, or of the newcomer's host for the
// per-host limits) is closed to admit a new connection when any of these
// limits, MaxConns or MaxConnsPerHost is reached (gocore/admission keeps
// that bookkeeping); proven connections are never closed for a newcomer. So idle connections without a capability cannot
// lock a requester out, which sends its READ right after it connects.
// ServerStats counts each of these closes (OverConns, OverHost,
// OverRefusals, Evicted, ProveTimeouts). Errors cross the wire through one table
// (codeErrors in errors.go) and come back as the same sentinel errors.
//
// The 64-byte header against a 256 KiB slice is 0.02% of the bytes; the
// fixed layout keeps decoding a bounds check, not a parse.
package transfer
