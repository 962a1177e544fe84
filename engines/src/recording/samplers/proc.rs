//! The meminfo and cpu samplers: a small `/proc` file re-read into a reused buffer every
//! interval and parsed into a fixed row of numbers (format in `super`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use collectors::clock::Clock;
use collectors::periodic;
use collectors::procstat::{self, ProcFile};

use super::SamplerThread;
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;
use format::csv::put_u64;

/// A small `/proc` file parsed into a fixed row of numbers.
pub(crate) struct ProcSource<const N: usize> {
    pub name: &'static str,
    /// Output file name in the run directory.
    pub file: &'static str,
    pub(crate) proc_path: std::path::PathBuf,
    pub columns: [&'static str; N],
    pub parse: fn(&[u8]) -> [u64; N],
}

/// Starts a sampler thread for a [`ProcSource`], writing its rows (no header) into `sink`.
pub(crate) fn spawn_proc_to<const N: usize>(
    src: ProcSource<N>,
    mut sink: ChunkSink,
    clock: Clock,
    interval_ns: u64,
    stop: Arc<AtomicBool>,
    events: EventLog,
) -> anyhow::Result<SamplerThread> {
    let ProcSource {
        name,
        file,
        proc_path,
        columns,
        parse,
    } = src;
    let proc_path = proc_path.as_path();
    let mut pf = ProcFile::open(proc_path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", proc_path.display()))?;
    let _ = columns;
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = periodic::try_realtime();
            let mut failed = false;
            let stats = periodic::run(&clock, interval_ns, &stop, |_| {
                let t0 = clock.now_ns();
                match pf.read() {
                    Ok(data) => {
                        let t1 = clock.now_ns();
                        let t = t0 + (t1 - t0) / 2;
                        let vals = parse(data);
                        let b = sink.buf();
                        put_u64(b, t);
                        for v in vals {
                            b.push(b',');
                            put_u64(b, v);
                        }
                        b.push(b'\n');
                        sink.row_done(t);
                    }
                    Err(e) if !failed => {
                        failed = true;
                        events.error(name, "read", &format!("{}: {e}", pf.path()));
                    }
                    Err(_) => {}
                }
                true
            });
            sink.finish()?;
            Ok(stats)
        })?;
    Ok(SamplerThread { name, file, handle })
}

/// meminfo parse adapter for [`spawn_proc_to`].
pub(crate) fn mem_row(b: &[u8]) -> [u64; 4] {
    procstat::parse_meminfo(b).values()
}

/// /proc/stat parse adapter for [`spawn_proc_to`].
pub(crate) fn cpu_row(b: &[u8]) -> [u64; 10] {
    procstat::parse_stat(b).values()
}
