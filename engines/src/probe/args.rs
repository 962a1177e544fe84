//! `probe`'s flags: fio's vocabulary, `--preset`s, and their resolution into a
//! [`Resolved`] job (explicit flag > preset > default), validated before anything is
//! written.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use collectors::directio::SyncFlag;
use collectors::probe::pace::RateProcess;
use collectors::probe::{Engine, ProbeSpec, Rw, SyncKind};

use super::args_where::{self, SizeArg};
use super::presets::{preset, Preset};
use format::cli::{fmt_duration, parse_duration, parse_size};
use format::usage;

/// Size of a file the probe creates when `--size` is not given.
pub(super) const DEFAULT_SIZE: u64 = 256 << 20;

/// Seed of the offset and mix generator when `--seed` is not given.
pub(super) const DEFAULT_SEED: u64 = 0x5EED_D15C;

#[derive(Args, Debug, Default, Clone)]
#[command(after_help = "\
fio's spellings work too: --rate_iops, --time_based, --ramp_time, --rate_process, --randseed,
--write_lat_log, --log_offset, --group_reporting, --blocksize, --readwrite; --runtime and
--ramp_time take bare numbers as seconds, as fio does. A fio job file: diskpulse probe JOB.fio
(flags given beside it override the file's options).

Presets (explicit flags override them):
  array-check  the storage study's fio job: --rw randrw --rwmixread 70 --bs 8k --iodepth 8
               --ioengine io_uring --rate-iops-total 15000 --time-based --runtime 30s
  wal          a write-ahead log: --rw write --bs 8k --iodepth 1 --ioengine sync --fdatasync 1
               --direct 0 --time-based --runtime 10s --size 64MiB (buffered writes, fdatasync each)

Examples:
  diskpulse probe --filename /mnt/vol0/probe.dat --preset array-check
  diskpulse probe --filename /mnt/vol0/probe.dat --rw randread --bs 4k --iodepth 32 --runtime 10s --time-based
  diskpulse probe --filename /mnt/vol0/wal.dat --preset wal --output-format json
  diskpulse probe scenarios/jobs/8k-70-30-qd8.fio --filename /mnt/vol0/p.dat --runtime=10
  diskpulse probe --filename=/mnt/vol0/p.dat --rw=randrw --rate_iops=200 --time_based --runtime=5
  diskpulse probe scenarios/jobs/8k-70-30-qd8.fio --show-job
  diskpulse record --path /mnt/vol0 -- diskpulse probe --filename /mnt/vol0/p.dat --preset array-check

Exit codes: 0 done, 1 an I/O error (what was measured is still printed), 2 bad input or a
refused target (nothing written), 130 interrupted (what was measured is printed).")]
pub struct ProbeArgs {
    /// A fio job file ([global] and one job section, the options below in fio's spelling).
    #[arg(value_name = "JOB.fio")]
    pub(crate) job_file: Option<PathBuf>,
    /// File or block device to probe. A file that does not exist is created, laid out and
    /// removed afterwards; an existing file is used and kept. A block device: read-only jobs
    /// run as they are, jobs that write need --allow-destructive. Default:
    /// diskpulse-probe-PID.dat in the current directory.
    #[arg(long, value_name = "PATH")]
    pub filename: Option<PathBuf>,
    /// Bytes each job uses (0..size). Default: an existing file's or device's size, else 256MiB.
    /// A share of an existing file's or device's size too (fio's size=50%).
    #[arg(long, value_parser = args_where::parse_size_arg, value_name = "SIZE")]
    pub size: Option<SizeArg>,
    /// read | write | randread | randwrite | rw | randrw | trim | randtrim | trimwrite (fio's --rw;
    /// default read; trims are BLKDISCARD, block devices only); read:8k skips 8 KiB after each
    /// I/O (read:-8k backwards), randread:8 runs 8 I/Os from each random offset.
    #[arg(long, alias = "readwrite", value_name = "MODE")]
    pub rw: Option<String>,
    /// Percentage of reads in a mixed job (rw, randrw). Default 50.
    #[arg(long, value_name = "PCT")]
    pub rwmixread: Option<f64>,
    /// Percentage of writes in a mixed job (100 - rwmixread).
    #[arg(long, value_name = "PCT", conflicts_with = "rwmixread")]
    pub rwmixwrite: Option<f64>,
    /// Block size, or READ,WRITE sizes (8k or 8k,64k). Default 4k.
    #[arg(long, alias = "blocksize", value_name = "SIZE[,SIZE]")]
    pub bs: Option<String>,
    /// I/Os in flight per job (needs io_uring or libaio above 1). Default 1.
    #[arg(long, value_name = "N")]
    pub iodepth: Option<u32>,
    /// Parallel jobs (threads), each with its own descriptor, buffers and ring. Default 1.
    #[arg(long, value_name = "N")]
    pub numjobs: Option<u32>,
    /// sync (pread/pwrite; fio's psync, vsync, pvsync, pvsync2 are taken as it), io_uring or
    /// libaio (posixaio and the others are refused). Default: io_uring when --iodepth > 1,
    /// else sync. Without this flag, a kernel that refuses io_uring gets sync at depth 1 (with
    /// a warning); with it, the probe stops instead.
    #[arg(long, value_name = "ENGINE")]
    pub ioengine: Option<String>,
    /// 1: O_DIRECT (default), 0: through the page cache.
    #[arg(long, value_name = "0|1", num_args = 0..=1, default_missing_value = "1")]
    pub direct: Option<String>,
    /// Open flags for synchronous writes: none (default), dsync (O_DSYNC) or sync (O_SYNC).
    #[arg(long, value_name = "MODE")]
    pub sync: Option<String>,
    /// fsync after every N writes.
    #[arg(long, value_name = "N", conflicts_with = "fdatasync")]
    pub fsync: Option<u32>,
    /// fdatasync after every N writes.
    #[arg(long, value_name = "N")]
    pub fdatasync: Option<u32>,
    /// fio's rate_iops: I/Os per second PER DIRECTION and PER JOB; READ,WRITE gives each
    /// direction its own (--rate_iops=10500,4500). In a mixed job both directions run at
    /// their rates and the mix follows them, as in fio (--rate_iops=200 at rwmixread 70 is
    /// 200 reads + 200 writes per second). Latency is then also measured from each I/O's
    /// intended start (lat_co).
    #[arg(
        long = "rate_iops",
        value_name = "IOPS[,IOPS]",
        conflicts_with = "rate_iops_total"
    )]
    pub rate_iops: Option<String>,
    /// TOTAL I/Os per second over all jobs and both directions, split by the mix: 15000 at
    /// rwmixread 70 is 10500 reads + 4500 writes per second (fio: --rate_iops=10500,4500).
    #[arg(long, value_name = "IOPS")]
    pub rate_iops_total: Option<f64>,
    /// The old name of --rate-iops-total: refused, naming the two flags that replace it.
    #[arg(long = "rate-iops", hide = true, value_name = "IOPS")]
    pub(crate) rate_iops_old: Option<String>,
    /// linear (even gaps) or poisson (exponential gaps, same mean). Default linear.
    #[arg(long, alias = "rate_process", value_name = "PROCESS")]
    pub rate_process: Option<String>,
    /// Measured time (after --ramp). A bare number is seconds (fio's --runtime=30). Without
    /// --time-based the job also ends after --size bytes.
    #[arg(long, value_parser = parse_seconds, value_name = "DURATION")]
    pub runtime: Option<Duration>,
    /// Run this long before measuring (I/O runs; statistics are not kept); fio's ramp_time,
    /// a bare number is seconds.
    #[arg(long, alias = "ramp_time", alias = "ramp-time", value_parser = parse_seconds, value_name = "DURATION")]
    pub ramp: Option<Duration>,
    /// Run for all of --runtime, wrapping around the file (fio's time_based); without it a
    /// job stops after --size bytes of I/O, like fio.
    #[arg(long, alias = "time_based")]
    pub time_based: bool,
    /// fio's group_reporting: the JSON has one job entry for all --numjobs (summed counts,
    /// merged latencies) instead of one per job.
    #[arg(long, alias = "group_reporting")]
    pub group_reporting: bool,
    /// Print the resolved job as a fio job file (every option, defaults filled in) and
    /// exit without touching the target.
    #[arg(long)]
    pub(crate) show_job: bool,
    /// Window of the per-window rows in probe.csv. Default 100ms.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub window: Option<Duration>,
    /// array-check (the storage study's fio job) or wal (8 KiB writes, fdatasync each).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// normal (a summary, the default) or json (fio's --output-format=json shape, plus
    /// lat_co_ns).
    #[arg(long, alias = "output_format", value_name = "FORMAT")]
    pub(crate) output_format: Option<String>,
    /// Allow writing to a block device (it is still refused while mounted, held, or
    /// carrying a file-system signature).
    #[arg(long)]
    pub allow_destructive: bool,
    /// Job name in the JSON (fio's --name). Default diskpulse (a job file: its section's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Seed of the offset and mix generator (same seed, same offsets). fio: --randseed.
    #[arg(long, alias = "randseed")]
    pub seed: Option<u64>,
    /// fio's --write_lat_log: each job's per-I/O completion latencies go to
    /// PREFIX_clat.N.log (N = job from 1), fio 3.33's lines "time_ms, clat_ns, direction,
    /// bs, prio"; time 0 is the probe's start (the `probe_start` event in a recording).
    #[arg(long, alias = "write_lat_log", value_name = "PREFIX")]
    pub write_lat_log: Option<PathBuf>,
    /// fio's --log_offset (or =1, =0): the logs also have each I/O's offset (before prio).
    #[arg(long, alias = "log_offset", value_name = "0|1", num_args = 0..=1, default_missing_value = "1", default_value = "0", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub log_offset: bool,
    // P2a: engines and timing
    #[command(flatten)]
    pub timing: super::timing::TimingArgs,
    // P3: verify and logs
    #[command(flatten)]
    pub vl: super::verifylog::VerifyLogArgs,
    // P2b: where I/Os go
    #[command(flatten)]
    pub where_: args_where::WhereArgs,
}

