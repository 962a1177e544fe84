//! A fio job file with several job sections, run as fio runs it.
//!
//! What must stay true (fio 3.33's `backend.c`/`init.c`, decision 0089):
//! - jobs run side by side unless a job has `stonewall` (`wait_for_previous`): it waits
//!   until every earlier job has ended, and the jobs after it start with it;
//! - `groupid` starts at 0 and goes up by one at each job with `stonewall` or `new_group`
//!   (after the first); `numjobs=N` copies a job N times (one `jobs[]` entry each), the
//!   copies start with it and never start a group;
//! - `group_reporting` sums the jobs of one group that set it into one entry, named after
//!   the first;
//! - `wait_for=NAME` starts a job when the earlier job NAME has ended; `startdelay` waits
//!   before starting; `exitall` ends the jobs of its group when it ends; `invalidate`
//!   (default 1) drops the file's page cache before the job starts;
//! - each job runs [`collectors::probe::run`] on its own thread with its own stop flag;
//!   Ctrl-C sets them all. Jobs that name one file share one target (laid out once, with
//!   the largest size any of them asks).
//!
//! Inside `diskpulse record`, each job appends its own rows to probe.csv (as overlapping
//! phases do); probe.json's `jobs[]` and `diskpulse.jobs[]` tell the jobs apart.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use collectors::clock::Clock;
use collectors::probe::stats::{READ, WRITE};
use collectors::probe::target::{Target, TargetKind};
use collectors::probe::{self as engine, Engine, JobResult, ProbeResult};
use format::usage;

use super::args::Resolved;
use super::jobfile::{self, JobFile, Section};
use super::output::{self, obj, s, J};
use super::{ProbeArgs, RunInfo};

/// A job section, resolved and placed.
struct Job<'a> {
    sec: &'a Section,
    r: Resolved,
    groupid: u64,
    /// Index into the run's targets.
    target: usize,
    /// The earlier job it waits for.
    wait_for: Option<usize>,
}

/// What running a job gave: its result, or why it did not start.
#[derive(Default)]
struct Ran {
    res: Option<ProbeResult>,
    error: Option<anyhow::Error>,
}

/// Where rows and events go inside `diskpulse record`.
struct Recording {
    dir: PathBuf,
    clock: Clock,
    phase: Option<u32>,
}

