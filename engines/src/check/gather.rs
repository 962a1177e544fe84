//! Stage 1b of `check`: a sample of other I/O (each device's counters and every
//! process's `/proc/PID/io` over the same interval), then the empirical flush tests.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use collectors::check::flush::{self, FlushError};
use collectors::check::procio;
use collectors::check::vm;
use collectors::diskstats::{self, DiskCounters};

use super::{Facts, FlushOutcome, IoDelta, Options, ProcFacts, SystemFacts, TargetFacts};

fn read_counters(sysfs: &Path, name: &str) -> Option<DiskCounters> {
    collectors::sysfs::BlockSysfs::new(sysfs).counters(name)
}

fn delta(a: &DiskCounters, b: &DiskCounters, elapsed_ns: u64) -> Option<IoDelta> {
    let d = |i| diskstats::counter_delta(i, a.get(i)?, b.get(i)?);
    Some(IoDelta {
        elapsed_ns,
        read_bytes: d(diskstats::F_SECTORS_READ)? * 512,
        write_bytes: d(diskstats::F_SECTORS_WRITTEN)? * 512,
        reads: d(diskstats::F_READS)?,
        writes: d(diskstats::F_WRITES)?,
        flushes: d(diskstats::F_FLUSHES),
    })
}

/// Samples I/O, then runs the flush tests. `stop` is set by Ctrl-C.
pub fn gather(mut targets: Vec<TargetFacts>, o: &Options, stop: &AtomicBool) -> Facts {
    use std::sync::atomic::Ordering;
    let me = std::process::id();
    // Every distinct device once.
    let mut names: Vec<String> = vec![];
    for t in &targets {
        for d in &t.devices {
            if !names.contains(&d.dev.name) {
                names.push(d.dev.name.clone());
            }
        }
    }
    let t0 = Instant::now();
    let c0: Vec<Option<DiskCounters>> = names.iter().map(|n| read_counters(&o.sysfs, n)).collect();
    let (p0, _) = procio::snapshot(&o.procfs);
    let dirty = vm::read_dirty_settings(&o.procfs);
    while t0.elapsed() < o.sample && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10).min(o.sample));
    }
    let c1: Vec<Option<DiskCounters>> = names.iter().map(|n| read_counters(&o.sysfs, n)).collect();
    let (p1, unreadable) = procio::snapshot(&o.procfs);
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let memory = vm::read_dirty_memory(&o.procfs);

    // Busy processes and the devices they have files on.
    let mut processes = vec![];
    for d in procio::deltas(&p0, &p1) {
        if d.pid == me {
            continue;
        }
        let open = procio::open_devices(&o.procfs, d.pid);
        let mut on = vec![];
        for t in &targets {
            for dev in &t.devices {
                if dev.match_devs.iter().any(|m| open.contains(m)) && !on.contains(&dev.dev.name) {
                    on.push(dev.dev.name.clone());
                }
            }
        }
        processes.push(ProcFacts {
            pid: d.pid,
            comm: d.comm,
            read_bytes: d.read_bytes,
            write_bytes: d.write_bytes,
            on_devices: on,
        });
    }
    for t in targets.iter_mut() {
        for dev in t.devices.iter_mut() {
            let i = names.iter().position(|n| *n == dev.dev.name).unwrap();
            if let (Some(a), Some(b)) = (&c0[i], &c1[i]) {
                dev.io = delta(a, b, elapsed_ns);
            }
            dev.busy_procs = processes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.on_devices.contains(&dev.dev.name))
                .map(|(i, _)| i)
                .collect();
        }
    }

    // The empirical tests, after the sample so they do not count as other I/O.
    let mut interrupted = stop.load(Ordering::Relaxed);
    for t in targets.iter_mut() {
        let Some(plan) = t.planned.take() else {
            continue;
        };
        if interrupted {
            break;
        }
        t.flush = match flush::run(&plan, &o.flush, stop) {
            Ok(r) => FlushOutcome::Measured(r),
            Err(FlushError::Interrupted) => {
                interrupted = true;
                FlushOutcome::NotRun
            }
            Err(e) => FlushOutcome::Failed(e),
        };
    }
    Facts {
        targets,
        system: SystemFacts {
            dirty,
            memory,
            sample_ns: elapsed_ns,
            processes,
            unreadable,
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
            clock: collectors::clock::ClockFacts::measure(&o.sysfs, Duration::from_millis(20)),
        },
        interrupted,
    }
}
