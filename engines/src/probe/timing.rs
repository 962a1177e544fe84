//! P2a: fio's engine and timing options for `probe` (flattened into `ProbeArgs`, so a
//! job file reaches them by their fio names): `iodepth_batch_*`, `io_submit_mode`,
//! `thinktime*`, `rate` (bytes/s), `ratemin`, `rate_iops_min`, `rate_cycle`,
//! `fill_device`, and `latency_target` with `latency_window`, `latency_percentile` and
//! `latency_run` (the queue-depth search: `collectors::probe::lattarget`).
//! Resolved into `collectors::probe::spec::Timing`.

use std::time::Duration;

use clap::Args;
use collectors::probe::spec::Timing;
use collectors::probe::LatencySpec;
use collectors::probe::Rw;
use format::cli::parse_size;
use format::usage;

#[derive(Args, Debug, Default, Clone)]
pub struct TimingArgs {
    /// I/Os queued before one submit call (fio's iodepth_batch_submit; default 1, as fio:
    /// each I/O is submitted as soon as it is ready). io_uring and libaio.
    #[arg(
        long,
        alias = "iodepth_batch_submit",
        alias = "iodepth_batch",
        value_name = "N"
    )]
    pub iodepth_batch_submit: Option<u32>,
    /// Completions to wait for once the queue is full (fio's iodepth_batch_complete_min;
    /// default 1).
    #[arg(
        long,
        alias = "iodepth_batch_complete_min",
        alias = "iodepth_batch_complete",
        value_name = "N"
    )]
    pub iodepth_batch_complete_min: Option<u32>,
    /// At most this many completions reaped at once (fio's iodepth_batch_complete_max;
    /// default: iodepth_batch_complete_min, so one out and one in, as fio).
    #[arg(long, alias = "iodepth_batch_complete_max", value_name = "N")]
    pub iodepth_batch_complete_max: Option<u32>,
    /// inline (fio's default: the job thread submits) ; offload is refused.
    #[arg(long, alias = "io_submit_mode", value_name = "MODE")]
    pub io_submit_mode: Option<String>,
    /// Pause after every thinktime_blocks I/Os, once all in flight are done (fio's
    /// thinktime; a bare number is microseconds, as in fio; or 5ms, 1s).
    #[arg(long, value_name = "TIME")]
    pub thinktime: Option<String>,
    /// Part of thinktime spun instead of slept (fio's thinktime_spin, microseconds).
    #[arg(long, alias = "thinktime_spin", value_name = "TIME")]
    pub thinktime_spin: Option<String>,
    /// I/Os between pauses (fio's thinktime_blocks; default 1).
    #[arg(long, alias = "thinktime_blocks", value_name = "N")]
    pub thinktime_blocks: Option<u32>,
    /// complete (fio's default: count completed I/Os) or issue (count issued ones).
    #[arg(long, alias = "thinktime_blocks_type", value_name = "TYPE")]
    pub thinktime_blocks_type: Option<String>,
    /// fio's rate: bytes per second per job and per direction (1m, or 1m,500k for
    /// reads,writes), paced as --rate_iops at that many blocks per second.
    #[arg(long, value_name = "BYTES[,BYTES]", conflicts_with = "rate_iops_total")]
    pub rate: Option<String>,
    /// fio's ratemin: the job fails when a rate_cycle after a 2 s settle period falls below
    /// this many bytes per second (per job, READ[,WRITE]).
    #[arg(long, value_name = "BYTES[,BYTES]")]
    pub ratemin: Option<String>,
    /// fio's rate_iops_min: as ratemin, in I/Os per second.
    #[arg(long, alias = "rate_iops_min", value_name = "IOPS[,IOPS]")]
    pub rate_iops_min: Option<String>,
    /// The period ratemin and rate_iops_min are averaged over (fio's rate_cycle, ms; default
    /// 1000).
    #[arg(long, alias = "rate_cycle", value_name = "MS")]
    pub rate_cycle: Option<String>,
    /// Write until the file system is full: ENOSPC ends the job (fio's fill_device, also
    /// fill_fs). The file is not laid out first; its size is the free space.
    #[arg(long, alias = "fill_device", alias = "fill_fs", alias = "fill-fs")]
    pub fill_device: bool,
    /// fio's latency_target: find the deepest queue (up to --iodepth) whose I/Os stay within
    /// this latency, from their start to their completion (a bare number is microseconds,
    /// as in fio; or 5ms).
    #[arg(long, alias = "latency_target", value_name = "TIME")]
    pub latency_target: Option<String>,
    /// fio's latency_window: how long each depth runs before it is judged (microseconds
    /// unless a unit is given; default 0: after every reap).
    #[arg(long, alias = "latency_window", value_name = "TIME")]
    pub latency_window: Option<String>,
    /// fio's latency_percentile: the share of I/Os (0-100) that must be within the target
    /// (default 100: one I/O over it lowers the depth).
    #[arg(long, alias = "latency_percentile", value_name = "PCT")]
    pub latency_percentile: Option<String>,
    /// fio's latency_run: keep adjusting the depth for the whole run instead of ending
    /// once it is found.
    #[arg(long, alias = "latency_run")]
    pub latency_run: bool,
}

