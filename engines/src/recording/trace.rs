//! `--trace` (issue 11): the tracefs collector (`collectors::tracefs`) wired into a
//! recording. It writes `fsync_calls.csv.gz` and `block_requests.csv.gz`
//! ([`format::fsync_calls`], [`format::block_requests`]), the meta.json
//! `trace` section ([`format::meta::TraceMeta`]) and a `trace_lost` event when the
//! kernel lost events.
//!
//! What must stay true: tracing is off unless asked for; when it is asked for but cannot
//! run (not root, no tracefs, a tracepoint missing) the recording says so in one line
//! (stderr and an `error` event, `source` `trace`) and everything else records.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use collectors::clock::Clock;
use collectors::tracefs::{self, Row, Tracer};

use super::EventLog;
use format::block_requests::{self, op_of_rwbs, BlockRequestRef};
use format::events::{Body, TraceLost};
use format::fsync_calls::{self, FsyncCall};
use format::meta::{TraceMeta, TraceStats};

/// What to trace. The run's devices (`SamplerSetup::devices`) are the block devices
/// traced (every device when the run lists none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSetup {
    /// Processes whose sync calls are recorded: every thread of each.
    pub pids: Vec<u32>,
    /// Process names (the kernel's comm: at most 15 bytes), filtered in the kernel.
    pub comms: Vec<String>,
    /// Also the processes the traced pids start, and theirs (`record -- CMD --trace`).
    pub children: bool,
    /// Every process's sync calls (`record --trace` with no pid, name or command).
    pub every_process: bool,
    /// Which half to trace (`record --trace-only`); both by default.
    pub only: Option<TraceOnly>,
}

/// `record --trace-only`: one half of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceOnly {
    /// Block requests only: no syscall tracepoint is enabled, so the other processes'
    /// system calls keep the kernel's fast path.
    Block,
    /// Sync calls only.
    Sync,
}

/// The traced pids, shared with the collector so pids known only after the recording
/// started (the command of `record -- CMD`, embedded brokers) are added while it runs:
/// [`crate::recording::Recording::trace_pid`].
#[derive(Debug, Clone, Default)]
pub struct TracedPids(pub Arc<Mutex<Vec<u32>>>);

impl TracedPids {
    pub fn add(&self, pid: u32) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !v.contains(&pid) {
            v.push(pid);
        }
    }
    pub fn get(&self) -> Vec<u32> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How often the ring buffers are read.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// How often the kernel's lost-event counters are looked at.
const LOST_EVERY_NS: u64 = 1_000_000_000;

/// A running trace thread.
pub struct TraceThread {
    handle: JoinHandle<anyhow::Result<TraceStats>>,
    pub meta: TraceMeta,
}

impl TraceThread {
    /// Waits for the thread (after the stop flag was set): its counts.
    pub fn join(self) -> anyhow::Result<TraceStats> {
        self.handle
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the trace thread panicked")))
    }
}

/// The environment variable that sets the ring buffer per CPU (KiB; default
/// [`tracefs::BUFFER_KIB_PER_CPU`]): smaller to check what a run that loses events says,
/// larger for a machine with bursts past 50,000 events a second.
const ENV_BUFFER_KIB: &str = "DISKPULSE_TRACE_BUFFER_KIB";

/// The buffer size from [`ENV_BUFFER_KIB`]; an error naming the variable, the limits and
/// the fix. `record --trace` checks it before anything is written.
pub fn buffer_kib_from_env() -> Result<Option<u64>, String> {
    match std::env::var(ENV_BUFFER_KIB) {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(k) if (4..=1 << 20).contains(&k) => Ok(Some(k)),
            _ => Err(format!(
                "{ENV_BUFFER_KIB}={v}: takes KiB per CPU from 4 to 1048576 (1 GiB); unset it for the default {}",
                tracefs::BUFFER_KIB_PER_CPU
            )),
        },
        Err(_) => Ok(None),
    }
}

/// A block device's name from sysfs (`/sys/dev/block/MAJ:MIN/uevent` `DEVNAME`).
fn sysfs_name(major: u32, minor: u32) -> String {
    std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
        })
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

