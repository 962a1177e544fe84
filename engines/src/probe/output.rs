//! The probe's JSON, in the shape of fio's `--output-format=json` so fio tooling reads
//! it (the human summary is `summary.rs`).
//!
//! JSON: the field names, nesting and number formatting of fio 3.33 (`"key" : value`,
//! floats printed with six decimals, percentile keys like `"99.000000"`, `bw` in KiB/s,
//! `runtime` in ms, latencies in ns). What differs, on purpose:
//! - `"fio version"` is `diskpulse-<version>`: no fio wrote this;
//! - `read`/`write` carry `lat_co_ns` (latency from the intended start on the rate
//!   schedule: coordinated omission corrected) after fio's fields;
//! - `sync.total_ios` is the number of syncs (fio 3.33 prints 0 there and the count in
//!   `sync.lat_ns.N`; both are right here);
//! - `iops_*`/`bw_*` samples are per `--window` (fio samples every 500 ms);
//! - `latency_ns/us/ms` are shares of completions by clat (reads, writes and trims together);
//! - `disk_util` lists every device `diskpulse record --path` would find under the target
//!   (a loop device and the disk under its backing file, btrfs members), with counter
//!   deltas from `/sys/class/block/X/stat` over the run (fio lists the target's device);
//! - `iodepth_level`, `iodepth_submit`, `iodepth_complete` are not produced;
//! - a top-level `"diskpulse"` object says how the numbers were taken (engine, fallback,
//!   window, rate, target, run clock times, whole-process CPU, error).

use collectors::directio::FIO_PERCENTILES;
use collectors::probe::stats::{DirStats, Moments, DIRS, READ, TRIM, WRITE};
use collectors::probe::{Engine, JobResult, ProbeError, ProbeResult};
use hdrhistogram::Histogram;

use super::{Resolved, RunInfo};

/// A JSON value printed the way fio prints it.
#[derive(Debug, Clone)]
pub(crate) enum J {
    Obj(Vec<(String, J)>),
    Arr(Vec<J>),
    Str(String),
    U(u64),
    I(i64),
    /// Printed with six decimals, as fio's `%f`.
    F(f64),
    Null,
}

