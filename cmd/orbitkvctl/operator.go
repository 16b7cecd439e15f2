package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/operator"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// call dials the operator socket, runs f with a deadline of --timeout and
// explains the usual failures: no Manager there, a server orbitkvctl does
// not trust (refused before anything is sent: operator.Dial's check of its
// peer, on every connection), or a peer the Manager does not allow.
func (g *globals) call(f func(c operatorpb.OperatorClient, opts ...grpc.CallOption) error) error {
	path, trust, err := g.operatorSocket()
	if err != nil {
		return err
	}
	c, err := operator.Dial(path, trust)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := f(c, grpc.WaitForReady(false)); err != nil {
		if refused := c.Refused(); refused != nil && status.Code(err) == codes.Unavailable {
			return refused
		}
		return operatorError(path, err)
	}
	return nil
}

// operatorError turns a gRPC error into one line naming the socket and,
// for the usual causes, what to do.
func operatorError(path string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("operator socket %s: %w", path, err)
	}
	msg := printable(st.Message()) // the server's words: no escape sequences
	switch {
	case st.Code() == codes.PermissionDenied:
		return fmt.Errorf("operator socket %s: refused: %s", path, msg)
	case st.Code() == codes.Unavailable && (strings.Contains(msg, syscall.ENOENT.Error()) || strings.Contains(msg, syscall.ECONNREFUSED.Error())):
		return fmt.Errorf("operator socket %s: no Manager there (is orbitkv-manager running? pass --operator-socket or --socket)", path)
	case st.Code() == codes.Unavailable && strings.Contains(msg, syscall.EACCES.Error()):
		return fmt.Errorf("operator socket %s: permission denied (mode 0600, or 0660 with the Manager's --operator-group: run as root or as a member of that group)", path)
	case st.Code() == codes.DeadlineExceeded:
		return fmt.Errorf("operator socket %s: no answer within --timeout", path)
	}
	return fmt.Errorf("operator socket %s: %s: %s", path, st.Code(), msg)
}

// rpc is one operator call: it asks c within ctx.
type rpc[R proto.Message] func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (R, error)

// get makes one operator call bounded by bound (0: --timeout).
func get[R proto.Message](g *globals, bound time.Duration, call rpc[R]) (R, error) {
	var r R
	err := g.call(func(c operatorpb.OperatorClient, opts ...grpc.CallOption) (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(bound, g.timeout))
		defer cancel()
		r, err = call(ctx, c, opts...)
		return err
	})
	return r, err
}

// ask makes one operator call bounded by bound (0: --timeout) and writes
// its reply to cmd's output in the --output format (table through table).
func ask[R proto.Message](g *globals, cmd *cobra.Command, bound time.Duration, call rpc[R], table func(io.Writer, R) error) error {
	r, err := get(g, bound, call)
	if err != nil {
		return err
	}
	return printAs(cmd.OutOrStdout(), g.output, r, func(w io.Writer) error { return table(w, r) })
}

func sessionsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "sessions",
		Short: "List the live sessions: pid, uid, tenant, last namespace, instance, role, age, operations, leases, bytes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.SessionsReply, error) {
				return c.Sessions(ctx, &operatorpb.SessionsRequest{}, opts...)
			}, func(w io.Writer, r *operatorpb.SessionsReply) error {
				t := newTable(w, "SLOT", "PID", "UID", "TENANT", "NAMESPACE", "ROLE", "INSTANCE", "AGE", "REQUESTS", "OPS", "TICKETS", "LEASES", "BLOCKS", "RESERVED", "BUFFERS")
				for _, s := range r.Sessions {
					t.row(s.Index, s.Pid, s.Uid, cmp.Or(s.Tenant, "-"), cmp.Or(s.Namespace, "-"), s.Role, s.Instance, dur(s.AgeNs), s.Requests, s.Operations, s.Tickets,
						s.Leases, s.LeasedBlocks, ibytes(s.ReservedBytes), fmt.Sprintf("%d (%s)", s.Buffers, ibytes(s.BufferBytes)))
				}
				return t.flush()
			})
		},
	}
}

