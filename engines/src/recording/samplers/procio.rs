//! The proc_io sampler: `/proc/PID/io` of the broker's processes every interval (10 ms)
//! into `proc_io.csv` (format in [`format::proc_io`]), one row per process and
//! sample, the counters as the kernel says them.
//!
//! Started by the session once the embedded servers run (their pids are known only
//! then), stopped with the recording. A process that ends (the broker stops before the
//! recording closes) is dropped from the loop quietly: its last row is its last sample.
//! Cheap enough to run on every recording with an embedded broker: a 3 s `demo` (debug
//! build, 2 busy cores) measured 136 µs of thread CPU per sample of one server, 1.4% of
//! a core at 10 ms, against 384 µs for the meminfo sampler in the same run (meta.json
//! `samplers.*.ns_per_sample_cpu`); the `pread` of `/proc/PID/io` itself is ~2.5 µs.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use collectors::clock::Clock;
use collectors::periodic;
use collectors::procio::ProcIoFile;

use super::SamplerThread;
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;
use format::events::{Body, ProcIoGone};
use format::proc_io::{ProcIoRow, FILE};

/// The default interval: 10 ms.
pub(crate) const DEFAULT_INTERVAL_NS: u64 = 10_000_000;

/// Opens every pid's `io` (an error naming the first that cannot be opened) and starts
/// the sampler thread, the rows going to `sink` (a file, or a channel: the agent's
/// batches, [`crate::agent::node`]).
pub(crate) fn spawn_procio_to(
    procfs: &Path,
    pids: Arc<std::sync::Mutex<Vec<u32>>>,
    mut sink: ChunkSink,
    clock: Clock,
    interval_ns: u64,
    stop: Arc<AtomicBool>,
    events: EventLog,
) -> anyhow::Result<SamplerThread> {
    let added = pids;
    let mut files = vec![];
    let first: Vec<u32> = added
        .lock()
        .map(|mut v| v.drain(..).collect())
        .unwrap_or_default();
    for pid in first {
        files.push(ProcIoFile::open(procfs, pid)?);
    }
    let procfs_owned = procfs.to_path_buf();
    let handle = std::thread::Builder::new()
        .name("proc_io".into())
        .spawn(move || {
            let _ = periodic::try_realtime();
            let mut live: Vec<bool> = vec![true; files.len()];
            let procfs = procfs_owned;
            let stats = periodic::run(&clock, interval_ns, &stop, |_| {
                // A node started again (restart/kill phases): its new process from now
                // on (opening allocates, once per restart; try_lock never waits).
                if let Ok(mut pids) = added.try_lock() {
                    for pid in pids.drain(..) {
                        match ProcIoFile::open(&procfs, pid) {
                            Ok(f) => {
                                files.push(f);
                                live.push(true);
                            }
                            Err(e) => events.error("proc_io", "open", &format!("{e:#}")),
                        }
                    }
                }
                let mut t_last = 0;
                for (f, alive) in files.iter_mut().zip(live.iter_mut()) {
                    if !*alive {
                        continue;
                    }
                    let t0 = clock.now_ns();
                    match f.read() {
                        Ok(c) => {
                            let t = t0 + (clock.now_ns() - t0) / 2;
                            ProcIoRow::write_to(sink.buf(), t, f.pid, &f.comm, &c);
                            t_last = t;
                        }
                        Err(e) => {
                            *alive = false;
                            events.event(Body::ProcIoGone(ProcIoGone {
                                pid: f.pid,
                                comm: f.comm.clone(),
                                why: e.to_string(),
                            }));
                        }
                    }
                }
                if t_last > 0 {
                    sink.row_done(t_last);
                }
                true
            });
            sink.finish()?;
            Ok(stats)
        })?;
    Ok(SamplerThread {
        name: "proc_io",
        file: FILE,
        handle,
    })
}
