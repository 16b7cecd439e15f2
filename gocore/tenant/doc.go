// Package tenant says which engines are which tenant, keeps tenants' cache
// keys apart, and holds each tenant's share of the Manager's resources
// (docs/security.md "Tenants").
//
// A tenant is a name and the selectors of its processes, given to the
// Manager as --tenant NAME=SEL[,SEL...] (repeatable):
//
//	uid:N       the process's uid (SO_PEERCRED) is N
//	gid:N       its gid or one of its supplementary groups (SO_PEERGROUPS) is N
//	cgroup:PATH its cgroup v2 path (/proc/PID/cgroup "0::PATH", read through a
//	            pidfd of the peer) is PATH or below it, whole components only:
//	            cgroup:/kubepods/pod1 selects /kubepods/pod1/c2, not
//	            /kubepods/pod10
//
// A process is the tenant whose selectors it matches; one that matches
// none is refused, and so is one that matches two tenants (the refusal
// names both: the configuration is ambiguous for it). With no tenants
// configured there is one trust domain, the Manager's uid, and this
// package is not used.
//
// Namespaces. The Manager keys every block by the namespace its engine
// sent mixed with the tenant's domain (Domain.Namespace): the first 16
// bytes of SHA-256 over the tag "orbitkv.tenant.v1", the domain name's
// length (u32 little-endian) and bytes, and the engine's 16 namespace
// bytes. A tenant that sends another tenant's namespace bytes therefore
// names another key and gets misses. The mix needs no secret: the Manager
// computes it from the kernel's word on who the peer is, and finding a
// namespace that mixes to another domain's key is a SHA-256 preimage. The
// domain is the tenant's name, or the name of the sharing group it is in
// (--tenant-share GROUP=NAME,NAME...): tenants of one group share their
// cache, no others do. The mix is the same on every host, so tenants of
// one name on two hosts of a cluster share through the peer tier as one
// tenant does.
//
// Quotas. Each tenant may take at most its share of the Manager's
// sessions, operation permits, discovery tables and leased RAM: by
// default half of each when two or more tenants are configured, all of it
// when one; --tenant-quota NAME:sessions=N,ops=N,tables=N,pinned=FRACTION
// sets a tenant's own. Shares are of the Manager-wide limits and are not
// reserved: the sum of the shares may exceed the whole (the default of
// two tenants is exactly the whole), and what one tenant leaves unused
// another may use up to its share. The keys ram=SIZE and ssd=SIZE (sizes
// by the Manager's size rule: 65536, 512MiB, 1.5GiB) bound the bytes of
// the tenant's blocks in the RAM and SSD tiers; they have no default.
// Blocks belong to a domain, so the tiers count them per domain and hold
// a sharing group to the smallest ram (ssd) quota of its members
// (Domain.RAMBytes).
//
// Who may import it: anything. It imports only the standard library
// (namespaces are the 16 bytes of an abi.Namespace).
package tenant