func statsCmd(g *globals) *cobra.Command {
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "stats [--watch D]",
		Short: "Show the tiers' fill, hit ratio per tier, SSD figures, evictions, budgets and each tenant's use and shares",
		Long: `stats shows the tiers' fill, the hit ratio per tier, the SSD tier's figures,
evictions, the lease and warm-up budgets and each tenant's use and shares.

--watch D asks again every D (at least 100ms, at most 24h) until interrupted
(SIGINT or SIGTERM: exit status 0). On a terminal each frame replaces the
last (the screen is cleared, a first line names the time); otherwise frames
follow each other: tables under a line naming the time, JSON documents one
after another, YAML documents separated by "---". A call that fails prints
its error on standard error and the watch goes on (the Manager may be
restarting), but for the first call, whose failure ends the command (exit
status 1).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			call := func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.StatsReply, error) {
				return c.Stats(ctx, &operatorpb.StatsRequest{}, opts...)
			}
			if !cmd.Flags().Changed("watch") {
				return ask(g, cmd, 0, call, statsTable)
			}
			if every < minWatch || every > maxWatch {
				return usagef("stats: --watch must be between %s and %s (got %s)", limit.Format(minWatch), limit.Format(maxWatch), limit.Format(every))
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return watch(ctx, g, cmd.OutOrStdout(), cmd.ErrOrStderr(), every, call, statsTable)
		},
	}
	cmd.Flags().DurationVar(&every, "watch", 0, "ask again every `D` (100ms..24h, e.g. 2s) until interrupted")
	return cmd
}

// The bounds of stats --watch: below 100ms the frames outrun a reader and
// the calls cost the dispatcher for nothing.
const (
	minWatch = 100 * time.Millisecond
	maxWatch = 24 * time.Hour
)

// clearScreen moves the cursor home and clears a terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// watch makes call every interval until ctx ends (then nil) and writes
// each reply as a frame (printAs) to w: after clearing the screen when w
// is a terminal. The first call's error is returned; later ones are
// written to errw with the time and the watch goes on.
func watch[R proto.Message](ctx context.Context, g *globals, w, errw io.Writer, interval time.Duration, call rpc[R], table func(io.Writer, R) error) error {
	tty := isTerminal(w)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for frame := 0; ; frame++ {
		r, err := get(g, 0, call)
		now := time.Now().Format(time.RFC3339)
		switch {
		case err != nil && frame == 0:
			return err
		case err != nil:
			fmt.Fprintf(errw, "%s: %v\n", now, err)
		default:
			var buf bytes.Buffer
			if tty {
				buf.WriteString(clearScreen)
			}
			switch {
			case g.output == formatYAML:
				buf.WriteString("---\n")
			case g.output == formatTable:
				if !tty && frame > 0 {
					buf.WriteString("\n")
				}
				fmt.Fprintf(&buf, "%s, every %v (Ctrl-C ends)\n", now, interval)
			}
			if err := printAs(&buf, g.output, r, func(w io.Writer) error { return table(w, r) }); err != nil {
				return err
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// isTerminal reports whether w is a terminal (TCGETS succeeds on it).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// statsTable writes a StatsReply as tables.
func statsTable(w io.Writer, r *operatorpb.StatsReply) error {
	if !r.Cache {
		fmt.Fprintln(w, "the Manager serves no cache (Ping only)")
		return nil
	}
	t := newTable(w)
	ram, b := r.Ram, r.Budgets
	t.row("ram", fmt.Sprintf("%s of %s used, %d blocks, %d pins, hugepages %v%s", ibytes(ram.UsedBytes), ibytes(ram.CapacityBytes),
		ram.Blocks, ram.Pins, ram.Hugepages, fallback(ram.HugepagesFallback)))
	t.row("ram hits", fmt.Sprintf("%s (%d of %d blocks looked up)", pct(ram.HitRatio), ram.HitBlocks, ram.HitBlocks+ram.MissBlocks))
	t.row("ram traffic", fmt.Sprintf("%d published, %d restored, %d evicted", ram.PublishedBlocks, ram.RestoredBlocks, ram.Evictions))
	if s := r.Ssd; s.On {
		t.row("ssd", fmt.Sprintf("%s of %s used, %d blocks (%d recovered at start)", ibytes(s.UsedBytes), ibytes(s.CapacityBytes), s.Blocks, s.Recovered))
		t.row("ssd hits", fmt.Sprintf("%s (%d of %d RAM misses; %d prefetched, %d failed)", pct(s.HitRatio), s.HitBlocks, s.HitBlocks+s.MissBlocks, s.Prefetches, s.PrefetchFailures))
		t.row("ssd traffic", fmt.Sprintf("%d written, %d read, %d corrupt, %d not admitted, %d evicted, %d demotions skipped",
			s.Writes, s.Reads, s.Corrupt, s.NotAdmitted, s.Evictions, s.DemoteSkipped))
	} else {
		t.row("ssd", "none")
	}
	lb := fmt.Sprintf("unbounded, %s reserved", ibytes(b.ReservedBytes))
	if b.LeaseBudgetBytes != 0 {
		lb = fmt.Sprintf("%s of %s reserved", ibytes(b.ReservedBytes), ibytes(b.LeaseBudgetBytes))
	}
	t.row("lease budget", fmt.Sprintf("%s, %d tickets waiting", lb, b.BudgetWaiting))
	t.row("warm-up budget", fmt.Sprintf("%s, %d warm-ups skipped", ibytes(b.WarmupBudgetBytes), b.WarmupsSkipped))
	t.row("operations", fmt.Sprintf("%d in flight, %d leases, %d tickets, %d unadmitted, %d expired", b.Operations, b.Leases, b.Tickets, b.Unadmitted, b.Expired))
	t.row("lookups", fmt.Sprintf("%d (%d distinct)", r.Lookups, r.DistinctLookups))
	if err := t.flush(); err != nil || len(r.Tenants) == 0 {
		return err
	}
	fmt.Fprintln(w)
	tt := newTable(w, "TENANT", "DOMAIN", "SESSIONS", "TABLES", "BUFFERS", "OPS", "LEASED", "RAM", "SSD", "QUOTA REFUSED", "QUERIES", "HIT BLOCKS", "UNADMITTED", "TICKETS", "MEAN ANSWER", "QUEUED", "MEAN QUEUED")
	for _, x := range r.Tenants {
		wait, queued := "-", "-"
		if x.TicketsAnswered > 0 {
			wait = dur(x.TicketWaitNs / x.TicketsAnswered)
		}
		if x.TicketsQueued > 0 {
			queued = dur(x.TicketQueueNs / x.TicketsQueued)
		}
		tt.row(x.Name, x.Domain, fmt.Sprintf("%d/%d", x.Sessions, x.SessionsShare), fmt.Sprintf("%d/%d", x.Tables, x.TablesShare),
			fmt.Sprintf("%d/%d (%s/%s)", x.Buffers, x.BuffersShare, ibytes(x.BufferBytes), ibytes(x.BufferBytesShare)),
			fmt.Sprintf("%d/%d", x.Operations, x.OperationsShare), fmt.Sprintf("%s/%s", ibytes(x.LeasedBytes), ibytes(x.LeasedBytesShare)),
			ofQuota(x.RamBytes, x.RamQuotaBytes), ofQuota(x.SsdBytes, x.SsdQuotaBytes), fmt.Sprintf("%d ram, %d ssd", x.RamRefused, x.SsdRefused),
			x.Queries, x.HitBlocks, x.Unadmitted, x.TicketsAnswered, wait, x.TicketsQueued, queued)
	}
	return tt.flush()
}

// ofQuota is bytes against a quota: "1.0 MiB/4.0 MiB", or "1.0 MiB/-"
// with none.
func ofQuota(bytes, quota uint64) string {
	if quota == 0 {
		return ibytes(bytes) + "/-"
	}
	return ibytes(bytes) + "/" + ibytes(quota)
}

func fallback(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func healthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the Manager-wide health (as HTTP GET /health) from the operator socket",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.HealthReply, error) {
				return c.Health(ctx, &operatorpb.HealthRequest{}, opts...)
			}, func(w io.Writer, h *operatorpb.HealthReply) error {
				t := newTable(w)
				t.row("status", h.Status)
				t.row("version", h.Version)
				if b := h.Build; b != nil {
					t.row("commit", b.Commit)
				}
				t.row("pid", h.ManagerPid)
				t.row("epoch", h.Epoch)
				t.row("service_id", h.ServiceId)
				t.row("poll_mode", h.PollMode)
				t.row("uptime", dur(h.UptimeNs))
				t.row("sessions", h.Sessions)
				t.row("requests", h.Requests)
				t.row("ram", fmt.Sprintf("%s of %s, %d blocks", ibytes(h.RamUsedBytes), ibytes(h.RamCapacityBytes), h.Blocks))
				t.row("leases", fmt.Sprintf("%d (%d pins, %s reserved)", h.Leases, h.Pins, ibytes(h.ReservedBytes)))
				t.row("operations", fmt.Sprintf("%d (%d tickets)", h.Operations, h.Tickets))
				t.row("evictions", h.Evictions)
				t.row("lookups", fmt.Sprintf("%d (%d distinct)", h.Lookups, h.DistinctLookups))
				for _, e := range h.Events {
					name := "events"
					if e.Name != "" {
						name += " " + printable(e.Name)
					}
					t.row(name, fmt.Sprintf("%s (replay %s)", printable(e.Endpoint), cmp.Or(printable(e.Replay), "none")))
				}
				return t.flush()
			})
		},
	}
}

func namespacesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "namespaces",
		Short: "List the namespaces: tenant, resident RAM and SSD blocks and bytes, queries, hit blocks, published blocks, sessions",
		Long: `namespaces lists, for each namespace the Manager holds blocks of or counted
requests in since it started: its tenant, its resident blocks and bytes in the
RAM tier and the SSD tier, the queries answered Ok or Miss in it (untracked
queries and tickets delivered), the blocks leased to them (HIT BLOCKS), the
blocks publishes stored, and the live sessions whose last namespace it is.

NAMESPACE is the namespace as the engine sent it (32 hex digits): what
"orbitkvctl evict --namespace" takes. With tenants the Manager keys blocks by
the namespace mixed with the tenant's domain (its name, or its sharing
group's), so TENANT goes with it ("evict --namespace HEX --tenant NAME"), and
the KEY column shows the mixed key ("evict --key HEX"); a key no session used
since the Manager started (blocks recovered from the SSD tier) shows its KEY
only, since the mix cannot be undone. The Manager counts at most 1024
namespaces apart; the rest are summed in a row named "other". With tenants
each tenant (or sharing group) holds at most 1024 / their number of those
rows, and its namespaces beyond them are summed in an "other" row of its
own, so one tenant's namespaces never hide another's.

The resident figures come from a walk of the RAM tier's index on the
Manager's dispatcher (about 0.1 s per million blocks, during which
it serves no request; concurrent calls share one walk) and of the SSD
tier's entries; the figures are per tenant, so this command is on the
operator socket only.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.NamespacesReply, error) {
				return c.Namespaces(ctx, &operatorpb.NamespacesRequest{}, opts...)
			}, namespacesTable)
		},
	}
}

