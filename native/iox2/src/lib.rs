//! okv_iox2 — OrbitKV's iceoryx2 transport: a C ABI over the `iceoryx2`
//! crate (0.10), declared by the hand-written `native/include/orbitkv/iox2.h`.
//!
//! What it owns: one iceoryx2 node per caller (`okv_iox2_node`), a server
//! end (`okv_iox2_server`: the side that exclusively creates a service and
//! answers) and a client end (`okv_iox2_client`: the side that opens it by
//! name and asks). Each end moves one 64-byte line (`struct okv_msg` of
//! `orbitkv/abi.h`) per request and per response through an iceoryx2
//! request-response service, and wakes the other side through two iceoryx2
//! event services beside it (`<name>/rq`: the client notifies, the server
//! listens; `<name>/rs`: the server notifies, the client listens). Waiting
//! is the caller's policy (spin on `*_receive`, then `*_wait`); every send
//! is followed by a notify, so a waiter is never missed: iceoryx2 keeps a
//! notification until a listener consumes it, and coalesces notifies while
//! one is pending (a peer that spins and never waits costs the sender one
//! atomic compare-exchange per notify, no system call).
//!
//! Errors: every function returns 0 (or a count) or a negative `OKV_IOX2_E*`
//! code; `okv_iox2_last_error` gives the thread's last failure in words.
//! No function unwinds into C: a Rust panic is caught and reported as
//! `OKV_IOX2_EINTERNAL`.
//!
//! Threads: a node and every end made from it belong to one thread at a
//! time (iceoryx2's `ipc::Service`, not its thread-safe variant); a caller
//! that hands them to another thread must order the hand-over itself.

#![deny(unsafe_op_in_unsafe_fn)]

use core::cell::RefCell;
use core::ffi::{c_char, c_int, CStr};
use core::time::Duration;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

use iceoryx2::active_request::ActiveRequest;
use iceoryx2::pending_response::PendingResponse;
use iceoryx2::port::client::Client;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::server::Server;
use iceoryx2::prelude::*;
use iceoryx2::waitset::WaitSetGuard;

mod sweep;

/// Return codes; equal to the `OKV_IOX2_E*` values of iox2.h.
pub const OKV_IOX2_EINVAL: c_int = -1;
pub const OKV_IOX2_EEXIST: c_int = -2;
pub const OKV_IOX2_ENOENT: c_int = -3;
pub const OKV_IOX2_EDISCONNECTED: c_int = -4;
pub const OKV_IOX2_EBUSY: c_int = -5;
pub const OKV_IOX2_EPERM: c_int = -6;
pub const OKV_IOX2_EINTERNAL: c_int = -7;

/// Longest service name this layer accepts (iceoryx2 allows 255; the
/// event services append 3 bytes).
pub const OKV_IOX2_NAME_MAX: usize = 240;

/// The 64-byte line: `struct okv_msg`, moved as opaque bytes. Aligned to a
/// cache line so that iceoryx2 places each payload on one.
#[derive(Debug, Clone, Copy, ZeroCopySend)]
#[repr(C)]
#[repr(align(64))]
#[type_name("okv_msg")]
pub struct Line {
    bytes: [u8; 64],
}

type Ipc = ipc::Service;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::new("no error").unwrap());
}

fn set_error(text: String) {
    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Records `what: err` as the thread's last error and returns `rc`.
fn fail(rc: c_int, what: &str, err: impl core::fmt::Debug) -> c_int {
    set_error(format!("{what}: {err:?}"));
    rc
}

/// Runs f, turning a panic into OKV_IOX2_EINTERNAL.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(_) => {
            set_error("okv_iox2: internal panic (a bug in OrbitKV's iceoryx2 layer)".into());
            OKV_IOX2_EINTERNAL
        }
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn name_arg(p: *const c_char, what: &str) -> Result<String, c_int> {
    if p.is_null() {
        return Err(fail(OKV_IOX2_EINVAL, what, "NULL"));
    }
    let s = unsafe { CStr::from_ptr(p) };
    let s = s.to_str().map_err(|e| fail(OKV_IOX2_EINVAL, what, e))?;
    if s.is_empty() || s.len() > OKV_IOX2_NAME_MAX {
        return Err(fail(
            OKV_IOX2_EINVAL,
            what,
            format!("length {} (want 1..{OKV_IOX2_NAME_MAX} bytes)", s.len()),
        ));
    }
    Ok(s.to_owned())
}

fn service_name(s: &str, what: &str) -> Result<ServiceName, c_int> {
    ServiceName::new(s).map_err(|e| fail(OKV_IOX2_EINVAL, what, e))
}

// ---- runtime ----------------------------------------------------------------

/// Longest runtime string (`okv_iox2_runtime_new`): PREFIX followed by the
/// absolute root directory, iceoryx2's path limit.
pub const OKV_IOX2_RUNTIME_MAX: usize = 255;

/// Where one Manager's iceoryx2 objects live: `prefix` starts every name
/// under /dev/shm (`okv` + 16 random hex digits + `_`), `root` is a
/// directory of this euid, mode 0700, made by okv_iox2_runtime_new with a
/// random name. Both are chosen per Manager and passed to its clients in
/// the bootstrap reply, so no other user can create them first: a
/// predictable name under /tmp or /dev/shm is one another uid can squat.
/// The root holds an owner record (sweep.rs) by which a later runtime of
/// this euid finds and removes both once the owner died.
struct Runtime {
    prefix: String,
    root: String,
}

