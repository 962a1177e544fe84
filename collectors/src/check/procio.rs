//! Which processes are doing I/O right now: `/proc/PID/io` snapshots and their deltas,
//! and the devices a process has files open on.
//!
//! `/proc/PID/io` is per process (all its threads), not per device: `read_bytes` counts
//! what the process made the storage layer fetch, `write_bytes` what it dirtied in the
//! page cache or wrote with O_DIRECT (the flusher's later writeback is not charged to it).
//! So a busy process is "doing I/O", somewhere; the caller correlates with a device's own
//! diskstats over the same interval, and with [`open_devices`] (files it holds open).
//! Reading another user's `io` needs ptrace access (root sees all); unreadable processes
//! are counted, not guessed.
//!
//! Units: bytes, cumulative since the process started.

use std::path::Path;
use std::str::FromStr;

use procfs_core::process::{FDTarget, Io};
use procfs_core::FromBufRead;

/// One process's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcIo {
    pub pid: u32,
    pub comm: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Parses `/proc/PID/io` text (procfs-core's `Io`): `(read_bytes, write_bytes)`.
fn parse_io(text: &str) -> Option<(u64, u64)> {
    let io = Io::from_buf_read(text.as_bytes()).ok()?;
    Some((io.read_bytes, io.write_bytes))
}

/// Every process's counters; the second value counts processes whose `io` could not be
/// read (another user's without root, or gone while listing).
pub fn snapshot(procfs: &Path) -> (Vec<ProcIo>, usize) {
    let mut v = vec![];
    let mut unreadable = 0;
    let Ok(rd) = std::fs::read_dir(procfs) else {
        return (v, 0);
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let Some((read_bytes, write_bytes)) = std::fs::read_to_string(dir.join("io"))
            .ok()
            .and_then(|t| parse_io(&t))
        else {
            unreadable += 1;
            continue;
        };
        let comm = std::fs::read_to_string(dir.join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        v.push(ProcIo {
            pid,
            comm,
            read_bytes,
            write_bytes,
        });
    }
    v.sort_by_key(|p| p.pid);
    (v, unreadable)
}

/// Bytes a process read and wrote between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcIoDelta {
    pub pid: u32,
    pub comm: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Deltas of processes with any I/O between `before` and `after`, busiest first. A process
/// that appeared in between counts from zero (it started within the interval); one whose
/// counters went down (its pid was reused) counts from zero too.
pub fn deltas(before: &[ProcIo], after: &[ProcIo]) -> Vec<ProcIoDelta> {
    let mut out = vec![];
    for a in after {
        let b = before
            .binary_search_by_key(&a.pid, |p| p.pid)
            .ok()
            .map(|i| &before[i])
            .filter(|b| b.read_bytes <= a.read_bytes && b.write_bytes <= a.write_bytes);
        let (r0, w0) = b.map(|b| (b.read_bytes, b.write_bytes)).unwrap_or((0, 0));
        let (r, w) = (a.read_bytes - r0, a.write_bytes - w0);
        if r + w > 0 {
            out.push(ProcIoDelta {
                pid: a.pid,
                comm: a.comm.clone(),
                read_bytes: r,
                write_bytes: w,
            });
        }
    }
    out.sort_by(|x, y| {
        (y.read_bytes + y.write_bytes)
            .cmp(&(x.read_bytes + x.write_bytes))
            .then(x.pid.cmp(&y.pid))
    });
    out
}

/// What a process's open files live on: `st_dev` of every open file, plus `st_rdev` of
/// block devices it has open, as raw `dev_t` values, sorted and unique. The cwd is left
/// out on purpose: every process has one (kernel threads on `/`), and it says nothing
/// about where the process writes.
pub fn open_devices(procfs: &Path, pid: u32) -> Vec<u64> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = procfs.join(pid.to_string());
    let mut v = vec![];
    let mut add = |p: &Path| {
        if let Ok(md) = std::fs::metadata(p) {
            if md.file_type().is_block_device() {
                v.push(md.rdev());
            } else {
                v.push(md.dev());
            }
        }
    };
    if let Ok(rd) = std::fs::read_dir(dir.join("fd")) {
        for e in rd.flatten() {
            // Sockets, pipes and anonymous inodes live on no device: only a path target
            // (procfs-core's `FDTarget::Path`) is stat'ed, through the fd's magic link
            // (so a file in another mount namespace or already deleted still resolves).
            let target = std::fs::read_link(e.path()).ok();
            let target = target.as_ref().and_then(|t| t.to_str());
            if matches!(target.map(FDTarget::from_str), Some(Ok(FDTarget::Path(_)))) {
                add(&e.path());
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: &str = "rchar: 2012\nwchar: 0\nsyscr: 7\nsyscw: 0\nread_bytes: 4096\n\
                      write_bytes: 1048576\ncancelled_write_bytes: 0\n";

    #[test]
    fn parses_proc_pid_io() {
        assert_eq!(parse_io(IO), Some((4096, 1_048_576)));
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    fn p(pid: u32, r: u64, w: u64) -> ProcIo {
        ProcIo {
            pid,
            comm: format!("p{pid}"),
            read_bytes: r,
            write_bytes: w,
        }
    }

    #[test]
    fn deltas_are_busiest_first_and_skip_idle_processes() {
        let before = [p(1, 10, 10), p(5, 0, 100), p(9, 500, 0)];
        let after = [p(1, 10, 10), p(5, 0, 900), p(7, 50, 0), p(9, 100, 0)];
        let d = deltas(&before, &after);
        let got: Vec<(u32, u64, u64)> = d
            .iter()
            .map(|x| (x.pid, x.read_bytes, x.write_bytes))
            .collect();
        // 9 went backwards: a reused pid, counted from zero.
        assert_eq!(got, [(5, 0, 800), (9, 100, 0), (7, 50, 0)]);
    }

    #[test]
    fn fixture_procfs_and_this_process() {
        let d = tempfile::tempdir().unwrap();
        for (pid, io) in [("12", IO), ("13", "garbage")] {
            let dir = d.path().join(pid);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("io"), io).unwrap();
            std::fs::write(dir.join("comm"), "nats-server\n").unwrap();
        }
        std::fs::create_dir_all(d.path().join("self")).unwrap();
        let (v, unreadable) = snapshot(d.path());
        assert_eq!(v, [p_named(12, "nats-server", 4096, 1_048_576)]);
        assert_eq!(unreadable, 1);

        // A file this process holds open is found on its device.
        use std::os::unix::fs::MetadataExt;
        let f = tempfile::tempfile_in("/var/tmp").unwrap();
        let dev = f.metadata().unwrap().dev();
        let me = std::process::id();
        assert!(open_devices(Path::new("/proc"), me).contains(&dev));
    }

    fn p_named(pid: u32, comm: &str, r: u64, w: u64) -> ProcIo {
        ProcIo {
            pid,
            comm: comm.into(),
            read_bytes: r,
            write_bytes: w,
        }
    }
}
