package replay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// WorkerCommand is the hidden subcommand the replay re-executes itself
// with, once per client, so that clients are separate processes with their
// own sessions and engine buffers (never fork() from Go).
const WorkerCommand = "__replay-worker"

// Operations whose round trips the replay times, in report order.
const (
	opQuery = iota
	opPublish
	opRestore
	opRelease
	numOps
)

var opNames = [numOps]string{"query", "publish", "restore", "release"}

// workerInput is the first line the parent writes to a worker's stdin.
// The protocol on the worker's pipes:
//
//	parent → stdin:  workerInput as one JSON line
//	worker → stdout: "ready\n" once connected and registered
//	parent → stdin:  "go\n" when every worker is ready
//	worker → stdout: workerResult as one JSON line, then it exits 0
//
// A worker that fails writes its error to stderr and exits 1.
type workerInput struct {
	Socket     string     `json:"socket"`
	Index      int        `json:"index"`
	Clients    int        `json:"clients"`
	BlockBytes uint64     `json:"block_bytes"`
	Layers     uint32     `json:"layers"`
	PageCount  uint64     `json:"page_count"`
	RunSalt    string     `json:"run_salt"` // tenant salt of this run's namespace
	Requests   [][]uint64 `json:"requests"` // hash ids of the worker's requests, in trace order

	// ProgressFD is the worker's end of its progress pipe (progress.go,
	// workerProgress); 0: none.
	ProgressFD int `json:"progress_fd,omitempty"`

	// RecordTokens > 0: every block is published with a block record of
	// that many token ids (events.go recordOf).
	RecordTokens int `json:"record_tokens,omitempty"`
	// Nodes and Events, with --route events: every node's bootstrap socket
	// and event endpoint; each request goes to the node eventIndex.choose
	// names (Socket is then unused).
	Nodes  []string `json:"nodes,omitempty"`
	Events []string `json:"events,omitempty"`
	// StartOrder is the start-order counter's file (order.go): requests
	// start in trace order across the clients; "": each client runs its
	// share at its own pace.
	StartOrder string `json:"start_order,omitempty"`
	// Reconnect (orbitkv-bench restart): a request the Manager's exit or
	// drain cut short is tried again on a new session, reconnecting with
	// back-off (restart.go), and counted failed only after reconnectBound;
	// requests from AfterFrom on (the trace's second half) are counted
	// apart as well (workerResult's ...After fields).
	Reconnect bool `json:"reconnect,omitempty"`
	AfterFrom int  `json:"after_from,omitempty"`
}

// workerResult is what a worker measured. Histograms holds, per op name,
// the latencyHist of its round trips in ns, HdrHistogram V2 encoded
// (latencyHist.encode): the parent decodes them (decodeWorkerResult) and
// merges them without loss, since every histogram has the same geometry.
type workerResult struct {
	Requests         uint64            `json:"requests"`
	Blocks           uint64            `json:"blocks"`
	HitBlocks        uint64            `json:"hit_blocks"`
	Mismatches       uint64            `json:"mismatches"`
	Unadmitted       uint64            `json:"unadmitted"`        // Publish calls refused for capacity
	UnadmittedBlocks uint64            `json:"unadmitted_blocks"` // blocks those calls did not store
	LoadingWaits     uint64            `json:"loading_waits"`     // queries answered Loading (SSD prefetch) and asked again
	StoredBlocks     uint64            `json:"stored_blocks"`
	PresentBlocks    uint64            `json:"present_blocks"`
	RestoredBytes    uint64            `json:"restored_bytes"`
	PublishedBytes   uint64            `json:"published_bytes"`
	RestoreNS        uint64            `json:"restore_ns"`
	PublishNS        uint64            `json:"publish_ns"`
	Histograms       map[string]string `json:"histograms"`
	// Remote is the histogram (encoded as Histograms) of the queries that
	// answered Loading before their lease (a peer fetch, or an SSD
	// prefetch), from the first ask to the lease, ns; "" when none did.
	Remote string `json:"remote,omitempty"`

	// With Reconnect: requests given up after reconnectBound; the blocks
	// and hits of the requests from AfterFrom on; the sessions opened
	// again; and, as Unix times in ns (0: none), when a request was first
	// cut short and when the first Restore after that completed.
	RequestsFailed uint64 `json:"requests_failed,omitempty"`
	BlocksAfter    uint64 `json:"blocks_after,omitempty"`
	HitBlocksAfter uint64 `json:"hit_blocks_after,omitempty"`
	Reconnects     uint64 `json:"reconnects,omitempty"`
	InterruptedNS  int64  `json:"interrupted_ns,omitempty"`
	FirstRestoreNS int64  `json:"first_restore_ns,omitempty"`

	remote *latency.Hist // Remote decoded (decodeWorkerResult)
}

