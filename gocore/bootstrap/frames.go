package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/ratelog"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// Limits on lifecycle frame contents (beyond the 16 MiB body limit).
const (
	maxInstanceIDBytes = 256
	maxLabels          = 64
	maxLabelBytes      = 256
	maxRegions         = lifecycle.MaxFiles
	// maxBuffersPerSession caps the buffer fds a session may make the
	// Manager hold across RegisterBuffers calls.
	maxBuffersPerSession = 256
	// maxBufferBytesPerSession caps the engine memory one session may have
	// the Manager map (4 TiB): the Manager's address space (128 TiB) is
	// shared by every session, the RAM tier and the Go heap.
	maxBufferBytesPerSession = 4 << 40
	// replyWriteTimeout bounds a reply write to a client that stopped reading.
	replyWriteTimeout = 5 * time.Second
	// maxClientBody is the largest frame body a client may send: its
	// largest frames, RegisterInstance with 64 labels of 256 bytes and
	// RegisterBuffers with 64 regions, take a few tens of KiB.
	maxClientBody = 128 << 10
)

// appError is an application error: answered with an error frame, the
// connection stays open.
type appError struct {
	status abi.Status
	field  string
	msg    string
}

func (e *appError) Error() string { return e.field + ": " + e.msg }

func invalid(field, format string, args ...any) *appError {
	return &appError{abi.StatusInvalid, field, fmt.Sprintf(format, args...)}
}

// frameLoop reads lifecycle frames until the peer closes, a frame is
// malformed, or the session unregisters.
func (s *Server) frameLoop(cn *conn) {
	sess := cn.sess
	log := s.log.With(slog.Uint64("slot", uint64(sess.Index)), slog.Int("pid", int(sess.Peer.PID)))
	// At most one refusal line a second per connection; the rest are counted.
	refusals := ratelog.Limiter{Burst: 1, Every: time.Second}
	// The fds a frame brings count as buffers of the session's tenant and
	// of the Manager from the moment they arrive until the frame has been
	// handled (its own files are closed then; RegisterBuffers turns them
	// into its regions' count), and a frame must arrive whole within the
	// hello timeout of its first byte or fd: a client that sends fds or
	// starts a frame and stalls holds neither past its shares nor for
	// long.
	lim := lifecycle.ReadLimits{MaxBody: maxClientBody, FrameTimeout: s.cfg.HelloTimeout, OnFiles: func(n int) error {
		if err := s.reserveBuffers(sess.Peer.Tenant, n, 0); err != nil {
			return err
		}
		cn.heldFds += n
		return nil
	}}
	release := func() {
		s.releaseBuffers(sess.Peer.Tenant, cn.heldFds, 0)
		cn.heldFds = 0
	}
	defer release()
	for {
		f, err := lifecycle.ReadFrameLimited(cn.c, s.cfg.Epoch, lim)
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				// Peer closed: process exit or okv_close. Teardown follows.
			case errors.Is(err, net.ErrClosed):
				// Manager shutdown closed the connection.
			case errors.Is(err, lifecycle.ErrMalformed):
				log.Warn("lifecycle frame malformed; closing connection", slog.Any("err", err))
			default:
				log.Info("bootstrap connection read failed", slog.Any("err", err))
			}
			return
		}
		code := f.Header.Code
		if code.IsReply() || code == lifecycle.CodeError {
			f.Close()
			log.Warn("lifecycle frame malformed; closing connection",
				slog.String("field", "code"), slog.String("detail", fmt.Sprintf("client sent %v, which only the Manager sends", code)))
			return
		}
		var reply proto.Message
		var aerr *appError
		var fatal error
		if f.FilesRefused != nil {
			aerr = &appError{abi.StatusUnadmitted, "fds", f.FilesRefused.Error()}
		} else {
			reply, aerr, fatal = s.handleFrame(cn, &f)
		}
		f.Close() // fds the handler kept were dup'ed
		release()
		if fatal != nil {
			log.Warn("lifecycle frame malformed; closing connection", slog.Any("err", fatal))
			return
		}
		cn.wmu.Lock()
		cn.c.SetWriteDeadline(time.Now().Add(replyWriteTimeout))
		if aerr != nil {
			refusals.Log(log, slog.LevelInfo, "lifecycle request refused", slog.String("code", code.String()),
				slog.String("field", aerr.field), slog.String("detail", aerr.msg))
			err = lifecycle.WriteError(cn.c, s.cfg.Epoch, uint32(aerr.status), aerr.field, aerr.msg)
		} else {
			err = lifecycle.WriteFrame(cn.c, code.Reply(), s.cfg.Epoch, reply, cn.replyFiles)
		}
		cn.replyFiles = nil
		cn.wmu.Unlock()
		if err != nil {
			log.Info("lifecycle reply failed", slog.Any("err", err))
			return
		}
		if code == lifecycle.CodeUnregister && aerr == nil {
			log.Info("session unregistered")
			return
		}
	}
}