impl Runtime {
    /// `PREFIX` + `ROOT` (ROOT starts with '/', PREFIX holds none).
    fn encode(&self) -> String {
        format!("{}{}", self.prefix, self.root)
    }

    fn parse(s: &str) -> Result<Runtime, c_int> {
        let what = "iceoryx2 runtime";
        let Some(i) = s.find('/') else {
            return Err(fail(OKV_IOX2_EINVAL, what, format!("{s:?}: want PREFIX/ROOT (an absolute root)")));
        };
        let (prefix, root) = s.split_at(i);
        if prefix.is_empty()
            || prefix.len() > 32
            || !prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(fail(
                OKV_IOX2_EINVAL,
                what,
                format!("prefix {prefix:?}: want 1..32 bytes of [A-Za-z0-9_]"),
            ));
        }
        if s.len() > OKV_IOX2_RUNTIME_MAX {
            return Err(fail(
                OKV_IOX2_EINVAL,
                what,
                format!("{} bytes (want at most {OKV_IOX2_RUNTIME_MAX})", s.len()),
            ));
        }
        Ok(Runtime {
            prefix: prefix.to_owned(),
            root: root.trim_end_matches('/').to_owned(),
        })
    }

    fn config(&self) -> Result<Config, c_int> {
        let mut cfg = Config::default();
        cfg.global.prefix = FileName::new(self.prefix.as_bytes())
            .map_err(|e| fail(OKV_IOX2_EINVAL, "iceoryx2 prefix", e))?;
        let p = Path::new(format!("{}/", self.root).as_bytes())
            .map_err(|e| fail(OKV_IOX2_EINVAL, "iceoryx2 root path", e))?;
        cfg.global.set_root_path(&p);
        Ok(cfg)
    }
}

/// Checks that `path` is a directory (not a symbolic link) of this euid
/// that no other user may enter: mode 0700 or narrower. The error names the
/// path, its owner and its mode.
fn private_dir(path: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let uid = unsafe { libc::geteuid() };
    let m = std::fs::symlink_metadata(path).map_err(|e| format!("{path}: {e}"))?;
    let kind = if m.file_type().is_symlink() {
        "symbolic link"
    } else if m.is_dir() {
        "directory"
    } else {
        "non-directory"
    };
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(format!(
            "{path} is a {kind} of uid {} with mode {:o}; want a directory of uid {uid} with mode 0700 \
             (a path another user made or may enter is not used)",
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// $XDG_RUNTIME_DIR when it is an absolute path to a private directory of
/// this euid (private_dir).
fn private_xdg() -> Option<String> {
    match std::env::var("XDG_RUNTIME_DIR") {
        Ok(x) if x.starts_with('/') && private_dir(&x).is_ok() => Some(x.trim_end_matches('/').to_owned()),
        _ => None,
    }
}

/// The directory under which okv_iox2_runtime_new makes a root:
/// private_xdg, else /tmp.
fn runtime_base() -> String {
    private_xdg().unwrap_or_else(|| "/tmp".to_owned())
}

/// Where okv_iox2_runtime_sweep looks: private_xdg (when there is one)
/// and /tmp, each once.
fn sweep_bases() -> Vec<String> {
    let mut v: Vec<String> = private_xdg().into_iter().collect();
    if !v.iter().any(|b| b == "/tmp") {
        v.push("/tmp".to_owned());
    }
    v
}

/// 16 random hex digits (getrandom(2)).
fn random_hex() -> Result<String, c_int> {
    let mut b = [0u8; 8];
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(fail(OKV_IOX2_EINTERNAL, "getrandom", std::io::Error::last_os_error()));
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn runtime_new() -> Result<Runtime, c_int> {
    let base = runtime_base();
    let template = CString::new(format!("{base}/{}XXXXXX", sweep::ROOT_STEM))
        .map_err(|e| fail(OKV_IOX2_EINVAL, "XDG_RUNTIME_DIR", e))?;
    let mut t = template.into_bytes_with_nul();
    // mkdtemp(3): a new directory of mode 0700 under a random name, made
    // with mkdir(2), which fails on any existing name (a symbolic link
    // included) and is retried by mkdtemp with another.
    let p = unsafe { libc::mkdtemp(t.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(fail(
            OKV_IOX2_EPERM,
            &format!("making an iceoryx2 root under {base}"),
            std::io::Error::last_os_error(),
        ));
    }
    t.pop();
    let root = String::from_utf8(t).map_err(|e| fail(OKV_IOX2_EINTERNAL, "mkdtemp", e))?;
    let made = (|| {
        private_dir(&root).map_err(|e| fail(OKV_IOX2_EPERM, "iceoryx2 root", e))?;
        let prefix = format!("okv{}_", random_hex()?);
        let owner = sweep::Owner::current(&prefix)
            .map_err(|e| fail(OKV_IOX2_EINTERNAL, "iceoryx2 runtime owner record", e))?;
        sweep::write_owner(&root, &owner)
            .map_err(|e| fail(OKV_IOX2_EPERM, "iceoryx2 runtime owner record", e))?;
        Ok(prefix)
    })();
    match made {
        Ok(prefix) => Ok(Runtime { prefix, root }),
        Err(rc) => {
            // Only what mkdtemp made and this function wrote is in it.
            if private_dir(&root).is_ok() {
                let _ = std::fs::remove_dir_all(&root);
            }
            Err(rc)
        }
    }
}

/// Makes a fresh runtime for one Manager: a root directory
/// `orbitkv-iox2-XXXXXX` (mode 0700, random name) under $XDG_RUNTIME_DIR
/// when that is a private directory of this euid, else under /tmp, a
/// random /dev/shm prefix, and the root's owner record (sweep.rs: this
/// process's pid and start time, the prefix). First it sweeps the stale
/// runtimes of this euid (okv_iox2_runtime_sweep). Writes `PREFIX` +
/// `ROOT`, NUL-terminated, into out[0..outlen); pass the string to
/// okv_iox2_node_new (here and in each client) and to
/// okv_iox2_runtime_remove at the end. OKV_IOX2_EINVAL when it does not
/// fit outlen, OKV_IOX2_EPERM when the directory or its record cannot be
/// made (the message names the path).
///
/// # Safety
/// `out` points to `outlen` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_runtime_new(out: *mut c_char, outlen: usize) -> c_int {
    guard(|| {
        if out.is_null() {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_runtime_new: out", "NULL");
        }
        sweep::sweep(&sweep_bases());
        let rt = match runtime_new() {
            Ok(rt) => rt,
            Err(rc) => return rc,
        };
        let s = rt.encode();
        if s.len() + 1 > outlen || s.len() > OKV_IOX2_RUNTIME_MAX {
            let _ = std::fs::remove_dir_all(&rt.root);
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_runtime_new",
                format!("{s:?} is {} bytes; outlen {outlen}, limit {OKV_IOX2_RUNTIME_MAX}", s.len()),
            );
        }
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), out.cast::<u8>(), s.len());
            *out.add(s.len()) = 0;
        }
        0
    })
}

