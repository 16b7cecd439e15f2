package main

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// config holds the Manager's settings as flags, environment and config
// file give them, before they become a manager.Spec. Sizes stay text here:
// spec parses them (limit.ParseSize) so every size error is reported with the
// others.
type config struct {
	listen       string
	socket       string
	pollMode     string
	transport    string
	service      string
	spinWindow   time.Duration
	httpAddr     string
	httpPprof    bool
	maxSessions  uint
	maxPerPID    uint
	descBytes    string
	helloTimeout time.Duration
	logLevel     string
	logFormat    string
	ramCapacity  string
	chunkBytes   string
	copyWorkers  int
	copyBackend  string
	prefault     bool
	fdStore      bool
	maxBufBytes  string
	discBytes    string
	hugepages    string
	eviction     string
	ssdDir       string
	ssdCreateDir bool
	ssdCapacity  string
	ssdSlot      string
	ssdAdmission string
	ssdWorkers   int
	maxOpsSess   int
	maxOps       int
	opExpiry     time.Duration
	leaseIdle    time.Duration
	leaseBudget  string
	warmupBudget string
	shutdownWait time.Duration
	opSocket     string
	opGroup      string
	opAdmitUID   bool
	pyroURL      string
	pyroApp      string
	pyroTenant   string
	pyroUser     string
	pyroPassFile string
	pyroInterval time.Duration
	ebpf         bool
	cluster      clusterConfig
	tenants      listValue
	tenantShares listValue
	tenantQuotas listValue
	kvEvents     string
	kvReplay     string
	kvTopic      string
	kvQueue      int

	// Not settings of the Manager: they choose what the command does, and
	// are neither config keys nor environment variables (but --config has
	// ORBITKV_CONFIG).
	configFile  string
	printConfig bool
	check       bool
	showVersion bool
}

// commandFlags are the flags that are not config keys.
var commandFlags = map[string]bool{"config": true, "print-config": true, "check": true, "version": true, "help": true}