/// Starts tracing into `dir`, or says in one line why it cannot run here.
pub fn start(
    setup: &TraceSetup,
    traced: &TracedPids,
    devices: &[(u32, u32, String)],
    files: &super::chunks::RunFiles,
    clock: Clock,
    stop: Arc<AtomicBool>,
    events: EventLog,
) -> Result<TraceThread, String> {
    let who = tracefs::Who {
        every: setup.every_process,
        pids: traced.0.clone(),
        children: setup.children,
        comms: setup.comms.clone(),
    };
    let mut cfg = tracefs::Config::new(who, devices.iter().map(|d| (d.0, d.1)).collect());
    cfg.sync_calls = setup.only != Some(TraceOnly::Block);
    cfg.block = setup.only != Some(TraceOnly::Sync);
    if let Some(kib) = buffer_kib_from_env()? {
        cfg.buffer_kib_per_cpu = kib;
    }
    let mut tracer = Tracer::start(&cfg)?;
    if !tracer.info.removed_stale.is_empty() {
        eprintln!(
            "trace: removed trace instances left by a diskpulse that did not end cleanly: {}",
            tracer.info.removed_stale.join(", ")
        );
    }
    // Both files are cut by `--chunk` and dropped by `--keep` as diskstats is.
    let mut calls = files
        .sink(
            fsync_calls::FILE,
            fsync_calls::HEADER,
            Some(super::writer::GZIP_LEVEL),
        )
        .map_err(|e| format!("{e:#}"))?;
    // Every request of the device is a row: gzip at its fastest level (1), which costs
    // the writer thread about half the CPU of the default level.
    let mut reqs = files
        .sink(block_requests::FILE, block_requests::HEADER, Some(1))
        .map_err(|e| format!("{e:#}"))?;
    let meta = TraceMeta {
        events: tracer.info.events.clone(),
        pids: traced.get(),
        comms: setup.comms.clone(),
        children: setup.children,
        devices: devices.iter().map(|d| format!("{}:{}", d.0, d.1)).collect(),
        clock: "mono".into(),
        clock_offset_ns: tracer.info.clock_offset_ns,
        clock_offset_bound_ns: tracer.info.clock_offset_bound_ns,
        buffer_kib_per_cpu: tracer.info.buffer_kib_per_cpu,
        stats: None,
    };
    let mut names: HashMap<(u32, u32), String> =
        devices.iter().map(|d| ((d.0, d.1), d.2.clone())).collect();
    let zero = clock.zero_monotonic_ns();
    let handle = std::thread::Builder::new()
        .name("trace".into())
        .spawn(move || {
            // Like the samplers: a low real-time priority, so a busy machine does not
            // starve the reader until the ring buffers overflow.
            let _ = collectors::periodic::try_realtime();
            // The run time, read once a poll: the writers' hand-off pacing needs no more
            // (a clock read per row was 3% of the thread's time).
            let now_ns = std::cell::Cell::new(clock.now_ns());
            let mut last_dev: ((u32, u32), String) = ((u32::MAX, u32::MAX), String::new());
            let mut write = |row: Row| match row {
                Row::Call(c) => {
                    let r = FsyncCall {
                        t_ns: c.start_ns.saturating_sub(zero),
                        dur_ns: c.dur_ns,
                        pid: c.pid,
                        tid: c.tid,
                        comm: c.comm,
                        call: c.call.to_string(),
                        fd: c.fd,
                        file: c.file,
                        ret: c.ret,
                    };
                    r.write_line(calls.buf());
                    calls.row_done(now_ns.get());
                }
                Row::Request(b) => {
                    // The hot path (every request of the device): no allocation, the
                    // row goes straight into the chunk buffer.
                    // The device of the previous row, most often this one's: no hash.
                    if last_dev.0 != (b.major, b.minor) {
                        let name = names
                            .entry((b.major, b.minor))
                            .or_insert_with(|| sysfs_name(b.major, b.minor));
                        last_dev = ((b.major, b.minor), name.clone());
                    }
                    let device = &last_dev.1;
                    BlockRequestRef {
                        t_ns: b.issue_ns.saturating_sub(zero),
                        device,
                        major: b.major,
                        minor: b.minor,
                        op: op_of_rwbs(b.rwbs()),
                        flags: b.rwbs(),
                        sector: b.sector,
                        bytes: b.bytes,
                        queue_ns: b.queue_ns,
                        service_ns: b.service_ns,
                        error: b.error,
                        comm: b.comm(),
                    }
                    .write_line(reqs.buf());
                    reqs.row_done(now_ns.get());
                }
            };
            let mut lost_seen = 0u64;
            let mut lost_checked_ns = 0u64;
            let note_lost = |lost: u64, seen: &mut u64| {
                if lost > *seen {
                    events.event(Body::TraceLost(TraceLost {
                        lost_events: lost - *seen,
                        total: lost,
                    }));
                    *seen = lost;
                }
            };
            let mut failed = None;
            while !stop.load(Ordering::Relaxed) {
                now_ns.set(clock.now_ns());
                if let Err(e) = tracer.poll(&mut write) {
                    failed = Some(e);
                    break;
                }
                let now = now_ns.get();
                if now.saturating_sub(lost_checked_ns) >= LOST_EVERY_NS {
                    lost_checked_ns = now;
                    note_lost(tracer.lost(), &mut lost_seen);
                }
                std::thread::sleep(POLL);
            }
            let (counts, end) = tracer.finish(&mut write);
            note_lost(counts.lost_events, &mut lost_seen);
            calls.finish()?;
            reqs.finish()?;
            if let Some(e) = failed {
                anyhow::bail!("reading the trace stopped: {e}");
            }
            end.map_err(anyhow::Error::msg)?;
            Ok(TraceStats {
                events: counts.events,
                lost_events: counts.lost_events,
                calls: counts.calls,
                requests: counts.requests,
                unpaired: counts.unpaired,
            })
        })
        .map_err(|e| format!("cannot start the trace thread: {e}"))?;
    Ok(TraceThread { handle, meta })
}
