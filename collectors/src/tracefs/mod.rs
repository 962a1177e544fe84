//! The broker's own sync calls and every block request, from the kernel's tracepoints
//! through tracefs (issue 11): no BPF toolchain, no strace, and on our clock.
//!
//! ## What it reads
//! - `syscalls:sys_enter_*`/`sys_exit_*` of `fsync`, `fdatasync`, `sync_file_range` and
//!   `msync`, paired per thread into one call ([`pair`]), kept for the traced processes:
//!   by pid (every thread: a thread's process is its `Tgid` in `/proc/TID/status`, read
//!   once per thread and cached; optionally the processes they start), by name (the
//!   kernel filters `comm == NAME`), or every process. The userspace filter was picked over
//!   `set_event_pid` + `options/event-fork` because `set_event_pid` filters every event
//!   of the instance by task, which would drop the block completions (they run in
//!   interrupt or kworker context); sync calls are rare enough system-wide (thousands a
//!   second at most) that reading them all costs nothing measurable.
//!   io_uring: this kernel has `io_uring:io_uring_submit_req` (with the opcode, FSYNC = 3)
//!   and `io_uring_complete` (by request pointer), but the completion cannot be filtered
//!   by opcode, so tracing it would read every io_uring completion of the machine; not
//!   traced (the `io_uring_fsync` call name is reserved in the format).
//! - `block:block_rq_insert`, `block_rq_issue`, `block_rq_complete`, filtered in the
//!   kernel to the run's devices (`dev == MAJ<<20|MIN`), paired by (device, sector).
//!
//! ## How
//! Its own instance `instances/diskpulse-PID` ([`instance`]), so another tracer is not
//! disturbed, with the `mono` trace clock (CLOCK_MONOTONIC: the offset is measured at the
//! start with a `trace_marker` write between two clock reads) and 8 MiB of ring buffer a
//! CPU. Each CPU's `per_cpu/cpuN/trace_pipe_raw` is read in binary ([`ring`]: exact ns
//! timestamps, no text formatting in the kernel), non-blocking, every poll (10 ms); the
//! CPUs' events are merged by timestamp and fed to the pairing up to 2 ms before the
//! poll, so an exit read from one CPU waits for its enter from another. Lost events are
//! the kernel's own count (`per_cpu/cpuN/stats`: overrun + dropped events).
//!
//! Units: ns on CLOCK_MONOTONIC for every timestamp handed out.

pub mod instance;
pub mod pair;
pub mod procs;
pub mod ring;

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use instance::Instance;
pub use pair::{BlockReq, Row, SyncCall, Who};
use pair::{Ev, Pairer, Procs};
use ring::{EventFormat, Field};

/// The ring buffer per CPU, KiB: 8 MiB holds ~100,000 events, two seconds at 50,000 a
/// second, far more than a 10 ms poll needs.
pub const BUFFER_KIB_PER_CPU: u64 = 8192;
/// How far behind the newest read time events are held back for the merge, ns.
const MERGE_LAG_NS: u64 = 2_000_000;

/// What to trace.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where tracefs is (or is to be mounted): `/sys/kernel/tracing`.
    pub tracefs: PathBuf,
    pub procfs: PathBuf,
    pub who: Who,
    /// Block devices (major, minor); empty: every device.
    pub devices: Vec<(u32, u32)>,
    pub buffer_kib_per_cpu: u64,
    /// Trace the sync calls (the syscall tracepoints). Enabling any syscall tracepoint sends
    /// every system call of every task through the kernel's slow path, so a trace of block
    /// requests alone leaves them off.
    pub sync_calls: bool,
    /// Trace the block requests.
    pub block: bool,
}