// namespacesTable writes a NamespacesReply as a table; the KEY column only
// where a key differs from its namespace (tenants).
func namespacesTable(w io.Writer, r *operatorpb.NamespacesReply) error {
	keys := false
	for _, n := range r.Namespaces {
		keys = keys || (!n.Other && n.Key != n.Namespace)
	}
	head := []string{"TENANT", "NAMESPACE"}
	if keys {
		head = append(head, "KEY")
	}
	t := newTable(w, append(head, "RAM", "SSD", "QUERIES", "HIT BLOCKS", "PUBLISHED", "SESSIONS")...)
	for _, n := range r.Namespaces {
		cells := []any{cmp.Or(n.Tenant, "-"), cmp.Or(n.Namespace, "-")}
		if n.Other {
			cells[1] = "other"
		}
		if keys {
			cells = append(cells, cmp.Or(n.Key, "-"))
		}
		cells = append(cells, fmt.Sprintf("%d (%s)", n.RamBlocks, ibytes(n.RamBytes)), fmt.Sprintf("%d (%s)", n.SsdBlocks, ibytes(n.SsdBytes)),
			n.Queries, n.HitBlocks, n.PublishedBlocks, n.Sessions)
		t.row(cells...)
	}
	return t.flush()
}

// namespaceFlag checks the value of a namespace flag: 32 hex digits.
func namespaceFlag(flag, v string) error {
	if b, err := hex.DecodeString(v); err != nil || len(b) != 16 {
		return usagef("%s %q: want 32 hex digits (as orbitkvctl namespaces lists them)", flag, v)
	}
	return nil
}

