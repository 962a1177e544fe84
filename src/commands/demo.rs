//! `diskpulse demo`: the main job with zero setup. Starts an embedded nats-server with
//! JetStream on a store directory, records the store's block devices every millisecond,
//! runs the JetStream async publisher for `--duration`, stops everything and reports.
//!
//! Ctrl-C at any point ends the run cleanly: the publisher stops, the broker is stopped,
//! the recording is closed and the report is still written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::session::{BrokerPlan, RecordTo, Session, Threads};
use ::format::cli::{parse_duration, parse_size};
use ::format::events::Body;
use ::format::usage;
use ::report::{self, ReportOptions};
use engines::broker::{self, ClusterOptions, SyncMode};
use engines::load::{self, output};
use engines::recording::session::default_run_dir;
use engines::recording::SamplerArgs;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// How long to publish.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// JetStream sync_interval: `always` or a duration (the server fsyncs every interval).
    #[arg(long, default_value = "5s")]
    pub sync_interval: String,
    /// JetStream store directory (default: a fresh directory under /var/tmp, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub store_dir: Option<PathBuf>,
    /// Run directory to create. Default: diskpulse-runs/<time>-demo.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// nats-server binary (default: found on PATH).
    #[arg(long, value_name = "PATH")]
    pub nats_server: Option<PathBuf>,
    /// Message payload size.
    #[arg(long, default_value = "128", value_parser = parse_size)]
    pub size: u64,
    /// Publishes in flight (unacked) at once: a sliding window.
    #[arg(long, default_value_t = load::DEFAULT_WINDOW)]
    pub window: usize,
    /// diskstats sampling interval.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// Window of the "UI" average in the report.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub ui_average: Duration,
    /// Trace nats-server's sync calls (fsync, fdatasync, ...) and every block request of
    /// the store's devices through tracefs (root): fsync_calls.csv.gz and
    /// block_requests.csv.gz, on the timeline and in the report. Without root or
    /// tracefs: one line, and the demo runs without it.
    #[arg(long)]
    pub trace: bool,
    /// `--chunk`, `--keep`, `--trigger` (e.g. 'ack_p99_ms>50': the publisher's acks),
    /// `--trigger-window`, as for `record`.
    #[command(flatten)]
    pub flight: crate::commands::record::FlightArgs,
    #[command(flatten)]
    pub progress: super::ProgressArgs,
}

pub fn run(a: DemoArgs) -> anyhow::Result<i32> {
    // Validate everything before writing anything.
    let sync: SyncMode = a
        .sync_interval
        .parse()
        .map_err(|e| usage!("--sync-interval: {e}"))?;
    if a.duration.is_zero() {
        return Err(usage!("--duration must be more than 0s"));
    }
    let chunks = a.flight.setup()?;
    if a.window == 0 {
        return Err(usage!("--window must be at least 1"));
    }
    if a.size > load::DEFAULT_MAX_PAYLOAD {
        return Err(usage!(
            "--size {}: the embedded nats-server accepts messages of at most {} (its default max_payload); use --size 1MiB or less",
            ::format::units::bytes_exact(a.size),
            ::format::units::bytes_exact(load::DEFAULT_MAX_PAYLOAD)
        ));
    }
    // The publisher's own checks (--size, --window, --duration bounds), before anything
    // is written: the same flags `demo` passes it below.
    load_args(&a)?.validate()?;
    if a.interval.is_zero() || a.interval > a.duration {
        return Err(usage!(
            "--interval {} must be more than 0 and at most --duration {} (a sample needs an interval that ends within the run)",
            ::format::cli::fmt_duration(a.interval),
            ::format::cli::fmt_duration(a.duration)
        ));
    }
    engines::recording::Sampler::Disk
        .check(a.interval)
        .map_err(|e| usage!("--interval {e}"))?;
    if a.ui_average < super::report::MIN_UI_AVERAGE {
        return Err(usage!(
            "--ui-average {} is too short: at least {} (it is the window of the report's moving average, like 30s)",
            ::format::cli::fmt_duration(a.ui_average),
            ::format::cli::fmt_duration(super::report::MIN_UI_AVERAGE)
        ));
    }
    if let Some(d) = &a.store_dir {
        super::check_store_dir("--store-dir", d)?;
    }
    let binary = broker::find_nats_server(a.nats_server.as_deref()).map_err(|e| usage!("{e:#}"))?;
    let (store_dir, remove_store) = match &a.store_dir {
        Some(d) => (d.clone(), false),
        None => {
            super::clean_killed_stores(std::path::Path::new(STORE_PARENT), STORE_PREFIX, "demo");
            (
                PathBuf::from(format!(
                    "{STORE_PARENT}/{STORE_PREFIX}{}",
                    std::process::id()
                )),
                true,
            )
        }
    };
    let store_parent_existed = store_dir.exists();
    std::fs::create_dir_all(&store_dir).map_err(|e| {
        usage!(
            "--store-dir {}: cannot create it ({e}); name a writable directory on a disk",
            store_dir.display()
        )
    })?;
    let samplers = SamplerArgs {
        devices: vec![],
        paths: vec![store_dir.clone()],
        interval: a.interval,
        mem_interval: Duration::from_millis(10),
        cpu_interval: Duration::from_millis(100),
    };
    let roles = load_args(&a)?.role_names();
    let checked = samplers.setup().and_then(|s| {
        let devices = engines::recording::recorded_names(&s.devices);
        a.flight
            .check_sources(&engines::recording::chunks::TriggerSources {
                devices: Some(&devices),
                roles: Some(&roles),
            })
            .map(|_| s)
    });
    let setup = match checked {
        // The embedded server's pid is handed to the trace once it runs (session.rs).
        Ok(s) => engines::recording::RecordSetup {
            trace: a.trace.then(engines::recording::TraceSetup::default),
            chunks,
            ..s
        },
        Err(e) => {
            if !store_parent_existed {
                let _ = std::fs::remove_dir_all(&store_dir);
            }
            return Err(e);
        }
    };
    let dir = a.out.clone().unwrap_or_else(|| default_run_dir("demo"));
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let progress = crate::progress::Progress::start(a.progress.output(), None);
    let result = run_recorded(
        &a,
        &dir,
        &setup,
        binary,
        &store_dir,
        sync,
        stop.clone(),
        progress.as_ref(),
    );
    // Cleared before anything else is printed (also on the error path: its Drop).
    drop(progress);
    if remove_store {
        let _ = std::fs::remove_dir_all(&store_dir);
    }
    let (code, rec_err) = result?;
    let o = ReportOptions {
        ui_window_ns: a.ui_average.as_nanos() as u64,
        ..Default::default()
    };
    let (s, warnings) = report::report_noted(&dir, &o)?;
    // The table ends with the report's answers (its headline and interference
    // sentences); then where the report is.
    print!("{}", report::table(&s));
    let page = dir.join("report.html");
    if page.exists() {
        println!("report: {}", page.display());
    }
    println!("{}", dir.display());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // What reading the recording back found (a cut-off end, damaged lines), as `report`
    // prints it: once, before the failure lines that end the output.
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if let Some(e) = rec_err {
        eprintln!("Error: {e:#} (the recording and report are kept)");
        return Ok(1);
    }
    let stopped = stop.load(Ordering::Relaxed);
    // Failure is loud: failed publishes make the exit 1, and the last line says what,
    // when and how many (the largest count last).
    let _ = std::io::Write::flush(&mut std::io::stdout());
    for f in &s.failures {
        eprintln!("{}", f.line);
    }
    if stopped {
        return Ok(130);
    }
    if !s.failures.is_empty() {
        return Ok(1);
    }
    Ok(code)
}