/// Sleeps `d` unless `stop` is set first; false when it was.
pub(super) fn start_delay(d: Duration, stop: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + d;
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = std::time::Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

/// fio's `invalidate=1`: drops the target's clean cached pages before a job, as fio does
/// (`posix_fadvise(DONTNEED)` on a file, `BLKFLSBUF` on a block device). Dirty pages
/// stay (as in fio; our layout ends in an fsync, as fio's `create_fsync=1`, so a laid-out
/// file has none). Best effort, as in fio: a failure leaves a warm cache, nothing else.
pub(super) fn invalidate(t: &Target) {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(&t.path) else {
        return;
    };
    let fd = f.as_raw_fd();
    // SAFETY: fd is open for the duration of the call; neither call touches memory.
    unsafe {
        match t.kind {
            // BLKFLSBUF is _IO(0x12, 97).
            TargetKind::BlockDevice { .. } => {
                libc::ioctl(fd, 0x1261, 0);
            }
            _ => {
                libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// Every section resolved (flags beside the file on top), groups and waits found.
fn plan<'a>(cli: &ProbeArgs, path: &Path, set: &'a JobFile) -> anyhow::Result<Vec<Job<'a>>> {
    let mut jobs = vec![];
    let mut gid = 0;
    for (i, sec) in set.sections.iter().enumerate() {
        let r = jobfile::resolve_section(path, sec, cli)?;
        if r.files.len() > 1 {
            return Err(usage!(
                "{} [{}]: several files per job (nrfiles, filename=a:b) in a file of several jobs are not run by diskpulse probe yet; run that job in a file of its own",
                path.display(),
                sec.name
            ));
        }
        if i > 0 && (sec.sem.stonewall || sec.sem.new_group) {
            gid += 1;
        }
        let wait_for = match &sec.sem.wait_for {
            None => None,
            Some((name, at)) => Some(
                set.sections[..i]
                    .iter()
                    .position(|s| &s.name == name)
                    .ok_or_else(|| {
                        usage!(
                            "{at}: wait_for={name}: no job [{name}] before [{}]; wait_for names an earlier job section",
                            sec.name
                        )
                    })?,
            ),
        };
        let mut r = r;
        // fio drops a buffered file's cache on each new pass of a time-based job too.
        r.spec.timing.loop_invalidate = sec.sem.invalidate && !r.spec.direct;
        jobs.push(Job {
            sec,
            r,
            groupid: gid,
            target: 0,
            wait_for,
        });
    }
    Ok(jobs)
}

/// One target per file named: whether any job writes it, the largest size asked.
fn targets(jobs: &mut [Job]) -> anyhow::Result<Vec<Target>> {
    let mut names: Vec<PathBuf> = vec![];
    for j in jobs.iter_mut() {
        j.target = match names.iter().position(|n| *n == j.r.filename) {
            Some(i) => i,
            None => {
                names.push(j.r.filename.clone());
                names.len() - 1
            }
        };
    }
    let mut out = vec![];
    for (i, _) in names.iter().enumerate() {
        let users: Vec<&Job> = jobs.iter().filter(|j| j.target == i).collect();
        let writes = users.iter().any(|j| j.r.spec.modifies());
        let size = users.iter().filter_map(|j| j.r.size).max();
        out.push(super::target_with(&users[0].r, writes, size)?);
    }
    Ok(out)
}

/// Runs one job on its thread: waits (wait_for, startdelay), invalidates, runs.
fn one_job(
    k: usize,
    jobs: &[Job],
    tgt: &Target,
    stops: &[AtomicBool],
    done: &[AtomicBool],
    rec: Option<&Recording>,
) -> Ran {
    let j = &jobs[k];
    let stop = &stops[k];
    if let Some(w) = j.wait_for {
        while !done[w].load(Ordering::SeqCst) {
            if stop.load(Ordering::SeqCst) {
                return Ran::default();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    if !start_delay(j.sec.sem.startdelay, stop) {
        return Ran::default();
    }
    if j.sec.sem.invalidate {
        invalidate(tgt);
    }
    let mut csv = match rec {
        Some(r) => match super::csv::ProbeCsv::create(&r.dir, r.clock, &j.r.spec, r.phase) {
            Ok(c) => Some(c),
            Err(e) => {
                return Ran {
                    res: None,
                    error: Some(e),
                }
            }
        },
        None => None,
    };
    let mut csv_error = None;
    let res = engine::run(&j.r.spec, tgt, stop, &mut |row| {
        if let Some(c) = csv.as_mut() {
            if let Err(e) = c.window(row) {
                csv_error.get_or_insert(e);
            }
        }
    });
    let mut error = csv.take().and_then(|c| c.finish().err());
    if let Some(e) = csv_error {
        error.get_or_insert(e.context("writing probe.hlog"));
    }
    match res {
        Ok(res) => {
            if let Some(r) = rec {
                if let Ok(events) =
                    crate::recording::EventLog::append(&r.dir.join("events.jsonl"), r.clock)
                {
                    events.event_at(
                        res.start_ns.saturating_sub(r.clock.zero_monotonic_ns()),
                        format::events::Body::ProbeStart(format::events::ProbeStart {
                            phase: r.phase,
                            ramp_ns: j.r.spec.ramp_ns,
                            lat_log: j.r.spec.lat_log.as_ref().map(|p| p.display().to_string()),
                        }),
                    );
                }
            }
            Ran {
                res: Some(res),
                error,
            }
        }
        Err(e) => Ran {
            res: None,
            error: Some(super::refusal_is_usage(e)),
        },
    }
}

/// Runs the jobs: each stonewall's stretch side by side, the stretches in order.
fn execute(
    jobs: &[Job],
    targets: &[Target],
    stop: &AtomicBool,
    rec: Option<&Recording>,
) -> Vec<Ran> {
    let n = jobs.len();
    let stops: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let done: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let ran: Vec<Mutex<Ran>> = (0..n).map(|_| Mutex::new(Ran::default())).collect();
    let mut i = 0;
    while i < n && !stop.load(Ordering::SeqCst) {
        let end = (i + 1..n).find(|&k| jobs[k].sec.sem.stonewall).unwrap_or(n);
        std::thread::scope(|s| {
            for k in i..end {
                let (stops, done, ran) = (&stops, &done, &ran);
                let tgt = &targets[jobs[k].target];
                std::thread::Builder::new()
                    .name(format!("probe-set{k}"))
                    .spawn_scoped(s, move || {
                        let out = one_job(k, jobs, tgt, stops, done, rec);
                        *ran[k].lock().expect("not poisoned") = out;
                        done[k].store(true, Ordering::SeqCst);
                        if jobs[k].sec.sem.exitall {
                            for (m, st) in stops.iter().enumerate().take(end).skip(i) {
                                if jobs[m].groupid == jobs[k].groupid {
                                    st.store(true, Ordering::SeqCst);
                                }
                            }
                        }
                    })
                    .expect("spawn a job thread");
            }
            // Ctrl-C reaches every running job.
            while !(i..end).all(|k| done[k].load(Ordering::SeqCst)) {
                if stop.load(Ordering::SeqCst) {
                    stops[i..end]
                        .iter()
                        .for_each(|st| st.store(true, Ordering::SeqCst));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        i = end;
    }
    ran.into_iter()
        .map(|m| m.into_inner().expect("not poisoned"))
        .collect()
}

/// One `jobs[]` entry: a job copy, or a group summed (`group_reporting`).
struct Entry {
    job: usize,
    /// The last job summed in: fio shows its `job options` for the group.
    last: usize,
    /// Jobs summed in (fio's `jobs=` in the summary's heading).
    n: usize,
    groupid: u64,
    parts: Vec<JobResult>,
    start_ns: u64,
    meas_ns: u64,
    end_ns: u64,
}

/// The entries fio's JSON would list, in order.
fn entries(jobs: &[Job], ran: &mut [Ran]) -> Vec<Entry> {
    let mut out: Vec<Entry> = vec![];
    for (k, r) in ran.iter_mut().enumerate() {
        let Some(res) = r.res.as_mut() else {
            continue;
        };
        let gr = jobs[k].r.group_reporting;
        for jr in std::mem::take(&mut res.jobs) {
            let g = jobs[k].groupid;
            match out.last_mut() {
                Some(e) if gr && e.groupid == g && jobs[e.job].r.group_reporting => {
                    e.parts.push(jr);
                    e.last = k;
                    e.n += 1;
                    e.start_ns = e.start_ns.min(res.start_ns);
                    e.meas_ns = e.meas_ns.min(res.meas_ns);
                    e.end_ns = e.end_ns.max(res.end_ns);
                }
                _ => out.push(Entry {
                    job: k,
                    last: k,
                    n: 1,
                    groupid: g,
                    parts: vec![jr],
                    start_ns: res.start_ns,
                    meas_ns: res.meas_ns,
                    end_ns: res.end_ns,
                }),
            }
        }
    }
    out
}

fn bytes_per_s(j: &JobResult) -> f64 {
    let secs = j.runtime_ns.max(1) as f64 / 1e9;
    (j.totals.dir[READ].bytes + j.totals.dir[WRITE].bytes) as f64 / secs
}

/// fio's binary and decimal rates, like `86.0MiB/s (90.2MB/s)`: as fio's `num2str`, the
/// unit goes up while the number has more than 4 digits, then 3 significant digits.
fn rate_pair(bps: f64) -> (String, String) {
    let one = |v: f64, base: f64, units: [&str; 4]| {
        let mut v = v;
        let mut u = 0;
        while v >= 10_000.0 && u < 3 {
            v /= base;
            u += 1;
        }
        if v >= 100.0 {
            format!("{v:.0}{}", units[u])
        } else if v >= 10.0 {
            format!("{v:.1}{}", units[u])
        } else {
            format!("{v:.2}{}", units[u])
        }
    };
    (
        one(bps, 1024.0, ["B/s", "KiB/s", "MiB/s", "GiB/s"]),
        one(bps, 1000.0, ["B/s", "kB/s", "MB/s", "GB/s"]),
    )
}

fn size_pair(b: u64) -> (String, String) {
    let (a, d) = rate_pair(b as f64);
    (
        a.trim_end_matches("/s").into(),
        d.trim_end_matches("/s").into(),
    )
}

/// fio's "Run status group N (all jobs):" block.
fn run_status(group: u64, es: &[(&Entry, &JobResult)]) -> String {
    let mut o = format!("\nRun status group {group} (all jobs):\n");
    for (dir, label) in [(READ, "READ"), (WRITE, "WRITE")] {
        let per: Vec<(u64, u64)> = es
            .iter()
            .map(|(_, j)| (j.fio_dir(dir).bytes, j.fio_runtime_ns(dir)))
            .filter(|(b, _)| *b > 0)
            .collect();
        if per.is_empty() {
            continue;
        }
        let total: u64 = per.iter().map(|p| p.0).sum();
        let max_rt = per.iter().map(|p| p.1).max().unwrap_or(1).max(1);
        let min_rt = per.iter().map(|p| p.1).min().unwrap_or(1).max(1);
        let bw = |b: u64, rt: u64| b as f64 / (rt as f64 / 1e9);
        let rates: Vec<f64> = per.iter().map(|&(b, rt)| bw(b, rt.max(1))).collect();
        let lo = rates.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().cloned().fold(0.0, f64::max);
        let (agg_b, agg_d) = rate_pair(bw(total, max_rt));
        let (lo_b, lo_d) = rate_pair(lo);
        let (hi_b, hi_d) = rate_pair(hi);
        let (io_b, io_d) = size_pair(total);
        o.push_str(&format!(
            "{label:>7}: bw={agg_b} ({agg_d}), {lo_b}-{hi_b} ({lo_d}-{hi_d}), io={io_b} ({io_d}), run={}-{}msec\n",
            min_rt / 1_000_000,
            max_rt / 1_000_000
        ));
    }
    o
}

/// A job file's jobs, run as fio runs them; the exit code as `probe`'s.
#[allow(
    clippy::too_many_lines,
    reason = "the job set's steps in order (plan, lay out, run, report), each next to its error"
)]
pub(super) fn run(cli: &ProbeArgs, path: &Path, set: JobFile) -> anyhow::Result<i32> {
    let mut jobs = plan(cli, path, &set)?;
    if cli.show_job {
        for j in &jobs {
            print!("{}", jobfile::render(&j.r));
        }
        return Ok(0);
    }
    let phase = format::phase_from_env().map_err(|e| usage!("{e:#}"))?;
    let mut warnings = vec![];
    for j in jobs
        .iter_mut()
        .filter(|j| j.r.spec.engine == Engine::IoUring)
    {
        if let Err(e) = engine::uring_available() {
            if j.r.engine_insisted {
                return Err(anyhow::Error::new(e));
            }
            let w = format!(
                "[{}]: {e}; running with --ioengine sync at --iodepth 1 instead",
                j.sec.name
            );
            eprintln!("warning: {w}");
            warnings.push(w);
            j.r.spec.engine = Engine::Sync;
            j.r.spec.iodepth = 1;
        }
    }
    let mut tgts = targets(&mut jobs)?;
    // After the checks: a refused target is one line.
    // A note about a [global] line is said once, not once per job.
    let mut said: Vec<&String> = vec![];
    for n in jobs.iter().flat_map(|j| &j.r.notes) {
        if !said.contains(&n) {
            eprintln!("note: {n}");
            said.push(n);
        }
    }
    let clock = Clock::from_env().unwrap_or_else(Clock::start);
    let run_dir = std::env::var_os("DISKPULSE_RUN_DIR").map(PathBuf::from);
    if run_dir.is_some() {
        for j in jobs.iter_mut() {
            j.r.spec.grid_zero_ns = Some(clock.zero_monotonic_ns());
        }
    }
    let stop = super::stop_flag()?;
    for (i, t) in tgts.iter_mut().enumerate() {
        let direct = jobs.iter().any(|j| j.target == i && j.r.spec.direct);
        if !super::lay_out(t, direct, &stop)? {
            return Ok(130);
        }
    }
    let mut disk_names: Vec<String> = vec![];
    for t in &tgts {
        for d in super::devices_of(t) {
            if !disk_names.contains(&d) {
                disk_names.push(d);
            }
        }
    }
    let disks_before = super::disk_counters(&disk_names);
    let disks_t0 = collectors::clock::monotonic_ns();
    let start_wall = chrono::Local::now();
    let rec = run_dir.as_ref().map(|d| Recording {
        dir: d.clone(),
        clock,
        phase,
    });
    let mut ran = execute(&jobs, &tgts, &stop, rec.as_ref());
    let disks = super::disk_deltas(&disk_names, disks_before, disks_t0);
    let interrupted = stop.load(Ordering::SeqCst);
    let info_of = |j: &Job| {
        let t = &tgts[j.target];
        RunInfo {
            target_path: t.path.clone(),
            target_kind: match &t.kind {
                TargetKind::NewFile => "file (created, removed afterwards)".into(),
                TargetKind::ExistingFile { .. } => "file (existing, kept)".into(),
                TargetKind::BlockDevice { name } => format!("block device {name}"),
            },
            fstype: t.fstype.clone(),
            size: t.size,
            warnings: vec![],
            clock,
            recorded_in: None,
            start_wall,
            disks: vec![],
            file_shown: None,
        }
    };
    let mut list: Vec<(Entry, JobResult)> = entries(&jobs, &mut ran)
        .into_iter()
        .map(|mut e| {
            let parts = std::mem::take(&mut e.parts);
            let jr = if parts.len() == 1 {
                parts.into_iter().next().expect("one")
            } else {
                output::merge_jobs(parts)
            };
            (e, jr)
        })
        .collect();
    let z = clock.zero_monotonic_ns();
    let mut json_jobs = vec![];
    let mut ours = vec![];
    for (e, jr) in &list {
        let j = &jobs[e.job];
        let group_bw: f64 = list
            .iter()
            .filter(|(o, _)| o.groupid == e.groupid)
            .map(|(_, x)| bytes_per_s(x))
            .sum();
        let elapsed_s = e.end_ns.saturating_sub(e.start_ns).div_ceil(1_000_000_000);
        let options = J::Obj(
            jobs[e.last]
                .sec
                .shown
                .iter()
                .map(|(k, v)| (k.clone(), s(v.clone())))
                .collect(),
        );
        let info = info_of(j);
        json_jobs.push(output::job_entry(
            &j.r, jr, e.groupid, elapsed_s, group_bw, options,
        ));
        ours.push(obj(vec![
            ("jobname", s(j.r.name.clone())),
            ("groupid", J::U(e.groupid)),
            ("engine", s(j.r.spec.engine.name())),
            ("direct", J::U(j.r.spec.direct as u64)),
            ("target", s(info.target_path.display().to_string())),
            ("start_t_ns", J::U(e.start_ns.saturating_sub(z))),
            ("measure_t_ns", J::U(e.meas_ns.saturating_sub(z))),
            ("end_t_ns", J::U(e.end_ns.saturating_sub(z))),
        ]));
    }
    let first_error = ran
        .iter()
        .find_map(|r| r.error.as_ref().map(|e| format!("{e:#}")))
        .or_else(|| {
            list.iter()
                .find_map(|(_, j)| j.error.as_ref().map(|e| e.to_string()))
        });
    let doc = obj(vec![
        (
            "fio version",
            s(format!("diskpulse-{}", env!("CARGO_PKG_VERSION"))),
        ),
        ("timestamp", J::U(start_wall.timestamp() as u64)),
        ("timestamp_ms", J::U(start_wall.timestamp_millis() as u64)),
        (
            "time",
            s(start_wall.format("%a %b %e %H:%M:%S %Y").to_string()),
        ),
        (
            "global options",
            J::Obj(
                set.global_shown
                    .iter()
                    .map(|(k, v)| (k.clone(), s(v.clone())))
                    .collect(),
            ),
        ),
        (
            "diskpulse",
            obj(vec![
                ("version", s(env!("CARGO_PKG_VERSION"))),
                ("clock_zero_monotonic_ns", J::U(z)),
                ("jobs", J::Arr(ours)),
                (
                    "recorded_in",
                    run_dir
                        .as_ref()
                        .map(|p| s(p.display().to_string()))
                        .unwrap_or(J::Null),
                ),
                (
                    "warnings",
                    J::Arr(warnings.iter().map(|w| s(w.clone())).collect()),
                ),
                ("interrupted", J::U(interrupted as u64)),
                ("error", first_error.map(s).unwrap_or(J::Null)),
            ]),
        ),
        ("jobs", J::Arr(json_jobs)),
        (
            "disk_util",
            J::Arr(disks.iter().map(output::disk_util).collect()),
        ),
    ]);
    let mut json = String::new();
    doc.write(&mut json, 0);
    if let Some(d) = &run_dir {
        format::atomic::write(&d.join("probe.json"), json.as_bytes())?;
    }
    if jobs[0].r.json {
        println!("{json}");
    } else {
        print!("{}", human(&jobs, &mut list, &info_of, &disks));
        if let Some(d) = &run_dir {
            println!("per-window rows: {}", d.join("probe.csv").display());
        }
    }
    drop(tgts);
    if let Some(e) = ran.iter_mut().find_map(|r| r.error.take()) {
        return Err(e);
    }
    if let Some(e) = list.iter_mut().find_map(|(_, j)| j.error.take()) {
        return Err(anyhow::Error::new(e)
            .context("the summary above has what was measured before the error"));
    }
    if interrupted {
        eprintln!("interrupted: the summary above covers the time until Ctrl-C");
        return Ok(130);
    }
    Ok(0)
}

/// The human summary: each entry as `probe` prints a job, then fio's run status lines.
fn human(
    jobs: &[Job],
    list: &mut [(Entry, JobResult)],
    info_of: &dyn Fn(&Job) -> RunInfo,
    disks: &[super::DiskDelta],
) -> String {
    let mut o = String::new();
    for (e, jr) in list.iter_mut() {
        let j = &jobs[e.job];
        o.push_str(&format!(
            "{}: (groupid={}, jobs={}): err={}\n",
            j.r.name,
            e.groupid,
            e.n,
            if jr.error.is_some() { 1 } else { 0 }
        ));
        if let Some(d) = &j.sec.sem.description {
            o.push_str(&format!("  Description  : [{d}]\n"));
        }
        // The summary reads a ProbeResult: lend it this entry's job.
        let blank = output::merge_jobs(vec![]);
        let res = ProbeResult {
            jobs: vec![std::mem::replace(jr, blank)],
            start_ns: e.start_ns,
            meas_ns: e.meas_ns,
            end_ns: e.end_ns,
            process_usage: Default::default(),
            interrupted: false,
        };
        o.push_str(&super::summary::human(&j.r, &info_of(j), &res));
        *jr = res.jobs.into_iter().next().expect("lent back");
    }
    let mut groups: Vec<u64> = list.iter().map(|(e, _)| e.groupid).collect();
    groups.dedup();
    for g in groups {
        let es: Vec<(&Entry, &JobResult)> = list
            .iter()
            .filter(|(e, _)| e.groupid == g)
            .map(|(e, j)| (e, j))
            .collect();
        o.push_str(&run_status(g, &es));
    }
    if !disks.is_empty() {
        use collectors::diskstats as ds;
        o.push_str("\nDisk stats (read/write):\n");
        for d in disks {
            let g = |i: usize| d.d.get(i).copied().flatten().unwrap_or(0);
            o.push_str(&format!(
                "  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}\n",
                d.name,
                g(ds::F_READS),
                g(ds::F_WRITES),
                g(ds::F_READS_MERGED),
                g(ds::F_WRITES_MERGED),
                g(ds::F_READ_MS),
                g(ds::F_WRITE_MS),
                g(ds::F_WEIGHTED_MS)
            ));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_print_as_fios() {
        assert_eq!(
            rate_pair(90.2e6),
            ("86.0MiB/s".to_string(), "90.2MB/s".to_string())
        );
        assert_eq!(size_pair(2 << 20), ("2048KiB".into(), "2097kB".into()));
        assert_eq!(rate_pair(836.0e6).0, "797MiB/s");
    }
}
