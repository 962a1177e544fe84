//! Which process a traced thread belongs to and the file behind an fd, from a /proc
//! tree (a fake one in tests): `/proc/TID/status` (tgid, name, parent) read once per
//! thread and cached; `/proc/PID/fd/N` cached per (pid, fd) for a second (fds are reused
//! after `close`). Both caches are emptied past [`CACHE_MAX`] entries.

use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub(super) struct Thread {
    pub(super) tgid: u32,
    pub(super) comm: String,
    /// The process and its ancestors (tgid first), when `children`.
    pub(super) line: Vec<u32>,
    /// Gone before /proc was read: only its id is known.
    pub(super) gone: bool,
}

/// The thread and fd caches over a /proc tree.
#[derive(Debug)]
pub struct Procs {
    procfs: PathBuf,
    threads: HashMap<u32, Thread>,
    fds: HashMap<(u32, i64), (String, u64)>,
}

/// How long a resolved fd's path is trusted, ns of the trace clock.
const FD_TTL_NS: u64 = 1_000_000_000;
/// Caches are emptied past this many entries (a run with millions of threads or fds).
pub(super) const CACHE_MAX: usize = 1 << 16;

fn status_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

impl Procs {
    pub fn new(procfs: PathBuf) -> Procs {
        Procs {
            procfs,
            threads: HashMap::new(),
            fds: HashMap::new(),
        }
    }

    /// (tgid, name, parent) of a thread or process; `None` when it is gone.
    fn status(&self, tid: u32) -> Option<(u32, String, u32)> {
        let text =
            std::fs::read_to_string(self.procfs.join(tid.to_string()).join("status")).ok()?;
        Some((
            status_field(&text, "Tgid:")?.parse().ok()?,
            status_field(&text, "Name:").unwrap_or_default(),
            status_field(&text, "PPid:")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
        ))
    }

    pub(super) fn thread(&mut self, tid: u32, children: bool) -> &Thread {
        if self.threads.len() > CACHE_MAX {
            self.threads.clear();
        }
        if !self.threads.contains_key(&tid) {
            let t = match self.status(tid) {
                Some((tgid, comm, ppid)) => {
                    let mut line = vec![tgid];
                    if children {
                        let mut p = if tgid == tid {
                            ppid
                        } else {
                            self.status(tgid).map(|s| s.2).unwrap_or(0)
                        };
                        while p > 1 && line.len() < 64 {
                            line.push(p);
                            p = self.status(p).map(|s| s.2).unwrap_or(0);
                        }
                    }
                    Thread {
                        tgid,
                        comm,
                        line,
                        gone: false,
                    }
                }
                // Gone before we looked: only its id is known (the process's own id
                // when it was the main thread).
                None => Thread {
                    tgid: tid,
                    comm: String::new(),
                    line: vec![tid],
                    gone: true,
                },
            };
            self.threads.insert(tid, t);
        }
        &self.threads[&tid]
    }

    /// Remembers a thread's process before it may be gone (the threads of the traced
    /// pids at the start).
    pub fn root(&self) -> &std::path::Path {
        &self.procfs
    }

    pub(crate) fn learn(&mut self, tid: u32, children: bool) {
        self.thread(tid, children);
    }

    /// The path behind `fd` of `pid`, empty when unresolved.
    pub(super) fn file(&mut self, pid: u32, fd: i64, now_ns: u64) -> String {
        if let Some((p, t)) = self.fds.get(&(pid, fd)) {
            if now_ns.saturating_sub(*t) < FD_TTL_NS {
                return p.clone();
            }
        }
        if self.fds.len() > CACHE_MAX {
            self.fds.clear();
        }
        let p = std::fs::read_link(self.procfs.join(format!("{pid}/fd/{fd}")))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !p.is_empty() {
            self.fds.insert((pid, fd), (p.clone(), now_ns));
        }
        p
    }
}
