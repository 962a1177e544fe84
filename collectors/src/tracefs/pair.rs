//! Turning tracepoint events into rows: a sync call is its thread's `sys_enter_*` and the
//! next `sys_exit_*` (a thread makes one system call at a time); a block request is its
//! `block_rq_issue` and the `block_rq_complete` with the same device and sector (first
//! issued, first completed, for requests at one sector: flushes), with the
//! `block_rq_insert` before it for the queue time. Events reach [`Pairer`] in timestamp
//! order (the reader merges the CPUs' buffers), so an exit or completion on another CPU
//! than its start still finds it.
//!
//! Which process a thread belongs to (tgid), its name and its parent, and the file
//! behind an fd, come from /proc through [`Procs`] (`procs.rs`, cached).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub use super::procs::Procs;
use super::procs::CACHE_MAX;

/// The sync calls traced, by index: the `call` column's names.
pub const CALLS: [&str; 4] = ["fsync", "fdatasync", "sync_file_range", "msync"];

/// One sync call, timestamps on the trace clock (ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncCall {
    pub start_ns: u64,
    pub dur_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub call: &'static str,
    pub fd: Option<i64>,
    pub file: String,
    pub ret: i64,
}

/// One completed block request, timestamps on the trace clock (ns). Its strings are the
/// kernel's fixed arrays (NUL-padded), so a request costs no allocation on the way to
/// its row: [`BlockReq::rwbs`] and [`BlockReq::comm`] borrow them as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockReq {
    pub issue_ns: u64,
    pub major: u32,
    pub minor: u32,
    rwbs_raw: [u8; 10],
    pub sector: u64,
    pub bytes: u64,
    pub queue_ns: Option<u64>,
    pub service_ns: u64,
    pub error: i32,
    comm_raw: [u8; 16],
}

/// The text before the first NUL (empty when it is not UTF-8: the kernel writes ASCII).
fn cstr_ref(b: &[u8]) -> &str {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("")
}

impl BlockReq {
    /// The kernel's rwbs string (`WS`, `FWFS`, ...).
    pub fn rwbs(&self) -> &str {
        cstr_ref(&self.rwbs_raw)
    }
    /// The task that issued it, as the issue tracepoint says.
    pub fn comm(&self) -> &str {
        cstr_ref(&self.comm_raw)
    }
}

/// What the reader decoded from one event (no allocation: fixed arrays for strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    Enter {
        tid: u32,
        call: u8,
        fd: Option<i64>,
    },
    Exit {
        tid: u32,
        call: u8,
        ret: i64,
    },
    Insert {
        dev: u32,
        sector: u64,
    },
    Issue {
        dev: u32,
        sector: u64,
        bytes: u64,
        rwbs: [u8; 10],
        comm: [u8; 16],
    },
    Complete {
        dev: u32,
        sector: u64,
        error: i32,
    },
    /// `sched_process_fork` (also a new thread): who made `child`, and its name.
    Fork {
        parent: u32,
        child: u32,
        comm: [u8; 16],
    },
    /// `sched_process_exec`: `pid` runs a new program, named `comm` now.
    Exec {
        pid: u32,
        comm: [u8; 16],
    },
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Which processes' calls are kept.
#[derive(Debug, Clone, Default)]
pub struct Who {
    /// Every process.
    pub every: bool,
    /// These processes (grows while the run goes).
    pub pids: Arc<Mutex<Vec<u32>>>,
    /// And the processes they start.
    pub children: bool,
    /// These names (the thread's comm).
    pub comms: Vec<String>,
}

/// Counters of the pairing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairStats {
    pub calls: u64,
    pub requests: u64,
    /// Exits and completions without their start (begun before the trace), starts left
    /// at the end, and calls of other processes are not counted here.
    pub unpaired: u64,
}

/// An issued request waiting for its completion: issue time, insert time, bytes, rwbs, comm.
type Issued = (u64, Option<u64>, u64, [u8; 10], [u8; 16]);

/// Pairs events into calls and requests.
pub(crate) struct Pairer {
    who: Who,
    pub procs: Procs,
    enters: HashMap<u32, (u64, u8, Option<i64>)>,
    inserts: FifoMap<u64>,
    issued: FifoMap<Issued>,
    /// tid -> (the tid that made it, its name), from fork and exec events: who a thread
    /// or process was when it is gone before /proc is read (a short `dd` in a traced tree).
    forks: HashMap<u32, (u32, [u8; 16])>,
    pub stats: PairStats,
}

