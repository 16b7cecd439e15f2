package manager

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tenant"
)

// postLookup sends body to the Manager's POST /v1/lookup and returns the
// status and the decoded JSON answer.
func postLookup(t *testing.T, m *Manager, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post("http://"+m.http.addr+LookupPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s %s: answer is no JSON object: %v", LookupPath, body, err)
	}
	return resp.StatusCode, out
}

// chainRecords are n blocks of a chain: engine hashes base+1.., each the
// parent of the next, blockSize token ids each (block i holds
// i*blockSize...), and the token ids of the whole chain.
func chainRecords(base uint64, n, blockSize int) ([]client.BlockRecord, []uint32) {
	var recs []client.BlockRecord
	var all []uint32
	for i := range n {
		toks := make([]uint32, blockSize)
		for j := range toks {
			toks[j] = uint32(i*blockSize + j + int(base))
		}
		r := client.BlockRecord{EngineHash: base + uint64(i) + 1, Tokens: toks}
		if i > 0 {
			r.ParentHash, r.HasParent = base+uint64(i), true
		}
		recs, all = append(recs, r), append(all, toks...)
	}
	return recs, all
}

// publishChain publishes recs as blocks of ns through a real client.
func publishChain(t *testing.T, m *Manager, ns client.Namespace, recs []client.BlockRecord) {
	t.Helper()
	c := connect(t, m, "lookup")
	buf, err := client.AllocBuffer(1, 16<<10, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	bid, err := c.RegisterBuffer(buf)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]client.BlockHash, len(recs))
	pages := make([]uint32, len(recs))
	for i, r := range recs {
		hashes[i] = client.BlockHash{byte(r.EngineHash), byte(r.EngineHash >> 8), 0x1c}
		pages[i] = uint32(i)
	}
	if r, err := c.PublishRecords(ns, bid, hashes, pages, recs); err != nil || int(r.Stored) != len(recs) {
		t.Fatalf("PublishRecords = %+v, %v; want %d stored", r, err, len(recs))
	}
}

func eventsSpec(t *testing.T) Spec {
	s := testSpec(t, "127.0.0.1:0")
	s.Events = kvevents.Spec{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}
	return s
}

func jsonInts(v []uint32) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLookupAnswersFromTheBlocksPublishedWithRecords(t *testing.T) {
	m := serving(t, eventsSpec(t))
	ns := client.Namespace{0x1c, 0x2d, 0x3e}
	recs, toks := chainRecords(1000, 3, 4)
	publishChain(t, m, ns, recs)
	nsHex := hex.EncodeToString(ns[:])
	other := hex.EncodeToString([]byte{15: 1})
	for _, c := range []struct {
		name, body string
		want       map[string]float64
	}{
		{"the chain's hashes and one unknown after them are 3 held of 4", `{"block_hashes": [1001, 1002, 1003, 77]}`,
			map[string]float64{"blocks": 4, "cpu": 3, "storage": 0, "any": 3}},
		{"an unknown first hash holds none", `{"block_hashes": [77, 1001]}`,
			map[string]float64{"blocks": 2, "cpu": 0, "storage": 0, "any": 0}},
		{"the chain in its own namespace is held", `{"namespace": "` + nsHex + `", "block_hashes": [1001, 1002]}`,
			map[string]float64{"blocks": 2, "cpu": 2, "any": 2}},
		{"the chain in another namespace is not", `{"namespace": "` + other + `", "block_hashes": [1001, 1002]}`,
			map[string]float64{"blocks": 2, "cpu": 0, "any": 0}},
		{"the chain's token ids with a trailing partial block are 3 whole blocks held", `{"token_ids": ` + jsonInts(append(toks, 5, 6)) + `, "block_size": 4}`,
			map[string]float64{"blocks": 3, "cpu": 3, "any": 3}},
		{"token ids that differ in the second block hold one", `{"token_ids": ` + jsonInts(append(toks[:4:4], 9, 9, 9, 9)) + `, "block_size": 4}`,
			map[string]float64{"blocks": 2, "cpu": 1, "any": 1}},
		{"token ids cut at another block size hold none", `{"token_ids": ` + jsonInts(toks) + `, "block_size": 2}`,
			map[string]float64{"blocks": 6, "cpu": 0, "any": 0}},
		{"an empty chain holds none", `{"block_hashes": []}`, map[string]float64{"blocks": 0, "cpu": 0, "any": 0}},
		{"nodes on a node outside a cluster is an empty list", `{"block_hashes": [1001], "nodes": true}`, map[string]float64{"blocks": 1, "cpu": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := postLookup(t, m, c.body)
			if code != http.StatusOK {
				t.Fatalf("status %d (%v), want 200", code, out)
			}
			for k, v := range c.want {
				if out[k] != v {
					t.Errorf("%s = %v, want %v (answer %v)", k, out[k], v, out)
				}
			}
			if strings.Contains(c.body, "nodes") {
				if nodes, ok := out["nodes"].([]any); !ok || len(nodes) != 0 {
					t.Errorf("nodes = %#v, want []", out["nodes"])
				}
			} else if _, ok := out["nodes"]; ok {
				t.Errorf("nodes present without being asked: %v", out)
			}
		})
	}
	fams := scrape(t, m)
	if got := oneLabelled(t, fams, "orbitkv_kv_lookup_requests_total", "result", "ok"); got < 9 {
		t.Errorf("orbitkv_kv_lookup_requests_total{result=ok} = %v, want at least 9", got)
	}
	t.Run("the events' series count the records kept and the events published", func(t *testing.T) {
		if got := oneValue(t, fams, "orbitkv_kv_event_blocks"); got != 3 {
			t.Errorf("orbitkv_kv_event_blocks = %v, want 3", got)
		}
		if got := oneValue(t, fams, "orbitkv_kv_event_unannounced_blocks_total"); got != 0 {
			t.Errorf("orbitkv_kv_event_unannounced_blocks_total = %v, want 0", got)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			// AllBlocksCleared at the epoch's start, then the 3 stores
			// (published within the flush interval).
			ev := oneLabelled(t, scrape(t, m), "orbitkv_kv_events_total", "stream", "node")
			if ev >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("orbitkv_kv_events_total{stream=node} = %v after 5 s, want the clear and the stores", ev)
			}
		}
		for _, name := range []string{"orbitkv_kv_event_batches_total", "orbitkv_kv_events_dropped_total", "orbitkv_kv_event_resyncs_total",
			"orbitkv_kv_event_subscribers", "orbitkv_kv_event_subscribers_dropped_total"} {
			oneLabelled(t, fams, name, "stream", "node")
		}
	})
}

