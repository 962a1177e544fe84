//! The direct-I/O probe: fio's job vocabulary, open-loop pacing, per-window statistics.
//!
//! One std thread per job (`numjobs`), each with its own file descriptor, its own
//! buffers and, for `io_uring`, its own ring. A job records every completion into its
//! thread's [`stats::WindowStats`] without locks or allocation; at each window boundary
//! (`window_ns`, on a grid anchored at the end of the ramp) it hands the window to the
//! aggregator, which runs on the calling thread, merges jobs per window for
//! `on_window` (probe.csv) and merges windows after the ramp into per-job totals
//! (the summary and the fio-shaped JSON).
//!
//! Times are `CLOCK_MONOTONIC` ns throughout (`crate::clock::monotonic_ns`), the clock
//! of the run's zero, so callers place windows on the run clock by subtracting it.
//!
//! Engines: [`Engine::Sync`] (`pread`/`pwrite`, fio's `psync`, queue depth 1) and
//! [`Engine::IoUring`] (see `engine_uring`) and [`Engine::Aio`] (fio's libaio, see
//! `engine_aio`). With a rate, each job follows a
//! [`pace::Schedule`] of intended start times (total rate / numjobs, phases
//! interleaved), and latency is also recorded from the intended start (`lat_co`).

pub mod error;
pub mod files;
pub(crate) mod latlog;
pub mod pace;
pub mod place;
mod randmap;
pub mod rng;
pub mod spec;
pub mod stats;
pub mod target;
pub mod verify;
pub mod workload;

mod aggregate;
mod engine_aio;
mod engine_sync;
mod engine_uring;
mod lattarget;
mod timing;
mod usage;

pub use lattarget::LatencySpec;

use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Barrier};

pub use engine_uring::uring_available;
pub use error::ProbeError;
pub use spec::{Engine, ProbeSpec, Rw, SyncKind};
use stats::{WindowStats, WRITE};
use target::Target;
pub use usage::Usage;

use crate::clock::monotonic_ns;

/// One window, all jobs merged, for `probe.csv`.
pub struct WindowRow<'a> {
    /// Window number; negative during the ramp.
    pub idx: i64,
    /// `CLOCK_MONOTONIC` ns: where the window starts and ends (the last window ends at
    /// the last completion).
    pub start_ns: u64,
    pub end_ns: u64,
    pub ramp: bool,
    pub stats: &'a WindowStats,
    /// How long the oldest I/O (or sync call) still in flight at the window's end had
    /// waited since its intended start (its submission without a rate), ns, the longest
    /// over the jobs; 0 when none was in flight.
    pub oldest_wait_ns: u64,
}

/// One window's counts for a job (for fio's iops/bw min/max/mean/stddev).
#[derive(Debug, Clone, Copy)]
pub struct JobSample {
    /// Per direction: read, write, trim.
    pub ios: [u64; stats::DIRS],
    pub bytes: [u64; stats::DIRS],
    pub window_ns: u64,
}

/// One job's results after the ramp.
pub struct JobResult {
    pub job: u32,
    pub totals: WindowStats,
    /// From the end of the ramp to the job's last completion.
    pub runtime_ns: u64,
    /// Whole windows after the ramp.
    pub samples: Vec<JobSample>,
    /// The job thread's CPU over the measurement.
    pub usage: Usage,
    /// With a rate: scheduled I/Os that were not issued by the end (behind schedule).
    pub rate_missed: u64,
    pub error: Option<ProbeError>,
    // P3: verify
    /// Bytes read back and checked after the write phase (verify), not in `totals`.
    pub verified_bytes: u64,
    /// The read-back's reads (one per written block, as fio's verify phase reads them):
    /// fio counts them in the job's read figures, with their own runtime.
    pub verify_reads: stats::DirStats,
    /// The read-back's length (fio's read `runtime` of a write job that verifies).
    pub verify_ns: u64,
    /// With latency_target: the queue depth the search ended at (fio's latency_depth).
    pub latency_depth: Option<u32>,
}