/// The hash of the (device, sector) maps: a multiply and a rotate (FxHash's) instead of
/// SipHash, which was the pairing's largest cost after the maps themselves at 100,000
/// requests a second (perf). The keys are the kernel's, not an attacker's.
#[derive(Debug, Default, Clone, Copy)]
struct ByDevSector;

/// [`ByDevSector`]'s hasher.
#[derive(Debug, Default)]
struct DevSectorHasher(u64);

impl std::hash::Hasher for DevSectorHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::BuildHasher for ByDevSector {
    type Hasher = DevSectorHasher;
    fn build_hasher(&self) -> DevSectorHasher {
        DevSectorHasher::default()
    }
}

/// Bound on requests waiting for their completion (a lost completion must not grow this).
const PENDING_MAX: usize = 1 << 20;

/// What waits at one (device, sector), first in first out, in a flat table: the first
/// entry of a key sits in `first` itself; a second one while the first waits (flushes,
/// all at one sector) queues in `more`. A request at full speed therefore costs one
/// insert and one remove in one table, and no allocation (a `VecDeque` per key cost an
/// allocation and a free per request: 100,000 and more a second).
#[derive(Debug)]
struct FifoMap<T> {
    first: HashMap<(u32, u64), T, ByDevSector>,
    more: HashMap<(u32, u64), VecDeque<T>, ByDevSector>,
}

impl<T> Default for FifoMap<T> {
    fn default() -> Self {
        FifoMap {
            first: HashMap::default(),
            more: HashMap::default(),
        }
    }
}