impl TimingArgs {
    /// The file's options with the command line's on top (see `jobfile::overlay`).
    pub(crate) fn overlay(self, cli: &TimingArgs) -> TimingArgs {
        let c = cli.clone();
        TimingArgs {
            iodepth_batch_submit: c.iodepth_batch_submit.or(self.iodepth_batch_submit),
            iodepth_batch_complete_min: c
                .iodepth_batch_complete_min
                .or(self.iodepth_batch_complete_min),
            iodepth_batch_complete_max: c
                .iodepth_batch_complete_max
                .or(self.iodepth_batch_complete_max),
            io_submit_mode: c.io_submit_mode.or(self.io_submit_mode),
            thinktime: c.thinktime.or(self.thinktime),
            thinktime_spin: c.thinktime_spin.or(self.thinktime_spin),
            thinktime_blocks: c.thinktime_blocks.or(self.thinktime_blocks),
            thinktime_blocks_type: c.thinktime_blocks_type.or(self.thinktime_blocks_type),
            rate: c.rate.or(self.rate),
            ratemin: c.ratemin.or(self.ratemin),
            rate_iops_min: c.rate_iops_min.or(self.rate_iops_min),
            rate_cycle: c.rate_cycle.or(self.rate_cycle),
            fill_device: c.fill_device || self.fill_device,
            latency_target: c.latency_target.or(self.latency_target),
            latency_window: c.latency_window.or(self.latency_window),
            latency_percentile: c.latency_percentile.or(self.latency_percentile),
            latency_run: c.latency_run || self.latency_run,
        }
    }
}

/// fio's time options that default to microseconds: a bare number is us.
fn parse_us(flag: &str, s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let d = if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        t.parse::<u64>().ok().map(Duration::from_micros)
    } else {
        format::cli::parse_duration(t).ok()
    };
    d.map(|d| d.as_nanos() as u64).ok_or_else(|| {
        usage!("--{flag} takes microseconds (500) or a duration like 5ms or 1s; got '{s}'")
    })
}

