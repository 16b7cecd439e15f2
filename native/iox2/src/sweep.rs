//! The owner record of a runtime and the sweep of stale runtimes.
//!
//! A runtime (`okv_iox2_runtime_new`) has a random root directory and a
//! random /dev/shm prefix, so nothing but its own process knows where it
//! is. Its root therefore holds an owner record, the file `owner` (mode
//! 0600, this euid's), in which a later runtime_new of the same euid finds
//! it again: when the process that made it is gone without
//! okv_iox2_runtime_remove (SIGKILL, a crash), the sweep removes its /dev/shm
//! objects and its root.
//!
//! Record: ASCII lines `KEY VALUE`, at most OWNER_MAX bytes, written to
//! `owner.tmp` and renamed to `owner` (so a record is whole or absent):
//!
//! ```text
//! pid 4242                                   the process (decimal)
//! start 918273                               its start, clock ticks after boot (/proc/<pid>/stat field 22)
//! boot 6f1c…                                 /proc/sys/kernel/random/boot_id at the time
//! pidns pid:[4026531836]                     readlink /proc/self/ns/pid: where pid means that process
//! prefix okv0123456789abcdef_                the runtime's /dev/shm prefix
//! ```
//!
//! A runtime is stale when its record names another boot, or this pid
//! namespace and a pid that is gone or now started at another time (a
//! reused pid). A record of another pid namespace is left alone (its pid
//! cannot be judged from here), as is a directory without a readable,
//! well-formed record (a runtime being made, one of an older layout).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// Name of the owner record in a runtime's root.
pub(crate) const OWNER_FILE: &str = "owner";

/// Largest owner record read, in bytes (a real one is under 200).
const OWNER_MAX: u64 = 512;

/// Directory names of runtimes (mkdtemp's template without its XXXXXX).
pub(crate) const ROOT_STEM: &str = "orbitkv-iox2-";

/// Where a runtime's process was and which /dev/shm prefix it used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pid: i32,
    start: u64,
    boot: String,
    pidns: String,
    prefix: String,
}

impl Owner {
    /// The record of the calling process for `prefix`; an error names the
    /// /proc file that could not be read.
    pub(crate) fn current(prefix: &str) -> Result<Owner, String> {
        let pid = std::process::id() as i32;
        let start = start_time(pid).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
        Ok(Owner {
            pid,
            start,
            boot: boot_id(),
            pidns: pid_ns(),
            prefix: prefix.to_owned(),
        })
    }

    fn encode(&self) -> String {
        format!(
            "pid {}\nstart {}\nboot {}\npidns {}\nprefix {}\n",
            self.pid, self.start, self.boot, self.pidns, self.prefix
        )
    }

    /// Parses a record; None unless every key is there once with a value of
    /// its shape (pid > 0, start a number, prefix of okv_iox2_runtime_new's
    /// shape: `okv` + 16 lowercase hex digits + `_`).
    fn parse(text: &str) -> Option<Owner> {
        let (mut pid, mut start, mut boot, mut pidns, mut prefix) = (None, None, None, None, None);
        for line in text.lines() {
            let (k, v) = line.split_once(' ')?;
            let slot = match k {
                "pid" => &mut pid,
                "start" => &mut start,
                "boot" => &mut boot,
                "pidns" => &mut pidns,
                "prefix" => &mut prefix,
                _ => return None,
            };
            if slot.replace(v.to_owned()).is_some() {
                return None;
            }
        }
        let pid: i32 = pid?.parse().ok().filter(|p| *p > 0)?;
        let start: u64 = start?.parse().ok()?;
        let prefix = prefix?;
        if !prefix_shape(&prefix) {
            return None;
        }
        Some(Owner {
            pid,
            start,
            boot: boot?,
            pidns: pidns?,
            prefix,
        })
    }

    /// Whether the process of this record is certainly gone.
    fn is_stale(&self) -> bool {
        let boot = boot_id();
        if !self.boot.is_empty() && !boot.is_empty() && self.boot != boot {
            return true;
        }
        if self.pidns != pid_ns() {
            return false;
        }
        match start_time(self.pid) {
            Ok(t) => t != self.start,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }
}

/// `okv` + 16 lowercase hex digits + `_`: the prefixes runtime_new makes.
fn prefix_shape(p: &str) -> bool {
    let b = p.as_bytes();
    b.len() == 20
        && b.starts_with(b"okv")
        && b[19] == b'_'
        && b[3..19]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// Start time of process `pid` in clock ticks after boot: field 22 of
/// /proc/<pid>/stat, counted after the last ')' (field 2, the command, may
/// hold spaces and parentheses). NotFound when there is no such process.
fn start_time(pid: i32) -> std::io::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "malformed stat line");
    let rest = &s[s.rfind(')').ok_or_else(bad)? + 1..];
    // rest starts with field 3 (state): field 22 is its 20th word.
    rest.split_ascii_whitespace()
        .nth(19)
        .and_then(|w| w.parse().ok())
        .ok_or_else(bad)
}