impl JobResult {
    /// One direction's figures as fio reports them: the verify read-back's reads are
    /// reads (fio's read `total_ios` of a write job that verifies is one per block).
    pub fn fio_dir(&self, d: usize) -> stats::DirStats {
        let mut out = stats::DirStats::new();
        out.merge(&self.totals.dir[d]);
        if d == stats::READ {
            out.merge(&self.verify_reads);
        }
        out
    }

    /// One direction's runtime as fio reports it: the read-back has its own (fio's read
    /// `runtime` of a write job that verifies is the verify phase's length).
    pub fn fio_runtime_ns(&self, d: usize) -> u64 {
        match (d == stats::READ, self.totals.dir[d].ios > 0) {
            (true, true) => self.runtime_ns + self.verify_ns,
            (true, false) => self.verify_ns,
            _ => self.runtime_ns,
        }
    }

    /// The job's whole length, the read-back included (fio's `job_runtime`).
    pub fn job_runtime_ns(&self) -> u64 {
        self.runtime_ns + self.verify_ns
    }
}

/// The probe's results; present even when a job failed (what was measured is kept).
pub struct ProbeResult {
    pub jobs: Vec<JobResult>,
    pub start_ns: u64,
    /// End of the ramp: where the measurement starts.
    pub meas_ns: u64,
    /// The last completion of any job.
    pub end_ns: u64,
    /// The whole process's CPU from the start of the jobs to their end (ramp included).
    pub process_usage: Usage,
    pub interrupted: bool,
}

impl ProbeResult {
    /// The first job error, if any.
    pub fn error(&self) -> Option<&ProbeError> {
        self.jobs.iter().find_map(|j| j.error.as_ref())
    }

    /// All jobs merged.
    pub fn merged(&self) -> WindowStats {
        let mut m = WindowStats::new();
        for j in &self.jobs {
            m.merge(&j.totals);
        }
        m
    }

    pub fn runtime_ns(&self) -> u64 {
        self.jobs.iter().map(|j| j.runtime_ns).max().unwrap_or(0)
    }

    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for j in &self.jobs {
            u.usr_ns += j.usage.usr_ns;
            u.sys_ns += j.usage.sys_ns;
            u.ctx += j.usage.ctx;
            u.minflt += j.usage.minflt;
            u.majflt += j.usage.majflt;
        }
        u
    }
}

enum Msg {
    /// A job finished window `idx`; its next window is `next` (windows between are empty).
    /// `oldest_ns`: the intended start of the oldest I/O it had in flight when it rolled
    /// (u64::MAX: none), in flight at the end of `idx` and of every window up to `next`
    /// if it started before their end.
    Window {
        job: u32,
        idx: i64,
        next: i64,
        stats: Box<WindowStats>,
        oldest_ns: u64,
    },
    Done {
        job: u32,
        last_done_ns: u64,
        usage: Usage,
        rate_missed: u64,
        error: Option<ProbeError>,
        verified: Box<verify::ReadBack>,
        latency_depth: Option<u32>,
    },
    /// latency_target's final run began at `at_ns`: the job's figures start again there
    /// (fio's reset_all_stats).
    Reset { job: u32, at_ns: u64 },
}

fn window_index(t: u64, meas: u64, w: u64) -> i64 {
    (t as i128 - meas as i128).div_euclid(w as i128) as i64
}

fn window_start(idx: i64, meas: u64, w: u64) -> u64 {
    (meas as i128 + idx as i128 * w as i128).max(0) as u64
}

/// A job's current window: recording goes into `stats`; `at(now)` rolls to the next
/// window when `now` has passed the boundary.
pub(crate) struct WindowCursor {
    job: u32,
    idx: i64,
    end_ns: u64,
    meas_ns: u64,
    w: u64,
    pub(crate) stats: Box<WindowStats>,
    tx: SyncSender<Msg>,
    free: Receiver<Box<WindowStats>>,
    usage_at_meas: Option<Usage>,
    pub(crate) last_done_ns: u64,
    /// With latency_target: the depth the search is at.
    pub(crate) latency_depth: Option<u32>,
}

impl WindowCursor {
    /// Rolls at `now` with nothing in flight.
    #[inline]
    pub(crate) fn at(&mut self, now: u64) {
        self.at_with(now, || u64::MAX);
    }

