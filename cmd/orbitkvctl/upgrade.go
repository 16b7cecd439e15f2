package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// upgradeWait bounds how long upgrade waits, after the drain, for a
// Manager to serve: the successor (the old Manager waits up to 5 minutes
// for it to adopt the tier), or the old one serving again.
const upgradeWait = 6 * time.Minute

func upgradeCmd(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "upgrade [--timeout D]",
		Short: "Start the Manager's binary anew and hand it the RAM tier without copying it",
		Long: `upgrade asks the running Manager to start the executable it was started from
(the binary at that path now: install the new version first) with the same
arguments. Once the new Manager's configuration is valid, the running one
drains as drain does (new sessions and operations refused, operations in flight
waited for, at most --timeout), stops serving, and passes its RAM tier's memory
(memfds) to the new one, which takes a new epoch and serves at once, each
sealed block once its bytes matched the checksum taken at its seal (verified
in the background); engines reconnect to it by themselves. The old Manager then exits. If the new
one fails, the old one kills it and serves the same RAM tier again under a new
epoch. upgrade waits until a Manager serves on the operator socket again and
prints which one, with the blocks it holds. The unit's ExecReload= runs it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wait < time.Millisecond || wait > time.Hour {
				return usagef("upgrade: --timeout must be between 1ms and 1h (got %v)", wait)
			}
			start := time.Now()
			before, err := get(g, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.HealthReply, error) {
				return c.Health(ctx, &operatorpb.HealthRequest{}, opts...)
			})
			if err != nil {
				return err
			}
			w := cmd.ErrOrStderr()
			var r *operatorpb.UpgradeReply
			var raw error // the call's own error, before call explains it
			err = g.call(func(c operatorpb.OperatorClient, opts ...grpc.CallOption) error {
				ctx, cancel := context.WithTimeout(context.Background(), successorStart)
				defer cancel()
				r, raw = c.Upgrade(ctx, &operatorpb.UpgradeRequest{TimeoutNs: uint64(wait)}, opts...)
				return raw
			})
			switch {
			case err != nil && status.Code(raw) == codes.Unavailable:
				// An idle Manager drains at once and may close the socket
				// before its reply is out (EOF, or a reset): the upgrade
				// goes on, and the Manager that serves next says how it
				// ended. (An upgrade the Manager abandoned answers Aborted.)
				fmt.Fprintf(w, "upgrade: pid %d closed the operator socket before its reply (it drains); waiting for the Manager that serves next\n", before.ManagerPid)
				r = &operatorpb.UpgradeReply{ManagerPid: before.ManagerPid, Epoch: before.Epoch}
			case err != nil:
				return err
			default:
				fmt.Fprintf(w, "upgrade: successor pid %d started from %s; pid %d drains (at most %s) and hands over its RAM tier\n",
					r.SuccessorPid, r.Executable, r.ManagerPid, wait)
			}
			h, err := awaitManager(g, r, start.Add(wait+upgradeWait))
			if err != nil {
				return err
			}
			return printAs(cmd.OutOrStdout(), g.output, h, func(w io.Writer) error {
				if h.ManagerPid != r.ManagerPid && (r.SuccessorPid == 0 || h.ManagerPid == r.SuccessorPid) {
					fmt.Fprintf(w, "upgraded in %s: pid %d (epoch %d) serves, %d blocks (%s) verified in RAM so far (its log says when all are); pid %d exited\n",
						time.Since(start).Round(time.Millisecond), h.ManagerPid, h.Epoch, h.Blocks, ibytes(h.RamUsedBytes), r.ManagerPid)
					return nil
				}
				return fmt.Errorf("upgrade failed: the successor did not take over; pid %d serves the same RAM tier again under epoch %d (%d blocks); its log says why", h.ManagerPid, h.Epoch, h.Blocks)
			})
		},
	}
	cmd.Flags().DurationVar(&wait, "timeout", 30*time.Second, "drain: wait at most this for the operations in flight before the handover (1ms..1h)")
	return cmd
}

// successorStart bounds the Upgrade call: the successor's start up to its
// valid configuration.
const successorStart = 90 * time.Second

// awaitManager polls Health until a Manager serves with an epoch other
// than r's (the successor, or the old one serving again), until deadline.
func awaitManager(g *globals, r *operatorpb.UpgradeReply, deadline time.Time) (*operatorpb.HealthReply, error) {
	var last error
	for time.Now().Before(deadline) {
		h, err := get(g, time.Second, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.HealthReply, error) {
			return c.Health(ctx, &operatorpb.HealthRequest{}, opts...)
		})
		if err == nil && h.Epoch != r.Epoch && h.Status == "serving" {
			return h, nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("upgrade: no Manager served on the operator socket by the deadline (last: %v)", last)
}