/// Removes a runtime's root directory and what is left in it, and this
/// euid's /dev/shm objects of its prefix (best effort; call it after every
/// node of the runtime was freed). OKV_IOX2_EPERM (nothing removed)
/// when the root is not a private directory of this euid.
///
/// # Safety
/// `runtime` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_runtime_remove(runtime: *const c_char) -> c_int {
    guard(|| {
        let s = match unsafe { name_arg(runtime, "iceoryx2 runtime") } {
            Ok(s) => s,
            Err(rc) => return rc,
        };
        let rt = match Runtime::parse(&s) {
            Ok(rt) => rt,
            Err(rc) => return rc,
        };
        if let Err(e) = private_dir(&rt.root) {
            return fail(OKV_IOX2_EPERM, "iceoryx2 root", e);
        }
        // What outlives the nodes under /dev/shm: iceoryx2's global node
        // counter of the prefix (the prefix is this runtime's alone). The
        // objects go before the root, whose owner record lets a later
        // sweep finish the job if this process dies in between.
        sweep::remove_shm(&rt.prefix, unsafe { libc::geteuid() });
        let _ = std::fs::remove_dir_all(&rt.root);
        0
    })
}

/// Removes every stale runtime of this euid: each `orbitkv-iox2-*` entry
/// under $XDG_RUNTIME_DIR (when that is a private directory of this euid)
/// and under /tmp that is a directory, not a symbolic link, of this euid
/// with mode 0700, whose owner record names a process that is gone (its
/// pid is free, or was reused by a process started at another time, or the
/// record is of an earlier boot): this euid's regular files under /dev/shm
/// that start with the record's prefix, then the directory. Runtimes of
/// live processes, of another pid namespace, without a well-formed record,
/// or of another user are left alone. Returns how many runtimes were
/// removed (best effort, nothing is logged). okv_iox2_runtime_new calls it
/// first.
#[no_mangle]
pub extern "C" fn okv_iox2_runtime_sweep() -> c_int {
    guard(|| sweep::sweep(&sweep_bases()).min(i32::MAX as usize) as c_int)
}

// ---- node -------------------------------------------------------------------

/// Makes this layer's iceoryx2 global node counter (`/dev/shm/<prefix>…
/// .global_mgmt`, created 0666 by iceoryx2) the owner's only, and refuses
/// one another user created.
fn own_global_mgmt(prefix: &str) -> Result<(), c_int> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let uid = unsafe { libc::geteuid() };
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Ok(());
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(prefix) || !name.ends_with(".global_mgmt") {
            continue;
        }
        let path = e.path();
        let m = std::fs::symlink_metadata(&path)
            .map_err(|e| fail(OKV_IOX2_EPERM, &path.to_string_lossy(), e))?;
        if m.uid() != uid {
            return Err(fail(
                OKV_IOX2_EPERM,
                &path.to_string_lossy(),
                format!("owned by uid {}, not {uid}: another user created this user's iceoryx2 counter; remove it", m.uid()),
            ));
        }
        if m.mode() & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| fail(OKV_IOX2_EPERM, &path.to_string_lossy(), e))?;
        }
    }
    Ok(())
}

/// One iceoryx2 node: the process's registration under iceoryx2's root
/// directory (its monitoring token lets others tell whether it died).
pub struct OkvIox2Node {
    node: Node<Ipc>,
}