// RunWorker is `orbitkv-bench __replay-worker`: one replay client.
func RunWorker(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return suite.Usagef("%s takes no arguments: the parent writes its work to stdin", WorkerCommand)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the work from stdin: %w", err)
	}
	var wi workerInput
	if err := json.Unmarshal(line, &wi); err != nil {
		return fmt.Errorf("decoding the work: %w", err)
	}
	w, err := newReplayWorker(wi)
	if err != nil {
		return err
	}
	defer w.close()
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return err
	}
	goLine, err := in.ReadString('\n')
	if err != nil || strings.TrimSpace(goLine) != "go" {
		return fmt.Errorf("waiting for go: got %q, %v", goLine, err)
	}
	if err := w.run(); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(&w.res)
}

// replayWorker is one client's session, engine buffer and scratch arrays,
// allocated once and reused by every request.
type replayWorker struct {
	in      workerInput
	c       *client.Client
	ns      client.Namespace
	nsLo    uint64
	buf     *client.Buffer
	bufID   uint32
	maxQ    int
	hashes  []client.BlockHash
	pages   []uint32
	entries []client.RestoreEntry
	leases  []client.Lease
	hists   [numOps]*latency.Hist
	remote  *latency.Hist // queries that waited for Loading
	order   *orderGate    // nil: no start order (workerInput.StartOrder)
	res     workerResult

	conns  []nodeConn           // with --route events: one session per node; c and bufID are the chosen one's
	index  *eventIndex          // with --route events
	load   []int                // requests sent to each node
	infos  []client.BlockRecord // with RecordTokens: the records of one Publish
	tokens []uint32             // their token ids

	restoredAt time.Time // when the last Restore completed (Reconnect)
}

// nodeConn is a session with one node and the engine buffer's id there.
type nodeConn struct {
	c     *client.Client
	bufID uint32
}

