package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/operator"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// call dials the operator socket, runs f with a deadline of --timeout and
// explains the usual failures: no Manager there, or a peer not allowed.
func (g *globals) call(f func(c operatorpb.OperatorClient, opts ...grpc.CallOption) error) error {
	path, err := g.operatorSocket()
	if err != nil {
		return err
	}
	c, cc, err := operator.Dial(path)
	if err != nil {
		return err
	}
	defer cc.Close()
	if err := f(c, grpc.WaitForReady(false)); err != nil {
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
	msg := st.Message()
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

// ask makes one operator call bounded by bound (0: --timeout) and writes
// its reply to cmd's output: as JSON with -o json, else through table.
func ask[R proto.Message](g *globals, cmd *cobra.Command, bound time.Duration, call rpc[R], table func(io.Writer, R) error) error {
	var r R
	err := g.call(func(c operatorpb.OperatorClient, opts ...grpc.CallOption) (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(bound, g.timeout))
		defer cancel()
		r, err = call(ctx, c, opts...)
		return err
	})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if g.output == "json" {
		return printJSON(w, r)
	}
	return table(w, r)
}

func sessionsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "sessions",
		Short: "List the live sessions: pid, uid, tenant, instance, role, age, operations, leases, bytes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.SessionsReply, error) {
				return c.Sessions(ctx, &operatorpb.SessionsRequest{}, opts...)
			}, func(w io.Writer, r *operatorpb.SessionsReply) error {
				t := newTable(w, "SLOT", "PID", "UID", "TENANT", "ROLE", "INSTANCE", "AGE", "REQUESTS", "OPS", "TICKETS", "LEASES", "BLOCKS", "RESERVED", "BUFFERS")
				for _, s := range r.Sessions {
					t.row(s.Index, s.Pid, s.Uid, cmp.Or(s.Tenant, "-"), s.Role, s.Instance, dur(s.AgeNs), s.Requests, s.Operations, s.Tickets,
						s.Leases, s.LeasedBlocks, ibytes(s.ReservedBytes), fmt.Sprintf("%d (%s)", s.Buffers, ibytes(s.BufferBytes)))
				}
				return t.flush()
			})
		},
	}
}

func statsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show the tiers' fill, hit ratio per tier, SSD figures, evictions, budgets and each tenant's use and shares",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.StatsReply, error) {
				return c.Stats(ctx, &operatorpb.StatsRequest{}, opts...)
			}, func(w io.Writer, r *operatorpb.StatsReply) error {
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
			})
		},
	}
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
				return t.flush()
			})
		},
	}
}

// dropCmd is evict (flush false) or flush.
func dropCmd(g *globals, flush bool) *cobra.Command {
	var ns string
	var all, yes bool
	name, short, what := "evict", "Remove the unpinned blocks of a namespace (or all) from the RAM tier, demoting them to SSD",
		"from the RAM tier (demoted to the SSD tier where there is one)"
	if flush {
		name, short, what = "flush", "Remove the unpinned blocks of a namespace (or all) from the RAM and SSD tiers",
			"from the RAM and SSD tiers"
	}
	cmd := &cobra.Command{
		Use:   name + " (--namespace HEX | --all) [--yes]",
		Short: short,
		Long: short + `. Pinned blocks (held by a lease or a copy) and blocks still
being published stay and are counted in the answer. Asks for confirmation on
standard input unless --yes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case all && ns != "":
				return usagef("%s: give one of --namespace HEX and --all, not both", name)
			case !all && ns == "":
				return usagef("%s: give --namespace HEX or --all", name)
			}
			target := "namespace " + ns
			if all {
				target = "every namespace"
			}
			if !yes {
				if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), fmt.Sprintf("%s the unpinned blocks of %s %s?", name, target, what)); err != nil {
					return err
				}
			}
			return ask(g, cmd, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.EvictReply, error) {
				req := &operatorpb.EvictRequest{Namespace: ns, All: all}
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
	f.StringVar(&ns, "namespace", "", "the namespace, `HEX` (32 hex digits, as the Manager logs it)")
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