/// Where the default store goes: `STORE_PARENT/STORE_PREFIX<pid>`, removed at the end.
const STORE_PARENT: &str = "/var/tmp";
const STORE_PREFIX: &str = "diskpulse-demo-";

/// Records while the broker and publisher run. Returns the exit code and a load/broker
/// error that happened after the recording started (the recording is still complete).
#[allow(clippy::too_many_arguments)]
fn run_recorded(
    a: &DemoArgs,
    dir: &std::path::Path,
    setup: &engines::recording::SamplerSetup,
    binary: PathBuf,
    store_dir: &std::path::Path,
    sync: SyncMode,
    stop: Arc<AtomicBool>,
    progress: Option<&crate::progress::Progress>,
) -> anyhow::Result<(i32, Option<anyhow::Error>)> {
    let record = RecordTo::New {
        dir: dir.to_path_buf(),
        setup: setup.clone(),
        argv: super::argv(),
    };
    // The progress line counts the store devices' write bursts from the sampler's bins.
    let live = progress.map(|_| engines::live::Live::new(setup.disk_interval.as_nanos() as u64));
    let mut session = Session::open_with_live(record, Threads::Exactly(2), stop, live.clone())?;
    let mut copts = ClusterOptions::new(1, vec![store_dir.to_path_buf()], sync, dir);
    copts.binary = Some(binary);
    let load_args = load_args(a)?;
    let live_diskstats = live;
    let ran = session.run(
        BrokerPlan::Embedded(copts),
        engines::broker::monitor::DEFAULT_INTERVAL,
        true,
        async |live| {
            let events = &live.events;
            let phase = ::format::events::Phase {
                phase: Some("js-pub".to_string()),
                ..Default::default()
            };
            events.event(Body::PhaseStart(phase.clone()));
            if let Some(p) = progress {
                p.begin_run(1, "", Some(a.duration.as_secs_f64()), false);
                let devices = crate::progress::own_devices(&setup.devices);
                p.watch(dir, live_diskstats.clone().map(|l| (l, devices)));
            }
            let r = load::run(&load_args, &live.load_env()).await;
            if let Some(p) = progress {
                p.end_run();
            }
            events.event(Body::PhaseEnd(phase));
            r
        },
    );
    let mut err = ran.died.map(anyhow::Error::msg);
    match ran.result {
        Ok(s) => {
            // The single server's own meta, as `demo` has always recorded it.
            if let Some(::format::meta::BrokerSection::Cluster(c)) = ran.cluster_meta {
                if let Some(server) = c.servers.into_iter().next() {
                    session.set(&::format::meta::BrokerSection::Server(server))?;
                }
            }
            session.set(&load::output::DemoLoad {
                mode: "js-pub".into(),
                stream: "DEMO".into(),
                subject: "demo.events".into(),
                msg_size: a.size,
                window: a.window,
                duration_ns: a.duration.as_nanos() as u64,
                js_context: s.js_context,
                roles: output::summarize(&s.clients, s.started_ns),
            })?;
        }
        Err(e) => {
            session.events().error("demo", "load", &format!("{e:#}"));
            err.get_or_insert(e);
        }
    }
    session.close(None)?;
    Ok((0, err))
}

/// The publisher's flags: js-pub to stream DEMO for `--duration`.
fn load_args(a: &DemoArgs) -> anyhow::Result<load::LoadArgs> {
    let size = a.size.to_string();
    let window = a.window.to_string();
    let duration = ::format::cli::fmt_duration(a.duration);
    load::args_from([
        "js-pub",
        "--stream",
        "DEMO",
        "--subject",
        "demo.events",
        "--size",
        &size,
        "--window",
        &window,
        "--duration",
        &duration,
        "--quiet",
    ])
}