/// Reads the runtime string argument (1..OKV_IOX2_RUNTIME_MAX bytes).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn runtime_arg(p: *const c_char) -> Result<Runtime, c_int> {
    if p.is_null() {
        return Err(fail(OKV_IOX2_EINVAL, "iceoryx2 runtime", "NULL"));
    }
    let s = unsafe { CStr::from_ptr(p) };
    let s = s.to_str().map_err(|e| fail(OKV_IOX2_EINVAL, "iceoryx2 runtime", e))?;
    Runtime::parse(s)
}

/// Creates a node named `name` (NULL: unnamed) in the runtime `runtime`
/// (a string of okv_iox2_runtime_new: its /dev/shm prefix and root
/// directory). The root must be a directory of this euid with mode 0700
/// or narrower, not a symbolic link: anything else is OKV_IOX2_EPERM with
/// the path, its owner and its mode in okv_iox2_last_error, as is a global
/// counter of the prefix that another user made. iceoryx2's own signal
/// handlers are not installed (the host process owns SIGINT/SIGTERM) and
/// its log output is limited to fatal errors (failures come back as
/// codes). Creating a node removes what dead nodes of this runtime left
/// (iceoryx2's cleanup_dead_nodes_on_creation).
///
/// # Safety
/// `runtime` and `name` are NULL or NUL-terminated strings; `out` is a
/// valid pointer.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_node_new(
    runtime: *const c_char,
    name: *const c_char,
    out: *mut *mut OkvIox2Node,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_node_new: out", "NULL");
        }
        set_log_level_from_env_or(LogLevel::Fatal);
        let rt = match unsafe { runtime_arg(runtime) } {
            Ok(rt) => rt,
            Err(rc) => return rc,
        };
        let check_root = || private_dir(&rt.root).map_err(|e| fail(OKV_IOX2_EPERM, "iceoryx2 root", e));
        if let Err(rc) = check_root() {
            return rc;
        }
        let cfg = match rt.config() {
            Ok(c) => c,
            Err(rc) => return rc,
        };
        let mut b = NodeBuilder::new()
            .config(&cfg)
            .signal_handling_mode(SignalHandlingMode::Disabled);
        if !name.is_null() {
            let n = match unsafe { name_arg(name, "node name") } {
                Ok(n) => n,
                Err(rc) => return rc,
            };
            match NodeName::new(&n) {
                Ok(nn) => b = b.name(&nn),
                Err(e) => return fail(OKV_IOX2_EINVAL, "node name", e),
            }
        }
        match b.create::<Ipc>() {
            Ok(node) => {
                // Again after iceoryx2 used it: the root may have been
                // swapped between the check and now.
                if let Err(rc) = check_root().and_then(|_| own_global_mgmt(&rt.prefix)) {
                    return rc;
                }
                unsafe { *out = Box::into_raw(Box::new(OkvIox2Node { node })) };
                0
            }
            Err(e) => fail(OKV_IOX2_EINTERNAL, "creating iceoryx2 node", e),
        }
    })
}

/// Frees a node (NULL: no-op). Every end made from it must be freed first.
///
/// # Safety
/// `n` is NULL or from okv_iox2_node_new, not freed before.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_node_free(n: *mut OkvIox2Node) {
    if !n.is_null() {
        let _ = guard(|| {
            drop(unsafe { Box::from_raw(n) });
            0
        });
    }
}

/// Removes the resources (shared memory, sockets, node files) of every
/// iceoryx2 node of this user whose process died without cleaning up, as
/// far as this process may. Returns the number of dead nodes cleaned, or a
/// negative code.
///
/// # Safety
/// `n` is from okv_iox2_node_new.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_cleanup_dead(n: *mut OkvIox2Node) -> c_int {
    guard(|| {
        let Some(n) = (unsafe { n.as_ref() }) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_cleanup_dead: node", "NULL");
        };
        let st = n.node.try_cleanup_dead_nodes();
        st.cleanups.min(i32::MAX as u64) as c_int
    })
}

// ---- server -----------------------------------------------------------------

/// The answering end of one service: the request-response server, the
/// listener of `<name>/rq` and the notifier of `<name>/rs`, and the request
/// taken but not yet answered.
pub struct OkvIox2Server {
    server: Server<Ipc, Line, (), Line, ()>,
    listener: Listener<Ipc>,
    notifier: Notifier<Ipc>,
    active: Option<ActiveRequest<Ipc, Line, (), Line, ()>>,
}

/// Creates the service `name` exclusively (OKV_IOX2_EEXIST if it exists,
/// even as a dead process's leftover that okv_iox2_cleanup_dead has not yet
/// removed) with one server and at most `max_clients` clients, and its two
/// event services. The shared-memory objects are the creating user's only
/// (iceoryx2's permissions without its `dev_permissions` feature: 0600).
///
/// # Safety
/// `n` from okv_iox2_node_new; `name` NUL-terminated; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_create(
    n: *mut OkvIox2Node,
    name: *const c_char,
    max_clients: u32,
    out: *mut *mut OkvIox2Server,
) -> c_int {
    guard(|| {
        let (Some(n), false) = (unsafe { n.as_ref() }, out.is_null()) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_server_create: node/out", "NULL");
        };
        let name = match unsafe { name_arg(name, "service name") } {
            Ok(s) => s,
            Err(rc) => return rc,
        };
        if max_clients == 0 || max_clients > 64 {
            return fail(
                OKV_IOX2_EINVAL,
                "max_clients",
                format!("{max_clients} (want 1..64)"),
            );
        }
        match server_create(n, &name, max_clients as usize) {
            Ok(s) => {
                unsafe { *out = Box::into_raw(Box::new(s)) };
                0
            }
            Err(rc) => rc,
        }
    })
}

