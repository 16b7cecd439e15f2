// Package peer is peer control between orbitkv-managers: the gRPC service of
// proto/peer.proto (OpenTransfer, ReleaseTransfer, Lookup) over mutual TLS under a
// cluster CA, its client (Dial), the loading of the cluster's certificates
// (LoadTLS) and their making (NewCA, NewNodeCert; `orbitkvctl certs`). It
// authorises a transfer and pins the exact bytes at the source; the bytes
// move on the transfer engine (gocore/transfer), never through this package.
// gocore/cluster, gocore/cache (PinnedBlock), gocore/manager (its Stats)
// and cmd/ import it.
//
// # A transfer
//
// A requester that found, in the catalog, a live peer advertising the next
// blocks of a chain calls OpenTransfer(namespace, hashes, max_bytes,
// expect_epoch) on that peer. The source
//
//  1. checks the request (errors name the field and its limit: a namespace
//     and each hash are 16 bytes, 1..MaxHashes hashes, max_bytes at least 1)
//     and that expect_epoch is its epoch;
//  2. reserves the calling peer's share (ServerSpec.MaxPeerTransfers,
//     MaxPeerBytes) and asks its Source (the Manager's dispatcher) to pin the
//     longest resident leading run of the hashes, at most max_bytes lowered
//     to MaxTransferBytes and to what is left of the peer's bytes;
//  3. computes each block's CRC-32C (Castagnoli) on the gRPC handler's
//     goroutine, never on the dispatcher;
//  4. registers the run as one segment on its transfer server (the blocks'
//     chunks back to back) with the lease's deadline, and answers the run:
//     each block's length, CRC-32C and offset in the segment, the data
//     address, the segment id and its capability, and the deadline.
//
// The pins go exactly once, on the first of: ReleaseTransfer from the peer
// that opened it; the lease's deadline (ServerSpec.LeaseTTL after the
// answer); the end of the gRPC connection it was opened on (the stats
// handler's ConnEnd: a requester that dies or is cut off holds nothing past
// its TCP connection, or past the keepalive when the network drops it
// silently); Server.Close. Each way unregisters the segment first (after
// UnregisterSegment returns no READ touches the blocks) and only then calls
// Source.Unpin. An empty run holds nothing: it is unpinned at once and
// answered with transfer id 0.
//
// # A lookup
//
// Lookup(namespace, engine_hashes | token_ids and block_size) asks a peer
// how many leading blocks of a chain it holds in RAM, on SSD and on either,
// from the block records its KV events keep (ServerSpec.Lookup, the
// Manager's adapter over gocore/kvevents; nil while its events are off:
// ErrUnavailable). It pins nothing: the answer is a hint. The fields are
// checked against MaxLookupHashes, MaxLookupTokens and a block size of
// 1..abi.RecordMaxTokens (ErrInvalidRequest naming the field), and the
// client refuses counts that do not fit the chain (ErrBadReply). The
// Manager's POST /v1/lookup with "nodes" asks every live member this way
// (gocore/cluster's LookupPeers).
//
// # Epochs
//
// A Manager's epoch changes at every start. The catalog advertises blocks
// with the epoch of the Manager that holds them, and the requester sends
// that epoch as expect_epoch: a source at another epoch answers
// FAILED_PRECONDITION (ErrEpochMismatch), so a restarted peer is never asked
// for its previous life's blocks, whatever the catalog still says.
//
// # Trust model
//
// Every connection is TLS 1.3 with a client certificate the cluster CA
// signed (tls.RequireAndVerifyClientCert); a connection without one, or
// with one of another CA, fails its handshake and is logged (at most
// refusalLogsPerSecond lines a second) before any call is read. The peer's
// node id is its certificate's subject common name, logged at connect and
// used to bound and to own its transfers: one peer cannot release another's.
// Before any of that, ServerSpec.MaxConns (256) bounds the connections
// open, handshakes included (the gate listener below TLS: past it a
// connection waits in the kernel's accept queue), and MaxHandshakes (64)
// and MaxHandshakesPerHost (32) those still in their TLS handshake: past
// either, one of the host with the most (of the same host, for the
// per-host cap) is closed to admit the new one, the oldest that has sent
// no byte yet, else the oldest; a connection leaves the pool once
// authenticated. So clients that never send a TLS byte
// hold at most 64 descriptors however fast they redial, and keep a peer
// out only from its own address or from more than 64 addresses (Stats.
// HandshakesEvicted counts the closes); MaxConcurrentStreams (128) bounds
// the calls in flight on one connection.
// The other way round, the server's certificate must chain to the CA and
// name the address dialled; DialNode also requires it to name the node id
// the catalog gave, so a node that took over another's address is refused.
// Nothing of this package listens without that authentication; the
// transfer engine's data connections are plain TCP, but a READ names a
// segment by its id and a 128-bit capability from crypto/rand that only
// the authenticated peer that opened the transfer was told, and the segment
// exists only while the transfer does. The data path carries gigabytes a
// second, which TLS would encrypt byte by byte on both Managers' cores;
// a capability gives the same access control (who may read which bytes,
// and until when) at the cost of one 16-byte compare per connection. It
// does not give confidentiality: the blocks cross the network in clear,
// so the data network must be one the cluster trusts not to be sniffed.
//
// Peers are trusted once authenticated: a Manager holding a certificate of
// the cluster CA may pin up to its bounds and is believed about the bytes
// it serves. The CRC-32C of each block, computed by the source before the
// transfer and checked by the requester before the block becomes visible,
// catches corruption on the way (a bad NIC, a bug, a torn read); it does
// not catch a lying peer, which can send wrong bytes with their matching
// checksum. A cluster that cannot trust every holder of a node certificate
// needs content-addressed verification this design does not have.
//
// Operators may bring their own certificates instead of `orbitkvctl certs`:
// LoadTLS takes a PEM CA file, a PEM certificate whose subject common name is
// the node id (CheckNodeID's characters) with both the server and the client
// extended key usage, and its PEM key (PKCS #8, EC or RSA), and it checks
// that the certificate chains to the CA.
//
// # Errors and gRPC codes
//
// One table (errors.go, codeTable) maps this package's errors to gRPC codes
// on the server and back on the client, so a requester tests errors.Is:
//
//	ErrInvalidRequest   INVALID_ARGUMENT     a field out of its limit (named)
//	ErrUnauthenticated  UNAUTHENTICATED      no verified certificate or node id
//	ErrEpochMismatch    FAILED_PRECONDITION  expect_epoch is not the source's
//	ErrPeerLimit        RESOURCE_EXHAUSTED   the peer holds its most transfers or bytes
//	ErrUnknownTransfer  NOT_FOUND            released, expired, or another peer's
//	ErrUnavailable      UNAVAILABLE          source closing, pin or segment refused, no connection
//	ErrSourceBroken     INTERNAL             the Source broke its contract (logged)
//	context.DeadlineExceeded DEADLINE_EXCEEDED
//	context.Canceled    CANCELED
//
// Anything else is INTERNAL. On the client an UNAVAILABLE from the transport
// itself (a refused handshake, a dropped connection) is ErrUnavailable too.
// Every one of them is, for the requester, a miss.
package peer