impl Config {
    pub fn new(who: Who, devices: Vec<(u32, u32)>) -> Config {
        Config {
            tracefs: PathBuf::from("/sys/kernel/tracing"),
            procfs: PathBuf::from("/proc"),
            who,
            devices,
            buffer_kib_per_cpu: BUFFER_KIB_PER_CPU,
            sync_calls: true,
            block: true,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Enter(u8, Option<Field>),
    Exit(u8, Field),
    Insert(Field, Field),
    Issue(Field, Field, Field, Field, Field),
    Complete(Field, Field, Field),
    Fork(Field, Field, Field),
    Exec(Field, Field),
}

/// A name as the kernel keeps it: at most 15 bytes and a NUL.
fn comm16(s: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    let b = s.as_bytes();
    let n = b.len().min(15);
    c[..n].copy_from_slice(&b[..n]);
    c
}

/// Event id -> how to decode it: a table indexed by the id (ids are small: the kernel
/// numbers its events from 1 up, ~2,000 here), so an event of the last kind registered
/// costs no more to find than the first (a search through a dozen kinds did).
#[derive(Debug, Default)]
struct Decoder {
    by_id: Vec<Option<Kind>>,
}

impl Decoder {
    fn add(&mut self, id: u16, kind: Kind) {
        let i = usize::from(id);
        if self.by_id.len() <= i {
            self.by_id.resize(i + 1, None);
        }
        self.by_id[i] = Some(kind);
    }

    fn decode(&self, data: &[u8]) -> Option<Ev> {
        let id = ring::common_type(data);
        let k = self.by_id.get(usize::from(id)).copied().flatten()?;
        let tid = ring::common_pid(data);
        Some(match k {
            Kind::Enter(call, fd) => Ev::Enter {
                tid,
                call,
                fd: fd.map(|f| ring::read_i(data, f) as i32 as i64),
            },
            Kind::Exit(call, ret) => Ev::Exit {
                tid,
                call,
                ret: ring::read_i(data, ret),
            },
            Kind::Insert(dev, sector) => Ev::Insert {
                dev: ring::read_u(data, dev) as u32,
                sector: ring::read_u(data, sector),
            },
            Kind::Issue(dev, sector, bytes, rwbs, comm) => {
                let mut r = [0u8; 10];
                let s = ring::read_str(data, rwbs).as_bytes();
                r[..s.len().min(10)].copy_from_slice(&s[..s.len().min(10)]);
                Ev::Issue {
                    dev: ring::read_u(data, dev) as u32,
                    sector: ring::read_u(data, sector),
                    bytes: ring::read_u(data, bytes),
                    rwbs: r,
                    comm: comm16(ring::read_str(data, comm)),
                }
            }
            Kind::Fork(parent, child, comm) => Ev::Fork {
                parent: ring::read_u(data, parent) as u32,
                child: ring::read_u(data, child) as u32,
                comm: comm16(ring::read_str(data, comm)),
            },
            Kind::Exec(pid, filename) => {
                let f = ring::read_str(data, filename);
                Ev::Exec {
                    pid: ring::read_u(data, pid) as u32,
                    comm: comm16(f.rsplit('/').next().unwrap_or(f)),
                }
            }
            Kind::Complete(dev, sector, error) => Ev::Complete {
                dev: ring::read_u(data, dev) as u32,
                sector: ring::read_u(data, sector),
                error: ring::read_i(data, error) as i32,
            },
        })
    }
}

/// What a running trace measured, for meta.json.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceInfo {
    /// The tracepoints enabled, `system:name`.
    pub events: Vec<String>,
    /// The instance's name.
    pub instance: String,
    /// Stale instances removed at the start (a diskpulse killed before it removed its own).
    pub removed_stale: Vec<String>,
    pub clock_offset_ns: i64,
    pub clock_offset_bound_ns: u64,
    pub buffer_kib_per_cpu: u64,
}

/// The counts at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCounts {
    pub events: u64,
    pub lost_events: u64,
    pub calls: u64,
    pub requests: u64,
    pub unpaired: u64,
}

