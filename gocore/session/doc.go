// Package session owns what the Manager holds for one connected process: its
// slot (a sealed memfd, mapped), its eventfd, its identity (peer pid and uid
// from SO_PEERCRED, role, instance id, client token) and its registered
// buffers, plus the Table that hands out slot indexes.
//
// Slot layout (native/include/orbitkv/abi.h, struct okv_slot):
//
//	offset  bytes  line
//	0       64     header: magic, ABI version, slot bytes, slot index,
//	               descriptor offset and capacity, epoch, initial generation
//	64      64     request  (written by the client)
//	128     64     response (written by the Manager)
//	192     64     wait: the client's park flag
//	4096    N      descriptor area (N = 256 KiB by default)
//
// Request and response sit on separate cache lines so neither side's stores
// invalidate the line the other side is writing. The descriptor area starts
// on its own page. The memfd is sealed with F_SEAL_GROW | F_SEAL_SHRINK |
// F_SEAL_SEAL (memfd_create(2), fcntl(2) "File Sealing") before its fd leaves
// the Manager, so a client can neither shrink it under the Manager's mapping
// (SIGBUS) nor grow it.
//
// Generations: a slot index that is reused starts its new session beyond
// every generation an earlier session at that index used (spec: "reconnecting
// to a reused slot starts beyond the prior generation").
//
// Importers: gocore/bootstrap (creates and closes sessions), gocore/channel
// (reads the mapping through the dispatcher).
package session
