//! `diskpulse export RUN --format openmetrics|influx`: a run directory's series for
//! Prometheus (backfill with promtool) or InfluxDB, on absolute time.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use ::format::cli::{fmt_duration, parse_duration};
use ::format::usage;
use ::report::run::Run;
use engines::export::{self, influx, openmetrics, Options};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.
    Openmetrics,
    /// Influx line protocol, ns timestamps.
    Influx,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Run directory (made by record, demo, load --record or a scenario run).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Write to this file (must not exist) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Downsampling step: counters and gauges at every step (plus each series' first
    /// and last row), and the highest 1/10/100 ms rates within each step as peaks.
    /// A whole number of milliseconds, at least 1ms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub step: Duration,
}

pub fn run(a: ExportArgs) -> anyhow::Result<i32> {
    let step_ns = a.step.as_nanos() as u64;
    if step_ns < 1_000_000 || !step_ns.is_multiple_of(1_000_000) {
        return Err(usage!(
            "--step {}: must be a whole number of milliseconds, at least 1ms (OpenMetrics timestamps are in ms); e.g. --step 1s or --step 100ms",
            fmt_duration(a.step)
        ));
    }
    if let Some(out) = &a.out {
        if out.exists() {
            return Err(usage!(
                "--out {}: exists; name a new file (export never overwrites)",
                out.display()
            ));
        }
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(usage!(
                "--out {}: its directory {} does not exist; create it or name another file",
                out.display(),
                parent.display()
            ));
        }
        // Before the run is read: a read-only directory or a name too long failed only
        // after the export was made (exit 1).
        ::format::atomic::check_writable(out).map_err(|e| {
            usage!(
                "--out {}: {e:#}; name a file in a writable directory",
                out.display()
            )
        })?;
    }
    let run = Run::read(&a.run)?;
    for w in &run.warnings {
        eprintln!("warning: {w}");
    }
    let groups = export::groups(&run, &Options { step_ns })?;
    let zero = run.meta.clock_zero_unix_ns;
    let emit = |w: &mut dyn Write| -> std::io::Result<u64> {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
        let n = match a.format {
            Format::Openmetrics => openmetrics::write(&mut w, &groups, zero)?,
            Format::Influx => influx::write(&mut w, &groups, zero, &run.meta.host)?,
        };
        w.flush()?;
        Ok(n)
    };
    let what = match a.format {
        Format::Openmetrics => "samples",
        Format::Influx => "lines",
    };
    match &a.out {
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            let n = emit(&mut lock).map_err(|e| {
                anyhow::anyhow!(
                    "cannot write to stdout: {e}; send the output to a file or pipe that takes it, or give --out FILE"
                )
            })?;
            eprintln!("exported {n} {what} of {}", a.run.display());
        }
        Some(out) => {
            // A temporary file beside it, renamed over it (format::atomic): never a
            // shared or existing name, never through a symlink.
            // Never over a file that appeared meanwhile (another export of the same
            // name): link(2), not rename(2).
            let n = ::format::atomic::write_new_with(out, |f| {
                let n = emit(f)?;
                f.sync_all()?;
                Ok(n)
            })
            .map_err(|e| {
                if out.exists() {
                    usage!(
                        "--out {}: another program wrote it while this export ran; nothing was written over it: name a new file",
                        out.display()
                    )
                } else {
                    e
                }
            })?;
            eprintln!(
                "exported {n} {what} of {} to {}",
                a.run.display(),
                out.display()
            );
        }
    }
    Ok(0)
}