/// A running trace.
pub struct Tracer {
    inst: Instance,
    readers: Vec<(u32, File)>,
    page: Vec<u8>,
    decoder: Decoder,
    pending: Vec<(u64, Ev)>,
    pairer: Pairer,
    /// Subtracted from trace timestamps when the trace clock measurably differs from
    /// CLOCK_MONOTONIC (0 otherwise).
    correction_ns: i64,
    events_read: u64,
    page_missed: u64,
    pids_seen: usize,
    pub info: TraceInfo,
}

fn format_of(tracefs: &Path, event: &str) -> Result<EventFormat, String> {
    let p = tracefs.join("events").join(event).join("format");
    let text = std::fs::read_to_string(&p).map_err(|_| {
        format!(
            "this kernel has no tracepoint {} ({} missing)",
            event.replace('/', ":"),
            p.display()
        )
    })?;
    EventFormat::parse(&text).ok_or_else(|| format!("{} does not parse", p.display()))
}

impl Tracer {
    /// Mounts tracefs if needed, removes stale instances, creates this process's
    /// instance, measures the clock offset and enables the tracepoints. The error is one
    /// line saying why tracing cannot run here.
    pub fn start(cfg: &Config) -> Result<Tracer, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("tracing needs root (tracefs and its tracepoints are root's)".into());
        }
        let tracefs = instance::find_or_mount(&cfg.tracefs)?;
        let own = std::process::id();
        let removed_stale = instance::remove_stale(&tracefs, &cfg.procfs, own);
        let mut decoder = Decoder::default();
        let mut events = vec![];
        for (i, call) in pair::CALLS.iter().enumerate().filter(|_| cfg.sync_calls) {
            let enter = format_of(&tracefs, &format!("syscalls/sys_enter_{call}"))?;
            let exit = format_of(&tracefs, &format!("syscalls/sys_exit_{call}"))?;
            let fd = if *call == "msync" {
                None
            } else {
                Some(enter.field("fd")?)
            };
            decoder.add(enter.id, Kind::Enter(i as u8, fd));
            decoder.add(exit.id, Kind::Exit(i as u8, exit.field("ret")?));
            events.push(format!("syscalls/sys_enter_{call}"));
            events.push(format!("syscalls/sys_exit_{call}"));
        }
        if cfg.block {
            let ins = format_of(&tracefs, "block/block_rq_insert")?;
            let iss = format_of(&tracefs, "block/block_rq_issue")?;
            let com = format_of(&tracefs, "block/block_rq_complete")?;
            decoder.add(
                ins.id,
                Kind::Insert(ins.field("dev")?, ins.field("sector")?),
            );
            decoder.add(
                iss.id,
                Kind::Issue(
                    iss.field("dev")?,
                    iss.field("sector")?,
                    iss.field("bytes")?,
                    iss.field("rwbs")?,
                    iss.field("comm")?,
                ),
            );
            decoder.add(
                com.id,
                Kind::Complete(com.field("dev")?, com.field("sector")?, com.field("error")?),
            );
            for e in ["block_rq_insert", "block_rq_issue", "block_rq_complete"] {
                events.push(format!("block/{e}"));
            }
        }
        if cfg.sync_calls && !cfg.who.every {
            // Who a short process was when it is gone before /proc is read.
            let fork = format_of(&tracefs, "sched/sched_process_fork")?;
            let exec = format_of(&tracefs, "sched/sched_process_exec")?;
            decoder.add(
                fork.id,
                Kind::Fork(
                    fork.field("parent_pid")?,
                    fork.field("child_pid")?,
                    fork.field("child_comm")?,
                ),
            );
            decoder.add(
                exec.id,
                Kind::Exec(exec.field("pid")?, exec.field("filename")?),
            );
            events.push("sched/sched_process_fork".into());
            events.push("sched/sched_process_exec".into());
        }
        let print = format_of(&tracefs, "ftrace/print")?;

        let inst = Instance::create(&tracefs, own)?;
        inst.write("trace_clock", "mono")?;
        inst.write("buffer_size_kb", &cfg.buffer_kib_per_cpu.to_string())?;
        // Keep what is in the buffer when it is full (a drop is counted as `dropped events`).
        let _ = inst.write("options/overwrite", "0");
        inst.write("tracing_on", "1")?;
        let subbuf = inst
            .read("buffer_subbuf_size_kb")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(4)
            * 1024;
        let mut readers = vec![];
        for cpu in inst.cpus() {
            let p = inst.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| format!("cannot open {}: {e}", p.display()))?;
            readers.push((cpu, f));
        }
        let mut t = Tracer {
            inst,
            readers,
            page: vec![0u8; subbuf.max(4096)],
            decoder,
            pending: vec![],
            pairer: Pairer::new(cfg.who.clone(), Procs::new(cfg.procfs.clone())),
            correction_ns: 0,
            events_read: 0,
            page_missed: 0,
            pids_seen: 0,
            info: TraceInfo {
                events: events.iter().map(|e| e.replace('/', ":")).collect(),
                removed_stale,
                buffer_kib_per_cpu: cfg.buffer_kib_per_cpu,
                ..Default::default()
            },
        };
        t.info.instance = t.inst.name.clone();
        t.calibrate(print.id)?;

        if cfg.block && !cfg.devices.is_empty() {
            let f = cfg
                .devices
                .iter()
                .map(|(ma, mi)| format!("dev == {}", (ma << 20) | mi))
                .collect::<Vec<_>>()
                .join(" || ");
            for e in ["block_rq_insert", "block_rq_issue", "block_rq_complete"] {
                t.inst.write(&format!("events/block/{e}/filter"), &f)?;
            }
        }
        let who = &cfg.who;
        let pids_empty = who.pids.lock().map(|p| p.is_empty()).unwrap_or(true);
        if !who.every && !who.children && pids_empty && !who.comms.is_empty() {
            let f = who
                .comms
                .iter()
                .map(|c| format!("comm == \"{c}\""))
                .collect::<Vec<_>>()
                .join(" || ");
            for e in events.iter().filter(|e| e.starts_with("syscalls/")) {
                // Only an optimisation: the names are checked in userspace too.
                let _ = t.inst.write(&format!("events/{e}/filter"), &f);
            }
        }
        for e in &events {
            t.inst.write(&format!("events/{e}/enable"), "1")?;
        }
        t.learn_pids();
        Ok(t)
    }

    /// Writes a marker between two CLOCK_MONOTONIC reads (the tightest of five) and
    /// finds its timestamp: the trace clock's offset and its bound.
    fn calibrate(&mut self, print_id: u16) -> Result<(), String> {
        let marker = self.inst.dir.join("trace_marker");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&marker)
            .map_err(|e| format!("cannot open {}: {e}", marker.display()))?;
        let mut best: Option<(u64, u64, u64)> = None; // (gap, mid, marker ts)
        for _ in 0..5 {
            let t0 = crate::clock::monotonic_ns();
            std::io::Write::write_all(&mut f, b"diskpulse-clock")
                .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
            let t1 = crate::clock::monotonic_ns();
            let mut ts = None;
            for i in 0..self.readers.len() {
                loop {
                    match self.readers[i].1.read(&mut self.page) {
                        Ok(n) if n > 0 => {
                            ring::parse_page(&self.page[..n], |t, d| {
                                if ring::common_type(d) == print_id {
                                    ts = Some(t);
                                }
                            });
                        }
                        _ => break,
                    }
                }
            }
            let Some(ts) = ts else { continue };
            let gap = t1 - t0;
            if best.is_none_or(|b| gap < b.0) {
                best = Some((gap, t0 + gap / 2, ts));
            }
        }
        let (gap, mid, ts) = best.ok_or("the trace_marker write did not reach the trace buffer")?;
        let offset = ts as i64 - mid as i64;
        self.info.clock_offset_ns = offset;
        self.info.clock_offset_bound_ns = gap / 2 + 1;
        if offset.unsigned_abs() > gap / 2 + 1 {
            self.correction_ns = offset;
        }
        Ok(())
    }

    /// Learns the threads of pids added since the last look (so a thread that ends
    /// before its calls are read is still known).
    fn learn_pids(&mut self) {
        let pids = self.pairer_pids();
        if pids.len() == self.pids_seen {
            return;
        }
        let children = self.pairer_children();
        for pid in &pids[self.pids_seen..] {
            let task = self.procfs_task(*pid);
            for tid in task {
                self.pairer.procs.learn(tid, children);
            }
        }
        self.pids_seen = pids.len();
    }

    fn pairer_pids(&self) -> Vec<u32> {
        self.who()
            .pids
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }
    fn pairer_children(&self) -> bool {
        self.who().children
    }
    fn who(&self) -> &Who {
        self.pairer.who()
    }
    fn procfs_task(&self, pid: u32) -> Vec<u32> {
        std::fs::read_dir(self.pairer.procs.root().join(format!("{pid}/task")))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The trace clock now (CLOCK_MONOTONIC plus the measured offset).
    fn trace_now(&self) -> u64 {
        (crate::clock::monotonic_ns() as i64 + self.info.clock_offset_ns) as u64
    }

    fn read_all(&mut self) -> std::io::Result<()> {
        for i in 0..self.readers.len() {
            loop {
                match self.readers[i].1.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => {
                        let dec = &self.decoder;
                        let pending = &mut self.pending;
                        let mut read = 0u64;
                        let info = ring::parse_page(&self.page[..n], |ts, d| {
                            read += 1;
                            if let Some(ev) = dec.decode(d) {
                                pending.push((ts, ev));
                            }
                        });
                        self.events_read += read;
                        if let Some(m) = info.missed {
                            self.page_missed += if m == u64::MAX { 1 } else { m };
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn feed(&mut self, upto: Option<u64>, out: &mut impl FnMut(Row)) {
        self.pending.sort_by_key(|(ts, _)| *ts);
        let cut = match upto {
            Some(w) => self.pending.partition_point(|(ts, _)| *ts <= w),
            None => self.pending.len(),
        };
        let c = self.correction_ns;
        for (ts, ev) in self.pending.drain(..cut) {
            self.pairer.feed((ts as i64 - c).max(0) as u64, ev, out);
        }
    }

    /// Reads what the kernel has and hands finished calls and requests to `out`
    /// (timestamps on CLOCK_MONOTONIC), holding back the last 2 ms for the merge.
    pub fn poll(&mut self, out: &mut impl FnMut(Row)) -> std::io::Result<()> {
        self.learn_pids();
        let w = self.trace_now().saturating_sub(MERGE_LAG_NS);
        self.read_all()?;
        self.feed(Some(w), out);
        Ok(())
    }

    /// Events lost so far (the kernel's counters; at least the pages flagged as missing).
    pub fn lost(&self) -> u64 {
        let stats: u64 = self
            .readers
            .iter()
            .map(|(cpu, _)| self.inst.lost_on(*cpu))
            .sum();
        stats.max(self.page_missed)
    }

    /// Stops tracing, reads and pairs the rest, removes the instance.
    pub fn finish(mut self, out: &mut impl FnMut(Row)) -> (TraceCounts, Result<(), String>) {
        let _ = self.inst.write("tracing_on", "0");
        let r = self.read_all();
        self.feed(None, out);
        self.pairer.close();
        let counts = TraceCounts {
            events: self.events_read,
            lost_events: self.lost(),
            calls: self.pairer.stats.calls,
            requests: self.pairer.stats.requests,
            unpaired: self.pairer.stats.unpaired,
        };
        self.readers.clear();
        let removed = self.inst.remove();
        let r = r
            .map_err(|e| format!("reading the trace: {e}"))
            .and(removed);
        (counts, r)
    }
}
