//! `diskpulse probe`: fio's job vocabulary on diskpulse's clock.
//!
//! Flags are fio's where fio has one (`--rw`, `--bs`, `--iodepth`, `--rate_iops`, ...,
//! in fio's spelling too), or a fio job file (`jobfile.rs`),
//! resolved in three layers (`args.rs`): an explicit flag beats a `--preset`, which beats the
//! default. Everything is validated before anything is written (bad input: exit 2, one
//! line). The engine lives in `collectors::probe`; this module picks the target, lays
//! the file out, runs, and writes the human summary (`summary.rs`) or fio-shaped JSON
//! (`output.rs`), plus
//! `probe.csv` (and `probe.json`) when run inside `diskpulse record -- ...`.

mod args;
mod args_files;
mod args_where;
mod csv;
mod jobfile;
mod jobkeys;
mod jobset;
mod output;
mod presets;
mod summary;
mod timing;
mod verifylog;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use collectors::clock::Clock;
use collectors::probe::target::{self, TargetKind, TargetOptions};
use collectors::probe::{self as engine, Engine, ProbeError};

use format::usage;

pub use args::ProbeArgs;
use args::{resolve, Resolved, DEFAULT_SIZE};

/// Options as a job file's lines wrote them: (fio's name, the value).
pub(crate) type Shown = Vec<(String, String)>;

/// The run's facts that the outputs show besides the numbers.
pub(crate) struct RunInfo {
    target_path: PathBuf,
    target_kind: String,
    pub fstype: String,
    pub size: u64,
    pub warnings: Vec<String>,
    pub clock: Clock,
    recorded_in: Option<PathBuf>,
    pub start_wall: chrono::DateTime<chrono::Local>,
    /// Device counters before and after the run, for fio's `disk_util`.
    pub disks: Vec<DiskDelta>,
    /// A job file's `global options` and `job options` as its lines wrote them (fio's
    /// JSON lists those, not the resolved job); None for flags alone.
    pub file_shown: Option<(Shown, Shown)>,
}

/// A device's counters over the run (fio's `disk_util` entry).
pub(crate) struct DiskDelta {
    pub name: String,
    /// Field deltas in /sys/class/block/X/stat order (`collectors::diskstats::F_*`).
    pub d: Vec<Option<u64>>,
    pub elapsed_ns: u64,
}

/// The devices that carry the target's I/O (a file's file system and what is under it,
/// or the named device and what is under it), as `diskpulse record --path` finds them.
fn devices_of(t: &target::Target) -> Vec<String> {
    let r = collectors::devices::Resolver::default();
    let found = match &t.kind {
        TargetKind::BlockDevice { .. } => r.for_spec(&t.path.to_string_lossy()),
        _ => r.for_path(&t.path),
    };
    found
        .map(|v| v.into_iter().map(|d| d.name).collect())
        .unwrap_or_default()
}

fn disk_counters(names: &[String]) -> Vec<Option<collectors::diskstats::DiskCounters>> {
    let sys = collectors::sysfs::BlockSysfs::default();
    names.iter().map(|n| sys.counters(n)).collect()
}

/// The checks `run` makes of its arguments before it touches anything: for `diskpulse
/// run --dry-run`, which checks a scenario's probe phases without running them.
pub fn check_args(a: &ProbeArgs) -> anyhow::Result<()> {
    resolve(a).map(|_| ())
}

/// [`check_args`] and the target as `run` inspects it (a pseudo file system, a missing
/// directory, a mounted or held block device, no room, smaller than a block): for a
/// scenario's probe phase whose `--filename` is the user's own (issue 25 point 8: a
/// phase on /proc/x passed the dry run and failed in the run). Writes nothing.
pub fn check_target(a: &ProbeArgs) -> anyhow::Result<()> {
    target_of(&resolve(a)?).map(|_| ())
}

/// The target of a resolved job, inspected and checked before anything is written.
fn target_of(r: &Resolved) -> anyhow::Result<target::Target> {
    target_with(r, r.spec.modifies(), r.size)
}

/// [`target_of`] for a file several jobs share: whether any writes, the largest size.
fn target_with(r: &Resolved, writes: bool, size: Option<u64>) -> anyhow::Result<target::Target> {
    target_at(r, &r.filename, writes, size)
}

/// The job's other files (`r.files[1..]`: fio's nrfiles, filename=a:b), each inspected
/// and checked as the first one is.
fn more_targets(r: &Resolved) -> anyhow::Result<Vec<target::Target>> {
    r.files[1..]
        .iter()
        .map(|(p, size)| target_at(r, p, r.spec.modifies(), *size))
        .collect()
}

