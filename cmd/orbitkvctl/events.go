package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// eventsFlags are the events command's own flags.
type eventsFlags struct {
	endpoint, replay, stream string
	json, snapshot           bool
	from                     int64 // -1: no replay
	count                    int
}

func eventsCmd(g *globals) *cobra.Command {
	f := &eventsFlags{}
	cmd := &cobra.Command{
		Use:   "events [--endpoint E] [--replay E] [--stream NAME] [--json] [--from SEQ | --snapshot] [--count N]",
		Short: "Print the Manager's KV event stream (vLLM's KV-event wire format) as it is published",
		Long: `events subscribes to a KV event stream of the Manager (--kv-events; docs/events.md)
and prints each event as it is published: a table of seq (the batch's sequence
number), time, type (BlockStored, BlockRemoved, AllBlocksCleared), medium (CPU:
the RAM tier, STORAGE: the SSD tier), blocks, the first block's engine hash and
the tokens a BlockStored carries; or, with --json (or -o json), one JSON object
per line: {"seq", "ts", "type", "medium", "block_hashes", "parent_block_hash",
"token_ids", "block_size"} (hashes as decimal strings: JSON readers hold
numbers as doubles).

The stream is --endpoint (tcp://HOST:PORT or ipc:///PATH); without it the
Manager's health on the operator socket names its streams: the one stream, or
with tenants the one called --stream. --from SEQ first replays the batches
from sequence SEQ on (the replay socket, --replay or the Manager's), and
--snapshot first asks the replay socket for every block held now
(AllBlocksCleared, then a BlockStored per block and medium); the live stream
follows without gaps or repeats (batches at or below the last sequence already
printed are skipped). --count N stops after N events (0: until interrupted).
--timeout bounds the operator call, the connection and each replay reply, not
the wait for live events.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.count < 0 {
				return usagef("events: --count must be 0 (no bound) or more (got %d)", f.count)
			}
			if f.snapshot && f.from >= 0 {
				return usagef("events: give --from or --snapshot, not both")
			}
			if g.output == formatYAML {
				return usagef("events: -o yaml is not a stream format; use --json (one object per line) or the table")
			}
			f.json = f.json || g.output == formatJSON
			return streamEvents(cmd.Context(), g, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.endpoint, "endpoint", "", "the event (PUB) socket, tcp://HOST:PORT or ipc:///PATH (default: the Manager's, from its health on the operator socket)")
	fl.StringVar(&f.replay, "replay", "", "the replay (ROUTER) socket for --from and --snapshot (default: the Manager's for the stream)")
	fl.StringVar(&f.stream, "stream", "", "with tenants, the tenant domain whose stream to print (default: the Manager's only stream)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per event and line")
	fl.Int64Var(&f.from, "from", -1, "first replay the batches from this sequence number on (0: all the replay socket keeps)")
	fl.BoolVar(&f.snapshot, "snapshot", false, "first print every block held now (the replay socket's snapshot), then the live stream")
	fl.IntVar(&f.count, "count", 0, "stop after this many events (0: until interrupted)")
	return cmd
}

// resolveStream fills f.endpoint and f.replay from the Manager's health
// where they were not given.
func resolveStream(g *globals, f *eventsFlags) error {
	needReplay := f.snapshot || f.from >= 0
	if f.endpoint != "" && (f.replay != "" || !needReplay) {
		return nil
	}
	h, err := get(g, 0, func(ctx context.Context, c operatorpb.OperatorClient, opts ...grpc.CallOption) (*operatorpb.HealthReply, error) {
		return c.Health(ctx, &operatorpb.HealthRequest{}, opts...)
	})
	if err != nil {
		return fmt.Errorf("events: asking the Manager for its event streams (or give --endpoint): %w", err)
	}
	var names []string
	var pick *operatorpb.EventStream
	for _, s := range h.Events {
		names = append(names, strconv.Quote(s.Name))
		if s.Name == f.stream || (f.stream == "" && len(h.Events) == 1) {
			pick = s
		}
	}
	switch {
	case len(h.Events) == 0:
		return errors.New("events: the Manager publishes no KV events (start it with --kv-events), or give --endpoint")
	case pick == nil && f.stream == "":
		return usagef("events: the Manager has %d streams (%s): choose one with --stream", len(names), strings.Join(names, ", "))
	case pick == nil:
		return usagef("events: --stream %q: the Manager's streams are %s", f.stream, strings.Join(names, ", "))
	}
	if f.endpoint == "" {
		f.endpoint = pick.Endpoint
	}
	if f.replay == "" {
		f.replay = pick.Replay
	}
	if needReplay && f.replay == "" {
		return errors.New("events: the stream has no replay socket (the Manager's --kv-events-replay), needed by --from and --snapshot")
	}
	return nil
}

// streamEvents subscribes, replays or snapshots when asked, then prints
// the live stream until the count is reached or ctx ends.
func streamEvents(ctx context.Context, g *globals, f *eventsFlags, w io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.endpoint == "" || f.snapshot || f.from >= 0 {
		if err := resolveStream(g, f); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := zmq4.NewSub(ctx, zmq4.WithDialerTimeout(g.timeout))
	defer sub.Close()
	if err := sub.Dial(f.endpoint); err != nil {
		return fmt.Errorf("events: connecting to %s: %w", f.endpoint, err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("events: subscribing to %s: %w", f.endpoint, err)
	}
	p := newEventPrinter(w, f)
	last := int64(-1) // the last sequence printed
	if f.snapshot || f.from >= 0 {
		req := []byte(kvevents.SnapshotRequest)
		if !f.snapshot {
			req = binary.BigEndian.AppendUint64(nil, uint64(f.from))
		}
		done, err := replayInto(ctx, g, f.replay, req, p, &last)
		if err != nil || done {
			return cmpErr(err, p.flush())
		}
	}
	for {
		msg, err := sub.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return p.flush()
			}
			return cmpErr(fmt.Errorf("events: receiving from %s: %w", f.endpoint, err), p.flush())
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			return cmpErr(fmt.Errorf("events: a message of %d frames from %s; want topic, 8-byte sequence, payload", len(msg.Frames), f.endpoint), p.flush())
		}
		seq := int64(binary.BigEndian.Uint64(msg.Frames[1]))
		if seq <= last && seq != 0 { // a new epoch starts again at 0
			continue
		}
		if last >= 0 && seq > last+1 && f.replay != "" {
			// Batches published before the subscription reached the
			// Manager: the replay socket still keeps them.
			done, err := replayInto(ctx, g, f.replay, binary.BigEndian.AppendUint64(nil, uint64(last+1)), p, &last)
			if err != nil || done {
				return cmpErr(err, p.flush())
			}
			if seq <= last {
				continue
			}
		}
		b, err := kvevents.DecodeBatch(msg.Frames[2])
		if err != nil {
			return cmpErr(fmt.Errorf("events: batch %d: %w", seq, err), p.flush())
		}
		last = seq
		if p.batch(seq, &b) {
			return p.flush()
		}
	}
}

// replayInto sends req on the replay socket and prints the batches that
// come back until the end marker; done is true once the count is reached.
func replayInto(ctx context.Context, g *globals, endpoint string, req []byte, p *eventPrinter, last *int64) (done bool, err error) {
	d := zmq4.NewDealer(ctx, zmq4.WithDialerTimeout(g.timeout))
	defer d.Close()
	if err := d.Dial(endpoint); err != nil {
		return false, fmt.Errorf("events: connecting to the replay socket %s: %w", endpoint, err)
	}
	if err := d.Send(zmq4.NewMsgFrom([]byte{}, req)); err != nil {
		return false, fmt.Errorf("events: asking the replay socket %s: %w", endpoint, err)
	}
	for {
		type result struct {
			msg zmq4.Msg
			err error
		}
		ch := make(chan result, 1)
		go func() { m, err := d.Recv(); ch <- result{m, err} }()
		var r result
		select {
		case r = <-ch:
		case <-time.After(g.timeout):
			return false, fmt.Errorf("events: the replay socket %s sent nothing for %v", endpoint, g.timeout)
		}
		if r.err != nil {
			return false, fmt.Errorf("events: reading the replay socket %s: %w", endpoint, r.err)
		}
		f := r.msg.Frames
		if len(f) != 4 || len(f[0]) != 0 || len(f[2]) != 8 {
			return false, fmt.Errorf("events: a replay message of %d frames from %s; want empty, topic, 8-byte sequence, payload", len(f), endpoint)
		}
		seq := int64(binary.BigEndian.Uint64(f[2]))
		if seq == -1 {
			return false, nil
		}
		b, err := kvevents.DecodeBatch(f[3])
		if err != nil {
			return false, fmt.Errorf("events: replayed batch %d: %w", seq, err)
		}
		*last = max(*last, seq)
		if p.batch(seq, &b) {
			return true, nil
		}
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// eventPrinter writes events as table rows (fixed widths: a live stream
// cannot be aligned after the fact) or JSON lines, and counts them.
type eventPrinter struct {
	w       io.Writer
	json    bool
	count   int // 0: no bound
	printed int
	header  bool
}

func newEventPrinter(w io.Writer, f *eventsFlags) *eventPrinter {
	return &eventPrinter{w: w, json: f.json, count: f.count}
}

// eventRow is the table's row format: seq, time, type, medium, blocks,
// first hash (a uint64 is at most 20 digits), tokens.
const eventRow = "%-8v  %-15s  %-16s  %-7s  %6v  %-20s  %6v\n"

// eventJSON is one event of --json.
type eventJSON struct {
	Seq       int64    `json:"seq"`
	TS        float64  `json:"ts"`
	Type      string   `json:"type"`
	Medium    string   `json:"medium,omitempty"`
	Hashes    []string `json:"block_hashes,omitempty"`
	Parent    *string  `json:"parent_block_hash,omitempty"`
	Tokens    []uint32 `json:"token_ids,omitempty"`
	BlockSize int      `json:"block_size,omitempty"`
}

// batch prints b's events; true once the count is reached.
func (p *eventPrinter) batch(seq int64, b *kvevents.Batch) bool {
	for i := range b.Events {
		e := &b.Events[i]
		if p.json {
			j := eventJSON{Seq: seq, TS: b.TS, Type: e.Kind, BlockSize: e.BlockSize, Tokens: e.Tokens}
			if e.Kind != kvevents.KindCleared {
				j.Medium = e.Medium.String()
			}
			for _, h := range e.Hashes {
				j.Hashes = append(j.Hashes, strconv.FormatUint(h, 10))
			}
			if e.HasParent {
				s := strconv.FormatUint(e.Parent, 10)
				j.Parent = &s
			}
			line, _ := json.Marshal(j)
			fmt.Fprintf(p.w, "%s\n", line)
		} else {
			if !p.header {
				fmt.Fprintf(p.w, eventRow, "SEQ", "TIME", "TYPE", "MEDIUM", "BLOCKS", "FIRST HASH", "TOKENS")
				p.header = true
			}
			medium, first := "-", "-"
			if e.Kind != kvevents.KindCleared {
				medium = e.Medium.String()
			}
			if len(e.Hashes) > 0 {
				first = strconv.FormatUint(e.Hashes[0], 10)
			}
			sec, frac := math.Modf(b.TS)
			ts := time.Unix(int64(sec), int64(frac*1e9)).UTC().Format("15:04:05.000000")
			fmt.Fprintf(p.w, eventRow, seq, ts, e.Kind, medium, len(e.Hashes), first, len(e.Tokens))
		}
		p.printed++
		if p.count > 0 && p.printed >= p.count {
			return true
		}
	}
	return false
}

// flush ends the output (rows are written as they come: nothing is
// buffered).
func (p *eventPrinter) flush() error { return nil }
