//! How full each embedded node's store volume is, recorded as a `store_volume` event
//! when the session stops the nodes, so a run whose broker refused for want of space
//! ("insufficient resources") can say which node, which volume and how full
//! ([`line`], used by `report` for the failure lines of `demo`, `run` and `report`).
//!
//! Sizes are bytes from `statvfs` (`f_blocks`, `f_bavail` for what the server, not root,
//! could still use); the device and file system from the mount table. nats-server
//! refuses before the file system is at 100%: its `max_file_store` defaults to 75% of
//! the space free when it started.

use std::path::Path;

use format::events::{Body, StoreVolume};

use super::Broker;
use crate::recording::EventLog;

/// Records one `store_volume` event per node: `node`, `store_dir`, `device`, `fstype`,
/// `mount`, `size_bytes`, `used_bytes`, `free_bytes`, `used_pct`.
pub(super) fn record(nodes: &[Broker], events: &EventLog) {
    let mounts = collectors::mounts::read(Path::new("/proc")).unwrap_or_default();
    for b in nodes {
        let dir = &b.opts.store_dir;
        let Some((size, free)) = sizes(dir) else {
            continue;
        };
        let m = collectors::mounts::mount_of(&mounts, dir);
        let used = size.saturating_sub(free);
        events.event(Body::StoreVolume(StoreVolume {
            node: b.opts.name.clone(),
            store_dir: dir.display().to_string(),
            device: m.map(|m| m.source.clone()),
            fstype: m.map(|m| m.fstype.clone()),
            mount: m.map(|m| m.point.display().to_string()),
            size_bytes: size,
            used_bytes: used,
            free_bytes: free,
            used_pct: if size > 0 {
                used as f64 * 100.0 / size as f64
            } else {
                0.0
            },
        }));
    }
}

/// (size, free for unprivileged users) of the file system holding `p`, bytes.
fn sizes(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    (r == 0).then(|| {
        let f = s.f_frsize as u64;
        (s.f_blocks as u64 * f, s.f_bavail as u64 * f)
    })
}