fn server_create(n: &OkvIox2Node, name: &str, max_clients: usize) -> Result<OkvIox2Server, c_int> {
    use iceoryx2::service::builder::event::EventCreateError as EC;
    use iceoryx2::service::builder::request_response::RequestResponseCreateError as RC;
    let what = format!("creating iceoryx2 service {name}");
    let rr = n
        .node
        .service_builder(&service_name(name, "service name")?)
        .request_response::<Line, Line>()
        .max_servers(1)
        .max_clients(max_clients)
        .max_active_requests_per_client(2)
        .max_response_buffer_size(2)
        .max_loaned_requests(1)
        .create()
        .map_err(|e| {
            let rc = match e {
                RC::AlreadyExists | RC::IsBeingCreatedByAnotherInstance => OKV_IOX2_EEXIST,
                RC::InsufficientPermissions => OKV_IOX2_EPERM,
                _ => OKV_IOX2_EINTERNAL,
            };
            fail(rc, &what, e)
        })?;
    let event = |suffix: &str| {
        n.node
            .service_builder(&service_name(&format!("{name}{suffix}"), "service name")?)
            .event()
            .max_notifiers(max_clients + 1)
            .max_listeners(max_clients + 1)
            .create()
            .map_err(|e| {
                let rc = match e {
                    EC::AlreadyExists | EC::IsBeingCreatedByAnotherInstance => OKV_IOX2_EEXIST,
                    EC::InsufficientPermissions => OKV_IOX2_EPERM,
                    _ => OKV_IOX2_EINTERNAL,
                };
                fail(rc, &format!("{what}{suffix}"), e)
            })
    };
    let rq = event("/rq")?;
    let rs = event("/rs")?;
    let server = rr
        .server_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EINTERNAL, "creating iceoryx2 server", e))?;
    let listener = rq
        .listener_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EINTERNAL, "creating iceoryx2 listener", e))?;
    let notifier = rs
        .notifier_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EINTERNAL, "creating iceoryx2 notifier", e))?;
    Ok(OkvIox2Server {
        server,
        listener,
        notifier,
        active: None,
    })
}

/// Takes the next request into `*out`: 1 when one was taken, 0 when none is
/// there. A request taken while an earlier one is unanswered replaces it
/// (its client gave up on the earlier one). Never blocks.
///
/// # Safety
/// `s` from okv_iox2_server_create; `out` points to 64 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_receive(s: *mut OkvIox2Server, out: *mut Line) -> c_int {
    guard(|| {
        let (Some(s), false) = (unsafe { s.as_mut() }, out.is_null()) else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_server_receive: server/out",
                "NULL",
            );
        };
        match s.server.receive() {
            Ok(Some(req)) => {
                unsafe { out.write_unaligned(*req.payload()) };
                s.active = Some(req);
                1
            }
            Ok(None) => 0,
            Err(e) => fail(OKV_IOX2_EINTERNAL, "receiving iceoryx2 request", e),
        }
    })
}

/// Answers the request taken last with the 64 bytes at `msg` and notifies
/// the client. OKV_IOX2_EINVAL when no request is unanswered,
/// OKV_IOX2_EDISCONNECTED when its client is gone.
///
/// # Safety
/// `s` from okv_iox2_server_create; `msg` points to 64 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_respond(s: *mut OkvIox2Server, msg: *const Line) -> c_int {
    guard(|| {
        let (Some(s), false) = (unsafe { s.as_mut() }, msg.is_null()) else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_server_respond: server/msg",
                "NULL",
            );
        };
        let Some(req) = s.active.take() else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_server_respond",
                "no request to answer",
            );
        };
        if !req.is_connected() {
            return fail(
                OKV_IOX2_EDISCONNECTED,
                "answering iceoryx2 request",
                "client gone",
            );
        }
        if let Err(e) = req.send_copy(unsafe { msg.read_unaligned() }) {
            return fail(OKV_IOX2_EDISCONNECTED, "sending iceoryx2 response", e);
        }
        drop(req);
        match s.notifier.notify() {
            Ok(_) => 0,
            Err(e) => fail(OKV_IOX2_EINTERNAL, "notifying iceoryx2 client", e),
        }
    })
}

/// Sleeps on the request event until a client notified or `timeout_ns`
/// passed (0: do not sleep, only consume pending notifications). Returns 1
/// when notified (a request may be there: call okv_iox2_server_receive), 0
/// on timeout. A notification can be stale (consumed after its request was
/// taken by spinning), so 1 promises nothing; a request sent before the
/// call is always either receivable or notified.
///
/// # Safety
/// `s` from okv_iox2_server_create.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_wait(s: *mut OkvIox2Server, timeout_ns: u64) -> c_int {
    guard(|| {
        let Some(s) = (unsafe { s.as_mut() }) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_server_wait: server", "NULL");
        };
        wait(&s.listener, timeout_ns)
    })
}

