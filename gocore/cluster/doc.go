// Package cluster is this Manager's part in a cluster of Managers
// (docs/design.md §4.1 and §7, docs/cache.md "Peer tier"): the catalog on etcd
// that advertises which blocks each node holds (gocore/catalog), peer
// control that authorises and pins a transfer (gocore/peer, mutual TLS
// under the cluster CA), and the transfer engine that moves the bytes
// (gocore/transfer: data connections carrying the per-transfer capability
// peer control issued).
//
// It owns three paths, each below the cache:
//
//   - Fetch (Fetcher): the peer tier's network side. Owners answers from
//     the catalog's Watch-fed index (no round trip: the dispatcher asks);
//     Fetch opens a transfer at the owner (OpenTransfer pins the run
//     there), has the tier place frames for the run served, READs the
//     bytes straight into them and releases the transfer in the
//     background. A peer whose fetch failed (unreachable, cut off, late,
//     of another epoch) is not asked again for PeerBackoff.
//   - Source (Cluster.Start's peer.Source): peer control serves this
//     node's RAM blocks to peers through the pin functions the Manager
//     hands it (the cache's PinRun and UnpinRun, run on the dispatcher),
//     and the transfer data server sends their bytes.
//   - Advertise (Advertiser): the tiers' advertisements and withdrawals
//     of the blocks this node produced, forwarded to the catalog once it
//     is open.
//
// Lifecycle: New makes the transfer engine, the Fetcher and the
// Advertiser (the tiers take them at their creation); Start, once the
// RAM tier exists and the dispatcher runs, binds the data and peer
// control listeners and opens the catalog; Leave revokes the catalog
// lease and stops serving peers while the dispatcher still runs; Close
// (after the cache stopped: no fetch runs) waits for releases in flight
// and closes the engine.
package cluster