func newReplayWorker(in workerInput) (*replayWorker, error) {
	switch {
	case in.Layers == 0 || in.BlockBytes == 0 || in.BlockBytes%uint64(in.Layers) != 0:
		return nil, fmt.Errorf("bad work: %d block bytes over %d layers", in.BlockBytes, in.Layers)
	case in.PageCount == 0 || in.PageCount > 1<<20:
		return nil, fmt.Errorf("bad work: page count %d", in.PageCount)
	}
	w := &replayWorker{in: in}
	var err error
	spec := content.Namespace
	spec.TenantSalt = in.RunSalt
	if w.ns, err = client.Fingerprint(spec); err != nil {
		return nil, fmt.Errorf("namespace fingerprint: %w", err)
	}
	w.nsLo = content.NamespaceLo(w.ns)
	if w.buf, err = client.AllocBuffer(in.Layers, in.BlockBytes/uint64(in.Layers), in.PageCount); err != nil {
		return nil, fmt.Errorf("allocating the engine buffer (%d layers × %d pages × %d bytes): %w",
			in.Layers, in.PageCount, in.BlockBytes/uint64(in.Layers), err)
	}
	sockets := in.Nodes
	if len(sockets) == 0 {
		sockets = []string{in.Socket}
	}
	for _, sock := range sockets {
		c, err := client.Connect(client.Options{
			SocketPath: sock,
			InstanceID: fmt.Sprintf("replay-%d", in.Index),
			Role:       uint32(abi.RoleBench),
		})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("connecting to the Manager at %s: %w", sock, err)
		}
		w.conns = append(w.conns, nodeConn{c: c})
		if w.conns[len(w.conns)-1].bufID, err = c.RegisterBuffer(w.buf); err != nil {
			w.close()
			return nil, fmt.Errorf("registering the engine buffer at %s: %w", sock, err)
		}
	}
	w.c, w.bufID = w.conns[0].c, w.conns[0].bufID
	w.load = make([]int, len(w.conns))
	if len(in.Events) > 0 {
		if len(in.Events) != len(w.conns) {
			w.close()
			return nil, fmt.Errorf("bad work: %d event endpoints for %d nodes", len(in.Events), len(w.conns))
		}
		if w.index, err = subscribeAll(in.Events); err != nil {
			w.close()
			return nil, err
		}
	}
	if in.RecordTokens > 0 {
		w.infos = make([]client.BlockRecord, in.PageCount)
		w.tokens = make([]uint32, int(in.PageCount)*in.RecordTokens)
	}
	w.maxQ = w.c.MaxQueryHashes()
	if w.maxQ < 1 {
		w.close()
		return nil, fmt.Errorf("the session takes %d query hashes per call", w.maxQ)
	}
	w.hashes = make([]client.BlockHash, in.PageCount)
	w.pages = make([]uint32, in.PageCount)
	for i := range w.pages {
		w.pages[i] = uint32(i)
	}
	w.entries = make([]client.RestoreEntry, 0, in.PageCount)
	for op := range w.hists {
		w.hists[op] = latency.NewHist()
	}
	w.remote = latency.NewHist()
	if in.StartOrder != "" {
		if w.order, err = openOrderGate(in.StartOrder); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// close ends the session (the Manager drops its leases) and frees the buffer.
func (w *replayWorker) close() {
	if w.index != nil {
		w.index.close()
	}
	for _, nc := range w.conns {
		nc.c.Close()
	}
	if w.buf != nil {
		w.buf.Free()
	}
	if w.order != nil {
		w.order.close()
	}
}

// run replays every request, then fills res.Histograms.
func (w *replayWorker) run() error {
	prog := openWorkerProgress(w.in.ProgressFD)
	defer prog.close()
	for j, ids := range w.in.Requests {
		if w.order != nil {
			w.order.start(uint64(w.in.Index + j*w.in.Clients))
		}
		var err error
		if w.in.Reconnect {
			err = w.requestAcrossRestarts(ids, w.in.Index+j*w.in.Clients >= w.in.AfterFrom)
		} else {
			err = w.request(ids)
		}
		if err != nil {
			return fmt.Errorf("client %d, trace request %d (%d blocks): %w",
				w.in.Index, w.in.Index+j*w.in.Clients+1, len(ids), err)
		}
		prog.report(j + 1)
	}
	w.res.Histograms = make(map[string]string, numOps)
	for op, h := range w.hists {
		b, err := h.Encode()
		if err != nil {
			return fmt.Errorf("encoding the %s histogram: %w", opNames[op], err)
		}
		w.res.Histograms[opNames[op]] = string(b)
	}
	if w.remote.Count() > 0 {
		b, err := w.remote.Encode()
		if err != nil {
			return fmt.Errorf("encoding the remote histogram: %w", err)
		}
		w.res.Remote = string(b)
	}
	return nil
}

// since records the round trip of op that began at t and returns it in ns.
func (w *replayWorker) since(op int, t time.Time) uint64 {
	ns := uint64(time.Since(t))
	w.hists[op].Record(ns)
	return ns
}

// request replays one trace request: Query → Restore + verify the hit
// prefix → fill the missed pages → Publish them → Release. The leases are
// released also when a step fails.
func (w *replayWorker) request(ids []uint64) error {
	err := w.cached(ids)
	return errors.Join(err, w.releaseAll())
}

func (w *replayWorker) cached(ids []uint64) error {
	k := len(ids)
	w.res.Requests++
	w.res.Blocks += uint64(k)
	if k == 0 {
		return nil
	}
	if uint64(k) > w.in.PageCount {
		return fmt.Errorf("%d blocks, the engine buffer has %d pages", k, w.in.PageCount)
	}
	hashes := w.hashes[:k]
	for i, h := range ids {
		hashes[i] = content.BlockHash(h)
	}
	if w.index != nil {
		if err := w.index.err(); err != nil {
			return err
		}
		n := w.index.choose(ids, w.load)
		w.load[n]++
		w.c, w.bufID = w.conns[n].c, w.conns[n].bufID
	}
	hits, err := w.query(hashes)
	if err != nil {
		return err
	}
	if err := w.restore(); err != nil {
		return err
	}
	w.res.HitBlocks += uint64(hits)
	layers := w.in.Layers
	for i := range hits {
		for l := range layers {
			w.res.Mismatches += content.VerifyPage(w.buf.Page(l, uint64(i)), content.Seed(w.nsLo, ids[i], l))
		}
	}
	if hits == k {
		return nil
	}
	for i := hits; i < k; i++ {
		for l := range layers {
			content.FillPage(w.buf.Page(l, uint64(i)), content.Seed(w.nsLo, ids[i], l))
		}
	}
	var infos []client.BlockRecord
	if n := w.in.RecordTokens; n > 0 {
		infos = w.infos[:k-hits]
		for i := range infos {
			recordOf(&infos[i], ids, hits+i, w.tokens[i*n:(i+1)*n])
		}
	}
	t := time.Now()
	var pr client.PublishResult
	if infos != nil {
		pr, err = w.c.PublishRecords(w.ns, w.bufID, hashes[hits:], w.pages[hits:k], infos)
	} else {
		pr, err = w.c.Publish(w.ns, w.bufID, hashes[hits:], w.pages[hits:k])
	}
	w.res.PublishNS += w.since(opPublish, t)
	w.res.StoredBlocks += uint64(pr.Stored)
	w.res.PresentBlocks += uint64(pr.Present)
	w.res.PublishedBytes += uint64(pr.Stored) * w.in.BlockBytes
	if err != nil {
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != client.CodeUnadmitted {
			return fmt.Errorf("publish of %d blocks: %w", k-hits, err)
		}
		w.res.Unadmitted++
		w.res.UnadmittedBlocks += uint64(k-hits) - uint64(pr.Stored) - uint64(pr.Present)
	}
	return nil
}

// query asks for the longest resident prefix of hashes, in chunks of at
// most MaxQueryHashes: each chunk that hits takes a lease, and the next
// chunk is asked only when the previous one hit in full. It returns the
// hit count; the leases are in w.leases.
func (w *replayWorker) query(hashes []client.BlockHash) (int, error) {
	w.leases = w.leases[:0]
	hits := 0
	for hits < len(hashes) {
		n := min(len(hashes)-hits, w.maxQ)
		t := time.Now()
		l, err := w.queryUntilReady(hashes[hits : hits+n])
		w.since(opQuery, t)
		if err != nil {
			return hits, fmt.Errorf("query of %d hashes: %w", n, err)
		}
		if int(l.Hits) > n {
			return hits, fmt.Errorf("query of %d hashes answered %d hits", n, l.Hits)
		}
		if l.Hits == 0 {
			break
		}
		w.leases = append(w.leases, l)
		if l.BlockBytes != 0 && l.BlockBytes != w.in.BlockBytes {
			return hits, fmt.Errorf("lease %d has %d-byte blocks, the replay publishes %d", l.ID, l.BlockBytes, w.in.BlockBytes)
		}
		hits += int(l.Hits)
		if int(l.Hits) < n {
			break
		}
	}
	return hits, nil
}

// loadingRetry is how long the replay waits before asking again after a
// query answered Loading (blocks being prefetched from the SSD tier), and
// loadingTimeout how long it keeps asking.
const (
	loadingRetry   = 50 * time.Microsecond
	loadingTimeout = 10 * time.Second
)

// queryUntilReady queries hashes, asking again while the Manager answers
// Loading (the SSD tier prefetches the chain into RAM); the timed round trip
// includes the waits.
func (w *replayWorker) queryUntilReady(hashes []client.BlockHash) (client.Lease, error) {
	start := time.Now()
	deadline := start.Add(loadingTimeout)
	for waited := false; ; waited = true {
		l, err := w.c.Query(w.ns, hashes)
		var ce *client.Error
		if err == nil || !errors.As(err, &ce) || ce.Code != client.CodePending {
			if waited && err == nil {
				w.remote.RecordDuration(time.Since(start))
			}
			return l, err
		}
		w.res.LoadingWaits++
		if time.Now().After(deadline) {
			return l, fmt.Errorf("still Loading after %v: %w", loadingTimeout, err)
		}
		time.Sleep(loadingRetry)
	}
}

// restore copies every leased block i of the request into page i and waits
// for each copy; one timed restore per lease.
func (w *replayWorker) restore() error {
	page := uint32(0)
	for _, l := range w.leases {
		w.entries = w.entries[:0]
		for b := range l.Hits {
			w.entries = append(w.entries, client.RestoreEntry{Block: b, Page: page + b})
		}
		t := time.Now()
		op, err := w.c.Restore(l.ID, w.bufID, w.entries)
		if err == nil {
			err = w.c.RestoreWait(op, content.RestoreTimeout)
		}
		w.res.RestoreNS += w.since(opRestore, t)
		if err != nil {
			return fmt.Errorf("restore of %d blocks from lease %d: %w", l.Hits, l.ID, err)
		}
		w.res.RestoredBytes += uint64(l.Hits) * w.in.BlockBytes
		w.restoredAt = time.Now()
		page += l.Hits
	}
	return nil
}

// releaseAll ends the request's leases (ID 0 holds nothing to release).
func (w *replayWorker) releaseAll() error {
	var errs []error
	for _, l := range w.leases {
		if l.ID == 0 {
			continue
		}
		t := time.Now()
		if err := w.c.Release(l.ID); err != nil {
			errs = append(errs, fmt.Errorf("release of lease %d: %w", l.ID, err))
		}
		w.since(opRelease, t)
	}
	w.leases = w.leases[:0]
	return errors.Join(errs...)
}
