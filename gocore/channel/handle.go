package channel

import (
	"log/slog"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
)

// handle validates one request and returns its response, or ok=false when
// the response is deferred (a Publish answers once its copy completed).
// Runs on the dispatcher goroutine; must not block.
func (d *Dispatcher) handle(sess *session.Session, m *abi.Message) (resp abi.Message, ok bool) {
	if rerr := m.ValidateRequest(sess.Limits); rerr != nil {
		d.invalid.Add(1)
		d.logInvalid(sess, m, rerr)
		return m.Response(d.spec.Epoch, rerr.Status, uint64(rerr.Field), 0), true
	}
	sess.Limits.LastGen = m.Generation
	switch abi.Command(m.Code) {
	case abi.CmdPing:
		return m.Response(d.spec.Epoch, abi.StatusOK, m.Arg0, 0), true
	case abi.CmdShutdown:
		// The session ends when its bootstrap socket closes; Shutdown only
		// acknowledges so the client can close without a timeout.
		return m.Response(d.spec.Epoch, abi.StatusOK, 0, 0), true
	case abi.CmdQueryBundle, abi.CmdPublish, abi.CmdRestore, abi.CmdRestorePoll, abi.CmdRelease,
		abi.CmdPoll, abi.CmdClaim, abi.CmdCancelQuery:
		if d.svc != nil {
			return d.svc.Serve(sess, *m)
		}
	}
	// Without a cache service (Spec.Cache nil) only Ping and Shutdown are served.
	return m.Response(d.spec.Epoch, abi.StatusUnsupported, 0, 0), true
}

func (d *Dispatcher) logInvalid(sess *session.Session, m *abi.Message, rerr *abi.RequestError) {
	ok, suppressed := sess.RefusalLogged()
	if !ok {
		return
	}
	sess.WarnRefused(d.log, suppressed, "channel request refused",
		slog.String("field", rerr.Field.String()),
		slog.String("status", rerr.Status.String()),
		slog.String("detail", rerr.Detail),
		slog.String("command", abi.Command(m.Code).String()))
}