/// Everything resolved from flags, preset and defaults.
pub(crate) struct Resolved {
    pub spec: ProbeSpec,
    /// The job's (first) file and its size (`files[0]`).
    pub filename: PathBuf,
    pub size: Option<u64>,
    /// Every file of the job with its size (fio's nrfiles, filename=a:b; one file: the
    /// same as `filename`, `size`).
    pub files: Vec<(PathBuf, Option<u64>)>,
    pub json: bool,
    /// The user named the engine (no silent fallback).
    pub(crate) engine_insisted: bool,
    pub preset: Option<String>,
    pub name: String,
    pub allow_destructive: bool,
    /// fio's group_reporting: one JSON job entry for all jobs.
    pub group_reporting: bool,
    /// Things the user should know about how flags were read (printed on stderr).
    pub notes: Vec<String>,
}

/// fio's durations: a bare number is seconds (`--runtime=30`), else [`parse_duration`]'s
/// units.
pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return parse_duration(&format!("{t}s"));
    }
    parse_duration(t).map_err(|e| {
        e.replace(
            "takes a duration like",
            "takes seconds (30) or a duration like",
        )
    })
}

/// fio's rate_iops value: `R`, `R,W`, `R,` (reads only) or `,W` (writes only).
fn parse_fio_rate(s: &str) -> anyhow::Result<[Option<f64>; 2]> {
    let bad = || {
        usage!("--rate_iops takes I/Os per second per direction and per job, like 500 or 500,200 (reads,writes); got '{s}'")
    };
    let one = |p: &str| -> anyhow::Result<Option<f64>> {
        let p = p.trim();
        if p.is_empty() {
            return Ok(None);
        }
        let v: f64 = p.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad());
        }
        Ok(Some(v))
    };
    let parts: Vec<&str> = s.split(',').collect();
    match parts.as_slice() {
        [r] => {
            let r = one(r)?.ok_or_else(bad)?;
            Ok([Some(r), Some(r)])
        }
        [r, w] => {
            let v = [one(r)?, one(w)?];
            if v == [None, None] {
                return Err(bad());
            }
            Ok(v)
        }
        _ => Err(bad()),
    }
}