// oneLabelled is the value of name's series whose label k is v.
func oneLabelled(t *testing.T, fams map[string]*dto.MetricFamily, name, k, v string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no series %s", name)
	}
	for _, s := range f.GetMetric() {
		if labels(s)[k] == v {
			if s.GetCounter() != nil {
				return s.GetCounter().GetValue()
			}
			return s.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, k, v)
	return 0
}

func TestLookupRefusesABadRequestNamingTheFieldAndTheLimit(t *testing.T) {
	m := serving(t, eventsSpec(t))
	for _, c := range []struct{ name, body, want string }{
		{"an empty body", ``, "body: empty"},
		{"malformed JSON", `{"block_hashes": [1,`, "body: "},
		{"a second value after the object", `{"block_hashes": []} {}`, "body: one JSON object"},
		{"an unknown field", `{"block_hashes": [], "hash": 1}`, "hash: unknown field"},
		{"a negative hash", `{"block_hashes": [-1]}`, "block_hashes: "},
		{"a hash over 64 bits", `{"block_hashes": [18446744073709551616]}`, "block_hashes: "},
		{"a token id over 32 bits", `{"token_ids": [4294967296], "block_size": 1}`, "token_ids: "},
		{"both hashes and tokens", `{"block_hashes": [], "token_ids": [], "block_size": 1}`, "block_hashes: give block_hashes or token_ids, not both"},
		{"neither hashes nor tokens", `{"namespace": "0102030405060708090a0b0c0d0e0f10"}`, "block_hashes: give block_hashes"},
		{"too many hashes", `{"block_hashes": [` + strings.Repeat("1,", LookupMaxHashes) + `1]}`, "block_hashes: 65537 hashes; at most 65536"},
		{"tokens without a block size", `{"token_ids": [1]}`, "block_size: needed with token_ids"},
		{"a block size of 0", `{"token_ids": [1], "block_size": 0}`, "block_size: 0; want 1..512"},
		{"a block size over OKV_RECORD_MAX_TOKENS", `{"token_ids": [1], "block_size": 513}`, "block_size: 513; want 1..512"},
		{"a block size with hashes", `{"block_hashes": [1], "block_size": 4}`, "block_size: only with token_ids"},
		{"a short namespace", `{"namespace": "0102", "block_hashes": []}`, "namespace: 4 characters; want exactly 32 hex digits"},
		{"a namespace that is not hex", `{"namespace": "zz02030405060708090a0b0c0d0e0f10", "block_hashes": []}`, "namespace: not hex"},
		{"the all-zero namespace", `{"namespace": "00000000000000000000000000000000", "block_hashes": []}`, "namespace: all zero"},
		{"a field that is not one", `{"tenant": "a", "block_hashes": []}`, "tenant: unknown field"},
		{"a body over 4 MiB", `{"block_hashes": [` + strings.Repeat(" ", LookupMaxBodyBytes) + `]}`, "body: over 4194304 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := postLookup(t, m, c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d (%v), want 400", code, out)
			}
			if e, _ := out["error"].(string); !strings.HasPrefix(e, c.want) {
				t.Fatalf("error %q, want it to start %q", e, c.want)
			}
		})
	}
	if got := oneLabelled(t, scrape(t, m), "orbitkv_kv_lookup_requests_total", "result", "invalid"); got != 19 {
		t.Errorf("orbitkv_kv_lookup_requests_total{result=invalid} = %v, want 19", got)
	}
}

