//! The tracefs mount and diskpulse's own trace instance (`instances/diskpulse-PID`):
//! created at the start, removed at the end (also from Drop, so an error path or Ctrl-C
//! removes it); an instance left by a diskpulse that was killed is removed by the next
//! one that starts. Events enabled in an instance go to its own ring buffers only, so
//! another tracer (the top level, `trace-cmd`, perf) is not disturbed.

use std::fs;
use std::path::{Path, PathBuf};

/// The instance name prefix; the suffix is the owning process's pid.
pub const PREFIX: &str = "diskpulse-";

/// Where tracefs is, mounting it at `/sys/kernel/tracing` when it is not mounted.
/// Errors say why (not root, no tracefs in this kernel) in a way a user can act on.
pub(crate) fn find_or_mount(preferred: &Path) -> Result<PathBuf, String> {
    if preferred.join("instances").is_dir() {
        return Ok(preferred.to_path_buf());
    }
    let legacy = Path::new("/sys/kernel/debug/tracing");
    if preferred == Path::new("/sys/kernel/tracing") && legacy.join("instances").is_dir() {
        return Ok(legacy.to_path_buf());
    }
    let target = std::ffi::CString::new(preferred.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: not a path", preferred.display()))?;
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EPERM) => "mounting it needs root (CAP_SYS_ADMIN)".to_string(),
            Some(libc::ENODEV) => "this kernel has no tracefs (CONFIG_TRACING)".to_string(),
            _ => format!("mounting it failed: {e}"),
        };
        return Err(format!(
            "tracefs is not mounted at {} and {why}",
            preferred.display()
        ));
    }
    if preferred.join("instances").is_dir() {
        Ok(preferred.to_path_buf())
    } else {
        Err(format!(
            "tracefs mounted at {} has no instances/ (kernel too old for trace instances)",
            preferred.display()
        ))
    }
}

/// Whether `pid` is a live diskpulse process (its comm starts with `diskpulse`).
fn live_diskpulse(procfs: &Path, pid: u32) -> bool {
    fs::read_to_string(procfs.join(pid.to_string()).join("comm"))
        .is_ok_and(|c| c.trim_end().starts_with("diskpulse"))
}

/// Removes `instances/diskpulse-PID` of processes that are gone (or are no diskpulse
/// any more): what a `kill -9` left. Returns the names removed.
pub(crate) fn remove_stale(tracefs: &Path, procfs: &Path, own_pid: u32) -> Vec<String> {
    let mut removed = vec![];
    let Ok(rd) = fs::read_dir(tracefs.join("instances")) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if (pid == own_pid || !live_diskpulse(procfs, pid)) && fs::remove_dir(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// A trace instance; removed on drop.
#[derive(Debug)]
pub(crate) struct Instance {
    pub dir: PathBuf,
    pub name: String,
    removed: bool,
}

impl Instance {
    /// Creates `instances/diskpulse-PID`.
    pub fn create(tracefs: &Path, pid: u32) -> Result<Instance, String> {
        let name = format!("{PREFIX}{pid}");
        let dir = tracefs.join("instances").join(&name);
        fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Instance {
            dir,
            name,
            removed: false,
        })
    }

    /// Writes `value` to the instance's file `rel` (`trace_clock`, `events/block/enable`).
    pub fn write(&self, rel: &str, value: &str) -> Result<(), String> {
        let p = self.dir.join(rel);
        fs::write(&p, value).map_err(|e| format!("cannot write '{value}' to {}: {e}", p.display()))
    }

    pub fn read(&self, rel: &str) -> Result<String, String> {
        let p = self.dir.join(rel);
        fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    }

    /// The CPUs with a ring buffer (`per_cpu/cpuN`).
    pub(crate) fn cpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = fs::read_dir(self.dir.join("per_cpu"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .strip_prefix("cpu")
                            .and_then(|n| n.parse().ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// Events the kernel lost on one CPU: `overrun` (overwritten before read) plus
    /// `dropped events` (refused, buffer full) of `per_cpu/cpuN/stats`.
    pub(crate) fn lost_on(&self, cpu: u32) -> u64 {
        let text = self
            .read(&format!("per_cpu/cpu{cpu}/stats"))
            .unwrap_or_default();
        let mut lost = 0;
        for l in text.lines() {
            if let Some((k, v)) = l.split_once(':') {
                if k.trim() == "overrun" || k.trim() == "dropped events" {
                    lost += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        lost
    }

    /// Stops tracing and removes the instance (its files must be closed first).
    pub fn remove(&mut self) -> Result<(), String> {
        if self.removed {
            return Ok(());
        }
        let _ = self.write("tracing_on", "0");
        let _ = self.write("events/enable", "0");
        // rmdir answers EBUSY while a reader still holds a file open; the caller closes
        // them first, but a reader thread may need a moment.
        let mut last = None;
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err(format!(
            "cannot remove trace instance {}: {}",
            self.dir.display(),
            last.map(|e| e.to_string()).unwrap_or_default()
        ))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}