/// The file descriptor of the server's request listener (borrowed, valid
/// until okv_iox2_server_free): readable while a client's notification is
/// unconsumed, so a caller may sleep on it with poll or epoll and consume
/// with okv_iox2_server_wait(s, 0).
///
/// # Safety
/// `s` from okv_iox2_server_create.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_fd(s: *mut OkvIox2Server) -> c_int {
    guard(|| {
        let Some(s) = (unsafe { s.as_ref() }) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_server_fd: server", "NULL");
        };
        unsafe { s.listener.file_descriptor().native_handle() }
    })
}

/// Frees the server; the services it created are removed once no other
/// process holds them. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or from okv_iox2_server_create, not freed before.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_server_free(s: *mut OkvIox2Server) {
    if !s.is_null() {
        let _ = guard(|| {
            drop(unsafe { Box::from_raw(s) });
            0
        });
    }
}

// ---- client -----------------------------------------------------------------

/// The asking end of one service: the request-response client, the notifier
/// of `<name>/rq`, the listener of `<name>/rs`, and the request in flight.
pub struct OkvIox2Client {
    client: Client<Ipc, Line, (), Line, ()>,
    listener: Listener<Ipc>,
    notifier: Notifier<Ipc>,
    pending: Option<PendingResponse<Ipc, Line, (), Line, ()>>,
}

/// Opens the existing service `name` and its event services as a client.
/// OKV_IOX2_ENOENT when no such service exists (or not yet: a caller that
/// races the creator retries), OKV_IOX2_EPERM when this user may not open
/// it.
///
/// # Safety
/// `n` from okv_iox2_node_new; `name` NUL-terminated; `out` valid.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_client_open(
    n: *mut OkvIox2Node,
    name: *const c_char,
    out: *mut *mut OkvIox2Client,
) -> c_int {
    guard(|| {
        let (Some(n), false) = (unsafe { n.as_ref() }, out.is_null()) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_client_open: node/out", "NULL");
        };
        let name = match unsafe { name_arg(name, "service name") } {
            Ok(s) => s,
            Err(rc) => return rc,
        };
        match client_open(n, &name) {
            Ok(c) => {
                unsafe { *out = Box::into_raw(Box::new(c)) };
                0
            }
            Err(rc) => rc,
        }
    })
}

fn client_open(n: &OkvIox2Node, name: &str) -> Result<OkvIox2Client, c_int> {
    use iceoryx2::service::builder::event::EventOpenError as EO;
    use iceoryx2::service::builder::request_response::RequestResponseOpenError as RO;
    let what = format!("opening iceoryx2 service {name}");
    let rr = n
        .node
        .service_builder(&service_name(name, "service name")?)
        .request_response::<Line, Line>()
        .open()
        .map_err(|e| {
            let rc = match e {
                RO::DoesNotExist => OKV_IOX2_ENOENT,
                RO::InsufficientPermissions => OKV_IOX2_EPERM,
                RO::ExceedsMaxNumberOfNodes => OKV_IOX2_EBUSY,
                _ => OKV_IOX2_EINTERNAL,
            };
            fail(rc, &what, e)
        })?;
    let event = |suffix: &str| {
        n.node
            .service_builder(&service_name(&format!("{name}{suffix}"), "service name")?)
            .event()
            .open()
            .map_err(|e| {
                let rc = match e {
                    EO::DoesNotExist => OKV_IOX2_ENOENT,
                    EO::InsufficientPermissions => OKV_IOX2_EPERM,
                    _ => OKV_IOX2_EINTERNAL,
                };
                fail(rc, &format!("{what}{suffix}"), e)
            })
    };
    let rq = event("/rq")?;
    let rs = event("/rs")?;
    let client = rr
        .client_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EBUSY, "creating iceoryx2 client", e))?;
    let listener = rs
        .listener_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EBUSY, "creating iceoryx2 listener", e))?;
    let notifier = rq
        .notifier_builder()
        .create()
        .map_err(|e| fail(OKV_IOX2_EBUSY, "creating iceoryx2 notifier", e))?;
    Ok(OkvIox2Client {
        client,
        listener,
        notifier,
        pending: None,
    })
}

/// Sends the 64 bytes at `msg` as a request and notifies the server. A
/// request still unanswered is abandoned (its late response is never
/// received). OKV_IOX2_EDISCONNECTED when no server is connected.
///
/// # Safety
/// `c` from okv_iox2_client_open; `msg` points to 64 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_client_send(c: *mut OkvIox2Client, msg: *const Line) -> c_int {
    guard(|| {
        let (Some(c), false) = (unsafe { c.as_mut() }, msg.is_null()) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_client_send: client/msg", "NULL");
        };
        c.pending = None;
        match c.client.send_copy(unsafe { msg.read_unaligned() }) {
            Ok(p) => {
                if p.number_of_server_connections() == 0 {
                    return fail(
                        OKV_IOX2_EDISCONNECTED,
                        "sending iceoryx2 request",
                        "no server connected",
                    );
                }
                c.pending = Some(p);
            }
            Err(e) => return fail(OKV_IOX2_EDISCONNECTED, "sending iceoryx2 request", e),
        }
        match c.notifier.notify() {
            Ok(_) => 0,
            Err(e) => fail(OKV_IOX2_EINTERNAL, "notifying iceoryx2 server", e),
        }
    })
}