// Without --kv-events the Manager keeps no block records: the lookup
// answers 409 saying so, never a silent "none held".
func TestLookupWithEventsOffIsAConflictSayingSo(t *testing.T) {
	m := serving(t, testSpec(t, "127.0.0.1:0"))
	code, out := postLookup(t, m, `{"block_hashes": [1]}`)
	if e, _ := out["error"].(string); code != http.StatusConflict || !strings.Contains(e, "--kv-events") {
		t.Fatalf("status %d, %v; want 409 naming --kv-events", code, out)
	}
	if got := oneLabelled(t, scrape(t, m), "orbitkv_kv_lookup_requests_total", "result", "events_off"); got != 1 {
		t.Errorf("orbitkv_kv_lookup_requests_total{result=events_off} = %v, want 1", got)
	}
	// Other endpoints still refuse a body.
	resp, err := http.Post("http://"+m.http.addr+"/health", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /health with a body = %d, want 400", resp.StatusCode)
	}
}

// With tenants the lookup is refused: the HTTP listener is not
// authenticated, and an answer would show one tenant another's blocks.
func TestLookupWithTenantsIsForbidden(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	ts, err := tenant.Parse([]string{"me=uid:" + uid, "other=uid:" + strconv.Itoa(os.Getuid()+1)}, nil, nil, func(string) (uint64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, "127.0.0.1:0")
	s.Tenants = ts
	s.Session.MaxSessions, s.Channel.MaxSessions = 4, 4
	dir := t.TempDir()
	s.Events = kvevents.Spec{Endpoint: "ipc://" + filepath.Join(dir, "ev")}
	m, err := New(s)
	if err != nil {
		t.Skipf("a Manager with tenants and events could not start here: %v", err)
	}
	m.Close()
	m = serving(t, s)
	ns := client.Namespace{0x7e, 0x4a}
	recs, _ := chainRecords(500, 2, 4)
	publishChain(t, m, ns, recs)
	for _, body := range []string{`{"block_hashes": [501, 502]}`, `{"namespace": "` + hex.EncodeToString(ns[:]) + `", "block_hashes": [501]}`} {
		code, out := postLookup(t, m, body)
		if e, _ := out["error"].(string); code != http.StatusForbidden || !strings.Contains(e, "tenants") {
			t.Fatalf("%s: status %d, %v; want 403 naming the tenants", body, code, out)
		}
	}
}

// Every accepted request meets the limits decodeLookup states, and
// re-encoding what it accepted decodes to the same query.
func FuzzDecodeLookup(f *testing.F) {
	for _, s := range []string{
		`{"block_hashes": [1, 2, 18446744073709551615]}`,
		`{"namespace": "0102030405060708090a0b0c0d0e0f10", "block_hashes": []}`,
		`{"token_ids": [1, 2, 3, 4, 5], "block_size": 2, "nodes": true}`,
		`{"token_ids": [], "block_size": 512}`,
		`{"block_hashes": [1], "token_ids": [1]}`,
		`{"block_hashes": null, "token_ids": [1], "block_size": 1}`,
		`{"block_hashes": [1.5]}`,
		`[]`, `null`, `{}`, `{"nodes": "yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := decodeLookup(body)
		if err != nil {
			if _, ok := err.(*lookupError); !ok {
				t.Fatalf("error %T %v, want a *lookupError", err, err)
			}
			return
		}
		if (q.Hashes == nil) == (q.Tokens == nil) {
			t.Fatalf("accepted %q with hashes %v and tokens %v: want exactly one", body, q.Hashes != nil, q.Tokens != nil)
		}
		if len(q.Hashes) > LookupMaxHashes || len(q.Tokens) > LookupMaxTokens {
			t.Fatalf("accepted %d hashes, %d tokens", len(q.Hashes), len(q.Tokens))
		}
		if q.Tokens != nil && (q.BlockSize < 1 || q.BlockSize > abi.RecordMaxTokens) {
			t.Fatalf("accepted block size %d", q.BlockSize)
		}
		if q.NS != nil && *q.NS == (abi.Namespace{}) {
			t.Fatalf("accepted the all-zero namespace")
		}
		// Round trip: the query as a body of its own decodes the same.
		b := map[string]any{"nodes": q.Nodes}
		if q.NS != nil {
			b["namespace"] = hex.EncodeToString(q.NS[:])
		}
		if q.Tokens != nil {
			b["token_ids"], b["block_size"] = q.Tokens, q.BlockSize
		} else {
			b["block_hashes"] = q.Hashes
		}
		again, _ := json.Marshal(b)
		q2, err := decodeLookup(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if !sameQuery(q, q2) {
			t.Fatalf("round trip of %q: %+v, then %+v", body, q, q2)
		}
	})
}

func sameQuery(a, b lookupQuery) bool {
	nsEqual := (a.NS == nil) == (b.NS == nil) && (a.NS == nil || *a.NS == *b.NS)
	return nsEqual && slices.Equal(a.Hashes, b.Hashes) && slices.Equal(a.Tokens, b.Tokens) &&
		(a.Hashes == nil) == (b.Hashes == nil) && a.BlockSize == b.BlockSize && a.Nodes == b.Nodes
}

// With "nodes", the lookup also reports every live peer of the catalog:
// a peer holding the chain answers its counts through peer control's
// Lookup (mutual TLS), a peer whose events are off is reported with its
// error, and neither fails the request.
func TestLookupWithNodesAsksEveryLivePeer(t *testing.T) {
	eps := etcdEndpoints(t)
	certs := clusterCerts(t, "a", "b", "c")
	withEvents := func(s *Spec) {
		s.HTTPAddr = "127.0.0.1:0"
		s.Events = kvevents.Spec{Endpoint: "tcp://127.0.0.1:0"}
	}
	a := startNodeWith(t, "a", 11, eps, certs, withEvents)
	b := startNodeWith(t, "b", 22, eps, certs, withEvents)
	startNode(t, "c", 33, eps, certs) // events off
	recs, toks := chainRecords(40, 3, 4)
	hashes := make([]client.BlockHash, len(recs))
	pages := make([]uint32, len(recs))
	for i := range recs {
		hashes[i], pages[i] = cHash(40+i), uint32(i)
	}
	if r, err := a.c.PublishRecords(cNS, a.bid, hashes, pages, recs); err != nil || r.Stored != 3 {
		t.Fatalf("PublishRecords on a: %+v, %v", r, err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(b.m.Catalog().Members()) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("b sees members %v, want a, b and c", b.m.Catalog().Members())
		}
	}
	nsHex := hex.EncodeToString(cNS[:])
	for _, body := range []string{
		`{"namespace": "` + nsHex + `", "block_hashes": [41, 42, 43, 44], "nodes": true}`,
		`{"token_ids": ` + jsonInts(toks) + `, "block_size": 4, "nodes": true}`,
	} {
		code, out := postLookup(t, b.m, body)
		if code != http.StatusOK || out["any"] != 0.0 {
			t.Fatalf("%s: status %d, %v; want 200 with none held on b itself", body, code, out)
		}
		nodes, _ := out["nodes"].([]any)
		byNode := map[string]map[string]any{}
		for _, n := range nodes {
			nm := n.(map[string]any)
			byNode[nm["node"].(string)] = nm
		}
		if len(byNode) != 2 || byNode["b"] != nil {
			t.Fatalf("%s: nodes %v, want a and c (not b itself)", body, nodes)
		}
		if got := byNode["a"]; got["cpu"] != 3.0 || got["any"] != 3.0 || got["storage"] != 0.0 || got["error"] != nil {
			t.Errorf("%s: a answered %v, want cpu 3, any 3, storage 0", body, got)
		}
		if e, _ := byNode["c"]["error"].(string); !strings.Contains(e, "KV events are off") || byNode["c"]["any"] != nil {
			t.Errorf("%s: c answered %v, want its error saying its events are off", body, byNode["c"])
		}
	}
}
