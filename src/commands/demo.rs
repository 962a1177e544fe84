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

use crate::broker::{self, Broker, BrokerOptions, SyncMode};
use crate::cli::{parse_duration, parse_size};
use crate::commands::record::SamplerArgs;
use crate::load::{self, output, LoadEnv};
use crate::recording::session::{default_run_dir, Recording};
use crate::report::{self, ReportOptions};
use crate::usage;

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
    if a.window == 0 {
        return Err(usage!("--window must be at least 1"));
    }
    let binary = broker::find_nats_server(a.nats_server.as_deref()).map_err(|e| usage!("{e:#}"))?;
    let (store_dir, remove_store) = match &a.store_dir {
        Some(d) => (d.clone(), false),
        None => (
            PathBuf::from(format!("/var/tmp/diskpulse-demo-{}", std::process::id())),
            true,
        ),
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
    let setup = match samplers.setup() {
        Ok(s) => s,
        Err(e) => {
            if !store_parent_existed {
                let _ = std::fs::remove_dir_all(&store_dir);
            }
            return Err(e);
        }
    };
    let dir = a.out.clone().unwrap_or_else(|| default_run_dir("demo"));
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let result = run_recorded(&a, &dir, &setup, binary, &store_dir, sync, stop.clone());
    if remove_store {
        let _ = std::fs::remove_dir_all(&store_dir);
    }
    let (code, rec_err) = result?;
    let o = ReportOptions {
        ui_window_ns: a.ui_average.as_nanos() as u64,
        ..Default::default()
    };
    let s = report::report(&dir, &o)?;
    print!("{}", report::table(&s));
    println!("{}", dir.display());
    if let Some(e) = rec_err {
        eprintln!("Error: {e:#} (the recording and report are kept)");
        return Ok(1);
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(130);
    }
    Ok(code)
}

/// Records while the broker and publisher run. Returns the exit code and a load/broker
/// error that happened after the recording started (the recording is still complete).
fn run_recorded(
    a: &DemoArgs,
    dir: &std::path::Path,
    setup: &crate::recording::SamplerSetup,
    binary: PathBuf,
    store_dir: &std::path::Path,
    sync: SyncMode,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(i32, Option<anyhow::Error>)> {
    let mut rec = Recording::start(dir, setup, &super::argv())?;
    let events = rec.events.clone();
    let clock = rec.clock;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let opts = BrokerOptions {
        binary: Some(binary),
        store_dir: store_dir.to_path_buf(),
        sync,
        run_dir: dir.to_path_buf(),
        name: "n1".into(),
    };
    let size = a.size.to_string();
    let window = a.window.to_string();
    let duration = crate::cli::fmt_duration(a.duration);
    let load_args = load::args_from([
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
    ])?;
    let outcome: anyhow::Result<(serde_json::Value, load::LoadOutcome)> = rt.block_on(async {
        let mut b = Broker::start(opts, &events).await?;
        let bmeta = b.meta();
        let mon_stop = Arc::new(AtomicBool::new(false));
        let mon = crate::broker::monitor::start_monitor(
            vec![("n1".to_string(), b.monitor_url())],
            clock,
            dir,
            events.clone(),
            mon_stop.clone(),
            crate::broker::monitor::DEFAULT_INTERVAL,
        )
        .await?;
        events.event("phase_start", serde_json::json!({"phase": "js-pub"}));
        let env = LoadEnv {
            clock,
            events: events.clone(),
            stop: stop.clone(),
            servers: vec![b.client_url()],
            load_csv: Some(dir.join("load.csv")),
        };
        let r = load::run(&load_args, &env).await;
        events.event("phase_end", serde_json::json!({"phase": "js-pub"}));
        mon_stop.store(true, Ordering::SeqCst);
        let _ = mon.await;
        let st = b.stop().await;
        let s = r?;
        st?;
        Ok((bmeta, s))
    });
    let mut err = None;
    match outcome {
        Ok((bmeta, s)) => {
            rec.set_meta("broker", bmeta)?;
            let roles = output::summarize(&s.clients);
            rec.set_meta(
                "load",
                serde_json::json!({
                    "mode": "js-pub", "stream": "DEMO", "subject": "demo.events",
                    "msg_size": a.size, "window": a.window,
                    "duration_ns": a.duration.as_nanos() as u64,
                    "js_context": s.js_context,
                    "roles": roles,
                }),
            )?;
        }
        Err(e) => {
            events.error("demo", "load", &format!("{e:#}"));
            err = Some(e);
        }
    }
    rec.finish()?;
    Ok((0, err))
}
