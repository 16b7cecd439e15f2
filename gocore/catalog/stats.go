package catalog

import "sync/atomic"

// Stats is a snapshot of the catalog's counters (monotonic, since Open)
// and gauges (now); the Manager maps them to Prometheus.
type Stats struct {
	// Registered is whether this Manager holds a live membership lease now.
	Registered bool
	// Registrations counts leases granted with the member record written;
	// more than 1 means the lease was lost and registration redone.
	Registrations uint64
	// RegisterErrors counts failed registration attempts (etcd unreachable).
	RegisterErrors uint64
	// LeasesLost counts keep-alives that ended before Close.
	LeasesLost uint64
	// AdvertisedBlocks is the (namespace, hash) pairs this node advertises
	// now (gauge), written or about to be.
	AdvertisedBlocks uint64
	// AdvertisedBytes is the bytes of inventory keys and values they take
	// in etcd (gauge), at most BudgetBytes.
	AdvertisedBytes uint64
	// BudgetBytes is Spec.AdvertiseBudgetBytes.
	BudgetBytes uint64
	// OverBudgetBlocks counts Advertise hashes dropped past the budget (or
	// a full shard); they were never advertised.
	OverBudgetBlocks uint64
	// PendingShards is the shards whose changes etcd does not have yet.
	PendingShards uint64
	// Flushes counts transactions that wrote shards; FlushErrors those
	// that failed (their shards are retried at the next batch).
	Flushes, FlushErrors uint64
	// Rebuilds counts range reads of the whole prefix (the first, and one
	// after each compaction); Compactions the Watch resumes refused as
	// compacted; Resumes the Watch streams that ended and were resumed.
	Rebuilds, Compactions, Resumes uint64
	// MalformedRecords counts keys or values under the prefix that did not
	// decode (ignored; the log names the first of each key).
	MalformedRecords uint64
	// Members is the live members the index knows (gauge, this one too).
	Members uint64
	// IndexedEntries is the (block, owner) pairs in the index (gauge),
	// older epochs included until their records go.
	IndexedEntries uint64
	// Revision is the etcd revision the index reflects.
	Revision int64
}

type counters struct {
	registrations, registerErrors, leasesLost atomic.Uint64
	overBudget, flushes, flushErrors          atomic.Uint64
	rebuilds, compactions, resumes, malformed atomic.Uint64
	revision                                  atomic.Int64
}

// Stats returns the counters; safe from any goroutine.
func (c *Catalog) Stats() Stats {
	return Stats{
		Registered:       c.lease.Load() != 0,
		Registrations:    c.st.registrations.Load(),
		RegisterErrors:   c.st.registerErrors.Load(),
		LeasesLost:       c.st.leasesLost.Load(),
		AdvertisedBlocks: uint64(c.blocks.Load()),
		AdvertisedBytes:  c.used.Load(),
		BudgetBytes:      c.budget,
		OverBudgetBlocks: c.st.overBudget.Load(),
		PendingShards:    uint64(c.pendingShards()),
		Flushes:          c.st.flushes.Load(),
		FlushErrors:      c.st.flushErrors.Load(),
		Rebuilds:         c.st.rebuilds.Load(),
		Compactions:      c.st.compactions.Load(),
		Resumes:          c.st.resumes.Load(),
		MalformedRecords: c.st.malformed.Load(),
		Members:          uint64(len(c.members.Load().list)),
		IndexedEntries:   uint64(c.entries.Load()),
		Revision:         c.st.revision.Load(),
	}
}