/// This boot's id ("" when unreadable: then the boot is not compared).
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// This process's pid namespace ("pid:[inode]"; "" when unreadable).
fn pid_ns() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes the owner record into `root` (this euid's private directory):
/// `owner.tmp` made exclusively with mode 0600, then renamed to `owner`.
/// An error names the file.
pub(crate) fn write_owner(root: &str, owner: &Owner) -> Result<(), String> {
    use std::io::Write;
    let tmp = format!("{root}/{OWNER_FILE}.tmp");
    let path = format!("{root}/{OWNER_FILE}");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| format!("{tmp}: {e}"))?;
    f.write_all(owner.encode().as_bytes())
        .map_err(|e| format!("{tmp}: {e}"))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{tmp} -> {path}: {e}"))
}

/// Reads the owner record of the runtime root `root`: a regular file of
/// this euid, not a symbolic link, that no other user may read or write,
/// of at most OWNER_MAX bytes, well formed. None otherwise.
fn read_owner(root: &std::path::Path, uid: u32) -> Option<Owner> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(root.join(OWNER_FILE))
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.uid() != uid || m.mode() & 0o077 != 0 || m.len() > OWNER_MAX {
        return None;
    }
    let mut text = String::new();
    (&mut f).take(OWNER_MAX).read_to_string(&mut text).ok()?;
    Owner::parse(&text)
}

/// Removes this euid's regular files under /dev/shm whose name starts with
/// `prefix` (never a symbolic link, never another user's). Returns how
/// many were removed.
pub(crate) fn remove_shm(prefix: &str, uid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let mut n = 0;
    for e in dir.flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_file() && m.uid() == uid);
        if ours && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// Removes every stale runtime of this euid under each of `bases`: an
/// entry named `orbitkv-iox2-*` that is a directory (by lstat, so not a
/// symbolic link) of this euid with mode 0700 and whose owner record is
/// stale (Owner::is_stale). Its /dev/shm objects (remove_shm) go first,
/// then the directory, so a sweep cut short leaves the record to find
/// again. Returns how many runtimes were removed; errors leave the entry
/// (best effort, nothing is logged).
pub(crate) fn sweep(bases: &[String]) -> usize {
    let uid = unsafe { libc::geteuid() };
    let mut n = 0;
    for base in bases {
        let Ok(dir) = std::fs::read_dir(base) else {
            continue;
        };
        for e in dir.flatten() {
            if !e.file_name().to_string_lossy().starts_with(ROOT_STEM) {
                continue;
            }
            let path = e.path();
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !m.is_dir() || m.uid() != uid || m.mode() & 0o7777 != 0o700 {
                continue;
            }
            let Some(owner) = read_owner(&path, uid) else {
                continue;
            };
            if !owner.is_stale() {
                continue;
            }
            remove_shm(&owner.prefix, uid);
            // remove_dir_all does not follow symbolic links inside.
            if std::fs::remove_dir_all(&path).is_ok() {
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let o = Owner::current("okv0123456789abcdef_").expect("this process's record");
        assert_eq!(o.pid, std::process::id() as i32);
        assert_eq!(Owner::parse(&o.encode()), Some(o));
    }

    #[test]
    fn a_malformed_record_is_none() {
        let good = "pid 7\nstart 9\nboot b\npidns pid:[1]\nprefix okv0123456789abcdef_\n";
        assert!(Owner::parse(good).is_some());
        for bad in [
            "",
            "pid 7\nstart 9\nboot b\npidns pid:[1]\n", // no prefix
            "pid 0\nstart 9\nboot b\npidns pid:[1]\nprefix okv0123456789abcdef_\n", // pid 0
            "pid 7\nstart x\nboot b\npidns pid:[1]\nprefix okv0123456789abcdef_\n", // start not a number
            "pid 7\npid 8\nstart 9\nboot b\npidns pid:[1]\nprefix okv0123456789abcdef_\n", // a key twice
            "pid 7\nstart 9\nboot b\npidns pid:[1]\nprefix okv\n", // prefix of every runtime
            "pid 7\nstart 9\nboot b\npidns pid:[1]\nprefix okv0123456789ABCDEF_\n", // not runtime_new's shape
            "pid 7\nstart 9\nboot b\npidns pid:[1]\nprefix okv0123456789abcdef_\nextra 1\n", // an unknown key
        ] {
            assert_eq!(Owner::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_process_is_live_and_a_reused_pid_or_another_boot_is_stale() {
        let mut o = Owner::current("okv0123456789abcdef_").unwrap();
        assert!(!o.is_stale(), "{o:?}");
        o.start += 1;
        assert!(o.is_stale(), "a reused pid: {o:?}");
        o.start -= 1;
        o.boot = "another-boot".into();
        assert!(o.is_stale(), "another boot: {o:?}");
        o.boot = boot_id();
        o.pidns = "pid:[1]".into();
        o.start += 1;
        assert!(!o.is_stale(), "another pid namespace is not judged: {o:?}");
    }

    #[test]
    fn start_time_reads_a_live_process_and_not_a_missing_one() {
        let t = start_time(std::process::id() as i32).unwrap();
        assert!(t > 0);
        assert_eq!(
            start_time(i32::MAX).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
