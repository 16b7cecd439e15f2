package integration

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/test/model"
)

var (
	managerModelSeeds = flag.Int("model.seeds", 3, "seeds TestManagerAgreesWithTheModel runs (make soak raises it)")
	managerModelSteps = flag.Int("model.steps", 400, "operations per seed")
	managerModelSeed  = flag.Uint64("model.seed", 0, "run only this seed, logging every step")
)

const (
	mLayers    = 2
	mPageBytes = 8 << 10
	mPages     = 8
)

// managerDriver runs the model against a failpoint Manager binary through
// liborbitkv (the raw okv_op_* ticket calls), restarting it on request.
type managerDriver struct {
	t    *testing.T
	m    *fpManager
	sock string
	ns   client.Namespace
	sess map[int]*mSession
	next int
}

type mSession struct {
	c   *client.Client
	buf *client.Buffer
	id  uint32
}

// modelFlags: the model keeps a lease until Release or teardown, so idle
// leases are never revoked (Expire moves the clock 61 s).
var modelFlags = []string{"--max-ops-per-session", "8", "--max-ops", "16", "--lease-budget", "256KiB", "--ram-capacity", "64MiB",
	"--lease-idle-timeout", "0"}

func (d *managerDriver) Open() (int, error) {
	c, err := client.Connect(client.Options{SocketPath: d.sock, InstanceID: fmt.Sprintf("model-%d", d.next)})
	if err != nil {
		return 0, err
	}
	buf, err := client.AllocBuffer(mLayers, mPageBytes, mPages)
	if err != nil {
		c.Close()
		return 0, err
	}
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		c.Close()
		buf.Free()
		return 0, err
	}
	d.next++
	d.sess[d.next] = &mSession{c: c, buf: buf, id: id}
	return d.next, nil
}

func (d *managerDriver) Close(h int) error {
	s := d.sess[h]
	s.c.Close()
	s.buf.Free()
	delete(d.sess, h)
	return nil
}

func (d *managerDriver) Publish(h, chain, n int) error {
	s := d.sess[h]
	hs := make([]client.BlockHash, n)
	pages := make([]uint32, n)
	for i := range hs {
		hs[i], pages[i] = client.BlockHash(model.Hash(chain, i)), uint32(i)
	}
	_, err := s.c.Publish(d.ns, s.id, hs, pages)
	return err
}

// resp maps a client call's outcome to the Manager's status.
func resp(ans client.QueryAnswer, err error) (model.Resp, error) {
	if err == nil {
		return model.Resp{Status: abi.Status(ans.Status), Arg0: uint64(ans.Hits), Arg1: ans.LeaseID}, nil
	}
	var ce *client.Error
	if !errors.As(err, &ce) {
		return model.Resp{}, err
	}
	switch ce.Code {
	case client.CodeUnadmitted:
		return model.Resp{Status: abi.StatusUnadmitted}, nil
	case client.CodeExpired:
		return model.Resp{Status: abi.StatusTimeout}, nil
	case client.CodeInvalid:
		f := model.AnyField
		for i := abi.Field(1); i <= abi.FieldRecovery; i++ {
			if strings.Contains(ce.Detail, "field "+i.String()+",") || strings.HasSuffix(ce.Detail, "field "+i.String()) {
				f = uint64(i)
			}
		}
		return model.Resp{Status: abi.StatusInvalid, Arg0: f}, nil
	}
	return model.Resp{}, err
}