pub(super) fn obj(v: Vec<(&str, J)>) -> J {
    J::Obj(v.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

pub(super) fn s(v: impl Into<String>) -> J {
    J::Str(v.into())
}

impl J {
    pub fn write(&self, out: &mut String, indent: usize) {
        let pad = |out: &mut String, n: usize| out.extend(std::iter::repeat_n(' ', n));
        match self {
            J::Obj(kv) => {
                out.push_str("{\n");
                for (i, (k, v)) in kv.iter().enumerate() {
                    pad(out, indent + 2);
                    out.push_str(&serde_json::to_string(k).expect("string"));
                    out.push_str(" : ");
                    v.write(out, indent + 2);
                    if i + 1 < kv.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, indent);
                out.push('}');
            }
            J::Arr(items) => {
                out.push_str("[\n");
                for (i, v) in items.iter().enumerate() {
                    pad(out, indent + 2);
                    v.write(out, indent + 2);
                    if i + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, indent);
                out.push(']');
            }
            J::Str(v) => out.push_str(&serde_json::to_string(v).expect("string")),
            J::U(v) => out.push_str(&v.to_string()),
            J::I(v) => out.push_str(&v.to_string()),
            J::F(v) if v.is_finite() => out.push_str(&format!("{v:.6}")),
            J::F(_) | J::Null => out.push_str("null"),
        }
    }
}

fn moments(m: &Moments) -> Vec<(&'static str, J)> {
    vec![
        ("min", J::U(if m.n == 0 { 0 } else { m.min })),
        ("max", J::U(m.max)),
        ("mean", J::F(m.mean())),
        ("stddev", J::F(m.stddev())),
        ("N", J::U(m.n)),
    ]
}

fn percentiles(h: &Histogram<u64>) -> J {
    J::Obj(
        FIO_PERCENTILES
            .iter()
            .map(|&p| (format!("{p:.6}"), J::U(h.value_at_percentile(p))))
            .collect(),
    )
}

/// `{min,max,mean,stddev,N,percentile}` from exact moments and a histogram.
fn lat_block(m: &Moments, h: &Histogram<u64>) -> J {
    let mut v = moments(m);
    if m.n > 0 {
        v.push(("percentile", percentiles(h)));
    }
    obj(v)
}

/// `lat_co_ns`: only a histogram (3 significant digits) backs it.
fn hist_block(h: &Histogram<u64>) -> J {
    let n = h.len();
    let mut v = vec![
        ("min", J::U(if n == 0 { 0 } else { h.min() })),
        ("max", J::U(h.max())),
        ("mean", J::F(if n == 0 { 0.0 } else { h.mean() })),
        ("stddev", J::F(if n == 0 { 0.0 } else { h.stdev() })),
        ("N", J::U(n)),
    ];
    if n > 0 {
        v.push(("percentile", percentiles(h)));
    }
    obj(v)
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() < 2 {
        0.0
    } else {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    (mean, sd)
}

fn dir_block(d: &DirStats, runtime_ns: u64, j: &JobResult, dir: usize, group_bw: f64) -> J {
    let active = d.ios > 0;
    let rt_ns = if active { runtime_ns.max(1) } else { 0 };
    let secs = rt_ns as f64 / 1e9;
    let iops = if active { d.ios as f64 / secs } else { 0.0 };
    let bw_bytes = if active {
        (d.bytes as f64 / secs) as u64
    } else {
        0
    };
    let samples: Vec<(f64, f64)> = j
        .samples
        .iter()
        .map(|s| {
            let w = s.window_ns as f64 / 1e9;
            (s.bytes[dir] as f64 / w / 1024.0, s.ios[dir] as f64 / w)
        })
        .collect();
    // The windows count the workload's own I/O (a verify read-back has none of its own).
    let (bw_s, iops_s): (Vec<f64>, Vec<f64>) = if active && j.totals.dir[dir].ios > 0 {
        samples.into_iter().unzip()
    } else {
        (vec![], vec![])
    };
    let (bw_mean, bw_dev) = mean_sd(&bw_s);
    let (iops_mean, iops_sd) = mean_sd(&iops_s);
    let minmax = |v: &[f64]| {
        (
            v.iter().cloned().fold(f64::INFINITY, f64::min),
            v.iter().cloned().fold(0.0, f64::max),
        )
    };
    let (bw_min, bw_max) = if bw_s.is_empty() {
        (0.0, 0.0)
    } else {
        minmax(&bw_s)
    };
    let (iops_min, iops_max) = if iops_s.is_empty() {
        (0.0, 0.0)
    } else {
        minmax(&iops_s)
    };
    obj(vec![
        ("io_bytes", J::U(d.bytes)),
        ("io_kbytes", J::U(d.bytes / 1024)),
        ("bw_bytes", J::U(bw_bytes)),
        ("bw", J::U(bw_bytes / 1024)),
        ("iops", J::F(iops)),
        ("runtime", J::U((rt_ns + 500_000) / 1_000_000)),
        ("total_ios", J::U(d.ios)),
        ("short_ios", J::U(d.short_ios)),
        ("drop_ios", J::U(0)),
        ("slat_ns", obj(moments(&d.slat_m))),
        ("clat_ns", lat_block(&d.clat_m, &d.clat)),
        ("lat_ns", obj(moments(&d.lat_m))),
        ("bw_min", J::U(bw_min as u64)),
        ("bw_max", J::U(bw_max as u64)),
        (
            "bw_agg",
            J::F(if group_bw > 0.0 && active {
                bw_bytes as f64 / group_bw * 100.0
            } else {
                0.0
            }),
        ),
        ("bw_mean", J::F(bw_mean)),
        ("bw_dev", J::F(bw_dev)),
        ("bw_samples", J::U(bw_s.len() as u64)),
        ("iops_min", J::U(iops_min as u64)),
        ("iops_max", J::U(iops_max as u64)),
        ("iops_mean", J::F(iops_mean)),
        ("iops_stddev", J::F(iops_sd)),
        ("iops_samples", J::U(iops_s.len() as u64)),
        ("lat_co_ns", hist_block(&d.lat_co)),
    ])
}

fn empty_dir() -> J {
    let z = Moments::default();
    obj(vec![
        ("io_bytes", J::U(0)),
        ("io_kbytes", J::U(0)),
        ("bw_bytes", J::U(0)),
        ("bw", J::U(0)),
        ("iops", J::F(0.0)),
        ("runtime", J::U(0)),
        ("total_ios", J::U(0)),
        ("short_ios", J::U(0)),
        ("drop_ios", J::U(0)),
        ("slat_ns", obj(moments(&z))),
        ("clat_ns", obj(moments(&z))),
        ("lat_ns", obj(moments(&z))),
        ("bw_min", J::U(0)),
        ("bw_max", J::U(0)),
        ("bw_agg", J::F(0.0)),
        ("bw_mean", J::F(0.0)),
        ("bw_dev", J::F(0.0)),
        ("bw_samples", J::U(0)),
        ("iops_min", J::U(0)),
        ("iops_max", J::U(0)),
        ("iops_mean", J::F(0.0)),
        ("iops_stddev", J::F(0.0)),
        ("iops_samples", J::U(0)),
    ])
}

/// fio's `latency_ns`/`latency_us`/`latency_ms`: percent of completions with a clat in
/// each (previous bound, bound] bucket.
fn latency_buckets(h: &Histogram<u64>) -> Vec<(&'static str, J)> {
    let total = h.len();
    let share = |lo: u64, hi: Option<u64>| -> J {
        if total == 0 {
            return J::F(0.0);
        }
        let n: u64 = match hi {
            Some(hi) if hi <= lo => 0,
            Some(hi) => h.count_between(lo + 1, hi),
            None => h.count_between(lo + 1, h.high()),
        };
        J::F(n as f64 * 100.0 / total as f64)
    };
    let bounds = [2u64, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    let mut out = vec![];
    for (unit, mul) in [
        ("latency_ns", 1u64),
        ("latency_us", 1_000),
        ("latency_ms", 1_000_000),
    ] {
        let mut v = vec![];
        let mut prev = if mul == 1 { 0 } else { mul };
        let list: Vec<u64> = if mul == 1_000_000 {
            bounds.iter().copied().chain([2000]).collect()
        } else {
            bounds.to_vec()
        };
        for b in list {
            let hi = b * mul;
            v.push((b.to_string(), share(prev, Some(hi))));
            prev = hi;
        }
        if mul == 1_000_000 {
            v.push((">=2000".to_string(), share(2_000 * mul, None)));
        }
        out.push((unit, J::Obj(v)));
    }
    out
}

pub(super) fn fmt_size(b: u64) -> String {
    for (m, u) in [(1u64 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")] {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{u}", b / m);
        }
    }
    b.to_string()
}

fn errno_of(e: &ProbeError) -> i64 {
    match e {
        ProbeError::NoSpace { .. } => libc::ENOSPC as i64,
        ProbeError::ReadOnly { .. } => libc::EROFS as i64,
        ProbeError::DirectIo { .. } | ProbeError::DirectOpen { .. } => libc::EINVAL as i64,
        ProbeError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO) as i64,
        ProbeError::Verify { .. } => libc::EILSEQ as i64,
        ProbeError::LatencyTarget { .. } => libc::ETIMEDOUT as i64,
        _ => libc::EIO as i64,
    }
}

fn job_options(r: &Resolved, info: &RunInfo) -> J {
    let sp = &r.spec;
    // P2b: where I/Os go, as --show-job writes them (a bare flag is "1").
    let placed = super::args_where::render(&sp.place);
    let rw = format!(
        "{}{}",
        sp.rw.name(),
        super::args_where::rw_suffix(&sp.place, sp.rw)
    );
    let mut v: Vec<(&str, J)> = vec![
        ("name", s(r.name.clone())),
        ("filename", s(info.target_path.display().to_string())),
        ("size", s(fmt_size(info.size))),
        ("rw", s(rw)),
    ];
    if sp.rw.mixed() {
        v.push(("rwmixread", s(format!("{}", sp.rwmixread))));
    }
    let bs = if sp.bs[0] == sp.bs[1] {
        fmt_size(sp.bs[0])
    } else {
        format!("{},{}", fmt_size(sp.bs[0]), fmt_size(sp.bs[1]))
    };
    v.push(("bs", s(bs)));
    v.push(("iodepth", s(sp.iodepth.to_string())));
    v.push(("numjobs", s(sp.numjobs.to_string())));
    v.push(("ioengine", s(sp.engine.name())));
    v.push(("direct", s(if sp.direct { "1" } else { "0" })));
    match sp.sync {
        collectors::directio::SyncFlag::None => {}
        collectors::directio::SyncFlag::Dsync => v.push(("sync", s("dsync"))),
        collectors::directio::SyncFlag::Sync => v.push(("sync", s("sync"))),
    }
    if let Some((n, k)) = sp.fsync {
        v.push((k.name(), s(n.to_string())));
    }
    if let Some(rate) = sp.rate_iops {
        // fio's per-direction, per-job equivalent of our total.
        let per_job = rate / sp.numjobs as f64;
        let pct = sp.read_pct() / 100.0;
        let rd = (per_job * pct).round() as u64;
        let wr = (per_job * (1.0 - pct)).round() as u64;
        v.push(("rate_iops", s(format!("{rd},{wr}"))));
        v.push((
            "rate_process",
            s(match sp.rate_process {
                collectors::probe::pace::RateProcess::Linear => "linear",
                collectors::probe::pace::RateProcess::Poisson => "poisson",
            }),
        ));
    }
    if let Some(rt) = sp.runtime_ns {
        v.push((
            "runtime",
            s(format::cli::fmt_duration(std::time::Duration::from_nanos(
                rt,
            ))),
        ));
    }
    if sp.ramp_ns > 0 {
        v.push((
            "ramp_time",
            s(format::cli::fmt_duration(std::time::Duration::from_nanos(
                sp.ramp_ns,
            ))),
        ));
    }
    if sp.time_based {
        v.push(("time_based", s("1")));
    }
    // P2a: engines and timing (those not at fio's defaults)
    v.extend(
        super::timing::job_options(&sp.timing)
            .into_iter()
            .map(|(k, x)| (k, s(x))),
    );
    // P3: verify and logs, as fio's "job options" show them
    if let Some(vf) = &sp.verify {
        v.push(("verify", s(vf.kind.name())));
        if vf.only {
            v.push(("verify_only", s("1")));
        }
    }
    for (k, p) in [
        ("write_lat_log", &sp.lat_log),
        ("write_bw_log", &sp.bw_log),
        ("write_iops_log", &sp.iops_log),
    ] {
        if let Some(p) = p {
            v.push((k, s(p.display().to_string())));
        }
    }
    if sp.log_avg_ms > 0 {
        v.push(("log_avg_msec", s(sp.log_avg_ms.to_string())));
    }
    for line in placed.lines().filter(|l| !l.starts_with(';')) {
        let (k, val) = line.split_once('=').unwrap_or((line, "1"));
        v.retain(|(key, _)| *key != k);
        v.push((k, s(val.to_string())));
    }
    obj(v)
}

/// fio's `group_reporting`: all jobs as one (counts and latencies merged, windows summed,
/// the longest runtime, the first error), so the JSON has one job entry as fio's does.
pub(super) fn group_jobs(res: &mut ProbeResult) {
    if res.jobs.len() < 2 {
        return;
    }
    let jobs = std::mem::take(&mut res.jobs);
    res.jobs.push(merge_jobs(jobs));
}

/// Jobs summed as one, as fio's `group_reporting` sums a group.
pub(super) fn merge_jobs(jobs: Vec<JobResult>) -> JobResult {
    let mut totals = collectors::probe::stats::WindowStats::new();
    let mut usage = collectors::probe::Usage::default();
    let mut samples: Vec<collectors::probe::JobSample> = vec![];
    let (mut runtime_ns, mut rate_missed, mut error) = (0, 0, None);
    let mut verified = 0;
    let mut verify_reads = collectors::probe::stats::DirStats::new();
    let mut verify_ns = 0;
    let mut latency_depth = None;
    for j in jobs {
        // A group's depth: its jobs' summed (each searched its own).
        if let Some(d) = j.latency_depth {
            latency_depth = Some(latency_depth.unwrap_or(0) + d);
        }
        verified += j.verified_bytes;
        verify_reads.merge(&j.verify_reads);
        verify_ns = verify_ns.max(j.verify_ns);
        totals.merge(&j.totals);
        usage.usr_ns += j.usage.usr_ns;
        usage.sys_ns += j.usage.sys_ns;
        usage.ctx += j.usage.ctx;
        usage.minflt += j.usage.minflt;
        usage.majflt += j.usage.majflt;
        runtime_ns = runtime_ns.max(j.runtime_ns);
        rate_missed += j.rate_missed;
        if error.is_none() {
            error = j.error;
        }
        for (i, x) in j.samples.iter().enumerate() {
            match samples.get_mut(i) {
                Some(t) => {
                    for d in 0..DIRS {
                        t.ios[d] += x.ios[d];
                        t.bytes[d] += x.bytes[d];
                    }
                }
                None => samples.push(*x),
            }
        }
    }
    JobResult {
        job: 0,
        totals,
        runtime_ns,
        samples,
        usage,
        rate_missed,
        error,
        verified_bytes: verified,
        verify_reads,
        verify_ns,
        latency_depth,
    }
}

/// One entry of fio's `jobs[]`: a job's (or a reporting group's) numbers, in `groupid`,
/// with the `job options` given.
pub(super) fn job_entry(
    r: &Resolved,
    j: &JobResult,
    groupid: u64,
    elapsed_s: u64,
    group_bw: f64,
    options: J,
) -> J {
    let t = &j.totals;
    let rt = j.job_runtime_ns().max(1);
    let cpu_pct = |ns: u64| ns as f64 * 100.0 / rt as f64;
    let reads = j.fio_dir(READ);
    let mut all = reads.clat.clone();
    all.add(&t.dir[WRITE].clat).expect("same bounds");
    all.add(&t.dir[TRIM].clat).expect("same bounds");
    let mut v: Vec<(&str, J)> = vec![
        ("jobname", s(r.name.clone())),
        ("groupid", J::U(groupid)),
        ("error", J::I(j.error.as_ref().map(errno_of).unwrap_or(0))),
        ("eta", J::U(0)),
        ("elapsed", J::U(elapsed_s)),
        ("job options", options),
        (
            "read",
            if r.spec.rw.reads() || reads.ios > 0 {
                dir_block(&reads, j.fio_runtime_ns(READ), j, READ, group_bw)
            } else {
                empty_dir()
            },
        ),
        (
            "write",
            if r.spec.rw.writes() {
                dir_block(&t.dir[WRITE], j.runtime_ns, j, WRITE, group_bw)
            } else {
                empty_dir()
            },
        ),
        (
            "trim",
            if r.spec.rw.trims() {
                dir_block(&t.dir[TRIM], j.runtime_ns, j, TRIM, group_bw)
            } else {
                empty_dir()
            },
        ),
        (
            "sync",
            obj(vec![
                ("total_ios", J::U(t.sync_ios)),
                ("lat_ns", lat_block(&t.sync_m, &t.sync)),
            ]),
        ),
        (
            "job_runtime",
            J::U((j.job_runtime_ns() + 500_000) / 1_000_000),
        ),
        ("usr_cpu", J::F(cpu_pct(j.usage.usr_ns))),
        ("sys_cpu", J::F(cpu_pct(j.usage.sys_ns))),
        ("ctx", J::U(j.usage.ctx)),
        ("majf", J::U(j.usage.majflt)),
        ("minf", J::U(j.usage.minflt)),
    ];
    v.extend(latency_buckets(&all));
    // fio's: the depth a latency_target search ended at (else iodepth), the target in
    // ns, the window in us.
    let lt = r.spec.timing.latency;
    let depth = j.latency_depth.unwrap_or(r.spec.iodepth);
    v.push(("latency_depth", J::U(depth as u64)));
    v.push(("latency_target", J::U(lt.map_or(0, |l| l.target_ns))));
    v.push((
        "latency_percentile",
        J::F(lt.map_or(100.0, |l| l.percentile)),
    ));
    v.push((
        "latency_window",
        J::U(lt.map_or(0, |l| l.window_ns / 1_000)),
    ));
    obj(v)
}

/// A job's `job options`: a job file's own lines as written, as fio lists them (decision
/// 0089); the resolved job for flags alone.
fn shown_or_resolved(r: &Resolved, info: &RunInfo) -> J {
    match &info.file_shown {
        Some((_, job)) => J::Obj(job.iter().map(|(k, v)| (k.clone(), s(v.clone()))).collect()),
        None => job_options(r, info),
    }
}

/// The fio-shaped JSON document.
pub(crate) fn fio_json(r: &Resolved, info: &RunInfo, res: &ProbeResult) -> String {
    let group_bw: f64 = res
        .jobs
        .iter()
        .map(|j| {
            let secs = (j.job_runtime_ns().max(1)) as f64 / 1e9;
            let trim = j.totals.dir[TRIM].bytes;
            (j.fio_dir(READ).bytes + j.totals.dir[WRITE].bytes + trim) as f64 / secs
        })
        .sum();
    let elapsed_s = res
        .end_ns
        .saturating_sub(res.start_ns)
        .div_ceil(1_000_000_000);
    let jobs: Vec<J> = res
        .jobs
        .iter()
        .map(|j| job_entry(r, j, 0, elapsed_s, group_bw, shown_or_resolved(r, info)))
        .collect();
    let z = info.clock.zero_monotonic_ns();
    let extra = obj(vec![
        ("version", s(env!("CARGO_PKG_VERSION"))),
        ("preset", r.preset.clone().map(s).unwrap_or(J::Null)),
        ("engine", s(r.spec.engine.name())),
        (
            "engine_note",
            s(match r.spec.engine {
                Engine::IoUring => "one ring per job; registered file and buffers; submits iodepth_batch_submit at a time and reaps once the queue is full, as fio; clat starts when the submit call returns (fio's definition)",
                Engine::Sync => "pread/pwrite, one I/O at a time (fio's psync); slat is not measured, as in fio",
                Engine::Aio => "Linux native AIO (io_submit/io_getevents, fio's libaio); clat starts when io_submit returns (fio's definition); buffered, the kernel does the I/O inside io_submit (slat)",
            }),
        ),
        (
            "rate_iops_total",
            r.spec.rate_iops.map(J::F).unwrap_or(J::Null),
        ),
        (
            "rate_missed_ios",
            J::U(res.jobs.iter().map(|j| j.rate_missed).sum()),
        ),
        ("window_ns", J::U(r.spec.window_ns)),
        (
            "target",
            obj(vec![
                ("path", s(info.target_path.display().to_string())),
                ("kind", s(info.target_kind.clone())),
                ("fstype", s(info.fstype.clone())),
                ("size_bytes", J::U(info.size)),
            ]),
        ),
        ("clock_zero_monotonic_ns", J::U(z)),
        ("start_t_ns", J::U(res.start_ns.saturating_sub(z))),
        ("measure_t_ns", J::U(res.meas_ns.saturating_sub(z))),
        ("end_t_ns", J::U(res.end_ns.saturating_sub(z))),
        ("process_usr_ns", J::U(res.process_usage.usr_ns)),
        ("process_sys_ns", J::U(res.process_usage.sys_ns)),
        (
            "recorded_in",
            info.recorded_in
                .as_ref()
                .map(|p| s(p.display().to_string()))
                .unwrap_or(J::Null),
        ),
        ("warnings", J::Arr(info.warnings.iter().map(|w| s(w.clone())).collect())),
        ("interrupted", J::U(res.interrupted as u64)),
        (
            "error",
            res.error().map(|e| s(e.to_string())).unwrap_or(J::Null),
        ),
    ]);
    let ts = info.start_wall;
    let doc = obj(vec![
        (
            "fio version",
            s(format!("diskpulse-{}", env!("CARGO_PKG_VERSION"))),
        ),
        ("timestamp", J::U(ts.timestamp() as u64)),
        ("timestamp_ms", J::U(ts.timestamp_millis() as u64)),
        ("time", s(ts.format("%a %b %e %H:%M:%S %Y").to_string())),
        (
            "global options",
            J::Obj(
                info.file_shown
                    .iter()
                    .flat_map(|(g, _)| g.iter())
                    .map(|(k, v)| (k.clone(), s(v.clone())))
                    .collect(),
            ),
        ),
        ("diskpulse", extra),
        ("jobs", J::Arr(jobs)),
        (
            "disk_util",
            J::Arr(info.disks.iter().map(disk_util).collect()),
        ),
    ]);
    let mut out = String::new();
    doc.write(&mut out, 0);
    out
}

/// fio's `disk_util` entry from a device's counter deltas over the run.
pub(super) fn disk_util(d: &super::DiskDelta) -> J {
    use collectors::diskstats as ds;
    let f = |i: usize| J::U(d.d.get(i).copied().flatten().unwrap_or(0));
    let io_ms = d.d.get(ds::F_IO_MS).copied().flatten().unwrap_or(0);
    let util = if d.elapsed_ns > 0 {
        (io_ms as f64 * 1e6 / d.elapsed_ns as f64 * 100.0).min(100.0)
    } else {
        0.0
    };
    obj(vec![
        ("name", s(d.name.clone())),
        ("read_ios", f(ds::F_READS)),
        ("write_ios", f(ds::F_WRITES)),
        ("read_merges", f(ds::F_READS_MERGED)),
        ("write_merges", f(ds::F_WRITES_MERGED)),
        ("read_ticks", f(ds::F_READ_MS)),
        ("write_ticks", f(ds::F_WRITE_MS)),
        ("in_queue", f(ds::F_WEIGHTED_MS)),
        ("util", J::F(util)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_look_like_fios() {
        let v = obj(vec![
            ("a", J::F(0.0)),
            ("b", J::U(3)),
            ("c", obj(vec![("99.000000", J::U(5))])),
            ("d", J::Arr(vec![J::Str("x\"y".into())])),
        ]);
        let mut out = String::new();
        v.write(&mut out, 0);
        assert_eq!(
            out,
            "{\n  \"a\" : 0.000000,\n  \"b\" : 3,\n  \"c\" : {\n    \"99.000000\" : 5\n  },\n  \"d\" : [\n    \"x\\\"y\"\n  ]\n}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed["c"]["99.000000"], 5);
    }

    #[test]
    fn latency_buckets_add_up_to_100() {
        let mut h = collectors::directio::latency_histogram();
        for v in [1u64, 3, 15_000, 80_000, 900_000, 3_000_000_000] {
            collectors::directio::record_ns(&mut h, v);
        }
        let b = latency_buckets(&h);
        let mut total = 0.0;
        for (_, j) in &b {
            if let J::Obj(kv) = j {
                for (_, v) in kv {
                    if let J::F(x) = v {
                        total += x;
                    }
                }
            }
        }
        assert!((total - 100.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn sizes_print_like_fio_options() {
        assert_eq!(fmt_size(8192), "8k");
        assert_eq!(fmt_size(1 << 20), "1m");
        assert_eq!(fmt_size(1000), "1000");
    }
}