/// [`target_with`] for one file of the job.
fn target_at(
    r: &Resolved,
    path: &std::path::Path,
    writes: bool,
    size: Option<u64>,
) -> anyhow::Result<target::Target> {
    let opts = TargetOptions {
        // Room for every numjobs copy's region past --offset (P2b).
        size: size.map(|s| r.spec.place.extent(s, r.spec.numjobs)),
        default_size: DEFAULT_SIZE,
        writes,
        direct: r.spec.direct,
        allow_destructive: r.allow_destructive,
        sysfs: "/sys".into(),
        procfs: "/proc".into(),
    };
    let mut tgt = target::inspect(path, &opts).map_err(refusal_is_usage)?;
    if r.spec.place.relative() && tgt.kind == TargetKind::NewFile {
        return Err(usage!(
            "{}: a size or offset in % is a share of an existing file's or device's size, and this file does not exist; give bytes (--size 256MiB) or name an existing file",
            tgt.path.display()
        ));
    }
    // P2a: fill_device writes into the free space (no layout) until ENOSPC.
    if r.spec.timing.fill_device {
        fill_device_target(&mut tgt, r.spec.bs[1])?;
    } else {
        check_room(&tgt)?;
    }
    let big = r.spec.bs[0].max(r.spec.bs[1]);
    if tgt.size < big {
        return Err(usage!(
            "{}: {} bytes is smaller than the block size ({big} bytes); pass --size",
            tgt.path.display(),
            tgt.size
        ));
    }
    Ok(tgt)
}

/// What `diskpulse run --dry-run` plans from a probe phase's arguments, resolved as the
/// child resolves them (presets and fio spellings included).
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Measured time (`--runtime`), after `ramp`; `None`: until `size` bytes are done.
    pub runtime: Option<std::time::Duration>,
    pub ramp: std::time::Duration,
    /// Runs for all of `runtime`; without it the job may end earlier, after `size` bytes.
    pub time_based: bool,
    /// The file's size: `--size`, or the default for a new file.
    pub size_bytes: u64,
    /// Whether `size_bytes` is the default (no `--size`).
    pub default_size: bool,
}

pub fn planned(a: &ProbeArgs) -> anyhow::Result<Planned> {
    let r = resolve(a)?;
    Ok(Planned {
        runtime: r.spec.runtime_ns.map(std::time::Duration::from_nanos),
        ramp: std::time::Duration::from_nanos(r.spec.ramp_ns),
        time_based: r.spec.time_based,
        size_bytes: r.size.unwrap_or(DEFAULT_SIZE),
        default_size: r.size.is_none(),
    })
}

/// A file to lay out must fit in its file system's free space: `--size 16383G` wrote
/// until the disk was full, `--size 18446744073709551615` overflowed rounding up.
/// fio's fill_device: a file grows into the file system's free space (from its current
/// length, not laid out first); a block device keeps its size.
fn fill_device_target(tgt: &mut target::Target, bs: u64) -> anyhow::Result<()> {
    let len = match tgt.kind {
        TargetKind::BlockDevice { .. } => return Ok(()),
        TargetKind::NewFile => 0,
        TargetKind::ExistingFile { len } => len,
    };
    let dir = match tgt.path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let free = crate::lab::os::free_bytes(dir).unwrap_or(0);
    // As fio: a size the file cannot reach (the whole file system's), so ENOSPC ends it.
    let whole = fs_bytes(dir).max(len + free);
    let size = whole / bs * bs;
    if free < bs {
        return Err(usage!(
            "--fill-device: {} has no free space for one block of {bs} bytes; free some space there",
            dir.display()
        ));
    }
    tgt.size = size;
    tgt.layout = Some((len, len));
    Ok(())
}

/// The size of the file system holding `dir` (statvfs f_blocks * f_frsize), 0 if unknown.
fn fs_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: an all-zero statvfs is valid; statvfs fills it from a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    st.f_blocks as u64 * st.f_frsize as u64
}

