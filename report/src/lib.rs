//! `report`: from a run directory to `summary.json`, a table on stdout, `rates.csv`,
//! `timeline.png` / `timeline.svg` and `report.html`. Everything is derived from the raw
//! counters in the recording, so a run can be re-analysed with other windows. Every file
//! is read and written through its type in [`format`].

pub mod analysis;
pub mod bunching;
pub mod charts_build;
pub mod derive;
pub mod episodes;
pub mod faults;
pub mod fold;
pub mod html;
pub mod interference;
pub mod order;
pub mod procio;
pub mod rates;
pub mod run;
pub mod series;
pub mod spikes;
pub mod spill;
pub mod stream;
pub mod table;
pub mod trace;
pub(crate) mod trace_charts;
pub(crate) mod trace_context;
pub(crate) mod trace_summary;
pub mod zoom_data;

use std::path::Path;

use analysis::BurstParams;
pub(crate) use derive::DeviceAnalysis;
pub use derive::{analyse_device, headline, restarts};
pub use run::Run;
pub use table::table;

pub use format::summary::{
    CpuSummary, DeviceSummary, Direction, LoadRoleSummary, MemorySummary, Peaks, RestartSummary,
    Summary,
};

/// Report options.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Window of the "UI" average (what an array's web UI shows), ns.
    pub ui_window_ns: u64,
    pub burst: BurstParams,
    /// Write timeline.png and timeline.svg.
    pub charts: bool,
    /// Write report.html.
    pub html: bool,
    /// Window of `rates.csv`, ns.
    pub rates_window_ns: u64,
    /// `report --device`: only these devices (every device when empty). A name the run
    /// does not hold is a usage error ([`order::keep_only`]).
    pub devices: Vec<String>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            ui_window_ns: 30_000_000_000,
            burst: BurstParams::default(),
            charts: true,
            html: true,
            rates_window_ns: 100_000_000,
            devices: vec![],
        }
    }
}

/// Analyses a run and writes `summary.json` (and the charts) into it.
pub fn report(dir: &Path, o: &ReportOptions) -> anyhow::Result<Summary> {
    Ok(report_noted(dir, o)?.0)
}

/// [`report`], with the warnings of reading the run back ([`Run::warnings`]: a cut-off
/// end, damaged lines skipped, an incomplete recording), each naming its file.
pub fn report_noted(dir: &Path, o: &ReportOptions) -> anyhow::Result<(Summary, Vec<String>)> {
    let r = report_written(dir, o)?;
    r.written?;
    Ok((r.summary, r.warnings))
}

/// A run analysed, and whether its files could be written into the run directory.
pub struct Reported {
    pub summary: Summary,
    /// As [`report_noted`]'s.
    pub warnings: Vec<String>,
    /// The first output that could not be written (a read-only or full run directory):
    /// the summary is whole all the same, for the caller to print.
    pub written: anyhow::Result<()>,
}

/// [`report_noted`] that keeps the summary when writing its files fails.
pub fn report_written(dir: &Path, o: &ReportOptions) -> anyhow::Result<Reported> {
    let (run, analyses, summary) = analyse(dir, o)?;
    let written = write_outputs(dir, &run, &analyses, &summary, o);
    Ok(Reported {
        summary,
        warnings: run.warnings,
        written,
    })
}