/// Takes the response to the request in flight into `*out`: 1 when it was
/// there, 0 when not yet, OKV_IOX2_EDISCONNECTED when the server is gone,
/// OKV_IOX2_EINVAL when no request is in flight. Never blocks.
///
/// # Safety
/// `c` from okv_iox2_client_open; `out` points to 64 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_client_receive(c: *mut OkvIox2Client, out: *mut Line) -> c_int {
    guard(|| {
        let (Some(c), false) = (unsafe { c.as_mut() }, out.is_null()) else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_client_receive: client/out",
                "NULL",
            );
        };
        let Some(p) = c.pending.as_ref() else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_client_receive",
                "no request in flight",
            );
        };
        // A server answers, then drops its request: a disconnect seen
        // after an empty receive may follow the answer, so look once more.
        for last in [false, true] {
            match p.receive() {
                Ok(Some(r)) => {
                    unsafe { out.write_unaligned(*r.payload()) };
                    drop(r);
                    c.pending = None;
                    return 1;
                }
                Ok(None) if last => break,
                Ok(None) if p.is_connected() => return 0,
                Ok(None) => continue,
                Err(e) => return fail(OKV_IOX2_EDISCONNECTED, "receiving iceoryx2 response", e),
            }
        }
        fail(
            OKV_IOX2_EDISCONNECTED,
            "waiting for iceoryx2 response",
            "server gone",
        )
    })
}

/// Sleeps on the response event until the server notified or `timeout_ns`
/// passed; 1 when notified, 0 on timeout (see okv_iox2_server_wait).
///
/// # Safety
/// `c` from okv_iox2_client_open.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_client_wait(c: *mut OkvIox2Client, timeout_ns: u64) -> c_int {
    guard(|| {
        let Some(c) = (unsafe { c.as_mut() }) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_client_wait: client", "NULL");
        };
        wait(&c.listener, timeout_ns)
    })
}

/// Frees the client (NULL: no-op).
///
/// # Safety
/// `c` is NULL or from okv_iox2_client_open, not freed before.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_client_free(c: *mut OkvIox2Client) {
    if !c.is_null() {
        let _ = guard(|| {
            drop(unsafe { Box::from_raw(c) });
            0
        });
    }
}

// ---- waitset ----------------------------------------------------------------

/// A control fd (an eventfd of the caller's) as a WaitSet attachment.
#[derive(Debug)]
struct CtlFd(FileDescriptor);

impl FileDescriptorBased for CtlFd {
    fn file_descriptor(&self) -> &FileDescriptor {
        &self.0
    }
}

impl SynchronousMultiplexing for CtlFd {}

/// An iceoryx2 WaitSet over the request listeners of many servers and one
/// control fd: the Manager's one place to sleep. Guards borrow the
/// listeners and the WaitSet; they are kept with 'static lifetimes because
/// both live behind stable pointers (boxed here, boxed by the caller) and
/// a guard is dropped before what it borrows (okv_iox2_waitset_detach
/// before okv_iox2_server_free; field order below for the rest).
pub struct OkvIox2Waitset {
    attached: Vec<(u32, *mut OkvIox2Server, WaitSetGuard<'static, 'static, Ipc>)>,
    ctl_guard: Option<WaitSetGuard<'static, 'static, Ipc>>,
    ctl: Box<CtlFd>,
    ws: Box<WaitSet<Ipc>>,
}

/// Creates a WaitSet with `ctl_fd` (borrowed; an eventfd or any fd that
/// becomes readable) attached: okv_iox2_waitset_wait returns when it is
/// readable, and the caller drains it.
///
/// # Safety
/// `out` is valid; `ctl_fd` stays open until okv_iox2_waitset_free.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_waitset_new(
    ctl_fd: c_int,
    out: *mut *mut OkvIox2Waitset,
) -> c_int {
    guard(|| {
        if out.is_null() || ctl_fd < 0 {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_waitset_new: out/ctl_fd",
                "NULL or negative",
            );
        }
        let Some(fd) = FileDescriptor::non_owning_new(ctl_fd) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_waitset_new: ctl_fd", ctl_fd);
        };
        let ws = match WaitSetBuilder::new()
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<Ipc>()
        {
            Ok(ws) => Box::new(ws),
            Err(e) => return fail(OKV_IOX2_EINTERNAL, "creating iceoryx2 WaitSet", e),
        };
        let mut w = Box::new(OkvIox2Waitset {
            attached: Vec::new(),
            ctl_guard: None,
            ctl: Box::new(CtlFd(fd)),
            ws,
        });
        let ws_ref: &'static WaitSet<Ipc> = unsafe { &*(&*w.ws as *const WaitSet<Ipc>) };
        let ctl_ref: &'static CtlFd = unsafe { &*(&*w.ctl as *const CtlFd) };
        match ws_ref.attach_notification(ctl_ref) {
            Ok(g) => w.ctl_guard = Some(g),
            Err(e) => {
                return fail(
                    OKV_IOX2_EINTERNAL,
                    "attaching the control fd to the WaitSet",
                    e,
                )
            }
        }
        unsafe { *out = Box::into_raw(w) };
        0
    })
}

