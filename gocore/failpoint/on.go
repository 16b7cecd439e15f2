//go:build failpoints

package failpoint

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Enabled reports whether this build has failpoints (tag `failpoints`).
const Enabled = true

type point struct {
	armed  bool   // the next Pause of this point holds its operation
	paused bool   // an operation is held now (WaitPaused sees it)
	resume func() // the held operation's resume function; nil when none is held
	hits   int
}

var (
	mu     sync.Mutex
	cond   = sync.NewCond(&mu)
	points = map[Name]*point{}
	offset atomic.Int64 // test clock offset, nanoseconds
)

// Pause reports whether the operation at name must be held: when name is
// armed it consumes the arm, marks the point paused, keeps resume and
// returns true; the caller then parks that operation and returns, without
// blocking. Resume calls resume once. Safe from any goroutine; it never
// calls resume itself.
func Pause(name Name, resume func()) bool {
	mu.Lock()
	defer mu.Unlock()
	p := points[name]
	if p == nil || !p.armed {
		return false
	}
	p.armed, p.paused, p.resume, p.hits = false, true, resume, p.hits+1
	cond.Broadcast()
	return true
}

// Arm makes the next Pause of name hold its operation. It fails for an
// unknown name, and while an operation is held at name (resume it first).
func Arm(name Name) error {
	if !slices.Contains(All, name) {
		return fmt.Errorf("unknown failpoint %q (want one of %v)", name, All)
	}
	mu.Lock()
	defer mu.Unlock()
	p := points[name]
	if p == nil {
		p = &point{}
		points[name] = p
	}
	if p.paused {
		return fmt.Errorf("failpoint %q is paused now; resume it first", name)
	}
	p.armed = true
	return nil
}

// WaitPaused blocks until an operation is held at name, or timeout; it
// reports whether one is.
func WaitPaused(name Name, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() { mu.Lock(); cond.Broadcast(); mu.Unlock() })
	defer wake.Stop()
	mu.Lock()
	defer mu.Unlock()
	for {
		if p := points[name]; p != nil && p.paused {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		cond.Wait()
	}
}

// Resume disarms name and lets the operation held there (if any) go: its
// resume function runs on the calling goroutine, outside the package lock,
// exactly once. Resuming a point that holds nothing does nothing else, so
// a second Resume is a no-op.
func Resume(name Name) {
	mu.Lock()
	var f func()
	if p := points[name]; p != nil {
		p.armed = false
		if p.paused {
			f = p.resume
			p.paused, p.resume = false, nil
		}
	}
	mu.Unlock()
	if f != nil {
		f()
	}
}

var (
	holding    sync.Map // Name → *atomic.Bool
	heldEvents sync.Map // Name → *atomic.Int64, events withheld since the hold began
)

func holdFlag(name Name) *atomic.Bool {
	v, _ := holding.LoadOrStore(name, new(atomic.Bool))
	return v.(*atomic.Bool)
}

func heldCount(name Name) *atomic.Int64 {
	v, _ := heldEvents.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// Holding reports whether name is held (RestoreDone).
func Holding(name Name) bool { return holdFlag(name).Load() }

// NoteHeld counts one event withheld at name.
func NoteHeld(name Name) { heldCount(name).Add(1) }

// deviceFault arms a device-side fault in the CUDA copy backend
// (SetDeviceFault); nil while the Manager runs no CUDA backend. faultMu
// orders a call of it before the backend's removal (the Manager removes it
// before it closes the backend).
var (
	faultMu     sync.Mutex
	deviceFault func(module string) error
)

// SetDeviceFault installs arm as what POST
// /debug/failpoints/cuda-device-fault?module=PATH calls (the Manager
// passes its CUDA backend's ArmDeviceFault; nil removes it, after any call
// in progress has returned).
func SetDeviceFault(arm func(module string) error) {
	faultMu.Lock()
	deviceFault = arm
	faultMu.Unlock()
}

// armDeviceFault calls the installed arm (errNoDevice when none).
func armDeviceFault(module string) error {
	faultMu.Lock()
	defer faultMu.Unlock()
	if deviceFault == nil {
		return errNoDevice
	}
	return deviceFault(module)
}

var errNoDevice = errors.New("no CUDA copy backend in this Manager (start it with --copy-backend cuda)")

var dropWakeups atomic.Bool

// WakeupsDropped reports whether the Manager must skip its eventfd writes
// (a lost notification: clients must still finish by polling).
func WakeupsDropped() bool { return dropWakeups.Load() }

// Clock is real time plus the offset Advance added.
var Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }

// Advance moves the test clock forward by d.
func Advance(d time.Duration) { offset.Add(int64(d)) }

// Handler serves the test controls (loopback HTTP only):
//
//	POST /debug/failpoints/arm?name=N      hold the next operation that reaches N
//	GET  /debug/failpoints/wait?name=N&timeout=5s   200 once one is held, 408 if not in time
//	POST /debug/failpoints/resume?name=N   let it go (again: a no-op)
//	POST /debug/failpoints/drop-wakeups?on=1  skip every eventfd write (0: stop)
//	POST /debug/failpoints/cuda-device-fault?module=PATH  the next CUDA copy job on device 0 first
//	     launches the kernel okv_fault of module PATH (fault.cu): the device faults, the Manager fail-stops
//	POST /debug/failpoints/hold?name=restore-done&on=1  withhold restore completions (0: release them)
//	POST /debug/failpoints/hold?name=transfer-serve&on=1  withhold the answers to transfer READs (0: serve them)
//	GET  /debug/failpoints/held?name=N&timeout=5s  200 once one was withheld at hold point N, 408 if not in time
//	POST /debug/clock/advance?by=61s       move the expiry clock forward
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /debug/failpoints/arm", func(w http.ResponseWriter, r *http.Request) {
		if err := Arm(Name(r.URL.Query().Get("name"))); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("GET /debug/failpoints/wait", func(w http.ResponseWriter, r *http.Request) {
		to, err := time.ParseDuration(r.URL.Query().Get("timeout"))
		if err != nil || to <= 0 || to > time.Minute {
			http.Error(w, "timeout: want a duration in (0, 1m]", http.StatusBadRequest)
			return
		}
		if !WaitPaused(Name(r.URL.Query().Get("name")), to) {
			http.Error(w, "not paused in time", http.StatusRequestTimeout)
		}
	})
	mux.HandleFunc("POST /debug/failpoints/resume", func(w http.ResponseWriter, r *http.Request) {
		Resume(Name(r.URL.Query().Get("name")))
	})
	mux.HandleFunc("POST /debug/failpoints/hold", func(w http.ResponseWriter, r *http.Request) {
		name := Name(r.URL.Query().Get("name"))
		if name != RestoreDone && name != TransferServe {
			http.Error(w, fmt.Sprintf("unknown hold point %q (want %q or %q)", name, RestoreDone, TransferServe), http.StatusBadRequest)
			return
		}
		on := r.URL.Query().Get("on") == "1"
		if on {
			heldCount(name).Store(0)
		}
		holdFlag(name).Store(on) // released completions apply on the next control event (≤ 1 s)
	})
	mux.HandleFunc("GET /debug/failpoints/held", func(w http.ResponseWriter, r *http.Request) {
		name := Name(r.URL.Query().Get("name"))
		to, err := time.ParseDuration(r.URL.Query().Get("timeout"))
		if err != nil || to <= 0 || to > time.Minute {
			http.Error(w, "timeout: want a duration in (0, 1m]", http.StatusBadRequest)
			return
		}
		for deadline := time.Now().Add(to); heldCount(name).Load() == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				http.Error(w, "nothing withheld in time", http.StatusRequestTimeout)
				return
			}
		}
	})
	mux.HandleFunc("POST /debug/failpoints/cuda-device-fault", func(w http.ResponseWriter, r *http.Request) {
		module := r.URL.Query().Get("module")
		if module == "" || len(module) > 4096 || strings.ContainsRune(module, 0) {
			http.Error(w, "module: want the path (1..4096 bytes, no NUL) of a PTX or cubin file holding the kernel okv_fault", http.StatusBadRequest)
			return
		}
		if err := armDeviceFault(module); errors.Is(err, errNoDevice) {
			http.Error(w, err.Error(), http.StatusConflict)
		} else if err != nil {
			http.Error(w, "cuda-device-fault: "+err.Error(), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("POST /debug/failpoints/drop-wakeups", func(w http.ResponseWriter, r *http.Request) {
		dropWakeups.Store(r.URL.Query().Get("on") == "1")
	})
	mux.HandleFunc("POST /debug/clock/advance", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("by"))
		if err != nil || d < 0 || d > 24*time.Hour {
			http.Error(w, "by: want a duration in [0, 24h]", http.StatusBadRequest)
			return
		}
		Advance(d)
	})
	return mux
}