fn check_room(tgt: &target::Target) -> anyhow::Result<()> {
    let Some((from, to)) = tgt.layout else {
        return Ok(());
    };
    let need = to.saturating_sub(from);
    let dir = match tgt.path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    // Rounding up to 4 KiB blocks must stay within u64 too.
    let fits_u64 = to.checked_add(collectors::directio::ALIGN as u64).is_some();
    match crate::lab::os::free_bytes(dir) {
        Some(free) if need > free || !fits_u64 => Err(usage!(
            "--size {}: laying out {} needs {} but {} has {} free; pass a smaller --size",
            format::units::bytes_exact(to),
            tgt.path.display(),
            format::units::bytes_exact(need),
            dir.display(),
            format::units::bytes_exact(free)
        )),
        _ => Ok(()),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the probe command's steps in order (resolve, lay out, run, write, print), each next to its error"
)]
pub fn run(a: ProbeArgs) -> anyhow::Result<i32> {
    // A job file with several jobs runs as fio runs them (jobset.rs).
    let mut sem = jobfile::JobSem::default();
    let mut file_shown = None;
    if let Some(f) = &a.job_file {
        let set = jobfile::load_set(f)?;
        if set.sections.len() > 1 {
            return jobset::run(&a, f, set);
        }
        sem = set.sections[0].sem.clone();
        file_shown = Some((set.global_shown.clone(), set.sections[0].shown.clone()));
    }
    let mut r = resolve(&a)?;
    // fio drops a buffered file's cache on each new pass of a time-based job too.
    r.spec.timing.loop_invalidate = sem.invalidate && !r.spec.direct;
    if a.show_job {
        print!("{}", jobfile::render(&r));
        return Ok(0);
    }
    let phase = format::phase_from_env().map_err(|e| usage!("{e:#}"))?;
    let mut warnings = vec![];
    if r.spec.engine == Engine::IoUring {
        if let Err(e) = engine::uring_available() {
            if r.engine_insisted {
                return Err(anyhow::Error::new(e));
            }
            let w = format!(
                "{e}; running with --ioengine sync at --iodepth 1 instead (queue depth {} was asked)",
                r.spec.iodepth
            );
            eprintln!("warning: {w}");
            warnings.push(w);
            r.spec.engine = Engine::Sync;
            r.spec.iodepth = 1;
        }
    }
    let mut tgt = target_of(&r)?;
    let mut more = more_targets(&r)?;
    // After the checks: a refused target is one line.
    for n in &r.notes {
        eprintln!("note: {n}");
    }
    if let Some(n) = default_note(&a) {
        eprintln!("note: {n}");
    }
    if r.spec.direct && tgt.fstype == "tmpfs" {
        let w = format!(
            "{} is on tmpfs: O_DIRECT there copies memory, no disk is measured",
            tgt.path.display()
        );
        eprintln!("warning: {w}");
        warnings.push(w);
    }

    // Where per-window rows go, when run inside `diskpulse record -- ...`.
    let clock = Clock::from_env().unwrap_or_else(Clock::start);
    let run_dir = std::env::var_os("DISKPULSE_RUN_DIR").map(PathBuf::from);
    let mut csv = match &run_dir {
        Some(d) => {
            // Windows on the recording's grid: probe.csv rows join rates.csv rows.
            r.spec.grid_zero_ns = Some(clock.zero_monotonic_ns());
            Some(csv::ProbeCsv::create(d, clock, &r.spec, phase)?)
        }
        None => None,
    };

    let stop = stop_flag()?;
    if !lay_out(&mut tgt, r.spec.direct, &stop)? {
        return Ok(130);
    }
    for t in &mut more {
        if !lay_out(t, r.spec.direct, &stop)? {
            return Ok(130);
        }
    }
    if !jobset::start_delay(sem.startdelay, &stop) {
        return Ok(130);
    }
    if sem.invalidate {
        jobset::invalidate(&tgt);
        more.iter().for_each(jobset::invalidate);
    }
    let disk_names = devices_of(&tgt);
    let disks_before = disk_counters(&disk_names);
    let disks_t0 = collectors::clock::monotonic_ns();
    let mut info = RunInfo {
        target_path: tgt.path.clone(),
        target_kind: match &tgt.kind {
            TargetKind::NewFile => "file (created, removed afterwards)".into(),
            TargetKind::ExistingFile { .. } => "file (existing, kept)".into(),
            TargetKind::BlockDevice { name } => format!("block device {name}"),
        } + &match more.len() {
            0 => String::new(),
            n => format!(
                "; and {n} more file(s) of the job, {} MiB in all",
                (tgt.size + more.iter().map(|t| t.size).sum::<u64>()) >> 20
            ),
        },
        fstype: tgt.fstype.clone(),
        size: tgt.size,
        warnings,
        clock,
        recorded_in: run_dir.clone(),
        start_wall: chrono::Local::now(),
        disks: vec![],
        file_shown,
    };

    let mut csv_error = None;
    let all: Vec<&target::Target> = std::iter::once(&tgt).chain(&more).collect();
    let result = engine::run_files(&r.spec, &all, &stop, &mut |row| {
        if let Some(c) = csv.as_mut() {
            if let Err(e) = c.window(row) {
                csv_error.get_or_insert(e);
            }
        }
    });
    if let Some(c) = csv.take() {
        c.finish()?;
    }
    if let Some(e) = csv_error {
        return Err(e.context("writing probe.hlog"));
    }
    info.disks = disk_deltas(&disk_names, disks_before, disks_t0);
    let mut result = match result {
        Ok(res) => res,
        Err(e) => return Err(refusal_is_usage(e)),
    };
    if let Some(d) = &run_dir {
        // Time 0 of --write-lat-log's files, and of the probe, on the run clock.
        let events = crate::recording::EventLog::append(&d.join("events.jsonl"), clock)?;
        events.event_at(
            result.start_ns.saturating_sub(clock.zero_monotonic_ns()),
            format::events::Body::ProbeStart(format::events::ProbeStart {
                phase,
                ramp_ns: r.spec.ramp_ns,
                lat_log: r.spec.lat_log.as_ref().map(|p| p.display().to_string()),
            }),
        );
    }
    result.interrupted = stop.load(Ordering::SeqCst) && result.error().is_none();
    if r.group_reporting {
        output::group_jobs(&mut result);
    }
    let json = output::fio_json(&r, &info, &result);
    if let Some(d) = &run_dir {
        let p = d.join("probe.json");
        format::atomic::write(&p, json.as_bytes())?;
    }
    if r.json {
        println!("{json}");
    } else {
        print!("{}", summary::human(&r, &info, &result));
    }
    drop(tgt);
    if let Some(e) = result.jobs.iter_mut().find_map(|j| j.error.take()) {
        return Err(anyhow::Error::new(e)
            .context("the summary above has what was measured before the error"));
    }
    if result.interrupted {
        eprintln!("interrupted: the summary above covers the time until Ctrl-C");
        return Ok(130);
    }
    Ok(0)
}