// defineFlags declares every flag on fs, bound to c. Each flag name is
// also its config-file key and, upper-cased with "_" for "-" after
// ORBITKV_, its environment variable.
func defineFlags(fs *pflag.FlagSet, c *config) {
	fs.SortFlags = false // the order below groups them by concept
	fs.StringVar(&c.configFile, "config", "", "TOML config `file` of flag-named keys (ram-capacity = \"64GiB\"); also ORBITKV_CONFIG. Flags win over environment variables, which win over the file")
	fs.BoolVar(&c.printConfig, "print-config", false, "print the effective configuration (every key, as TOML) and where each value came from, then exit without starting: status 0, or 2 when a setting is wrong; the host is not checked (see --check)")
	fs.BoolVar(&c.check, "check", false, "preflight: validate the settings and run every start-time check of the host without starting (ports, socket paths and directories, memory or hugepages for --ram-capacity, --ssd-dir's filesystem and free space, eBPF), print each as ok or failed, and exit with status 0 when all pass, else the status of the first failure's class (see Exit status)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7470", "`host:port` this Manager is known by; without a runtime directory the bootstrap socket path /tmp/orbitkv-HOST-PORT.sock is derived from it (no TCP port is opened in this build)")
	fs.StringVar(&c.socket, "bootstrap-socket", "", "bootstrap Unix socket `path` (default: $RUNTIME_DIRECTORY/manager.sock when systemd sets RUNTIME_DIRECTORY, the first entry of several; else /run/orbitkv/manager.sock when /run/orbitkv is a directory owned by this user; else /tmp/orbitkv-HOST-PORT.sock of --listen)")
	fs.StringVar(&c.pollMode, "poll-mode", "adaptive", "how the dispatcher waits for requests: spin (dedicated core), adaptive (spin for --spin-window after the last request, then park), park")
	fs.DurationVar(&c.spinWindow, "spin-window", 50*time.Microsecond, "adaptive mode: how long to spin after the last request before parking (`duration` with a unit, e.g. 50us; 0..1s)")
	fs.StringVar(&c.transport, "channel-transport", "shm", "how the 64-byte requests and responses move: shm (the session slot's lines, a doorbell and futexes) or iceoryx2 (a request-response service of iceoryx2 0.10 per session, created exclusively with objects of this user only, its name in the session's bootstrap reply; needs a build with the iceoryx2 transport)")
	fs.StringVar(&c.service, "channel-service", "orbitkv", "iceoryx2 transport: `prefix` of every session's service name PREFIX/EPOCH/TOKEN (1..190 printable bytes, no spaces)")
	fs.StringVar(&c.opSocket, "operator-socket", "", "operator Unix socket `path` for orbitkvctl (default: the bootstrap socket's path plus .operator)")
	fs.StringVar(&c.opGroup, "operator-group", "", "operator socket group `name` (or gid): mode 0660 and that group's members may operate; default 0600 (root only)")
	fs.Var(&c.tenants, "tenant", "a tenant `NAME=SEL[,SEL...]` whose processes, of any uid, may use this Manager, each SEL uid:N, gid:N or cgroup:/PATH (the peer's cgroup v2 path or below it); repeat it, or separate tenants with ';' in ORBITKV_TENANT and the config file. With tenants the bootstrap socket is 0666, admits exactly the processes one tenant selects, and keeps each tenant's cache apart and within its share (docs/security.md); without, only the Manager's uid connects")
	fs.Var(&c.tenantShares, "tenant-share", "`GROUP=NAME,NAME[,...]`: these tenants share one cache (their namespaces are keyed alike); repeatable, ';'-separated in the environment and the file")
	fs.Var(&c.tenantQuotas, "tenant-quota", "`NAME:key=value[,...]`: a tenant's share, keys sessions, ops and tables (counts) and pinned (a fraction of --lease-budget), default half of each with two or more tenants, all of it with one; and ram and ssd (sizes, e.g. 4GiB: the most bytes of its blocks in the RAM and SSD tiers, its oldest blocks evicted first; no default; a sharing group takes its members' smallest); repeatable, ';'-separated in the environment and the file")
	fs.BoolVar(&c.opAdmitUID, "operator-admit-manager-uid", false, "also let processes of the Manager's own uid operate (flush, drain, list sessions); off, as engines run as that uid")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:7471", "loopback `host:port` for /livez, /readyz, /health and /metrics; empty disables")
	fs.BoolVar(&c.httpPprof, "http-pprof", false, "also serve /debug/pprof on --http-addr (profiles show every engine's activity to any local process: off unless debugging)")
	fs.UintVar(&c.maxSessions, "max-sessions", 1024, "most concurrent sessions (`count`, 1..4095)")
	fs.UintVar(&c.maxPerPID, "max-sessions-per-pid", session.DefaultMaxSessionsPerPID, "most concurrent sessions of one client process, by its SO_PEERCRED pid (`count`, 1..4095); an engine process opens one, and one more for a while after a reconnect; beyond it the bootstrap is refused (status full) naming this limit")
	fs.StringVar(&c.descBytes, "desc-bytes", "256KiB", "descriptor area per session slot (`size`: 4KiB..64MiB, multiple of 4KiB); the Manager commits the first 64KiB of it at a session's start, the client's writes the rest: a publish with block records of 128 token ids fits 468 blocks in 256KiB; liborbitkv splits a larger one into several publishes, each visible before the next")
	fs.DurationVar(&c.helloTimeout, "hello-timeout", 5*time.Second, "how long a new connection may take to send its hello (`duration`)")
	fs.StringVar(&c.ramCapacity, "ram-capacity", "4GiB", "bytes of the RAM tier (`size`: 4GiB, 512MiB; KiB = 1024 bytes); committed at start")
	fs.StringVar(&c.chunkBytes, "ram-chunk-bytes", "16KiB", "RAM tier allocation unit (`size`, a multiple of 4KiB in 4KiB..64MiB); a block takes whole chunks")
	fs.IntVar(&c.copyWorkers, "copy-workers", copier.DefaultWorkers(), "native copy threads for publish and restore (`count`, 1..64)")
	fs.StringVar(&c.copyBackend, "copy-backend", "host", "what moves publish and restore bytes: host (memcpy on the copy threads), cuda (the CUDA driver, dlopened from $ORBITKV_LIBCUDA or libcuda.so.1; the Manager does not start without a device; the RAM tier is page-locked) or auto (cuda when the driver loads and has a device, else host)")
	fs.StringVar(&c.eviction, "eviction", evict.Default, "RAM tier eviction `policy`: "+strings.Join(evict.Names(), ", ")+" (orbitkv-bench policy compares them)")
	fs.StringVar(&c.ssdDir, "ssd-dir", "", "`directory` of the SSD tier on a filesystem that takes O_DIRECT (empty: no SSD tier); its blocks survive a restart")
	fs.BoolVar(&c.ssdCreateDir, "ssd-create-dir", false, "create --ssd-dir (mode 0700) when it is missing; without it a missing directory is an error")
	fs.StringVar(&c.ssdCapacity, "ssd-capacity", "64GiB", "bytes of the SSD tier's data file (`size`), preallocated")
	fs.StringVar(&c.ssdSlot, "ssd-slot-bytes", "64KiB", "largest block the SSD tier stores (`size`, a multiple of 4KiB); every block takes a slot of this size plus a 4 KiB header, so set it to the engine's block size")
	fs.StringVar(&c.ssdAdmission, "ssd-admission", "all", "which evicted blocks are written to SSD: all, or second-hit (a block evicted twice)")
	fs.IntVar(&c.ssdWorkers, "ssd-io-workers", 4, "O_DIRECT I/Os in flight on the SSD tier (`count`, 1..256)")
	fs.StringVar(&c.maxBufBytes, "max-buffer-bytes", "32TiB", "engine buffer bytes all sessions together may register for the Manager to map (`size`, at most 64TiB); it bounds the Manager's virtual address space, not its memory")
	fs.StringVar(&c.discBytes, "discover-bytes", "256MiB", "memory of all the shared-memory discovery indexes sessions map read-only (`size`, 64KiB..64GiB; 0: none served); one per namespace asked for, each of 64 bytes per RAM-tier chunk (rounded up to a power of two); the default is raised to 4 indexes for a RAM tier whose index exceeds 64MiB; past it a namespace's index is refused and its clients take the round trip")
	fs.IntVar(&c.maxOpsSess, "max-ops-per-session", cache.DefaultMaxOpsPerSession, "operations (query tickets, restores) one session may hold at once (`count`, 1..1048576); beyond it they answer Unadmitted")
	fs.IntVar(&c.maxOps, "max-ops", cache.DefaultMaxOps, "operations all sessions together may hold at once (`count`, 1..1048576)")
	fs.DurationVar(&c.opExpiry, "op-expiry", ticket.DefaultOpExpiry, "how long a query ticket or an unpolled restore result lives after its latest submission (`duration`, 1s..24h); a late poll then answers Timeout")
	fs.DurationVar(&c.leaseIdle, "lease-idle-timeout", cache.DefaultLeaseIdleTimeout, "how long a lease handed to a client may go without a Restore started or landed on it, or its Release, before it is revoked: its blocks unpinned and its bytes returned to --lease-budget; a later Restore or Release of it answers Timeout (`duration`, 1s..24h; 0: never)")
	fs.StringVar(&c.leaseBudget, "lease-budget", "", "bytes leases and restores in flight may reserve (`size`; empty: --ram-capacity); a ticket beyond it waits (Loading), an untracked query answers Unadmitted")
	fs.StringVar(&c.warmupBudget, "warmup-budget", "256MiB", "bytes of SSD reads in flight for warm-ups and unawaited chain tails (`size`); beyond it warming is skipped")
	fs.BoolVar(&c.fdStore, "fdstore", true, "when started by systemd (NOTIFY_SOCKET set), hand the RAM tier's memfds to its file descriptor store (FDSTORE=1; the unit needs FileDescriptorStoreMax=2 or more), so a Manager restarted after a crash adopts the tier's sealed blocks instead of starting empty; a clean stop removes them")
	fs.BoolVar(&c.prefault, "prefault", true, "pre-fault the RAM tier at start so steady-state copies take no page faults (--prefault=false to skip)")
	fs.StringVar(&c.hugepages, "hugepages", "prefer", "RAM tier on 2 MiB hugetlb pages: require (fail without enough free ones; reserve them with vm.nr_hugepages), prefer (else an ordinary memfd with MADV_HUGEPAGE; the reason is logged and in metrics) or off")
	fs.DurationVar(&c.shutdownWait, "shutdown-timeout", 10*time.Second, "after SIGTERM, how long closing sessions and stopping the cache may take (`duration`, 1s..10m); past it the Manager logs the SSD reads still stuck and exits with status 3 without freeing the memory they may write")
	fs.StringVar(&c.pyroURL, "pyroscope-url", "", "push continuous profiles (CPU, heap, goroutines, mutex, block) to the Grafana Pyroscope server at this http(s) `URL`, e.g. http://pyroscope:4040 (empty: no push)")
	fs.StringVar(&c.pyroApp, "pyroscope-app-name", profiling.DefaultAppName, "application `name` the profiles are listed under in Pyroscope")
	fs.StringVar(&c.pyroTenant, "pyroscope-tenant-id", "", "tenant `id` sent as X-Scope-OrgID to a multi-tenant Pyroscope (empty: none)")
	fs.StringVar(&c.pyroUser, "pyroscope-basic-auth-user", "", "HTTP basic auth `user` for the push (Grafana Cloud: the stack's numeric user id); needs --pyroscope-password-file")
	fs.StringVar(&c.pyroPassFile, "pyroscope-password-file", "", "`file` holding the basic auth password or access token (one line; it is never printed)")
	fs.DurationVar(&c.pyroInterval, "pyroscope-upload-interval", profiling.DefaultUploadInterval, "how often profiles are pushed, each covering the interval before it (`duration`, 1s..5m)")
	fs.BoolVar(&c.ebpf, "ebpf", false, "load eBPF latency probes (Unix socket send to receive, session eventfd wake-up, transfer TCP) and export them on /metrics (the orbitkv_ebpf histograms); needs root or CAP_BPF+CAP_PERFMON and a kernel with BTF, and the Manager does not start when they cannot load")
	fs.StringVar(&c.kvEvents, "kv-events", "", "publish KV events (every block this node produced as it enters and leaves RAM and SSD) in vLLM's wire format on a ZeroMQ PUB socket at this `endpoint`: tcp://HOST:PORT or ipc:///PATH (mode 0600, 0660 in --operator-group; with tenants, ipc only, one socket per tenant domain at PATH.NAME in the group of its uid or gid); empty: off (docs/events.md)")
	fs.StringVar(&c.kvReplay, "kv-events-replay", "", "ZeroMQ ROUTER replay socket `endpoint` (forms as --kv-events): an 8-byte start sequence replays the kept batches (the last 10000), \""+kvevents.SnapshotRequest+"\" answers every block held now; empty: none")
	fs.StringVar(&c.kvTopic, "kv-events-topic", "", "`topic`, the first frame of every event message (subscribers filter on its prefix)")
	fs.IntVar(&c.kvQueue, "kv-events-queue", kvevents.DefaultQueueEvents, "events that may wait for the publisher (`count`, 1..16777216); past it they are dropped, counted, and the stream resyncs with AllBlocksCleared and every block held")
	defineClusterFlags(fs, &c.cluster)
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&c.showVersion, "version", false, "print the version, commit, build date and Go version, then exit")
}

// envName is the environment variable of config key name:
// ram-capacity → ORBITKV_RAM_CAPACITY.
func envName(name string) string {
	return "ORBITKV_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// listValue is a repeatable flag: each --flag adds its value, and a value
// set from the environment or the config file adds each of its
// ';'-separated items (a setting there is one string).
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ";") }
func (l *listValue) Type() string   { return "list" }
func (l *listValue) Set(v string) error {
	for item := range strings.SplitSeq(v, ";") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}
