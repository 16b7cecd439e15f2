package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// drainSlack is how much longer than its wait a drain call may take (the
// Manager's answer after the wait ended).
const drainSlack = 10 * time.Second

func drainCmd(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "drain [--timeout D]",
		Short: "Stop admitting sessions and operations, wait for those in flight, then shut the Manager down",
		Long: `drain makes the Manager refuse new sessions (their hello is refused as draining)
and new operations (QueryBundle, Publish and Restore answer Unadmitted) while
Release, RestorePoll, Poll, Claim and CancelQuery still work; it waits for the
operations in flight to finish, at most --timeout, and then the Manager shuts
down as on SIGTERM (exit status 0). --timeout here is that wait (default 30s,
at most 1h), not the deadline of a call. Drain waits for operations in flight
(tickets, copies, unpolled restores); a lease held without an operation is not
waited for: its session is closed at shutdown. Once begun, the drain runs in
the Manager to its end even if this command is interrupted.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wait < time.Millisecond || wait > time.Hour {
				return usagef("drain: --timeout must be between 1ms and 1h (got %v)", wait)
			}
			return ask(g, cmd, wait+drainSlack, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.DrainReply, error) {
				return c.Drain(ctx, &operatorpb.DrainRequest{TimeoutNs: uint64(wait)}, opts...)
			}, func(w io.Writer, r *operatorpb.DrainReply) error {
				if r.TimedOut {
					fmt.Fprintf(w, "drained after %s with %d operations still in flight (timeout); the Manager is shutting down\n", dur(r.WaitedNs), r.OperationsLeft)
				} else {
					fmt.Fprintf(w, "drained after %s: no operations in flight, %d sessions open; the Manager is shutting down\n", dur(r.WaitedNs), r.Sessions)
				}
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&wait, "timeout", 30*time.Second, "wait at most this for the operations in flight (1ms..1h)")
	return cmd
}