/// Attaches the request listener of `s` under `key` (the caller's slot
/// index). OKV_IOX2_EEXIST when `key` is attached already.
///
/// # Safety
/// `w` from okv_iox2_waitset_new; `s` from okv_iox2_server_create, freed
/// only after okv_iox2_waitset_detach(w, key).
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_waitset_attach(
    w: *mut OkvIox2Waitset,
    s: *mut OkvIox2Server,
    key: u32,
) -> c_int {
    guard(|| {
        let (Some(w), Some(srv)) = (unsafe { w.as_mut() }, unsafe { s.as_ref() }) else {
            return fail(
                OKV_IOX2_EINVAL,
                "okv_iox2_waitset_attach: waitset/server",
                "NULL",
            );
        };
        if w.attached.iter().any(|(k, _, _)| *k == key) {
            return fail(
                OKV_IOX2_EEXIST,
                "okv_iox2_waitset_attach",
                format!("key {key} attached"),
            );
        }
        let ws_ref: &'static WaitSet<Ipc> = unsafe { &*(&*w.ws as *const WaitSet<Ipc>) };
        let l_ref: &'static Listener<Ipc> = unsafe { &*(&srv.listener as *const Listener<Ipc>) };
        match ws_ref.attach_notification(l_ref) {
            Ok(g) => {
                w.attached.push((key, s, g));
                0
            }
            Err(e) => fail(OKV_IOX2_EBUSY, "attaching a listener to the WaitSet", e),
        }
    })
}

/// Detaches what was attached under `key` (absent: no-op).
///
/// # Safety
/// `w` from okv_iox2_waitset_new.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_waitset_detach(w: *mut OkvIox2Waitset, key: u32) {
    let _ = guard(|| {
        if let Some(w) = unsafe { w.as_mut() } {
            w.attached.retain(|(k, _, _)| *k != key);
        }
        0
    });
}

/// Sleeps until a client of an attached server notified, the control fd
/// became readable, or `timeout_ns` passed. The notifications of the
/// servers that woke it are consumed (so the next wait sleeps again); the
/// control fd is left for the caller to drain. Returns how many
/// attachments triggered (0: timed out).
///
/// # Safety
/// `w` from okv_iox2_waitset_new.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_waitset_wait(w: *mut OkvIox2Waitset, timeout_ns: u64) -> c_int {
    guard(|| {
        let Some(w) = (unsafe { w.as_mut() }) else {
            return fail(OKV_IOX2_EINVAL, "okv_iox2_waitset_wait: waitset", "NULL");
        };
        let mut n: c_int = 0;
        let attached = &w.attached;
        let r = w.ws.wait_and_process_once_with_timeout(
            |id| {
                n += 1;
                for (_, s, g) in attached.iter() {
                    if id.has_event_from(g) {
                        // Consume the notifications: the WaitSet is level
                        // triggered on the listener's socket.
                        let _ = unsafe { &**s }.listener.try_wait(|_| {});
                    }
                }
                CallbackProgression::Continue
            },
            Duration::from_nanos(timeout_ns.max(1)),
        );
        match r {
            Ok(_) => n,
            Err(e) => fail(OKV_IOX2_EINTERNAL, "waiting on the iceoryx2 WaitSet", e),
        }
    })
}

/// Frees the WaitSet (NULL: no-op); detaches everything first.
///
/// # Safety
/// `w` is NULL or from okv_iox2_waitset_new, not freed before.
#[no_mangle]
pub unsafe extern "C" fn okv_iox2_waitset_free(w: *mut OkvIox2Waitset) {
    if !w.is_null() {
        let _ = guard(|| {
            drop(unsafe { Box::from_raw(w) });
            0
        });
    }
}

// ---- shared ---------------------------------------------------------------

fn wait(l: &Listener<Ipc>, timeout_ns: u64) -> c_int {
    let r = if timeout_ns == 0 {
        l.try_wait(|_| {})
    } else {
        l.timed_wait(|_| {}, Duration::from_nanos(timeout_ns))
    };
    match r {
        Ok(0) => 0,
        Ok(_) => 1,
        Err(e) => fail(OKV_IOX2_EINTERNAL, "waiting on iceoryx2 listener", e),
    }
}

/// The calling thread's last failure in words (static until the thread's
/// next failing call). Never NULL.
#[no_mangle]
pub extern "C" fn okv_iox2_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a return code ("OKV_IOX2_ENOENT: no such service", ...);
/// static, never NULL.
#[no_mangle]
pub extern "C" fn okv_iox2_strerror(rc: c_int) -> *const c_char {
    let s: &'static CStr = match rc {
        0 => c"OK",
        OKV_IOX2_EINVAL => c"OKV_IOX2_EINVAL: invalid argument",
        OKV_IOX2_EEXIST => c"OKV_IOX2_EEXIST: the service exists",
        OKV_IOX2_ENOENT => c"OKV_IOX2_ENOENT: no such service",
        OKV_IOX2_EDISCONNECTED => c"OKV_IOX2_EDISCONNECTED: the other side is gone",
        OKV_IOX2_EBUSY => c"OKV_IOX2_EBUSY: the service has no room for another port",
        OKV_IOX2_EPERM => c"OKV_IOX2_EPERM: insufficient permissions",
        OKV_IOX2_EINTERNAL => c"OKV_IOX2_EINTERNAL: iceoryx2 failed",
        _ => c"unknown okv_iox2 code",
    };
    s.as_ptr()
}

/// The iceoryx2 version this layer was built on ("0.10.0"); static.
#[no_mangle]
pub extern "C" fn okv_iox2_version() -> *const c_char {
    c"0.10.0".as_ptr()
}