// handleFrame returns the reply, or an application error, or a fatal
// (malformed) error that closes the connection.
func (s *Server) handleFrame(cn *conn, f *lifecycle.Frame) (proto.Message, *appError, error) {
	sess := cn.sess
	if f.Header.Code != lifecycle.CodeRegisterBuffers && len(f.Files) > 0 {
		return nil, invalid("fds", "%d fds sent with %v; only RegisterBuffers carries fds", len(f.Files), f.Header.Code), nil
	}
	switch f.Header.Code {
	case lifecycle.CodeRegisterInstance:
		var req lifecyclepb.RegisterInstanceRequest
		if err := f.Unmarshal(&req); err != nil {
			return nil, nil, err
		}
		if aerr := checkToken(sess, req.GetClientToken()); aerr != nil {
			return nil, aerr, nil
		}
		if aerr := checkInstance(&req); aerr != nil {
			return nil, aerr, nil
		}
		sess.MarkRegistered(req.GetInstanceId())
		return &lifecyclepb.RegisterInstanceReply{SlotIndex: sess.Index}, nil, nil
	case lifecycle.CodeRegisterBuffers:
		var req lifecyclepb.RegisterBuffersRequest
		if err := f.Unmarshal(&req); err != nil {
			return nil, nil, err
		}
		if aerr := checkToken(sess, req.GetClientToken()); aerr != nil {
			return nil, aerr, nil
		}
		if !sess.Registered() {
			return nil, &appError{abi.StatusInvalid, "code", "RegisterBuffers before RegisterInstance"}, nil
		}
		if have := sess.BufferCount(); have+len(req.GetRegions()) > maxBuffersPerSession {
			return nil, invalid("regions", "%d regions on top of %d registered, limit %d per session", len(req.GetRegions()), have, maxBuffersPerSession), nil
		}
		var want uint64
		for _, r := range req.GetRegions() {
			want += min(r.GetBytes(), maxBufferBytesPerSession+1) // no wrap: each term is capped
		}
		if have := sess.BufferBytes(); have+want > maxBufferBytesPerSession {
			return nil, invalid("regions", "%d bytes on top of %d registered, limit %d bytes (4 TiB) per session", want, have, uint64(maxBufferBytesPerSession)), nil
		}
		tn, n := sess.Peer.Tenant, len(req.GetRegions())
		// The frame's fds were counted as they arrived; its regions
		// replace that count (the dups are made while the frame's own
		// files are still open, briefly more descriptors than counted).
		s.releaseBuffers(tn, cn.heldFds, 0)
		cn.heldFds = 0
		if err := s.reserveBuffers(tn, n, want); err != nil {
			return nil, &appError{abi.StatusUnadmitted, "regions", err.Error()}, nil
		}
		bufs, total, aerr := buffersFromRequest(&req, f.Files, s.managerFiles(), s.gpuMapper())
		if aerr != nil {
			s.releaseBuffers(tn, n, want)
			return nil, aerr, nil
		}
		s.releaseBuffers(tn, n-len(bufs), want-total) // want ≥ total: want caps each region
		first := sess.AddBuffers(bufs)
		return &lifecyclepb.RegisterBuffersReply{Regions: uint32(len(bufs)), TotalBytes: total, FirstBufferId: first}, nil, nil
	case lifecycle.CodeHealth:
		var req lifecyclepb.HealthRequest
		if err := f.Unmarshal(&req); err != nil {
			return nil, nil, err
		}
		h, err := s.sessionHealth(sess)
		if err != nil {
			return nil, &appError{abi.StatusStaleSession, "session", err.Error()}, nil
		}
		return h, nil, nil
	case lifecycle.CodeWatchSession:
		var req lifecyclepb.WatchSessionRequest
		if err := f.Unmarshal(&req); err != nil {
			return nil, nil, err
		}
		cn.wmu.Lock()
		cn.watched = true
		cn.wmu.Unlock()
		return &lifecyclepb.WatchSessionReply{State: "active", SlotIndex: sess.Index, Epoch: s.cfg.Epoch}, nil, nil
	case lifecycle.CodeMapDiscovery:
		ns, token, err := decodeMapDiscovery(f.Body)
		var nerr *nsError
		if errors.As(err, &nerr) {
			return nil, invalid("namespace", "%s", nerr.msg), nil
		} else if err != nil {
			return nil, nil, err
		}
		if aerr := checkToken(sess, token); aerr != nil {
			return nil, aerr, nil
		}
		return s.mapDiscovery(cn, ns)
	case lifecycle.CodeUnregister:
		var req lifecyclepb.UnregisterRequest
		if err := f.Unmarshal(&req); err != nil {
			return nil, nil, err
		}
		if aerr := checkToken(sess, req.GetClientToken()); aerr != nil {
			return nil, aerr, nil
		}
		return &lifecyclepb.UnregisterReply{}, nil, nil
	}
	return nil, nil, fmt.Errorf("lifecycle: unhandled frame code %v: %w", f.Header.Code, lifecycle.ErrMalformed)
}