/// The run's stop flag: the first Ctrl-C ends the run cleanly (in-flight I/O completes,
/// the summary is printed); a second one exits at once, for a device that never
/// completes its I/O.
fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
    }
    crate::signals::stop_on_signals(&stop)?;
    Ok(stop)
}

/// Lays out what the target still needs; false when interrupted (nothing measured).
fn lay_out(tgt: &mut target::Target, direct: bool, stop: &AtomicBool) -> anyhow::Result<bool> {
    if let Some((from, to)) = tgt.layout {
        let t = std::time::Instant::now();
        // fill_device's empty layout only creates the file: nothing to say.
        let say = to > from;
        if say {
            eprintln!(
                "laying out {} ({} MiB{})",
                tgt.path.display(),
                (to - from) >> 20,
                if from > 0 { ", extending" } else { "" }
            );
        }
        if let Err(e) = tgt.lay_out(direct, stop) {
            return Err(anyhow::Error::new(e));
        }
        if stop.load(Ordering::SeqCst) {
            eprintln!("interrupted while laying out the file: nothing was measured");
            return Ok(false);
        }
        if say {
            eprintln!("laid out in {:.1}s", t.elapsed().as_secs_f64());
        }
    }
    Ok(true)
}

/// The devices' counter deltas since `before` (read at `t0_ns`), for fio's `disk_util`.
fn disk_deltas(
    names: &[String],
    before: Vec<Option<collectors::diskstats::DiskCounters>>,
    t0_ns: u64,
) -> Vec<DiskDelta> {
    let elapsed_ns = collectors::clock::monotonic_ns() - t0_ns;
    let mut out = vec![];
    for ((name, a), b) in names.iter().zip(before).zip(disk_counters(names)) {
        if let (Some(a), Some(b)) = (a, b) {
            let n = a.nfields.min(b.nfields) as usize;
            out.push(DiskDelta {
                name: name.clone(),
                d: (0..n)
                    .map(|i| collectors::diskstats::counter_delta(i, a.f[i], b.f[i]))
                    .collect(),
                elapsed_ns,
            });
        }
    }
    out
}

/// Where probe's flag-only default differs from fio's (a job file takes fio's).
fn default_note(a: &ProbeArgs) -> Option<String> {
    (a.job_file.is_none() && a.direct.is_none() && a.preset.is_none()).then(|| {
        "no --direct: diskpulse probe's default is O_DIRECT (--direct=1); fio's is buffered (--direct=0), which a job file gets".to_string()
    })
}

fn refusal_is_usage(e: ProbeError) -> anyhow::Error {
    if e.is_refusal() {
        usage!("{e}")
    } else {
        anyhow::Error::new(e)
    }
}