    /// Rolls at `now` when a window ended; `oldest` (asked only then) is the intended
    /// start of the oldest I/O in flight now, the ones completing now included (u64::MAX:
    /// none): probe.csv's `oldest_wait_us`.
    #[inline]
    pub(crate) fn at_with(&mut self, now: u64, oldest: impl FnOnce() -> u64) {
        if now >= self.end_ns {
            self.roll(now, oldest());
        }
    }

    #[cold]
    fn roll(&mut self, now: u64, oldest_ns: u64) {
        let next = window_index(now, self.meas_ns, self.w);
        let fresh = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Box::new(WindowStats::new()));
        let full = std::mem::replace(&mut self.stats, fresh);
        let _ = self.tx.send(Msg::Window {
            job: self.job,
            idx: self.idx,
            next,
            stats: full,
            oldest_ns,
        });
        self.idx = next;
        self.end_ns = window_start(next + 1, self.meas_ns, self.w);
        if next >= 0 && self.usage_at_meas.is_none() {
            self.usage_at_meas = Some(Usage::thread());
        }
    }

    /// latency_target's final run: this job's figures start again `now` (what the current
    /// window held is dropped, from probe.csv too, as fio's reset_all_stats drops it).
    pub(crate) fn reset_figures(&mut self, now: u64) {
        self.stats.reset();
        let _ = self.tx.send(Msg::Reset {
            job: self.job,
            at_ns: now,
        });
    }

    fn finish(
        mut self,
        rate_missed: u64,
        error: Option<ProbeError>,
        verified: Box<verify::ReadBack>,
    ) {
        let end = Usage::thread();
        let usage = end.since(&self.usage_at_meas.unwrap_or(end));
        let stats = std::mem::take(&mut self.stats);
        let _ = self.tx.send(Msg::Window {
            job: self.job,
            idx: self.idx,
            next: i64::MAX,
            stats,
            oldest_ns: u64::MAX,
        });
        let _ = self.tx.send(Msg::Done {
            job: self.job,
            last_done_ns: self.last_done_ns,
            usage,
            rate_missed,
            error,
            verified,
            latency_depth: self.latency_depth,
        });
    }
}

/// What a job thread works with.
pub(crate) struct Ctx<'a> {
    /// The job's first file (the only one but with nrfiles / filename=a:b).
    pub(crate) fd: RawFd,
    pub(crate) target: &'a Target,
    /// Every file of the job, in `Op::file` order (`fds[0]` is `fd`).
    pub(crate) fds: Vec<RawFd>,
    pub(crate) targets: &'a [&'a Target],
    pub(crate) direct: bool,
    pub(crate) depth: u32,
    pub(crate) sync_kind: SyncKind,
    pub(crate) gen: files::JobGen,
    pub(crate) sched: Option<pace::Schedule>,
    pub(crate) sched_rng: rng::SplitMix64,
    pub(crate) end_ns: u64,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) win: WindowCursor,
    /// `--write-lat-log`: this job's raw completion latencies.
    pub(crate) lat_log: Option<latlog::LatLog>,
    // P2a: engines and timing
    pub(crate) timing: spec::Timing,
    pub(crate) tstate: timing::TimingState,
    // P3: verify
    /// fio's `verify`: fills writes, checks reads, remembers what was written.
    pub(crate) verify: Option<verify::JobVerify>,
}

impl Ctx<'_> {
    /// With a rate and a runtime, a job whose next intended start falls after its end
    /// stays until the end (`--rate-iops 1 --runtime 1s` ran 0.02 s and reported a rate
    /// over that): the run lasts what was asked, and the measured time covers the idle
    /// tail, so the rate shown is the rate asked. Wakes on `stop` within 50 ms.
    fn hold_to_end(&mut self) {
        if self.sched.is_none() || self.end_ns == u64::MAX {
            return;
        }
        let mut now = monotonic_ns();
        while now < self.end_ns && !self.stop.load(Ordering::Relaxed) {
            pace::wait_until(self.end_ns.min(now + 50_000_000));
            now = monotonic_ns();
        }
        let end = now.min(self.end_ns);
        if end > self.win.last_done_ns {
            self.win.at(end);
            self.win.last_done_ns = end;
        }
    }

    /// With a rate: intended starts that were due before the job ended (its end time, or
    /// now if it ended earlier: Ctrl-C, an error, --size reached) but were never issued
    /// because the device or the CPU could not keep up. Called after the engine.
    fn missed(&mut self) -> u64 {
        let Some(s) = self.sched.as_mut() else {
            return 0;
        };
        let until = self.end_ns.min(monotonic_ns());
        let mut n = 0;
        while s.next_ns() < until {
            n += 1;
            s.advance(&mut self.sched_rng);
        }
        n
    }
}

