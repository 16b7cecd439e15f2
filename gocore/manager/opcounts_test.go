package manager

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// opSeries is orbitkv_operations_total of one scrape, by op and result.
type opSeries map[[2]string]float64

func operationSeries(t *testing.T, fams map[string]*dto.MetricFamily) opSeries {
	t.Helper()
	f := fams["orbitkv_operations_total"]
	if f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("orbitkv_operations_total = %v, want a counter", f)
	}
	out := opSeries{}
	for _, m := range f.GetMetric() {
		l := labels(m)
		out[[2]string{l["op"], l["result"]}] = m.GetCounter().GetValue()
	}
	return out
}

// oneValue is the value of the one series of family name.
func oneValue(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("%s = %v, want one series", name, f)
	}
	m := f.GetMetric()[0]
	if f.GetType() == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// connect opens a liborbitkv session on m's socket, skipping the test in
// a build without cgo.
func connect(t *testing.T, m *Manager, name string) *client.Client {
	t.Helper()
	c, err := client.Connect(client.Options{SocketPath: m.spec.Bootstrap.Path, InstanceID: name})
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo: no liborbitkv client")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A fresh Manager exposes every op with every status at 0 (other only
// with invalid, unanswered only with publish); after a client's requests
// each series has counted exactly the requests of its op answered with
// its status, and all of them together are the dispatcher's request count.
func TestOperationsAreCountedExactly(t *testing.T) {
	m := newMetricsManager(t, 1)
	fresh := operationSeries(t, scrape(t, m))
	t.Run("every series is present at 0 on a fresh Manager", func(t *testing.T) {
		for op := range channel.NumOps {
			for res := range channel.NumResults {
				k := [2]string{channel.OpNames[op], channel.ResultNames[res]}
				v, ok := fresh[k]
				if want := alwaysExposed(op, res); ok != want {
					t.Errorf("series %v exposed %v, want %v", k, ok, want)
				} else if ok && v != 0 {
					t.Errorf("series %v = %v on a fresh Manager, want 0", k, v)
				}
			}
		}
		if n := len(fresh); n != (channel.NumOps-1)*(channel.NumResults-1)+2 {
			t.Errorf("%d series, want %d", n, (channel.NumOps-1)*(channel.NumResults-1)+2)
		}
	})

	c := connect(t, m, "counted")
	buf, err := client.AllocBuffer(1, 16<<10, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	bid, err := c.RegisterBuffer(buf)
	if err != nil {
		t.Fatal(err)
	}
	ns := client.Namespace{0x0c, 0x07}
	hash := func(i int) client.BlockHash { return client.BlockHash{byte(i), 0x0c, 0x07} }
	const pings, publishes, hits, misses, badReleases = 7, 3, 5, 4, 2
	for i := range pings {
		if v, err := c.Ping(uint64(i)); err != nil || v != uint64(i) {
			t.Fatalf("Ping(%d) = %d, %v", i, v, err)
		}
	}
	for i := range publishes {
		if r, err := c.Publish(ns, bid, []client.BlockHash{hash(i)}, []uint32{uint32(i)}); err != nil || r.Stored != 1 {
			t.Fatalf("Publish %d = %+v, %v; want 1 stored", i, r, err)
		}
	}
	for range hits {
		l, err := c.Query(ns, []client.BlockHash{hash(0), hash(1)})
		if err != nil || l.Hits != 2 {
			t.Fatalf("Query of published blocks = %+v, %v; want 2 hits", l, err)
		}
		if err := c.Release(l.ID); err != nil {
			t.Fatal(err)
		}
	}
	for i := range misses {
		if l, err := c.Query(ns, []client.BlockHash{hash(100 + i)}); err != nil || l.Hits != 0 {
			t.Fatalf("Query of an absent block = %+v, %v; want a miss", l, err)
		}
	}
	for range badReleases {
		var ce *client.Error
		if err := c.Release(1 << 60); !errors.As(err, &ce) || ce.Code != client.CodeInvalid {
			t.Fatalf("Release of an unknown lease = %v, want CodeInvalid", err)
		}
	}
	fams := scrape(t, m)
	got := operationSeries(t, fams)
	want := opSeries{
		{"ping", "ok"}: pings, {"publish", "ok"}: publishes, {"query", "ok"}: hits,
		{"release", "ok"}: hits, {"query", "miss"}: misses, {"release", "invalid"}: badReleases,
	}
	t.Run("each series counts exactly the requests sent", func(t *testing.T) {
		for k, v := range got {
			if d := v - fresh[k]; d != want[k] {
				t.Errorf("series %v counted %v, want %v", k, d, want[k])
			}
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Errorf("series %v missing", k)
			}
		}
	})
	t.Run("the series add up to the dispatcher's request count", func(t *testing.T) {
		var sum float64
		for _, v := range got {
			sum += v
		}
		if req := oneValue(t, fams, "orbitkv_channel_requests_total"); sum != req {
			t.Errorf("orbitkv_operations_total sums to %v, orbitkv_channel_requests_total is %v", sum, req)
		}
	})
}

// The label values follow abi's command and status codes, which index
// the dispatcher's counts.
func TestOpIndexesFollowTheABICodes(t *testing.T) {
	if channel.OpNames[abi.CmdQueryBundle] != "query" || channel.OpNames[abi.CmdShutdown] != "shutdown" ||
		channel.OpNames[abi.CmdPublish] != "publish" || channel.OpNames[abi.CmdRestorePoll] != "restore_poll" {
		t.Errorf("OpNames %v do not follow abi's command codes", channel.OpNames)
	}
	if channel.ResultNames[abi.StatusOK] != "ok" || channel.ResultNames[abi.StatusUnadmitted] != "unadmitted" ||
		channel.ResultNames[abi.StatusUnsupported] != "unsupported" || channel.ResultNames[channel.ResultUnanswered] != "unanswered" {
		t.Errorf("ResultNames %v do not follow abi's status codes", channel.ResultNames)
	}
}

// Sessions handed out and refusals by reason are counted; a connection
// closed before its first byte (a liveness probe) is neither.
func TestSessionsOpenedAndRefusedAreCounted(t *testing.T) {
	m := newMetricsManager(t, 1)
	refused := func(fams map[string]*dto.MetricFamily) map[string]float64 {
		out := map[string]float64{}
		for _, s := range fams["orbitkv_sessions_refused_total"].GetMetric() {
			out[labels(s)["reason"]] = s.GetCounter().GetValue()
		}
		return out
	}
	fams := scrape(t, m)
	if v := oneValue(t, fams, "orbitkv_sessions_opened_total"); v != 0 {
		t.Fatalf("orbitkv_sessions_opened_total = %v on a fresh Manager, want 0", v)
	}
	if r := refused(fams); len(r) != len(bootstrap.RefusalReasons) {
		t.Fatalf("orbitkv_sessions_refused_total has reasons %v, want every one of %v at 0", r, bootstrap.RefusalReasons)
	}
	const opened = 2
	for i := range opened {
		connect(t, m, "session-"+string(rune('a'+i)))
	}
	dial := func(send []byte) {
		t.Helper()
		cn, err := net.Dial("unix", m.spec.Bootstrap.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		if len(send) > 0 {
			if _, err := cn.Write(send); err != nil {
				t.Fatal(err)
			}
		}
		if cn, ok := cn.(*net.UnixConn); ok && len(send) < abi.HelloSize {
			cn.CloseWrite() // the hello ends short
		}
		cn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [abi.HelloReplySize]byte
		cn.Read(b[:]) // the refusal, or EOF
	}
	dial(nil)                         // a probe: not counted
	dial([]byte{1, 2, 3})             // a hello cut short
	dial(make([]byte, abi.HelloSize)) // a hello of the wrong magic
	dial(make([]byte, abi.HelloSize)) // and another
	want := map[string]float64{"hello_incomplete": 1, "hello_invalid": 2}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, m)
		got, open := refused(fams), oneValue(t, fams, "orbitkv_sessions_opened_total")
		ok := open == opened
		for _, reason := range bootstrap.RefusalReasons {
			ok = ok && got[reason] == want[reason]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("opened %v, refused %v; want %d opened and refused %v (others 0)", open, got, opened, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// GET /health and the operator socket's Health report the SSD tier:
// configured, open, its blocks, bytes and errors; without one, configured
// false and zeros.
func TestHealthReportsTheSSDTier(t *testing.T) {
	get := func(t *testing.T, m *Manager) map[string]any {
		t.Helper()
		resp, err := http.Get("http://" + m.http.addr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			SSD map[string]any `json:"ssd"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		if h.SSD == nil {
			t.Fatal("GET /health has no \"ssd\" object")
		}
		return h.SSD
	}
	fields := []string{"configured", "open", "blocks", "used_bytes", "capacity_bytes", "read_errors", "write_errors", "corrupt_blocks"}
	t.Run("with an SSD tier", func(t *testing.T) {
		m := newMetricsManager(t, 1)
		ssd := get(t, m)
		for _, f := range fields {
			if _, ok := ssd[f]; !ok {
				t.Errorf("ssd.%s missing (got %v)", f, ssd)
			}
		}
		st := m.Cache.Stats().SSD
		if ssd["configured"] != true || ssd["open"] != true || ssd["capacity_bytes"] != float64(st.CapacityBytes) || st.CapacityBytes == 0 {
			t.Errorf("ssd = %v, want configured and open with capacity_bytes %d", ssd, st.CapacityBytes)
		}
		op, err := (&operatorService{m: m}).Health(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := op.GetSsd(); !s.GetConfigured() || !s.GetOpen() || s.GetCapacityBytes() != st.CapacityBytes {
			t.Errorf("operator Health's ssd = %v, want configured and open with capacity %d", s, st.CapacityBytes)
		}
		m.Close()
		if s := m.health.ssdHealth(); !s.GetConfigured() || s.GetOpen() {
			t.Errorf("after Close the ssd state is %v, want configured and not open", s)
		}
	})
	t.Run("without an SSD tier", func(t *testing.T) {
		m := serving(t, testSpec(t, "127.0.0.1:0"))
		ssd := get(t, m)
		for _, f := range fields {
			if v, ok := ssd[f]; !ok || (v != false && v != float64(0)) {
				t.Errorf("ssd.%s = %v, want false or 0", f, v)
			}
		}
	})
}
