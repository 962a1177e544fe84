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
    let (s, warnings) = report::report_noted(&a.run, &o).map_err(|e| full_disk(e, &a.run))?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", report::table(&s));
    }
    Ok(0)
}