/// `fsync`/`fdatasync` on the job's descriptor, recorded as a sync; the time it returned.
/// `offset`: the write it follows, for the error's message.
pub(crate) fn sync_now(c: &mut Ctx, offset: u64) -> Result<u64, ProbeError> {
    let ts = crate::clock::monotonic_ns();
    // SAFETY: plain system calls on an open fd.
    let rc = unsafe {
        match c.sync_kind {
            SyncKind::Fdatasync => libc::fdatasync(c.fd),
            SyncKind::Fsync => libc::fsync(c.fd),
        }
    };
    let te = crate::clock::monotonic_ns();
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(c
            .target
            .io_error(e, "measuring", c.sync_kind.name(), offset, 0, c.direct));
    }
    c.win.at_with(te, || ts);
    c.win.stats.record_sync(te - ts);
    c.win.last_done_ns = te;
    Ok(te)
}

/// Drops a file's cached pages (fio's `invalidate`, on each new pass of a time-based job).
pub(crate) fn drop_cached(fd: std::os::fd::RawFd) {
    // SAFETY: a plain system call on an open fd; advice only, its result changes nothing.
    unsafe {
        libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Runs the probe on an already laid-out `target`. Returns `Err` only when nothing
/// could start (open, io_uring setup); errors during the run are in the jobs' results,
/// with what was measured until then. `stop` ends the run early (Ctrl-C).
pub fn run(
    spec: &ProbeSpec,
    target: &Target,
    stop: &AtomicBool,
    on_window: &mut dyn FnMut(&WindowRow),
) -> Result<ProbeResult, ProbeError> {
    run_files(spec, &[target], stop, on_window)
}

/// Each job's generator over its files (see `files`): one [`workload::Gen`] per file,
/// each over that file's size; `io_size` and `number_ios` are the job's, shared out.
fn job_gen(spec: &ProbeSpec, targets: &[&Target], job: u32, seed: u64) -> files::JobGen {
    let several = targets.len() > 1;
    let total: u64 = targets.iter().map(|t| t.size).sum::<u64>().max(1);
    let gens = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut place = spec.place.clone();
            if several {
                place.io_size = place
                    .io_size
                    .map(|b| (b as u128 * t.size as u128 / total as u128) as u64);
                place.number_ios = place.number_ios.map(|n| n.div_ceil(targets.len() as u64));
                place.size = None;
            }
            workload::Gen::new(workload::JobShape {
                random: spec.rw.random(),
                read_pct: spec.read_pct(),
                bs: spec.bs,
                place: &place,
                target_size: t.size,
                size: place.size,
                job,
                seed: seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407),
                sync_every: spec.fsync.map(|f| f.0).unwrap_or(0),
                time_based: spec.time_based && !several,
                trim: workload::TrimMode::of(spec.rw),
            })
        })
        .collect();
    files::JobGen::new(gens, spec.files, spec.time_based, seed)
}

