//! `diskpulse report RUN`: analyse a recording; print the table; write summary.json,
//! timeline.png/.svg and report.html into RUN.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use ::format::cli::parse_duration;
use ::format::usage;
use ::report::{self, ReportOptions};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run directory made by `record` or `demo`.
    pub run: PathBuf,
    /// Window of the "UI" average drawn over the throughput panels (what an array UI shows).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub ui_average: Duration,
    /// Window of rates.csv (per device: MiB/s, IOPS, flushes/s, util, await).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub window: Duration,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Skip timeline.png/.svg.
    #[arg(long)]
    pub no_charts: bool,
    /// Skip report.html.
    #[arg(long)]
    pub no_html: bool,
    /// Report only this device (repeatable: `--device loop12 --device vda`): summary.json,
    /// the table, headlines, charts and report.html hold only these. A name the run did
    /// not record is refused (exit 2) with the devices it has; nothing is written then.
    #[arg(long = "device", value_name = "NAME")]
    pub devices: Vec<String>,
}

/// A report that ran out of space says what to do: its outputs go into RUN, and the
/// recording's own files are only read.
fn full_disk(e: anyhow::Error, run: &std::path::Path) -> anyhow::Error {
    // The writers' messages carry the io::Error as text ("... (os error 28)").
    if format!("{e:#}").contains(&format!("(os error {})", libc::ENOSPC)) {
        e.context(format!(
            "the file system of {} is full: free space there (or copy the run directory \
             elsewhere and report the copy), then run report again; the recording itself is \
             unchanged",
            run.display()
        ))
    } else {
        e
    }
}

/// The error of a report printed whose files were not written.
fn not_written(e: anyhow::Error, run: &std::path::Path) -> anyhow::Error {
    let e = full_disk(e, run);
    if ::format::cli::error_chain(&e).contains("is full") {
        return e;
    }
    e.context(format!(
        "the report is printed above, but its files are not written into {}: copy the run directory somewhere writable and report the copy to keep them",
        run.display()
    ))
}

/// The shortest `--ui-average` (also for `demo`, which reports with it).
pub const MIN_UI_AVERAGE: Duration = Duration::from_millis(10);

pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    if a.ui_average < MIN_UI_AVERAGE {
        return Err(usage!("--ui-average must be at least 10ms"));
    }
    if a.window < Duration::from_millis(1) {
        return Err(usage!("--window must be at least 1ms"));
    }
    let o = ReportOptions {
        ui_window_ns: a.ui_average.as_nanos() as u64,
        charts: !a.no_charts,
        html: !a.no_html,
        rates_window_ns: a.window.as_nanos() as u64,
        devices: a.devices.clone(),
        ..Default::default()
    };
    let r = report::report_written(&a.run, &o)?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    let s = &r.summary;
    if a.json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        print!("{}", report::table(s));
    }
    // The report is printed whole also when its files cannot be written into the run
    // directory (read-only, full); that is still a failure (exit 1): a script reading
    // summary.json after `report` would otherwise read none, or an old one.
    r.written.map_err(|e| not_written(e, &a.run))?;
    Ok(0)
}