impl<T> FifoMap<T> {
    pub fn push(&mut self, key: (u32, u64), v: T) {
        match self.first.entry(key) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.more.entry(key).or_default().push_back(v);
            }
        }
    }

    /// The oldest entry of `key`.
    pub fn pop(&mut self, key: (u32, u64)) -> Option<T> {
        let v = self.first.remove(&key)?;
        if !self.more.is_empty() {
            if let Some(q) = self.more.get_mut(&key) {
                if let Some(next) = q.pop_front() {
                    self.first.insert(key, next);
                }
                if q.is_empty() {
                    self.more.remove(&key);
                }
            }
        }
        Some(v)
    }

    /// Keys waiting (a bound check: not the entries behind the first of a key).
    pub fn keys(&self) -> usize {
        self.first.len()
    }

    /// Every entry waiting.
    pub fn len(&self) -> usize {
        self.first.len() + self.more.values().map(VecDeque::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    pub fn clear(&mut self) {
        self.first.clear();
        self.more.clear();
    }
}

impl Pairer {
    pub fn new(who: Who, procs: Procs) -> Pairer {
        Pairer {
            who,
            procs,
            enters: HashMap::new(),
            inserts: FifoMap::default(),
            issued: FifoMap::default(),
            forks: HashMap::new(),
            stats: PairStats::default(),
        }
    }

    pub fn who(&self) -> &Who {
        &self.who
    }

    fn traced(&mut self, tid: u32) -> Option<(u32, String)> {
        let every = self.who.every;
        let children = self.who.children;
        let pids = self.who.pids.lock().map(|p| p.clone()).unwrap_or_default();
        let t = self.procs.thread(tid, children).clone();
        if t.gone {
            return self.traced_gone(tid, &pids);
        }
        let by_pid = if children {
            t.line.iter().any(|p| pids.contains(p))
        } else {
            pids.contains(&t.tgid)
        };
        let by_comm = self.who.comms.contains(&t.comm);
        (every || by_pid || by_comm).then(|| (t.tgid, t.comm.clone()))
    }

    /// A thread gone before /proc was read: its name and ancestry from fork and exec
    /// events. Its process: itself in `children` mode (most likely a short process),
    /// else the traced process that made it (most likely its thread).
    fn traced_gone(&mut self, tid: u32, pids: &[u32]) -> Option<(u32, String)> {
        let comm = self.forks.get(&tid).map(|f| cstr(&f.1)).unwrap_or_default();
        if self.who.every || pids.contains(&tid) || self.who.comms.contains(&comm) {
            return Some((tid, comm));
        }
        let children = self.who.children;
        let mut p = self.forks.get(&tid).map(|f| f.0);
        for _ in 0..64 {
            let Some(pp) = p else { break };
            let pt = self.procs.thread(pp, children).clone();
            let hit = if !pt.gone {
                if children {
                    pt.line.iter().any(|x| pids.contains(x))
                } else {
                    pids.contains(&pt.tgid)
                }
            } else {
                pids.contains(&pp)
            };
            if hit {
                return Some((if children { tid } else { pt.tgid }, comm));
            }
            if !pt.gone {
                return None;
            }
            p = self.forks.get(&pp).map(|f| f.0);
        }
        None
    }

    /// Feeds one event (in timestamp order); a finished call or request goes to `out`.
    pub fn feed(&mut self, ts: u64, ev: Ev, out: &mut impl FnMut(Row)) {
        match ev {
            Ev::Enter { tid, call, fd } => {
                self.enters.insert(tid, (ts, call, fd));
            }
            Ev::Exit { tid, call, ret } => {
                let Some((t0, c0, fd)) = self.enters.remove(&tid) else {
                    self.stats.unpaired += 1;
                    return;
                };
                if c0 != call {
                    self.stats.unpaired += 1;
                    return;
                }
                let Some((pid, comm)) = self.traced(tid) else {
                    return;
                };
                let file = fd
                    .map(|fd| self.procs.file(pid, fd, ts))
                    .unwrap_or_default();
                self.stats.calls += 1;
                out(Row::Call(SyncCall {
                    start_ns: t0,
                    dur_ns: ts.saturating_sub(t0),
                    pid,
                    tid,
                    comm,
                    call: CALLS[call as usize],
                    fd,
                    file,
                    ret,
                }));
            }
            Ev::Fork {
                parent,
                child,
                comm,
            } => {
                if self.forks.len() > CACHE_MAX {
                    self.forks.clear();
                }
                self.forks.insert(child, (parent, comm));
            }
            Ev::Exec { pid, comm } => {
                if let Some(f) = self.forks.get_mut(&pid) {
                    f.1 = comm;
                }
            }
            Ev::Insert { dev, sector } => {
                if self.inserts.keys() > PENDING_MAX {
                    self.inserts.clear();
                }
                self.inserts.push((dev, sector), ts);
            }
            Ev::Issue {
                dev,
                sector,
                bytes,
                rwbs,
                comm,
            } => {
                let ins = if self.inserts.is_empty() {
                    None
                } else {
                    self.inserts.pop((dev, sector))
                };
                if self.issued.keys() > PENDING_MAX {
                    self.stats.unpaired += self.issued.len() as u64;
                    self.issued.clear();
                }
                self.issued
                    .push((dev, sector), (ts, ins, bytes, rwbs, comm));
            }
            Ev::Complete { dev, sector, error } => {
                let Some((t_issue, ins, bytes, rwbs, comm)) = self.issued.pop((dev, sector)) else {
                    self.stats.unpaired += 1;
                    return;
                };
                self.stats.requests += 1;
                out(Row::Request(BlockReq {
                    issue_ns: t_issue,
                    major: dev >> 20,
                    minor: dev & ((1 << 20) - 1),
                    rwbs_raw: rwbs,
                    sector,
                    bytes,
                    queue_ns: ins.map(|i| t_issue.saturating_sub(i)),
                    service_ns: ts.saturating_sub(t_issue),
                    error: error.abs(),
                    comm_raw: comm,
                }));
            }
        }
    }

    /// At the end: what never finished counts as unpaired.
    pub fn close(&mut self) {
        self.stats.unpaired += self.enters.len() as u64;
        self.stats.unpaired += self.issued.len() as u64;
        self.enters.clear();
        self.issued.clear();
    }
}

/// A finished call or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Call(SyncCall),
    Request(BlockReq),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let status = |tid: u32, name: &str, tgid: u32, ppid: u32| {
            let p = d.path().join(tid.to_string());
            std::fs::create_dir_all(p.join("fd")).unwrap();
            std::fs::write(
                p.join("status"),
                format!("Name:\t{name}\nTgid:\t{tgid}\nPid:\t{tid}\nPPid:\t{ppid}\n"),
            )
            .unwrap();
        };
        status(100, "nats-server", 100, 50);
        status(101, "nats-server", 100, 50);
        status(50, "diskpulse", 50, 1);
        status(200, "other", 200, 1);
        std::os::unix::fs::symlink("/data/1.blk", d.path().join("100/fd/7")).unwrap();
        d
    }

    fn rows(who: Who, evs: &[(u64, Ev)], d: &tempfile::TempDir) -> (Vec<Row>, PairStats) {
        let mut p = Pairer::new(who, Procs::new(d.path().to_path_buf()));
        let mut out = vec![];
        for (ts, e) in evs {
            p.feed(*ts, *e, &mut |r| out.push(r));
        }
        p.close();
        (out, p.stats)
    }

    #[test]
    fn calls_pair_per_thread_and_keep_only_the_traced_process() {
        let d = fake_proc();
        let who = Who {
            pids: Arc::new(Mutex::new(vec![100])),
            ..Default::default()
        };
        let evs = [
            (
                1_000,
                Ev::Enter {
                    tid: 101,
                    call: 1,
                    fd: Some(7),
                },
            ),
            (
                1_500,
                Ev::Enter {
                    tid: 200,
                    call: 0,
                    fd: Some(3),
                },
            ),
            (
                2_000,
                Ev::Enter {
                    tid: 100,
                    call: 0,
                    fd: Some(9),
                },
            ),
            (
                3_000,
                Ev::Exit {
                    tid: 101,
                    call: 1,
                    ret: 0,
                },
            ),
            (
                3_500,
                Ev::Exit {
                    tid: 200,
                    call: 0,
                    ret: 0,
                },
            ),
            (
                9_000,
                Ev::Exit {
                    tid: 100,
                    call: 0,
                    ret: -5,
                },
            ),
            (
                9_500,
                Ev::Exit {
                    tid: 101,
                    call: 1,
                    ret: 0,
                },
            ),
        ];
        let (out, stats) = rows(who.clone(), &evs, &d);
        let calls: Vec<&SyncCall> = out
            .iter()
            .filter_map(|r| match r {
                Row::Call(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(
            (calls[0].tid, calls[0].pid, calls[0].dur_ns, calls[0].call),
            (101, 100, 2_000, "fdatasync")
        );
        // fd 7 of pid 100 resolves through the process (not the thread).
        assert_eq!(calls[0].file, "/data/1.blk");
        assert_eq!((calls[1].ret, calls[1].file.as_str()), (-5, ""));
        assert_eq!(stats.unpaired, 1);
        // By name, and with children: pid 50's child 100 is traced.
        let by_comm = Who {
            comms: vec!["other".into()],
            ..Default::default()
        };
        assert_eq!(rows(by_comm, &evs, &d).1.calls, 1);
        let tree = Who {
            pids: Arc::new(Mutex::new(vec![50])),
            children: true,
            ..Default::default()
        };
        assert_eq!(rows(tree, &evs, &d).1.calls, 2);
        let none = Who {
            pids: Arc::new(Mutex::new(vec![50])),
            ..Default::default()
        };
        assert_eq!(rows(none, &evs, &d).1.calls, 0);
    }

    #[test]
    fn a_short_process_gone_before_proc_is_read_is_known_by_its_fork() {
        let d = fake_proc();
        let mut comm = [0u8; 16];
        comm[..2].copy_from_slice(b"dd");
        // 300 (gone) was forked by 100 (nats-server's process, alive), 301 by 300.
        let evs = [
            (
                10,
                Ev::Fork {
                    parent: 100,
                    child: 300,
                    comm,
                },
            ),
            (
                11,
                Ev::Fork {
                    parent: 300,
                    child: 301,
                    comm,
                },
            ),
            (
                20,
                Ev::Enter {
                    tid: 301,
                    call: 1,
                    fd: Some(1),
                },
            ),
            (
                30,
                Ev::Exit {
                    tid: 301,
                    call: 1,
                    ret: 0,
                },
            ),
            (
                40,
                Ev::Enter {
                    tid: 302,
                    call: 1,
                    fd: Some(1),
                },
            ),
            (
                50,
                Ev::Exit {
                    tid: 302,
                    call: 1,
                    ret: 0,
                },
            ),
        ];
        let tree = Who {
            pids: Arc::new(Mutex::new(vec![50])),
            children: true,
            ..Default::default()
        };
        let (out, _) = rows(tree, &evs, &d);
        assert_eq!(out.len(), 1, "{out:?}");
        let Row::Call(c) = &out[0] else { panic!() };
        assert_eq!((c.pid, c.tid, c.comm.as_str()), (301, 301, "dd"));
        let other = Who {
            pids: Arc::new(Mutex::new(vec![200])),
            children: true,
            ..Default::default()
        };
        assert!(rows(other, &evs, &d).0.is_empty());
    }

    #[test]
    fn the_flat_table_keeps_first_in_first_out_per_key_and_leaves_nothing_behind() {
        let mut m = FifoMap::default();
        // Three flushes waiting at one sector, a write at another.
        m.push((1, 0), 'a');
        m.push((1, 8), 'w');
        m.push((1, 0), 'b');
        m.push((1, 0), 'c');
        assert_eq!((m.keys(), m.len()), (2, 4));
        assert_eq!(m.pop((1, 0)), Some('a'));
        assert_eq!(m.pop((2, 0)), None, "another device, same sector");
        assert_eq!(m.pop((1, 8)), Some('w'));
        m.push((1, 0), 'd');
        assert_eq!(m.pop((1, 0)), Some('b'));
        assert_eq!(m.pop((1, 0)), Some('c'));
        assert_eq!(m.pop((1, 0)), Some('d'));
        assert_eq!(m.pop((1, 0)), None);
        assert!(m.is_empty() && m.more.is_empty());
    }

    #[test]
    fn flushes_at_one_sector_complete_in_issue_order() {
        let d = fake_proc();
        let dev = (7 << 20) | 3;
        let mut rwbs = [0u8; 10];
        rwbs[..2].copy_from_slice(b"FN");
        let issue = |bytes| Ev::Issue {
            dev,
            sector: 0,
            bytes,
            rwbs,
            comm: [0u8; 16],
        };
        let done = Ev::Complete {
            dev,
            sector: 0,
            error: 0,
        };
        let evs = [
            (100, issue(0)),
            (200, issue(1)),
            (300, issue(2)),
            (1_000, done),
            (2_000, done),
            (4_000, done),
        ];
        let (out, stats) = rows(Who::default(), &evs, &d);
        let r: Vec<(u64, u64)> = out
            .iter()
            .filter_map(|r| match r {
                Row::Request(b) => Some((b.bytes, b.service_ns)),
                _ => None,
            })
            .collect();
        assert_eq!(r, vec![(0, 900), (1, 1_800), (2, 3_700)]);
        assert_eq!(stats.unpaired, 0);
    }

    #[test]
    fn requests_pair_by_device_and_sector_with_queue_time() {
        let d = fake_proc();
        let dev = (7 << 20) | 3;
        let mut rwbs = [0u8; 10];
        rwbs[..4].copy_from_slice(b"FWFS");
        let mut comm = [0u8; 16];
        comm[..3].copy_from_slice(b"fio");
        let issue = |sector, bytes| Ev::Issue {
            dev,
            sector,
            bytes,
            rwbs,
            comm,
        };
        let evs = [
            (100, Ev::Insert { dev, sector: 8 }),
            (150, issue(8, 4096)),
            (160, issue(16, 8192)),
            (
                170,
                Ev::Complete {
                    dev,
                    sector: 99,
                    error: 0,
                },
            ),
            (
                400,
                Ev::Complete {
                    dev,
                    sector: 16,
                    error: 0,
                },
            ),
            (
                900,
                Ev::Complete {
                    dev,
                    sector: 8,
                    error: -5,
                },
            ),
        ];
        let (out, stats) = rows(Who::default(), &evs, &d);
        let r: Vec<&BlockReq> = out
            .iter()
            .filter_map(|r| match r {
                Row::Request(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].sector, r[0].queue_ns, r[0].service_ns),
            (16, None, 240)
        );
        assert_eq!(
            (
                r[1].sector,
                r[1].queue_ns,
                r[1].service_ns,
                r[1].error,
                r[1].bytes
            ),
            (8, Some(50), 750, 5, 4096)
        );
        assert_eq!(
            (r[1].major, r[1].minor, r[1].rwbs(), r[1].comm()),
            (7, 3, "FWFS", "fio")
        );
        assert_eq!(stats.unpaired, 1);
    }
}