/// [`run`] on a job's several files (fio's `nrfiles`, `filename=a:b`), each laid out.
#[allow(
    clippy::too_many_lines,
    reason = "the probe's phases in the order they run (lay out, warm up, measure, drain), each next to what it undoes on an error"
)]
pub fn run_files(
    spec: &ProbeSpec,
    targets: &[&Target],
    stop: &AtomicBool,
    on_window: &mut dyn FnMut(&WindowRow),
) -> Result<ProbeResult, ProbeError> {
    let n = spec.numjobs.max(1) as usize;
    let writes = spec.modifies();
    let target = targets[0];
    let mut files = Vec::with_capacity(n);
    let mut lat_logs = Vec::with_capacity(n);
    for job in 0..n {
        let mut mine = Vec::with_capacity(targets.len());
        for t in targets {
            mine.push(t.open(t.open_flags(writes, spec.direct, spec.sync), job == 0)?);
        }
        files.push(mine);
        lat_logs.push(latlog::LatLog::create(
            &latlog::LogSpec::of(spec),
            job as u32,
        )?);
    }
    // P1: fio's fadvise_hint=1 (its default): a random job tells the kernel not to read
    // ahead, a sequential one that it will. Without it a buffered 4k randread of a 64 MiB
    // file read ahead the whole file and ran from the cache (233k IOPS, fio 12k).
    let advice = if spec.rw.random() {
        libc::POSIX_FADV_RANDOM
    } else {
        libc::POSIX_FADV_SEQUENTIAL
    };
    for f in files.iter().flatten() {
        // SAFETY: the descriptor is open; the call reads no memory of ours.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, advice) };
    }
    let (tx, rx) = mpsc::sync_channel::<Msg>(4096);
    let setup = Arc::new(Barrier::new(n + 1));
    let go = Arc::new(Barrier::new(n + 1));
    let start_cell = Arc::new(AtomicU64::new(0));
    let mut free_tx = Vec::with_capacity(n);
    let per_job_rate = spec.rate_iops.map(|r| r / n as f64);
    let w = spec.window_ns.max(1);

    let result = std::thread::scope(|s| {
        let mut handles = vec![];
        for ((job, file), mut lat_log) in files.iter().enumerate().zip(lat_logs) {
            let (ftx, frx) = mpsc::sync_channel::<Box<WindowStats>>(16);
            for _ in 0..2 {
                let _ = ftx.try_send(Box::new(WindowStats::new()));
            }
            free_tx.push(ftx);
            let tx = tx.clone();
            let (setup, go, start_cell) = (setup.clone(), go.clone(), start_cell.clone());
            let fds: Vec<RawFd> = file.iter().map(AsRawFd::as_raw_fd).collect();
            let fd = fds[0];
            let spec = spec.clone();
            let h = std::thread::Builder::new()
                .name(format!("probe-job{job}"))
                .spawn_scoped(s, move || {
                    pace::tight_timer_slack();
                    let seed = spec.seed ^ (job as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let gen = job_gen(&spec, targets, job as u32, seed);
                    let ring = match spec.engine {
                        Engine::IoUring => {
                            match engine_uring::Ring::new(spec.iodepth, &fds, gen.max_bs()) {
                                Ok(r) => Some(Ok(r)),
                                Err(e) => {
                                    stop.store(true, Ordering::SeqCst);
                                    Some(Err(e))
                                }
                            }
                        }
                        Engine::Sync | Engine::Aio => None,
                    };
                    // P2a: the libaio engine's context, set up as the ring is.
                    let aio = (spec.engine == Engine::Aio).then(|| {
                        engine_aio::Aio::new(spec.iodepth, gen.max_bs()).inspect_err(|_| {
                            stop.store(true, Ordering::SeqCst);
                        })
                    });
                    setup.wait();
                    go.wait();
                    let start = start_cell.load(Ordering::SeqCst);
                    // The head room before `start` is for the jobs to get here: nothing
                    // is issued before it, so no completion falls before the measurement
                    // begins (a run of one I/O measured 0 ns and showed 1e9 IOPS).
                    pace::wait_until(start);
                    let meas = start + spec.ramp_ns;
                    let end = spec.runtime_ns.map(|r| meas + r).unwrap_or(u64::MAX);
                    if let Some(l) = lat_log.as_mut() {
                        l.set_start(start, meas);
                    }
                    let idx = window_index(start, meas, w);
                    let win = WindowCursor {
                        job: job as u32,
                        idx,
                        end_ns: window_start(idx + 1, meas, w),
                        meas_ns: meas,
                        w,
                        stats: frx.try_recv().unwrap_or_default(),
                        tx,
                        free: frx,
                        usage_at_meas: (idx >= 0).then(Usage::thread),
                        last_done_ns: start,
                        latency_depth: None,
                    };
                    let mut aio = match aio {
                        Some(Err(e)) => {
                            win.finish(
                                0,
                                Some(ProbeError::Io {
                                    path: target.path.clone(),
                                    op: "io_setup (libaio)".into(),
                                    source: e,
                                }),
                                Box::default(),
                            );
                            return;
                        }
                        Some(Ok(a)) => Some(a),
                        None => None,
                    };
                    let mut ring = match ring {
                        Some(Err(e)) => {
                            win.finish(
                                0,
                                Some(ProbeError::Io {
                                    path: target.path.clone(),
                                    op: "setting up io_uring".into(),
                                    source: e,
                                }),
                                Box::default(),
                            );
                            return;
                        }
                        Some(Ok(r)) => Some(r),
                        None => None,
                    };
                    let sched = per_job_rate.map(|r| {
                        pace::Schedule::new(start, r, spec.rate_process, job as f64 / n as f64)
                    });
                    let mut c = Ctx {
                        fd,
                        target,
                        fds,
                        targets,
                        direct: spec.direct,
                        depth: spec.iodepth,
                        sync_kind: spec.fsync.map(|f| f.1).unwrap_or(SyncKind::Fsync),
                        gen,
                        sched,
                        sched_rng: rng::SplitMix64::new(seed ^ 0x5EED),
                        end_ns: end,
                        stop,
                        win,
                        lat_log,
                        timing: spec.timing.clone(),
                        tstate: timing::TimingState::new(start, &spec.timing, spec.iodepth, meas),
                        verify: spec.verify.as_ref().map(|v| {
                            let iv = if v.interval > 0 {
                                v.interval
                            } else {
                                spec.bs[WRITE]
                            };
                            let p = &target.path;
                            verify::JobVerify::new(v, iv, target.size, job as u32, seed, p, !writes)
                        }),
                    };
                    c.verify
                        .iter_mut()
                        .for_each(|v| v.keep_order(c.gen.first()));
                    let only = spec.verify.as_ref().is_some_and(|v| v.only);
                    let r = match (ring.as_mut(), aio.as_mut()) {
                        _ if only => {
                            verify::mark_only(&mut c, spec.time_based, target.size);
                            Ok(())
                        }
                        (Some(ring), _) => engine_uring::run(&mut c, ring),
                        (None, Some(a)) => engine_aio::run(&mut c, a),
                        (None, None) => engine_sync::run(&mut c),
                    };
                    if r.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    } else if !only {
                        c.hold_to_end();
                    }
                    let missed = c.missed();
                    let logged = c
                        .lat_log
                        .take()
                        .map(|l| l.finish(c.win.last_done_ns))
                        .unwrap_or(Ok(()));
                    // fio's do_verify: after the write phase, read back what was written.
                    let mut verified = Box::<verify::ReadBack>::default();
                    let verify_err = match (&r, &spec.verify) {
                        (Ok(()), Some(v)) if writes && v.do_verify => {
                            // Through the job's engine at its iodepth, as fio's verify phase.
                            let q = verify::Queue::of(ring.as_mut(), aio.as_mut());
                            verify::read_back(&mut c, spec.bs[WRITE], end, q, &mut verified).err()
                        }
                        _ => None,
                    };
                    c.win
                        .finish(missed, r.err().or(verify_err).or(logged.err()), verified);
                })
                .expect("spawn probe job thread");
            handles.push(h);
        }
        drop(tx);
        setup.wait();
        // A little head room so every job is past the barrier before the first deadline.
        let mut start = monotonic_ns() + 200_000;
        if let Some(zero) = spec.grid_zero_ns {
            let meas = (start + spec.ramp_ns)
                .saturating_sub(zero)
                .next_multiple_of(w)
                + zero;
            start = meas - spec.ramp_ns;
            // The jobs begin when released: release them with the same head room.
            pace::wait_until(start - 200_000);
        }
        start_cell.store(start, Ordering::SeqCst);
        let usage0 = Usage::process();
        go.wait();
        let out = aggregate::aggregate(spec, n, start, rx, &free_tx, on_window);
        let process_usage = Usage::process().since(&usage0);
        for h in handles {
            let _ = h.join();
        }
        (out, process_usage, start)
    });
    let ((jobs, end_ns), process_usage, start) = result;
    Ok(ProbeResult {
        jobs,
        start_ns: start,
        meas_ns: start + spec.ramp_ns,
        end_ns,
        process_usage,
        interrupted: false,
    })
}