/// `R`, `R,W`, `R,` or `,W` of sizes (or counts with `count`), per direction.
fn per_dir(flag: &str, s: &str, what: &str, count: bool) -> anyhow::Result<[Option<u64>; 2]> {
    let bad =
        || usage!("--{flag} takes {what} per job, like 1m or 1m,500k (reads,writes); got '{s}'");
    let one = |p: &str| -> anyhow::Result<Option<u64>> {
        let p = p.trim();
        if p.is_empty() {
            return Ok(None);
        }
        let v = if count {
            p.parse::<u64>().map_err(|_| bad())?
        } else {
            parse_size(p).map_err(|_| bad())?
        };
        if v == 0 {
            return Err(bad());
        }
        Ok(Some(v))
    };
    match s.split(',').collect::<Vec<_>>().as_slice() {
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

/// fio's `rate=` as the equivalent `rate_iops` value (blocks per second per direction):
/// `rate_iops` as given when `rate` is not.
pub(crate) fn rate_as_iops(
    t: &TimingArgs,
    rate_iops: Option<&str>,
    bs: [u64; 2],
) -> anyhow::Result<Option<String>> {
    let Some(r) = &t.rate else {
        return Ok(rate_iops.map(str::to_string));
    };
    if rate_iops.is_some() {
        return Err(usage!(
            "--rate={r} and --rate_iops both limit the job; give one (rate is bytes per second, rate_iops I/Os per second)"
        ));
    }
    let v = per_dir("rate", r, "bytes per second", false)?;
    let f = |d: usize| {
        v[d].map(|b| format!("{}", b as f64 / bs[d] as f64))
            .unwrap_or_default()
    };
    Ok(Some(format!("{},{}", f(0), f(1))))
}

/// fio refuses a minimum above the rate (init.c: "minimum rate exceeds rate"): so do we,
/// naming both. `fio_rate`: the `rate_iops` value (`R,W` blocks per second per job).
pub(crate) fn check_min_vs_rate(
    t: &Timing,
    fio_rate: Option<&str>,
    bs: [u64; 2],
) -> anyhow::Result<()> {
    let Some(r) = fio_rate else { return Ok(()) };
    let parts: Vec<&str> = r.split(',').collect();
    for (dir, name) in [(0, "reads"), (1, "writes")] {
        let p = parts.get(dir).or(parts.first()).copied().unwrap_or("");
        let Ok(iops) = p.trim().parse::<f64>() else {
            continue;
        };
        let (min_iops, min_b) = (t.min_iops[dir] as f64, t.min_bytes_s[dir] as f64);
        if min_iops > iops || min_b > iops * bs[dir] as f64 {
            return Err(usage!(
                "--ratemin/--rate-iops-min for {name} is above the rate the job is paced at ({iops} I/Os per second): fio refuses this too (minimum rate exceeds rate); lower the minimum or raise the rate"
            ));
        }
    }
    Ok(())
}

/// The spec's `Timing` from the flags; `iodepth` bounds the batch sizes.
pub(crate) fn resolve(t: &TimingArgs, rw: Rw, iodepth: u32) -> anyhow::Result<Timing> {
    let mut o = Timing {
        latency: latency(t)?,
        ..Timing::default()
    };
    match t.io_submit_mode.as_deref() {
        None | Some("inline") => {}
        Some("offload") => {
            return Err(usage!(
                "--io-submit-mode=offload is not supported: diskpulse submits from the job thread (fio's inline, the default); leave it out"
            ))
        }
        Some(o) => {
            return Err(usage!(
                "--io-submit-mode takes inline (offload is not supported); got '{o}'"
            ))
        }
    }
    // fio (init.c): 0 or more than iodepth means iodepth for the submit batch; the
    // complete max is at least the complete min.
    let depth = iodepth.max(1);
    o.batch_submit = match t.iodepth_batch_submit {
        Some(0) => depth,
        Some(n) => n.min(depth),
        None => 1,
    };
    o.complete_min = t.iodepth_batch_complete_min.unwrap_or(1).min(depth);
    o.complete_max = t
        .iodepth_batch_complete_max
        .unwrap_or(0)
        .max(o.complete_min)
        .min(depth);
    if let Some(tt) = &t.thinktime {
        o.think_ns = parse_us("thinktime", tt)?;
    }
    if let Some(sp) = &t.thinktime_spin {
        // fio: thinktime_spin is at most thinktime.
        o.think_spin_ns = parse_us("thinktime-spin", sp)?.min(o.think_ns);
    }
    if let Some(n) = t.thinktime_blocks {
        o.think_blocks = n.max(1);
    }
    o.think_on_complete = match t.thinktime_blocks_type.as_deref() {
        None | Some("complete") => true,
        Some("issue") => false,
        Some(x) => {
            return Err(usage!(
                "--thinktime-blocks-type takes complete or issue; got '{x}'"
            ))
        }
    };
    let dirs = |v: [Option<u64>; 2]| {
        [
            if rw.reads() { v[0].unwrap_or(0) } else { 0 },
            if rw.writes() { v[1].unwrap_or(0) } else { 0 },
        ]
    };
    if let Some(m) = &t.ratemin {
        o.min_bytes_s = dirs(per_dir("ratemin", m, "bytes per second", false)?);
    }
    if let Some(m) = &t.rate_iops_min {
        o.min_iops = dirs(per_dir("rate-iops-min", m, "I/Os per second", true)?);
    }
    if let Some(c) = &t.rate_cycle {
        let ms: u64 = c.trim().parse().ok().filter(|v| *v > 0).ok_or_else(|| {
            usage!("--rate-cycle takes milliseconds above 0, like 1000; got '{c}'")
        })?;
        o.rate_cycle_ns = ms * 1_000_000;
    }
    if t.fill_device {
        if rw.reads() {
            return Err(usage!(
                "--fill-device writes until the file system is full, but --rw {} reads; use --rw write",
                rw.name()
            ));
        }
        o.fill_device = true;
    }
    Ok(o)
}

/// fio's latency_target family; `latency_window`, `latency_percentile` and `latency_run`
/// alone mean nothing (fio ignores them), so they are refused, saying what they go with.
fn latency(t: &TimingArgs) -> anyhow::Result<Option<LatencySpec>> {
    let Some(target) = &t.latency_target else {
        let alone = [
            ("latency-window", t.latency_window.is_some()),
            ("latency-percentile", t.latency_percentile.is_some()),
            ("latency-run", t.latency_run),
        ];
        if let Some((k, _)) = alone.iter().find(|(_, set)| *set) {
            return Err(usage!(
                "--{k} is part of the latency_target search and means nothing without it: add --latency-target (like 10ms), or leave --{k} out"
            ));
        }
        return Ok(None);
    };
    let target_ns = parse_us("latency-target", target)?;
    if target_ns == 0 {
        return Err(usage!(
            "--latency-target takes a latency above 0, like 500 (microseconds) or 10ms; got '{target}'"
        ));
    }
    let window_ns = match &t.latency_window {
        Some(w) => parse_us("latency-window", w)?,
        None => 0,
    };
    let percentile = match &t.latency_percentile {
        Some(p) => p
            .trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|v| (0.0..=100.0).contains(v))
            .ok_or_else(|| {
                usage!("--latency-percentile takes a share of I/Os from 0 to 100, like 99.9; got '{p}'")
            })?,
        None => 100.0,
    };
    Ok(Some(LatencySpec {
        target_ns,
        window_ns,
        percentile,
        keep_running: t.latency_run,
    }))
}

/// `--show-job`'s lines for these options (fio's names; what reads back to the same job).
pub(crate) fn render(t: &Timing, o: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(
        o,
        "iodepth_batch_submit={}\niodepth_batch_complete_min={}\niodepth_batch_complete_max={}",
        t.batch_submit, t.complete_min, t.complete_max
    );
    if t.think_ns > 0 {
        let _ = writeln!(
            o,
            "thinktime={}\nthinktime_spin={}\nthinktime_blocks={}\nthinktime_blocks_type={}",
            t.think_ns / 1_000,
            t.think_spin_ns / 1_000,
            t.think_blocks,
            if t.think_on_complete {
                "complete"
            } else {
                "issue"
            }
        );
    }
    let pair = |v: [u64; 2]| {
        let f = |x: u64| if x == 0 { String::new() } else { x.to_string() };
        format!("{},{}", f(v[0]), f(v[1]))
    };
    if t.min_bytes_s != [0, 0] {
        let _ = writeln!(o, "ratemin={}", pair(t.min_bytes_s));
    }
    if t.min_iops != [0, 0] {
        let _ = writeln!(o, "rate_iops_min={}", pair(t.min_iops));
    }
    if t.min_bytes_s != [0, 0] || t.min_iops != [0, 0] {
        let _ = writeln!(o, "rate_cycle={}", t.rate_cycle_ns / 1_000_000);
    }
    if t.fill_device {
        let _ = writeln!(o, "fill_device");
    }
    if let Some(l) = &t.latency {
        // fio's units: microseconds.
        let _ = writeln!(
            o,
            "latency_target={}\nlatency_window={}\nlatency_percentile={}",
            l.target_ns / 1_000,
            l.window_ns / 1_000,
            l.percentile
        );
        if l.keep_running {
            let _ = writeln!(o, "latency_run");
        }
    }
}

/// The JSON's `job options` for these: the ones not at fio's defaults, in fio's names
/// (times in fio's microseconds).
pub(crate) fn job_options(t: &Timing) -> Vec<(&'static str, String)> {
    let mut text = String::new();
    render(t, &mut text);
    let d = Timing::default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=').unwrap_or((l, "1"));
            let default = match k {
                "iodepth_batch_submit" => t.batch_submit == d.batch_submit,
                "iodepth_batch_complete_min" => t.complete_min == d.complete_min,
                "iodepth_batch_complete_max" => t.complete_max == d.complete_max,
                "thinktime_spin" => t.think_spin_ns == 0,
                "thinktime_blocks" => t.think_blocks == d.think_blocks,
                "thinktime_blocks_type" => t.think_on_complete,
                "rate_cycle" => t.rate_cycle_ns == d.rate_cycle_ns,
                "latency_window" => t.latency.is_some_and(|l| l.window_ns == 0),
                "latency_percentile" => t.latency.is_some_and(|l| l.percentile == 100.0),
                _ => false,
            };
            const NAMES: [&str; 15] = [
                "iodepth_batch_submit",
                "iodepth_batch_complete_min",
                "iodepth_batch_complete_max",
                "thinktime",
                "thinktime_spin",
                "thinktime_blocks",
                "thinktime_blocks_type",
                "ratemin",
                "rate_iops_min",
                "rate_cycle",
                "fill_device",
                "latency_target",
                "latency_window",
                "latency_percentile",
                "latency_run",
            ];
            let name = NAMES.iter().find(|n| **n == k)?;
            (!default).then(|| (*name, v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> TimingArgs {
        TimingArgs::default()
    }

    #[test]
    fn fio_defaults_are_one_in_one_out() {
        let o = resolve(&t(), Rw::RandRead, 16).unwrap();
        assert_eq!((o.batch_submit, o.complete_min, o.complete_max), (1, 1, 1));
        let a = TimingArgs {
            iodepth_batch_submit: Some(0),
            iodepth_batch_complete_max: Some(64),
            ..t()
        };
        let o = resolve(&a, Rw::RandRead, 16).unwrap();
        assert_eq!(
            (o.batch_submit, o.complete_min, o.complete_max),
            (16, 1, 16)
        );
    }

    #[test]
    fn job_options_list_only_what_differs_from_fio_defaults() {
        assert!(job_options(&Timing::default()).is_empty());
        let a = TimingArgs {
            thinktime: Some("10ms".into()),
            fill_device: true,
            ..t()
        };
        let o = resolve(&a, Rw::Write, 1).unwrap();
        let v = job_options(&o);
        assert_eq!(
            v,
            vec![
                ("thinktime", "10000".to_string()),
                ("fill_device", "1".to_string())
            ]
        );
    }

    #[test]
    fn thinktime_is_microseconds_unless_a_unit_is_given() {
        let a = TimingArgs {
            thinktime: Some("500".into()),
            thinktime_spin: Some("2ms".into()),
            ..t()
        };
        let o = resolve(&a, Rw::Read, 1).unwrap();
        assert_eq!(o.think_ns, 500_000);
        // spin is at most the think time, as in fio
        assert_eq!(o.think_spin_ns, 500_000);
        assert!(o.think_on_complete);
    }

    #[test]
    fn latency_target_is_microseconds_unless_a_unit_is_given_with_fios_defaults() {
        let a = TimingArgs {
            latency_target: Some("500".into()),
            ..t()
        };
        let l = resolve(&a, Rw::Read, 8).unwrap().latency.unwrap();
        assert_eq!(
            (l.target_ns, l.window_ns, l.percentile),
            (500_000, 0, 100.0)
        );
        assert!(!l.keep_running);
        let a = TimingArgs {
            latency_target: Some("10ms".into()),
            latency_window: Some("1s".into()),
            latency_percentile: Some("99.9".into()),
            latency_run: true,
            ..t()
        };
        let o = resolve(&a, Rw::Read, 8).unwrap();
        let l = o.latency.unwrap();
        assert_eq!((l.target_ns, l.window_ns), (10_000_000, 1_000_000_000));
        assert!(l.keep_running && l.percentile == 99.9);
        let v = job_options(&o);
        assert!(
            v.contains(&("latency_target", "10000".to_string())),
            "{v:?}"
        );
        assert!(
            v.contains(&("latency_percentile", "99.9".to_string())),
            "{v:?}"
        );
        assert!(v.contains(&("latency_run", "1".to_string())), "{v:?}");
    }

    #[test]
    fn rate_in_bytes_is_blocks_per_second() {
        let a = TimingArgs {
            rate: Some("1m,512k".into()),
            ..t()
        };
        let r = rate_as_iops(&a, None, [4096, 8192]).unwrap().unwrap();
        assert_eq!(r, "256,64");
        let r = rate_as_iops(
            &TimingArgs {
                rate: Some(",1m".into()),
                ..t()
            },
            None,
            [4096, 4096],
        );
        assert_eq!(r.unwrap().unwrap(), ",256");
        assert!(rate_as_iops(&a, Some("100"), [4096, 4096]).is_err());
    }

    #[test]
    fn refusals_name_the_option() {
        let e = |a: TimingArgs, rw| resolve(&a, rw, 1).unwrap_err().to_string();
        assert!(e(
            TimingArgs {
                latency_window: Some("10ms".into()),
                ..t()
            },
            Rw::Read
        )
        .contains("--latency-window is part of the latency_target search"));
        assert!(e(
            TimingArgs {
                latency_target: Some("10ms".into()),
                latency_percentile: Some("101".into()),
                ..t()
            },
            Rw::Read
        )
        .contains("'101'"));
        assert!(e(
            TimingArgs {
                io_submit_mode: Some("offload".into()),
                ..t()
            },
            Rw::Read
        )
        .contains("offload"));
        assert!(e(
            TimingArgs {
                fill_device: true,
                ..t()
            },
            Rw::Read
        )
        .contains("--rw write"));
        assert!(e(
            TimingArgs {
                thinktime: Some("soon".into()),
                ..t()
            },
            Rw::Read
        )
        .contains("'soon'"));
        assert!(e(
            TimingArgs {
                ratemin: Some("0".into()),
                ..t()
            },
            Rw::Read
        )
        .contains("ratemin"));
    }
}