func (d *managerDriver) Do(h int, q model.Req) (model.Resp, error) {
	s := d.sess[h]
	switch q.Kind {
	case model.Submit, model.Untracked:
		hs := make([]client.BlockHash, q.Len)
		for i := range hs {
			hs[i] = client.BlockHash(model.Hash(q.Chain, i))
		}
		if q.Kind == model.Untracked {
			l, err := s.c.Query(d.ns, hs)
			if err != nil {
				return resp(client.QueryAnswer{}, err)
			}
			if l.Hits == 0 {
				return model.Resp{Status: abi.StatusMiss}, nil
			}
			return model.Resp{Status: abi.StatusOK, Arg0: uint64(l.Hits), Arg1: l.ID}, nil
		}
		bh, err := client.NewBlockHashes(hs)
		if err != nil {
			return model.Resp{}, err
		}
		defer bh.Free()
		return resp(s.c.OpSubmit(q.OpID, q.Rev, client.QuerySpec{NS: d.ns, Hashes: bh, Flags: uint32(q.Flags),
			RequestID: q.ReqID, Group: q.Group, RecoveryFirst: q.RecFirst, RecoveryCount: q.RecCount}))
	case model.Poll:
		return resp(s.c.OpPoll(q.OpID, q.Rev))
	case model.Claim:
		return resp(s.c.OpClaim(q.OpID, q.Rev))
	case model.Cancel:
		if err := s.c.OpCancel(q.OpID, q.Rev); err != nil {
			return resp(client.QueryAnswer{}, err)
		}
		return model.Resp{Status: abi.StatusOK, Arg0: 1}, nil
	case model.Release:
		if err := s.c.Release(q.LeaseID); err != nil {
			return resp(client.QueryAnswer{}, err)
		}
		return model.Resp{Status: abi.StatusOK}, nil
	}
	return model.Resp{}, fmt.Errorf("unknown request kind %v", q.Kind)
}

func (d *managerDriver) Expire() error {
	d.m.control(d.t, "POST", "/debug/clock/advance?by=61s")
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := readHealth(d.sock) // tickets of every session
		if err != nil {
			return err
		}
		if h.Tickets == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d tickets live 5 s after the clock passed their expiry", h.Tickets)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *managerDriver) Restart() (bool, error) {
	d.m.p.Signal(syscall.SIGKILL)
	exitCode(d.t, d.m.p, 10*time.Second)
	for h := range d.sess {
		d.Close(h)
	}
	d.m = startFPManager(d.t, d.sock, modelFlags...)
	return true, nil
}

func (d *managerDriver) Idle() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := readHealth(d.sock)
		if err != nil {
			return err
		}
		if h.Sessions == 0 && h.Leases == 0 && h.Pins == 0 && h.ReservedBytes == 0 && h.Operations == 0 && h.Tickets == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("idle invariant broken: %+v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *managerDriver) InvalidField() bool { return true }

// TestManagerAgreesWithTheModel runs the reference model (test/model)
// against a real Manager through the real channel and liborbitkv: several
// sessions interleaved, expiry through the failpoint build's test clock,
// disconnects and Manager restarts (SIGKILL, new epoch: old lease ids are
// refused). A failing seed is printed; rerun it with -model.seed N.
func TestManagerAgreesWithTheModel(t *testing.T) {
	var seeds []uint64
	if *managerModelSeed != 0 {
		seeds = []uint64{*managerModelSeed}
	} else {
		for i := 0; i < *managerModelSeeds; i++ {
			seeds = append(seeds, uint64(time.Now().UnixNano())+uint64(i)*104729)
		}
	}
	p := model.Params{Sessions: 3, Steps: *managerModelSteps, Chains: 3, ChainLen: mPages, BlockBytes: mLayers * mPageBytes,
		LeaseBudget: 256 << 10, MaxOpsSession: 8, MaxOps: 16, Restarts: true}
	for _, seed := range seeds {
		sock := filepath.Join(t.TempDir(), "okv.sock")
		d := &managerDriver{t: t, sock: sock, sess: map[int]*mSession{}, ns: namespace(t, "model-test")}
		d.m = startFPManager(t, sock, modelFlags...)
		var logf func(string, ...any)
		if *managerModelSeed != 0 {
			logf = t.Logf
		}
		if err := model.Run(d, p, seed, logf); err != nil {
			t.Fatalf("seed %d: %v\n(rerun: go test ./test/integration -run TestManagerAgreesWithTheModel -model.seed %d)", seed, err, seed)
		}
	}
}