func checkToken(sess *session.Session, token uint64) *appError {
	if token != sess.Token {
		return &appError{abi.StatusInvalid, "client_token", "does not match the token of this session's bootstrap reply"}
	}
	return nil
}

func checkInstance(req *lifecyclepb.RegisterInstanceRequest) *appError {
	if n := len(req.GetInstanceId()); n > maxInstanceIDBytes {
		return invalid("instance_id", "%d bytes, limit %d", n, maxInstanceIDBytes)
	}
	if n := len(req.GetLabels()); n > maxLabels {
		return invalid("labels", "%d entries, limit %d", n, maxLabels)
	}
	for k, v := range req.GetLabels() {
		if len(k) > maxLabelBytes || len(v) > maxLabelBytes {
			return invalid("labels["+trunc(k)+"]", "key or value longer than %d bytes", maxLabelBytes)
		}
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	if !utf8.ValidString(s) {
		return "?"
	}
	return s
}

// buffersFromRequest validates regions against the frame's fds and dups the
// fds it keeps (the frame's own files are closed by the caller). CUDA
// regions are mapped through gpu (nil: refused, naming --copy-backend).
func buffersFromRequest(req *lifecyclepb.RegisterBuffersRequest, files []*os.File, own map[fileID]bool, gpu session.GPUMapper) ([]session.Buffer, uint64, *appError) {
	regions := req.GetRegions()
	if len(regions) == 0 || len(regions) > maxRegions {
		return nil, 0, invalid("regions", "%d regions, want 1..%d", len(regions), maxRegions)
	}
	var out []session.Buffer
	var total uint64
	fail := func(aerr *appError) ([]session.Buffer, uint64, *appError) {
		for _, b := range out {
			closeBuffer(&b)
		}
		return nil, 0, aerr
	}
	for i, r := range regions {
		field := func(name string) string { return fmt.Sprintf("regions[%d].%s", i, name) }
		switch {
		case r.GetLayers() == 0 || r.GetLayers() > 4096:
			return fail(invalid(field("layers"), "%d, want 1..4096", r.GetLayers()))
		case r.GetPageBytes() == 0 || r.GetPageBytes() > 1<<30:
			return fail(invalid(field("page_bytes"), "%d, want 1..%d", r.GetPageBytes(), 1<<30))
		case r.GetPageCount() == 0 || r.GetPageCount() > 1<<32:
			return fail(invalid(field("page_count"), "%d, want 1..%d", r.GetPageCount(), uint64(1)<<32))
		}
		need := uint64(r.GetLayers()) * r.GetPageBytes() * r.GetPageCount()
		if need/r.GetPageCount()/r.GetPageBytes() != uint64(r.GetLayers()) || r.GetBytes() < need {
			return fail(invalid(field("bytes"), "%d, smaller than layers*page_bytes*page_count", r.GetBytes()))
		}
		b := session.Buffer{Offset: r.GetOffset(), Bytes: r.GetBytes(), Layers: r.GetLayers(),
			PageBytes: r.GetPageBytes(), PageCount: r.GetPageCount(), Device: r.GetDevice()}
		if kind := r.GetHandleKind(); kind != lifecyclepb.BufferHandleKind_BUFFER_HANDLE_MEMFD {
			m, aerr := mapGPURegion(r, files, gpu, field)
			if aerr != nil {
				return fail(aerr)
			}
			b.GPU = m
			if kind == lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC {
				b.CUDAIPC = append([]byte(nil), r.GetCudaIpcHandle()...)
			}
		} else if h := r.GetCudaIpcHandle(); len(h) > 0 {
			return fail(invalid(field("cuda_ipc_handle"), "%d bytes, but handle_kind is BUFFER_HANDLE_MEMFD: set handle_kind BUFFER_HANDLE_CUDA_IPC for CUDA memory", len(h)))
		} else {
			idx := r.GetFdIndex()
			if int(idx) >= len(files) {
				return fail(invalid(field("fd_index"), "%d, frame carries %d fds", idx, len(files)))
			}
			// The copy workers read and write this memory: a client that
			// could shrink the memfd would make them fault (SIGBUS) and kill
			// the Manager, so the shrink seal is required (fcntl(2), "File
			// Sealing"; okv_buffer_alloc sets it). Seals first, size second:
			// once F_SEAL_SHRINK is set the size can only grow, so the size
			// checked below stays true.
			seals, err := unix.FcntlInt(files[idx].Fd(), unix.F_GET_SEALS, 0)
			if err != nil {
				return fail(invalid(field("fd_index"), "is not a memfd (F_GET_SEALS: %v); allocate buffers with okv_buffer_alloc", err))
			}
			if seals&unix.F_SEAL_SHRINK == 0 {
				return fail(invalid(field("fd_index"), "memfd must be sealed with F_SEAL_SHRINK (okv_buffer_alloc does it); seals 0x%x, err %v", seals, err))
			}
			// F_SEAL_GROW too: unsealed, an engine could add pages past the
			// size (fallocate with FALLOC_FL_KEEP_SIZE) as it punches holes
			// inside, and st_blocks, which the restore path checks
			// (session.Buffer.Unallocated), would not fall short.
			if seals&unix.F_SEAL_GROW == 0 {
				return fail(invalid(field("fd_index"), "memfd must be sealed with F_SEAL_GROW (okv_buffer_alloc does it): a memfd that can grow can hold pages past its size that hide holes inside; seals 0x%x", seals))
			}
			if seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0 {
				return fail(invalid(field("fd_index"), "memfd is sealed against writes (seals 0x%x); Restore writes into engine buffers", seals))
			}
			// Only plain shmem memfds: a hugetlbfs memfd accepts the seals too,
			// but a hole punched into it is refilled from the hugepage pool
			// on the next fault, and an empty pool raises SIGBUS in a copy
			// worker (hugepage buffers come with the hugepages work).
			var sfs unix.Statfs_t
			if err := unix.Fstatfs(int(files[idx].Fd()), &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
				return fail(invalid(field("fd_index"), "must be a memfd on shmem (statfs type 0x%x, want TMPFS_MAGIC 0x%x; hugetlbfs buffers are not served yet)", uint64(sfs.Type), unix.TMPFS_MAGIC))
			}
			var st unix.Stat_t
			if err := unix.Fstat(int(files[idx].Fd()), &st); err != nil {
				return fail(invalid(field("fd_index"), "fstat: %v", err))
			}
			if own[fileID{st.Dev, st.Ino}] {
				return fail(invalid(field("fd_index"), "is one of the Manager's own memfds (a session's slot or the doorbell), not an engine buffer"))
			}
			if end := r.GetOffset() + r.GetBytes(); end < r.GetOffset() || end > uint64(st.Size) {
				return fail(invalid(field("bytes"), "offset %d + bytes %d exceeds the fd size %d", r.GetOffset(), r.GetBytes(), st.Size))
			}
			// A hole would be filled by the Manager's own writes (a
			// restore), charged to the Manager's memory cgroup: an engine
			// could make the Manager allocate its buffers. The whole memfd
			// must be allocated (st_blocks counts shmem pages in memory,
			// fallocated or swapped out; SEEK_HOLE would call fallocated
			// but unwritten pages holes).
			if alloc := uint64(st.Blocks) * 512; alloc < uint64(st.Size) {
				return fail(invalid(field("fd_index"), "is sparse: %d of its %d bytes have no page; allocate the whole memfd first (fallocate(2), or okv_buffer_alloc, which pre-faults it)", uint64(st.Size)-alloc, st.Size))
			}
			// Pages past the size (fallocated with FALLOC_FL_KEEP_SIZE
			// before F_SEAL_GROW) would count in st_blocks for holes inside.
			if beyond := pagesBeyond(files[idx], uint64(st.Size)); beyond > 0 {
				return fail(invalid(field("fd_index"), "has %d pages allocated past its size %d (fallocate with FALLOC_FL_KEEP_SIZE); allocate exactly its size", beyond, st.Size))
			}
			fd, err := unix.FcntlInt(files[idx].Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return fail(&appError{abi.StatusInternal, field("fd_index"), "dup: " + err.Error()})
			}
			b.File = os.NewFile(uintptr(fd), "orbitkv-buffer")
			page := uint64(os.Getpagesize())
			delta := r.GetOffset() % page
			m, err := unix.Mmap(fd, int64(r.GetOffset()-delta), int(delta+r.GetBytes()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				b.File.Close()
				if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
					return fail(invalid(field("fd_index"), "cannot be mapped read-write (%v): pass the memfd opened read-write", err))
				}
				return fail(&appError{abi.StatusInternal, field("bytes"), fmt.Sprintf("mmap %d bytes: %v", r.GetBytes(), err)})
			}
			b.SetMapping(m, delta)
		}
		out = append(out, b)
		total += r.GetBytes()
	}
	return out, total, nil
}

// pagesBeyond counts f's pages past its size in bytes (from the first page
// boundary at or after size to the end of the file), in the page cache or
// swapped out (cachestat(2)); 0 on a kernel without cachestat (before
// Linux 6.5), where the check is skipped.
func pagesBeyond(f *os.File, size uint64) uint64 {
	var cs unix.Cachestat_t
	r := unix.CachestatRange{Off: (size + 4095) &^ 4095}
	if unix.Cachestat(uint(f.Fd()), &r, &cs, 0) != nil {
		return 0
	}
	return cs.Cache + cs.Evicted
}

// fileID identifies an open file by device and inode (fstat(2)).
type fileID struct {
	dev uint64
	ino uint64
}

// managerFiles are the identities of the Manager's memfds a client may
// hold: the doorbell and every live session's slot (its own, and another
// session's fd passed on to it). None is ever an engine buffer: a restore
// would write cached bytes into the doorbell or a slot, and a publish
// would read another session's requests as KV bytes.
func (s *Server) managerFiles() map[fileID]bool {
	files := []*os.File{s.cfg.Dispatcher.DoorbellFile()}
	for _, sess := range s.cfg.Table.Sessions() {
		files = append(files, sess.SlotFile())
	}
	return ownFiles(files...)
}

// ownFiles are the identities (fstat) of files; one that cannot be
// fstat'ed (a session closing meanwhile) is left out.
func ownFiles(files ...*os.File) map[fileID]bool {
	m := make(map[fileID]bool, len(files))
	for _, f := range files {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil {
			m[fileID{st.Dev, st.Ino}] = true
		}
	}
	return m
}

// mapGPURegion validates the CUDA fields of region r (handle_kind not
// MEMFD) and maps it through gpu; field names a field of r for errors.
func mapGPURegion(r *lifecyclepb.BufferRegion, files []*os.File, gpu session.GPUMapper, field func(string) string) (session.DeviceMapping, *appError) {
	kind := r.GetHandleKind()
	if kind != lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC && kind != lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_VMM_FD {
		return nil, invalid(field("handle_kind"), "%d, want 0 (memfd), 1 (CUDA IPC handle) or 2 (CUDA VMM fd)", int32(kind))
	}
	if gpu == nil {
		return nil, invalid(field("handle_kind"), "%s, but this Manager copies host memory only (--copy-backend host, or auto without a CUDA device): start it with --copy-backend cuda", kind)
	}
	u := r.GetDeviceUuid()
	if len(u) != 16 {
		return nil, invalid(field("device_uuid"), "%d bytes, want 16 (cuDeviceGetUuid)", len(u))
	}
	uuid := [16]byte(u)
	var m session.DeviceMapping
	var err error
	handleField := "cuda_ipc_handle"
	if kind == lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC {
		if h := r.GetCudaIpcHandle(); len(h) != 64 {
			return nil, invalid(field("cuda_ipc_handle"), "%d bytes, want 64 (cudaIpcMemHandle_t)", len(h))
		}
		m, err = gpu.MapIPC(uuid, r.GetCudaIpcHandle(), r.GetOffset(), r.GetBytes())
	} else {
		handleField = "fd_index"
		idx := r.GetFdIndex()
		if int(idx) >= len(files) {
			return nil, invalid(field("fd_index"), "%d, frame carries %d fds", idx, len(files))
		}
		a := r.GetAllocBytes()
		if a == 0 {
			return nil, invalid(field("alloc_bytes"), "0: a CUDA VMM fd needs the size of its allocation")
		}
		if end := r.GetOffset() + r.GetBytes(); end < r.GetOffset() || end > a {
			return nil, invalid(field("bytes"), "offset %d + bytes %d exceeds alloc_bytes %d", r.GetOffset(), r.GetBytes(), a)
		}
		m, err = gpu.MapVMM(uuid, int(files[idx].Fd()), a, r.GetOffset(), r.GetBytes())
	}
	switch {
	case err == nil:
		return m, nil
	case errors.Is(err, unix.ENODEV):
		return nil, invalid(field("device_uuid"), "%v", err)
	case errors.Is(err, unix.ERANGE):
		return nil, invalid(field("bytes"), "%v", err)
	}
	return nil, invalid(field(handleField), "cannot be mapped: %v", err)
}

// closeBuffer unmaps and closes a buffer that was never handed to a session.
func closeBuffer(b *session.Buffer) {
	b.Unmap()
	if b.File != nil {
		b.File.Close()
	}
}

// sessionHealth answers a session's Health frame: the Manager's liveness
// (status, epoch, service id, pid, uptime, version, poll mode, ABI, RAM
// capacity) and this session's own figures (its requests, leases, pins,
// reservations, operations, tickets). Figures of the whole Manager
// (sessions, blocks, RAM used, evictions, lookups) stay 0 here: they would
// tell one tenant whether another's publish was new or its lookup a repeat,
// so only the operator's endpoints serve them (Config.Health feeds GET
// /health and /metrics).
func (s *Server) sessionHealth(sess *session.Session) (*lifecyclepb.HealthReply, error) {
	own, err := s.cfg.Dispatcher.SessionHealth(sess)
	if err != nil {
		return nil, err
	}
	h := &lifecyclepb.HealthReply{Status: "serving"}
	if s.cfg.Health != nil {
		m := s.cfg.Health()
		h.Status, h.UptimeNs, h.Version, h.PollMode, h.RamCapacityBytes = m.Status, m.UptimeNs, m.Version, m.PollMode, m.RamCapacityBytes
	}
	h.Epoch = s.cfg.Epoch
	h.ServiceId = s.cfg.ServiceID[:]
	h.ManagerPid = s.pid
	h.AbiVersion = abi.Version
	h.Requests = own.Requests
	h.Leases, h.Pins, h.ReservedBytes = own.Leases, own.LeasedBlocks, own.ReservedBytes
	h.Operations, h.Tickets = own.Operations, own.Tickets
	return h, nil
}

// notifyClosing sends an unsolicited WatchSession reply with state
// "closing" if the connection asked to watch its session.
func (s *Server) notifyClosing(cn *conn, reason string) {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if !cn.watched || cn.sess == nil {
		return
	}
	lifecycle.WriteFrame(cn.c, lifecycle.CodeWatchSession.Reply(), s.cfg.Epoch,
		&lifecyclepb.WatchSessionReply{State: "closing", Reason: reason, SlotIndex: cn.sess.Index, Epoch: s.cfg.Epoch}, nil)
}