// dropCmd is evict (flush false) or flush.
func dropCmd(g *globals, flush bool) *cobra.Command {
	var ns, tenantName, key string
	var all, yes bool
	name, short, what := "evict", "Remove the unpinned blocks of a namespace (or all) from the RAM tier, demoting them to SSD",
		"from the RAM tier (demoted to the SSD tier where there is one)"
	if flush {
		name, short, what = "flush", "Remove the unpinned blocks of a namespace (or all) from the RAM and SSD tiers",
			"from the RAM and SSD tiers"
	}
	cmd := &cobra.Command{
		Use:   name + " (--namespace HEX [--tenant NAME] | --key HEX | --all) [--yes]",
		Short: short,
		Long: short + `. Pinned blocks (held by a lease or a copy) and blocks still
being published stay and are counted in the answer. Asks for confirmation on
standard input unless --yes.

--namespace is the namespace as the engine sent it (the NAMESPACE column of
orbitkvctl namespaces and sessions). A Manager with tenants keys each
tenant's blocks by the namespace mixed with its domain, so --namespace then
needs --tenant (a tenant's name, or a sharing group's: the TENANT column of
orbitkvctl namespaces); without tenants --tenant is refused. --key is the
namespace as the Manager keys it (the KEY column), tenant's mix included.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			given := 0
			for _, set := range []bool{all, ns != "", key != ""} {
				if set {
					given++
				}
			}
			switch {
			case given > 1:
				return usagef("%s: give one of --namespace HEX, --key HEX and --all, not more", name)
			case given == 0:
				return usagef("%s: give --namespace HEX, --key HEX or --all", name)
			case tenantName != "" && ns == "":
				return usagef("%s: --tenant goes with --namespace only", name)
			case ns != "":
				if err := namespaceFlag("--namespace", ns); err != nil {
					return err
				}
			case key != "":
				if err := namespaceFlag("--key", key); err != nil {
					return err
				}
			}
			target := "namespace " + ns
			switch {
			case all:
				target = "every namespace"
			case key != "":
				target = "namespace key " + key
			case tenantName != "":
				target += " of tenant " + tenantName
			}
			if !yes {
				if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), fmt.Sprintf("%s the unpinned blocks of %s %s?", name, target, what)); err != nil {
					return err
				}
			}
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.EvictReply, error) {
				req := &operatorpb.EvictRequest{Namespace: ns, All: all, Tenant: tenantName, Key: key}
				if flush {
					return c.Flush(ctx, req, opts...)
				}
				return c.Evict(ctx, req, opts...)
			}, func(w io.Writer, r *operatorpb.EvictReply) error {
				t := newTable(w)
				t.row("ram blocks removed", fmt.Sprintf("%d (%s)", r.RamBlocks, ibytes(r.RamBytes)))
				if flush {
					t.row("ssd blocks removed", r.SsdBlocks)
				}
				t.row("pinned, kept", r.PinnedKept)
				t.row("publishing, kept", r.PublishingKept)
				return t.flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&ns, "namespace", "", "the namespace as the engine sent it, `HEX` (32 hex digits: orbitkvctl namespaces lists them)")
	f.StringVar(&tenantName, "tenant", "", "the tenant (or sharing group) `NAME` of --namespace; required when the Manager has tenants")
	f.StringVar(&key, "key", "", "the namespace as the Manager keys it, `HEX` (32 hex digits: the KEY column of orbitkvctl namespaces)")
	f.BoolVar(&all, "all", false, "every namespace")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// errAborted is the answer to a confirmation not given.
var errAborted = errors.New("aborted: not confirmed")

// confirm asks question on w and reads the answer from r: y or yes goes
// on; anything else, or no answer (EOF), aborts.
func confirm(r io.Reader, w io.Writer, question string) error {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return fmt.Errorf("%w (standard input closed; pass --yes to skip the question)", errAborted)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errAborted
}

// version writes the client's build and the Manager's (Health's build);
// the Manager's error, when it did not answer, is returned after the
// client's build is written.
func version(g *globals, w io.Writer) error {
	sum := &operatorpb.VersionSummary{Client: clientBuild()}
	h, err := get(g, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.HealthReply, error) {
		return c.Health(ctx, &operatorpb.HealthRequest{}, opts...)
	})
	if err != nil {
		sum.ServerError = err.Error()
	} else {
		sum.Server = h.Build
		if sum.Server == nil { // a Manager whose health carries no build
			sum.Server = &operatorpb.BuildInfo{Version: h.Version}
		}
	}
	perr := printAs(w, g.output, sum, func(w io.Writer) error {
		writeBuild(w, "orbitkvctl", sum.Client)
		if sum.Server != nil {
			fmt.Fprintln(w)
			writeBuild(w, "orbitkv-manager", sum.Server)
		}
		return nil
	})
	return cmp.Or(err, perr)
}

// clientBuild is orbitkvctl's own build.
func clientBuild() *operatorpb.BuildInfo {
	b := buildinfo.Get()
	return &operatorpb.BuildInfo{Version: b.Version, Commit: b.Commit, Date: b.Date, GoVersion: b.GoVersion,
		AbiVersion: abi.Version, BootstrapVersion: abi.BootstrapVersion, Failpoints: b.Failpoints}
}

// writeBuild writes b as lines, as --version does; the strings through
// printable, since the Manager's come from the server.
func writeBuild(w io.Writer, name string, b *operatorpb.BuildInfo) {
	fmt.Fprintf(w, "%s %s\ncommit: %s\nbuilt: %s\ngo: %s\nabi: %d, bootstrap protocol %d\n", name, printable(b.Version),
		printable(cmp.Or(b.Commit, buildinfo.Unknown)), printable(cmp.Or(b.Date, buildinfo.Unknown)), printable(cmp.Or(b.GoVersion, buildinfo.Unknown)),
		b.AbiVersion, b.BootstrapVersion)
	if b.Failpoints {
		fmt.Fprintln(w, "failpoints: on (a test build)")
	}
}