/// fio's per-direction, per-job rate as our total over jobs and directions, and the read
/// share it implies: in a mixed job fio runs each direction at its own rate and the mix
/// gives way (measured with fio 3.33: `--rate_iops=200 --rwmixread=70` did 189 reads and
/// 189 writes per second).
fn fio_rate_to_total(
    s: &str,
    rw: Rw,
    numjobs: u32,
    rwmixread: f64,
    mix_given: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<(f64, f64)> {
    let [r, w] = parse_fio_rate(s)?;
    let n = numjobs as f64;
    // A trim job's rate is taken as a write job's (its I/Os are placed as writes).
    match (rw.reads(), rw.writes() || rw.trims()) {
        (true, false) => {
            let r = r.ok_or_else(|| {
                usage!("--rate_iops={s} limits only writes, but --rw {} does not write; give the read rate, e.g. --rate_iops=500", rw.name())
            })?;
            Ok((r * n, rwmixread))
        }
        (false, true) => {
            let w = w.ok_or_else(|| {
                usage!("--rate_iops={s} limits only reads, but --rw {} does not read; give the write rate, e.g. --rate_iops=500 or --rate_iops=,500", rw.name())
            })?;
            Ok((w * n, rwmixread))
        }
        _ => {
            let (Some(r), Some(w)) = (r, w) else {
                return Err(usage!(
                    "--rate_iops={s} limits one direction of a mixed job (fio then runs the other unthrottled, which diskpulse does not do); give both, e.g. --rate_iops=500,200, or use --rate-iops-total"
                ));
            };
            let mix = 100.0 * r / (r + w);
            if mix_given && (mix - rwmixread).abs() > 0.05 {
                notes.push(format!(
                    "--rate_iops={s} is fio's per-direction rate: {} reads and {} writes per second per job, so {mix:.1}% reads, not --rwmixread {rwmixread} (as fio does); for {rwmixread}% reads at the same total, use --rate-iops-total {}",
                    fmt_num(r),
                    fmt_num(w),
                    fmt_num((r + w) * n)
                ));
            }
            Ok(((r + w) * n, mix))
        }
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as u64)
    } else {
        format!("{v}")
    }
}