/// Reads and analyses a run without writing anything. The diskstats rows are read once,
/// as a stream ([`stream`]); twice when the run's end is not what meta.json says (a
/// recording cut off), as the windows are laid out from the end.
pub fn analyse(
    dir: &Path,
    o: &ReportOptions,
) -> anyhow::Result<(Run, Vec<DeviceAnalysis>, Summary)> {
    let mut run = Run::read_head(dir)?;
    let (pass, dur) = analysis_pass(&run, o, true)?;
    run.set_disks(&pass);
    debug_assert_eq!(run.duration_ns, dur);
    let restarts = restarts(&run, &pass);
    let broker_bytes: Vec<(String, f64, f64)> = pass
        .devices
        .iter()
        .zip(&pass.accs)
        .map(|(d, a)| (d.name.clone(), a.broker_bytes.0, a.broker_bytes.1))
        .collect();
    let mut analyses: Vec<DeviceAnalysis> = pass
        .devices
        .into_iter()
        .zip(pass.accs)
        .map(|(d, a)| analyse_device(&d.name, a, run.device_why(&d.name), dur, o))
        .collect();
    if run.start_ns > 0 {
        // `--keep` deleted the first chunks: the mean is over what was kept.
        let kept_s = dur.saturating_sub(run.start_ns).max(1) as f64 / 1e9;
        for a in analyses.iter_mut() {
            for d in [&mut a.summary.write, &mut a.summary.read] {
                d.mean_mib_s = d.bytes / format::units::MIB / kept_s;
            }
        }
    }
    let ui_s = o.ui_window_ns as f64 / 1e9;
    // The devices the user asked about first, backing disks after them ([`order`]), in
    // every headline, table, chart and summary.json; `--device` keeps only those named.
    order::arrange(&run.meta, &mut analyses, |a| &a.summary);
    order::keep_only(&mut analyses, &o.devices, |a| &a.summary.name, dir)?;
    let mut headline: Vec<String> = analyses
        .iter()
        .map(|a| &a.summary)
        .filter(|s| s.write.bytes > 0.0)
        .map(|s| headline(s, ui_s))
        .collect();
    let devices: Vec<DeviceSummary> = analyses.iter().map(|a| a.summary.clone()).collect();
    let broker = interference::broker_devices(&run.meta, &devices);
    let broker_io = procio::broker_io(&run, &devices, &broker, &broker_bytes);
    let cpu = derive::cpu_summary(&run);
    derive::headline_notes(&mut headline, &devices, broker_io.as_ref(), cpu.as_ref());
    let trace = trace_summary::trace(&run, &devices, &broker);
    let interference = interference::interference(
        &run.probe_hist,
        &run.load_hist,
        &devices,
        &broker,
        &restarts,
        &run.events,
        interference::HarmInputs {
            disks: analyses
                .iter()
                .map(|a| (a.summary.name.clone(), &a.harm))
                .collect(),
            stalls: episodes::victim_stalls(&run.load, run.probe.as_ref()),
            cpu_busy: run
                .cpu
                .as_ref()
                .and_then(|c| c.pct.points(fold::CpuFolded::BUSY)),
            sync_calls: run
                .trace
                .as_ref()
                .map(|t| t.long_calls.clone())
                .unwrap_or_default(),
            flush_requests: run
                .trace
                .as_ref()
                .map(|t| t.long_flushes.clone())
                .unwrap_or_default(),
        },
    );
    let summary = Summary {
        format_version: format::FORMAT_VERSION,
        run: dir.display().to_string(),
        duration_s: dur as f64 / 1e9,
        ui_window_s: ui_s,
        headline,
        devices,
        memory: derive::memory_summary(&run),
        cpu,
        load: derive::load_summary(&run),
        samplers: run.meta.samplers.clone(),
        error_events: run
            .events
            .iter()
            .filter(|e| matches!(e.body, format::events::Body::Error(_)))
            .count(),
        restarts,
        interference,
        failures: failures(&run),
        faults: {
            let mut f = faults::faults(&run.events);
            faults::add_window_losses(&mut f, &run.load);
            f
        },
        broker_io,
        trace,
    };
    Ok((run, analyses, summary))
}

/// The pass over a run's rows for its report: laid out for meta.json's end, made again
/// for the end the rows give when that differs. `charts`: fold the devices' chart series.
/// Returns the pass and the run's end.
fn analysis_pass(
    run: &Run,
    o: &ReportOptions,
    charts: bool,
) -> anyhow::Result<(stream::Pass, u64)> {
    let files = run.diskstats_files();
    // The end meta.json says, as if the rows reached it (checked after the pass); without
    // one (cut off) the end is the last row: count the rows first.
    let said = run.meta.duration_ns.map(|d| run.duration_with(Some(d)));
    let mut dur = match said {
        Some(d) if d > 0 => d,
        _ => run.duration_with(
            stream::count(files, run.row_limit_ns())
                .map_err(|e| run.bad(e))?
                .last_t_ns(),
        ),
    };
    loop {
        let plan = plan(run, dur, o, charts);
        let pass = stream::pass(files, &plan).map_err(|e| run.bad(e))?;
        let end = run.duration_with(pass.last_t_ns());
        if end == dur {
            return Ok((pass, dur));
        }
        dur = end;
    }
}

