//! The lab's state file, `ROOT/state.json`: the one record of what diskpulse created.
//!
//! Teardown acts only on what is written here, and only after checking it still matches
//! (see `super` for the checks). So every resource is written here *before* it is
//! created (an image path before the file, a loop device before `losetup` attaches it, a
//! mount point before `mount`, a cgroup before `mkdir`): a crash or `kill -9` at any
//! moment leaves an entry that `diskpulse lab down` can clean. Entries are removed once
//! everything in them is gone.
//!
//! Format (`format_version` 1):
//! ```json
//! {"format_version": 1,
//!  "volumes": [{
//!    "name": "r1", "id": "r1-4242-1718000000000000000",
//!    "spec": {"name": "r1", "size": 1073741824, "fs": "btrfs", "raid": "raid1", "devices": 2,
//!             "mount_options": null, "throttle": {"write_iops": 200, ...}, "write_cache": "through"},
//!    "owner_pid": 4242, "owner_start_ticks": 123456,  // the creating process (/proc/PID/stat field 22)
//!    "kept": false,                                   // true: stays up after its creator exits (`lab up`)
//!    "complete": false,                               // true once `up` finished
//!    "created": "2025-...Z",                          // RFC 3339
//!    "images": ["/var/tmp/diskpulse-lab/images/r1-0.img", ...],
//!    "loop_devices": [{"device": "/dev/loop5", "image": ".../r1-0.img",
//!                      "write_cache_before": "write back"}],  // set when we changed write_cache
//!    "mount": "/var/tmp/diskpulse-lab/mnt/r1",
//!    "cgroup": "/sys/fs/cgroup/blkio/diskpulse-r1"}]}
//! ```
//! Writers hold an exclusive `flock` on `ROOT/state.lock` for each read-modify-write
//! (and for a whole teardown), and replace the file by rename, so readers never see
//! half a file.

use std::fs;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::VolumeSpec;

pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StateFile {
    pub format_version: u32,
    pub volumes: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// Unique per `up`: a `Volume` handle tears down only the entry it created.
    pub id: String,
    pub spec: VolumeSpec,
    pub owner_pid: u32,
    pub owner_start_ticks: u64,
    pub kept: bool,
    pub complete: bool,
    pub created: String,
    pub images: Vec<PathBuf>,
    pub loop_devices: Vec<LoopRecord>,
    pub mount: Option<PathBuf>,
    pub cgroup: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoopRecord {
    /// `/dev/loopN`.
    pub device: String,
    /// The image it was (to be) attached to.
    pub image: PathBuf,
    /// `queue/write_cache` before we set it: put back before detaching, because the
    /// kernel keeps the setting for the next user of the device.
    pub write_cache_before: Option<String>,
}

/// An exclusive lock on `ROOT/state.lock`; the state is read and written through it.
pub(crate) struct Locked {
    _file: fs::File,
    path: PathBuf,
}

impl Locked {
    /// Locks `root` (which must exist), waiting for other diskpulse processes.
    pub(crate) fn acquire(root: &Path) -> anyhow::Result<Locked> {
        let lock = root.join("state.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .with_context(|| format!("opening {}", lock.display()))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(anyhow::Error::new(e).context(format!("locking {}", lock.display())));
            }
        }
        Ok(Locked {
            _file: f,
            path: root.join("state.json"),
        })
    }

    pub fn load(&self) -> anyhow::Result<StateFile> {
        load(&self.path)
    }

    pub fn save(&self, s: &StateFile) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(s)?;
        text.push('\n');
        // Beside it under a unique name, synced, renamed (format::atomic): a fixed
        // state.json.tmp in a --lab-root of the user's could be a planted symlink.
        format::atomic::write_with(&self.path, |f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
    }

    /// Load, change one entry (by id) and save. A missing entry is an error: `lab down`
    /// removed it meanwhile, and nothing more may be created for it.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut Entry)) -> anyhow::Result<()> {
        let mut s = self.load()?;
        let Some(e) = s.volumes.iter_mut().find(|e| e.id == id) else {
            anyhow::bail!(
                "lab volume {id} is no longer in {} (torn down by `diskpulse lab down` meanwhile?)",
                self.path.display()
            );
        };
        f(e);
        self.save(&s)
    }
}

/// Reads a state file; a missing one is an empty state.
pub fn load(path: &Path) -> anyhow::Result<StateFile> {
    match fs::read_to_string(path) {
        Ok(t) => {
            let s: StateFile = serde_json::from_str(&t).with_context(|| {
                format!(
                    "{} is not a diskpulse lab state file; fix or remove it by hand",
                    path.display()
                )
            })?;
            if s.format_version != FORMAT_VERSION {
                anyhow::bail!(
                    "{}: format_version {} (this diskpulse reads {FORMAT_VERSION})",
                    path.display(),
                    s.format_version
                );
            }
            Ok(s)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
            format_version: FORMAT_VERSION,
            volumes: Vec::new(),
        }),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    }
}