fn parse_bool01(flag: &str, s: &str) -> anyhow::Result<bool> {
    match s {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(usage!("{flag} takes 0 or 1; got '{s}'")),
    }
}

fn parse_bs(s: &str) -> anyhow::Result<[u64; 2]> {
    let bad =
        |why: String| usage!("--bs takes a size or READ,WRITE sizes like 8k or 8k,64k; {why}");
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() > 2 {
        return Err(bad(format!("got '{s}'")));
    }
    let one = |p: &str| -> anyhow::Result<u64> {
        let v = parse_size(p).map_err(|_| bad(format!("got '{s}'")))?;
        if v == 0 {
            return Err(bad(format!("got '{s}' (0 bytes)")));
        }
        Ok(v)
    };
    let r = one(parts[0])?;
    // fio: "--bs 8k," keeps the write size at the read size.
    let w = match parts.get(1) {
        Some(p) if !p.is_empty() => one(p)?,
        _ => r,
    };
    Ok([r, w])
}

#[allow(
    clippy::too_many_lines,
    reason = "fio's precedence rules for the probe's flags, one after another, each next to its message"
)]
pub(crate) fn resolve(a: &ProbeArgs) -> anyhow::Result<Resolved> {
    if let Some(f) = &a.job_file {
        return super::jobfile::resolve_file(f, a);
    }
    let p = match &a.preset {
        Some(n) => preset(n)?,
        None => Preset::default(),
    };
    let (rw_s, rw_mod) = args_where::split_rw(a.rw.as_deref().or(p.rw).unwrap_or("read"));
    let rw = Rw::parse(rw_s).ok_or_else(|| {
        usage!("--rw takes read, write, randread, randwrite, rw, randrw, trim, randtrim or trimwrite; got '{rw_s}'")
    })?;
    let rwmixread = match (a.rwmixread, a.rwmixwrite) {
        (Some(r), _) => r,
        (None, Some(w)) => 100.0 - w,
        (None, None) => p.rwmixread.unwrap_or(50.0),
    };
    if !(0.0..=100.0).contains(&rwmixread) {
        return Err(usage!(
            "--rwmixread takes a percentage from 0 to 100; got {rwmixread}"
        ));
    }
    let bs = parse_bs(a.bs.as_deref().or(p.bs).unwrap_or("4k"))?;
    let size_arg = a
        .size
        .or(p.size.map(SizeArg::Bytes))
        .or(args_where::filesize(&a.where_)?);
    let placed = args_where::resolve(&a.where_, rw, rw_mod, bs, size_arg)?;
    let bs = placed.bs;
    let iodepth = a.iodepth.or(p.iodepth).unwrap_or(1);
    if !(1..=4096).contains(&iodepth) {
        return Err(usage!("--iodepth takes 1 to 4096; got {iodepth}"));
    }
    let numjobs = a.numjobs.unwrap_or(1);
    if !(1..=256).contains(&numjobs) {
        return Err(usage!("--numjobs takes 1 to 256; got {numjobs}"));
    }
    let engine_insisted = a.ioengine.is_some();
    let engine = match a.ioengine.as_deref().or(p.ioengine) {
        // fio's synchronous engines: one read/write (or readv/preadv) call per I/O, which is
        // what ours does with pread/pwrite.
        Some("sync") | Some("psync") | Some("vsync") | Some("pvsync") | Some("pvsync2") => {
            Engine::Sync
        }
        Some("io_uring") => Engine::IoUring,
        Some("libaio") => Engine::Aio,
        Some(other) => {
            return Err(usage!(
                "--ioengine takes sync, psync, vsync, pvsync, pvsync2 (pread/pwrite, one I/O at a time), io_uring or libaio; got '{other}'"
            ))
        }
        None if iodepth > 1 => Engine::IoUring,
        None => Engine::Sync,
    };
    if engine == Engine::Sync && iodepth > 1 {
        return Err(usage!(
            "--iodepth {iodepth} needs --ioengine io_uring or libaio: the sync engine does one I/O at a time"
        ));
    }
    let direct = match &a.direct {
        Some(s) => parse_bool01("--direct", s)?,
        None => p.direct.unwrap_or(true),
    };
    let sync = match a.sync.as_deref() {
        None | Some("none") | Some("0") => SyncFlag::None,
        Some("dsync") => SyncFlag::Dsync,
        Some("sync") | Some("1") => SyncFlag::Sync,
        Some(o) => return Err(usage!("--sync takes none, dsync or sync; got '{o}'")),
    };
    let fsync = match (a.fsync, a.fdatasync, p.fdatasync) {
        (Some(0), _, _) | (_, Some(0), _) => None,
        (Some(n), _, _) => Some((n, SyncKind::Fsync)),
        (None, Some(n), _) => Some((n, SyncKind::Fdatasync)),
        (None, None, Some(n)) => Some((n, SyncKind::Fdatasync)),
        _ => None,
    };
    if fsync.is_some() && !rw.writes() {
        return Err(usage!(
            "--fsync/--fdatasync sync after writes, but --rw {} does not write",
            rw.name()
        ));
    }
    if let Some(old) = &a.rate_iops_old {
        return Err(usage!(
            "--rate-iops is gone: it was a total over jobs and directions while fio's --rate_iops is per direction and per job; write --rate-iops-total {old} for the total, or --rate_iops={old} for fio's meaning"
        ));
    }
    let mut notes = placed.notes.clone();
    let mix_given = a.rwmixread.is_some() || a.rwmixwrite.is_some() || p.rwmixread.is_some();
    let fio_rate = super::timing::rate_as_iops(&a.timing, a.rate_iops.as_deref(), bs)?;
    let (rate_iops, rwmixread, rate_flag) = match (&fio_rate, a.rate_iops_total) {
        (Some(f), _) => {
            let (t, mix) = fio_rate_to_total(f, rw, numjobs, rwmixread, mix_given, &mut notes)?;
            (Some(t), mix, "--rate_iops")
        }
        (None, Some(t)) => (Some(t), rwmixread, "--rate-iops-total"),
        (None, None) => (p.rate_iops, rwmixread, "--rate-iops-total"),
    };
    if let Some(r) = rate_iops {
        if !(r.is_finite() && r > 0.0) {
            return Err(usage!(
                "{rate_flag} takes a total rate above 0 (I/Os per second); got {r}"
            ));
        }
        if r > 10_000_000.0 {
            return Err(usage!(
                "{rate_flag}: {r} I/Os per second in total; at most 10000000 (the pacer schedules each I/O in whole ns, and no device does more); leave it out to go as fast as the device can"
            ));
        }
    }
    let rate_process = match a.rate_process.as_deref() {
        None | Some("linear") => RateProcess::Linear,
        Some("poisson") => RateProcess::Poisson,
        Some(o) => return Err(usage!("--rate-process takes linear or poisson; got '{o}'")),
    };
    let time_based = a.time_based || p.time_based;
    let runtime = a.runtime.or(p.runtime);
    if time_based && runtime.is_none() {
        return Err(usage!(
            "--time-based needs --runtime (how long to run), e.g. --runtime 30s"
        ));
    }
    if runtime == Some(Duration::ZERO) {
        return Err(usage!("--runtime must be above 0"));
    }
    // A ramp is warm-up before the measurement. One longer than the measurement is a
    // slip of units (`--ramp 1h --runtime 300ms`), and without --time-based it also
    // spends --size before anything is measured: refuse rather than guess.
    if let (Some(ramp), Some(rt)) = (a.ramp, runtime) {
        if ramp > rt {
            return Err(usage!(
                "--ramp {} is longer than --runtime {}: the ramp is warm-up before the measurement and may be at most as long; shorten --ramp or lengthen --runtime",
                fmt_duration(ramp),
                fmt_duration(rt)
            ));
        }
    }
    if a.ramp.is_some_and(|r| !r.is_zero()) && !time_based {
        return Err(usage!(
            "--ramp needs --time-based --runtime D: without them the job ends after --size bytes, which the ramp may use up before anything is measured"
        ));
    }
    let window = a.window.unwrap_or(Duration::from_millis(100));
    if window < Duration::from_millis(1) {
        return Err(usage!(
            "--window takes 1ms or more; got {}",
            fmt_duration(window)
        ));
    }
    // A window longer than the run has no whole window: probe.csv would have no row.
    if let Some(rt) = runtime.filter(|rt| window > *rt) {
        return Err(usage!(
            "--window {} is longer than --runtime {}: probe.csv would have no whole window; use a window shorter than the run",
            fmt_duration(window),
            fmt_duration(rt)
        ));
    }
    let json = match a.output_format.as_deref().unwrap_or("normal") {
        "normal" => false,
        "json" => true,
        o => return Err(usage!("--output-format takes normal or json; got '{o}'")),
    };
    let size = size_arg.and_then(SizeArg::bytes);
    if let Some(s) = size {
        let big = bs[0].max(bs[1]);
        if s < big {
            return Err(usage!(
                "--size {s} is smaller than the block size ({big} bytes)"
            ));
        }
    }
    if let Some(prefix) = &a.write_lat_log {
        super::verifylog::check_prefix("write-lat-log", prefix)?;
    }
    let vl = super::verifylog::resolve(
        &a.vl,
        rw,
        bs,
        a.write_lat_log.as_deref(),
        a.log_offset,
        &mut notes,
    )?;
    let seed = a.seed.or(placed.seed).unwrap_or(DEFAULT_SEED);
    let jf = super::args_files::resolve(
        &a.where_,
        a.filename.as_deref(),
        a.name.as_deref(),
        size_arg,
        bs[0].max(bs[1]),
        seed,
    )?;
    let mut files = jf.files;
    if files.is_empty() {
        let f = PathBuf::from(format!("diskpulse-probe-{}.dat", std::process::id()));
        files.push((f, size));
    }
    for (f, _) in &files {
        format::cli::check_path_length("--filename", f).map_err(|e| usage!("{e}"))?;
    }
    let many = files.len() > 1;
    if let Some(what) = super::args_files::refusal(
        files.len(),
        vl.verify.is_some(),
        fsync.is_some(),
        a.timing.fill_device,
    ) {
        return Err(usage!(
            "{what} is not run by diskpulse probe yet; use one file (nrfiles=1), or numjobs= for several jobs, each on its own file"
        ));
    }
    let (filename, size) = files[0].clone();
    let size = if many {
        size
    } else {
        size.or(size_arg.and_then(SizeArg::bytes))
    };
    Ok(Resolved {
        spec: ProbeSpec {
            rw,
            rwmixread,
            bs,
            iodepth,
            numjobs,
            engine,
            direct,
            sync,
            fsync,
            rate_iops,
            rate_process,
            runtime_ns: runtime.map(|d| d.as_nanos() as u64),
            ramp_ns: a.ramp.map(|d| d.as_nanos() as u64).unwrap_or(0),
            time_based,
            window_ns: window.as_nanos() as u64,
            seed,
            grid_zero_ns: None,
            lat_log: a.write_lat_log.clone(),
            log_offset: a.log_offset,
            timing: super::timing::resolve(&a.timing, rw, iodepth).and_then(|t| {
                super::timing::check_min_vs_rate(&t, fio_rate.as_deref(), bs).map(|_| t)
            })?,
            // P3: verify and logs
            verify: vl.verify,
            bw_log: vl.bw_log,
            iops_log: vl.iops_log,
            log_avg_ms: vl.log_avg_ms,
            log_max_value: vl.log_max_value,
            per_job_logs: vl.per_job_logs,
            place: placed.place,
            files: jf.service,
        },
        filename,
        size,
        files,
        json,
        engine_insisted,
        preset: a.preset.clone(),
        name: a.name.clone().unwrap_or_else(|| "diskpulse".into()),
        allow_destructive: a.allow_destructive,
        group_reporting: a.group_reporting,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: ProbeArgs,
    }

    fn res(args: &[&str]) -> anyhow::Result<Resolved> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        resolve(&T::try_parse_from(v).unwrap().a)
    }

    fn usage_text(args: &[&str]) -> String {
        let e = res(args).err().expect("an error");
        assert!(e.downcast_ref::<format::cli::UsageError>().is_some(), "{e}");
        e.to_string()
    }

    #[test]
    fn preset_array_check_is_the_studys_job_and_flags_override_it() {
        let r = res(&["--preset", "array-check"]).unwrap();
        let s = &r.spec;
        assert_eq!(s.rw, Rw::RandRw);
        assert_eq!(s.rwmixread, 70.0);
        assert_eq!(s.bs, [8192, 8192]);
        assert_eq!(s.iodepth, 8);
        assert_eq!(s.engine, Engine::IoUring);
        assert_eq!(s.rate_iops, Some(15_000.0));
        assert!(s.time_based && s.direct);
        assert!(!r.engine_insisted);
        let r = res(&[
            "--preset",
            "array-check",
            "--iodepth",
            "16",
            "--rate-iops-total",
            "1000",
        ])
        .unwrap();
        assert_eq!(r.spec.iodepth, 16);
        assert_eq!(r.spec.rate_iops, Some(1000.0));
        assert_eq!(r.spec.bs, [8192, 8192]);
    }

    #[test]
    fn preset_wal_syncs_every_write() {
        let s = res(&["--preset", "wal"]).unwrap().spec;
        assert_eq!(s.rw, Rw::Write);
        assert_eq!(s.fsync, Some((1, SyncKind::Fdatasync)));
        assert_eq!(s.engine, Engine::Sync);
        assert!(!s.direct);
        let s = res(&["--preset", "wal", "--direct"]).unwrap().spec;
        assert!(s.direct);
        let s = res(&["--preset", "wal", "--fsync", "4"]).unwrap().spec;
        assert_eq!(s.fsync, Some((4, SyncKind::Fsync)));
    }

    #[test]
    fn bs_takes_one_or_two_sizes() {
        assert_eq!(res(&["--bs", "8k,64k"]).unwrap().spec.bs, [8192, 65536]);
        assert_eq!(res(&["--bs", "16k"]).unwrap().spec.bs, [16384, 16384]);
        assert!(usage_text(&["--bs", "8q"]).contains("'8q'"));
        assert!(usage_text(&["--bs", "0"]).contains("0 bytes"));
    }

    #[test]
    fn bad_combinations_are_usage_errors() {
        assert!(usage_text(&["--ioengine", "sync", "--iodepth", "8"]).contains("io_uring"));
        assert!(usage_text(&["--rw", "randread", "--fsync", "1"]).contains("does not write"));
        assert!(usage_text(&["--time-based"]).contains("--runtime"));
        assert!(usage_text(&["--rwmixread", "120"]).contains("120"));
        assert!(usage_text(&["--rw", "sideways"]).contains("'sideways'"));
        assert!(usage_text(&["--preset", "nope"]).contains("array-check"));
        assert!(usage_text(&["--rate-iops-total", "0"]).contains("--rate-iops-total"));
        let e = usage_text(&["--rate-iops", "100"]);
        assert!(
            e.contains("--rate-iops-total 100") && e.contains("--rate_iops=100"),
            "{e}"
        );
        assert!(usage_text(&["--ioengine", "mmap"]).contains("libaio"));
        assert!(usage_text(&["--direct", "2"]).contains("--direct"));
        assert!(usage_text(&["--size", "4k", "--bs", "8k"]).contains("smaller"));
    }

    #[test]
    fn fio_spellings_are_the_same_flags() {
        let ours = res(&[
            "--time-based",
            "--runtime",
            "30s",
            "--ramp",
            "5s",
            "--rate-process",
            "poisson",
            "--seed",
            "7",
            "--output-format",
            "json",
        ])
        .unwrap();
        let fio = res(&[
            "--time_based",
            "--runtime=30",
            "--ramp_time=5",
            "--rate_process=poisson",
            "--randseed=7",
            "--output_format=json",
        ])
        .unwrap();
        assert_eq!(ours.spec.runtime_ns, Some(30_000_000_000));
        assert_eq!(fio.spec.runtime_ns, ours.spec.runtime_ns);
        assert_eq!(fio.spec.ramp_ns, 5_000_000_000);
        assert_eq!(fio.spec.ramp_ns, ours.spec.ramp_ns);
        assert!(fio.spec.time_based && fio.json);
        assert_eq!(fio.spec.rate_process, RateProcess::Poisson);
        assert_eq!(fio.spec.seed, 7);
        // Bare numbers are seconds only where fio takes seconds; 1.5 is 1.5 s.
        assert_eq!(
            res(&["--runtime=1.5"]).unwrap().spec.runtime_ns,
            Some(1_500_000_000)
        );
        assert!(res(&["--ioengine=pvsync2"]).is_ok());
    }

    #[test]
    fn fio_rate_iops_is_per_direction_and_per_job() {
        // One value: each direction at it, per job; the mix follows the rates, as fio.
        let r = res(&["--rw", "randrw", "--rate_iops=200"]).unwrap();
        assert_eq!(r.spec.rate_iops, Some(400.0));
        assert_eq!(r.spec.rwmixread, 50.0);
        assert!(r.notes.is_empty());
        let r = res(&["--rw", "randrw", "--rwmixread", "70", "--rate_iops=200"]).unwrap();
        assert_eq!(r.spec.rate_iops, Some(400.0));
        assert_eq!(r.spec.rwmixread, 50.0);
        assert!(
            r.notes[0].contains("--rate-iops-total 400"),
            "{:?}",
            r.notes
        );
        let r = res(&["--rw", "randrw", "--rate_iops=10500,4500", "--numjobs", "2"]).unwrap();
        assert_eq!(r.spec.rate_iops, Some(30_000.0));
        assert_eq!(r.spec.rwmixread, 70.0);
        let r = res(&["--rw", "randread", "--rate_iops=500", "--numjobs", "3"]).unwrap();
        assert_eq!(r.spec.rate_iops, Some(1500.0));
        let r = res(&["--rw", "write", "--rate_iops=,300"]).unwrap();
        assert_eq!(r.spec.rate_iops, Some(300.0));
        // Ours keeps its meaning under its own name.
        let r = res(&[
            "--rw",
            "randrw",
            "--rwmixread",
            "70",
            "--rate-iops-total",
            "1000",
        ])
        .unwrap();
        assert_eq!((r.spec.rate_iops, r.spec.rwmixread), (Some(1000.0), 70.0));
        assert!(usage_text(&["--rw", "randrw", "--rate_iops=500,"]).contains("one direction"));
        assert!(usage_text(&["--rw", "read", "--rate_iops=,500"]).contains("does not write"));
        assert!(usage_text(&["--rate_iops=x"]).contains("'x'"));
        assert!(usage_text(&["--rate_iops=0"]).contains("'0'"));
    }

    #[test]
    fn engine_follows_depth_unless_named() {
        assert_eq!(
            res(&["--iodepth", "4"]).unwrap().spec.engine,
            Engine::IoUring
        );
        assert_eq!(res(&[]).unwrap().spec.engine, Engine::Sync);
        assert!(res(&["--ioengine", "io_uring"]).unwrap().engine_insisted);
    }
}