/// What the pass over the rows accumulates for a run ending at `dur`.
fn plan(run: &Run, dur: u64, o: &ReportOptions, charts: bool) -> stream::Plan {
    stream::Plan {
        duration_ns: dur,
        ui_window_ns: o.ui_window_ns,
        bin_ns: o.burst.bin_ns,
        rates_window_ns: Some(o.rates_window_ns),
        charts: if charts {
            charts_build::fold_mode(dur)
        } else {
            stream::ChartMode::Off
        },
        // None: the zoomable timeline's windows come from `zoom_data::RawWindows`, fed by
        // a pass of their own (html/zoom.rs), or envelopes.csv.gz.
        restarts: derive::restart_windows(run, dur),
        broker_span: procio::sampled_span(run),
        // The windows that grow with the run: an unnamed scratch file in the run directory.
        spill: Some(run.dir.clone()),
        row_limit_ns: run.row_limit_ns(),
    }
}

/// The load's failed operations, from meta.json: the run's own load and every load phase
/// of a scenario, fewest first (the last is the loudest).
fn failures(run: &Run) -> Vec<format::summary::Failure> {
    let loads = run
        .meta
        .load()
        .into_iter()
        .chain(run.meta.phases().into_iter().filter_map(|p| p.load()));
    let mut all: Vec<_> = loads
        .flat_map(|l| l.roles.into_iter().flat_map(|r| r.failures))
        .collect();
    all.sort_by_key(|f| f.count);
    // The store full: which node, which volume and how full, in the same line.
    let stores: Vec<String> = run
        .events
        .iter()
        .filter_map(|e| match &e.body {
            format::events::Body::StoreVolume(v) => Some(format::events::store_volume_line(v)),
            _ => None,
        })
        .collect();
    for f in all.iter_mut() {
        if format::summary::kind_words(&f.kind).0 == STORE_FULL && !stores.is_empty() {
            f.line = format!("{}; {}", f.line, stores.join("; "));
        }
    }
    all
}

/// How [`format::summary::kind_words`] says the broker refused for want of space.
const STORE_FULL: &str = "the store filled up";

/// Writes summary.json, rates.csv, timeline.png/.svg and report.html into `dir`.
fn write_outputs(
    dir: &Path,
    run: &Run,
    analyses: &[DeviceAnalysis],
    summary: &Summary,
    o: &ReportOptions,
) -> anyhow::Result<()> {
    summary.write(dir)?;
    format::rates::write_rows(
        &dir.join(format::rates::FILE),
        // One row at a time: an hour of 100 ms windows is 36 k rows a device.
        analyses.iter().flat_map(|a| {
            a.rates.iter().flat_map(|(windows, has)| {
                rates::device_rows(run, &a.summary.name, windows, has, o.rates_window_ns)
            })
        }),
    )?;
    if o.charts || o.html {
        let tl = charts_build::timeline(run, analyses, o);
        let write = |name: &str, bytes: &[u8]| format::atomic::write(&dir.join(name), bytes);
        if o.charts {
            write("timeline.svg", charts::render_svg(&tl).as_bytes())?;
            write("timeline.png", &charts::render_png(&tl)?)?;
        }
        if o.html {
            let uplot = html::zoom::find_uplot();
            if let Err(why) = &uplot {
                eprintln!("report.html: {why}");
            }
            write(
                "report.html",
                html::run_page(run, summary, &tl, &uplot).as_bytes(),
            )?;
        }
    }
    Ok(())
}
