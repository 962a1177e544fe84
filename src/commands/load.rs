//! `diskpulse load MODE`: the load generator, against your servers (`--server`,
//! `$NATS_URL`) or an embedded nats-server it starts; `--record` records the disks
//! beside it, and under `diskpulse record -- diskpulse load ...` it writes `load.csv`
//! into the parent's run on the parent's clock.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use collectors::clock::Clock;

use crate::session::{BrokerPlan, RecordTo, Session, Threads};
use ::format::usage;
use ::report::{self, ReportOptions};
use engines::broker::{self, ClusterOptions, SyncMode};
use engines::load::{self, output, LoadArgs};
use engines::recording::session::default_run_dir;

pub use engines::load::LoadCmdArgs;

/// How a run's results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `load`'s summary per role, with latencies and errors, on stdout.
    Load,
    /// `nats bench`'s summary blocks on stdout (natscli's text, for its readers), `load`'s
    /// summary on stderr, and natscli's "Saved metric data in csv file" line.
    NatsBench,
    /// natscli v0.2's report on stdout and its CSV (latency columns for the kinds that
    /// have them), `load`'s summary on stderr.
    NatsBenchV2(load::natscli_v2::Kind),
}

impl Style {
    /// The natscli CSV of this style (v0.1's for `load` and v0.1).
    fn csv(&self, run_id: &str, clients: &[load::record::ClientTotals]) -> String {
        match self {
            Style::NatsBenchV2(k) => load::natscli_v2::csv(k, run_id, clients),
            _ => load::natscli::csv(run_id, clients),
        }
    }

    fn csv_header(&self) -> &'static str {
        match self {
            Style::NatsBenchV2(k) => k.csv_header(),
            _ => load::natscli::CSV_HEADER,
        }
    }
}

pub fn run(a: LoadCmdArgs) -> anyhow::Result<i32> {
    run_as(a, Style::Load)
}

/// Runs the load and prints its results in `style`.
#[allow(
    clippy::too_many_lines,
    reason = "the load command's steps in order (broker, recording, load, summary, print), each next to what it stops on an error"
)]
pub fn run_as(mut a: LoadCmdArgs, style: Style) -> anyhow::Result<i32> {
    // --payload: the file is read once, before every check (--size is its length).
    a.load.load_payload()?;
    let parent_run = std::env::var_os("DISKPULSE_RUN_DIR").map(PathBuf::from);
    // Every check of the flags alone, the one a scenario's load phase gets too.
    broker::check_load_flags(&a, parent_run.is_some())?;
    let sync: SyncMode = a
        .sync_interval
        .parse()
        .map_err(|e| usage!("--sync-interval: {e}"))?;
    let amqp = a.load.mode.is_amqp();
    // AMQP modes: --server amqp://... only ($NATS_URL names NATS servers).
    let servers = if amqp {
        a.load.connect.servers.clone()
    } else {
        a.load.connect.server_list()
    };
    let embedded = servers.is_empty();
    let rabbit_binary = if amqp && embedded {
        Some(
            broker::rabbitmq::find_rabbitmq_server(None)
                .map_err(|e| usage!("{} needs a RabbitMQ broker: {e:#}", a.load.mode.cli_name()))?,
        )
    } else {
        None
    };
    let binary = if embedded && !amqp {
        Some(broker::find_nats_server(a.nats_server.as_deref()).map_err(|e| usage!("{e:#}"))?)
    } else {
        None
    };
    if embedded && !amqp {
        // The embedded server runs with nats-server's default max_payload.
        a.load
            .check_max_payload(load::DEFAULT_MAX_PAYLOAD, "the embedded nats-server")?;
    }
    let remove_store = a.store_dir.is_empty();
    let base = PathBuf::from(format!("/var/tmp/diskpulse-load-{}", std::process::id()));
    // The default store goes on every way out: a refusal after it was made, a failure, or
    // the end of a whole run.
    let _store = (remove_store && embedded).then(|| RemoveOnDrop(base.clone()));
    let mut copts = ClusterOptions::new(
        a.cluster,
        if remove_store {
            vec![base.clone()]
        } else {
            a.store_dir.clone()
        },
        sync,
        PathBuf::new(),
    );
    copts.binary = binary;
    let store_dirs = copts.node_store_dirs().map_err(|e| usage!("{e:#}"))?;
    for d in &a.store_dir {
        super::check_store_dir("--store-dir", d)?;
    }
    // Recording setup is validated before anything starts.
    let record = if a.record {
        let mut s = a.samplers.clone();
        if s.devices.is_empty() && s.paths.is_empty() {
            for d in &store_dirs {
                std::fs::create_dir_all(d)
                    .map_err(|e| usage!("--store-dir {}: {e}", d.display()))?;
            }
            s.paths = store_dirs.clone();
        }
        let mut setup = s.setup()?;
        // The servers' pids are handed to the trace once they run (session.rs).
        setup.trace = a.trace.then(engines::recording::TraceSetup::default);
        let dir = a.out.clone().unwrap_or_else(|| default_run_dir("load"));
        RecordTo::New {
            dir,
            setup,
            argv: super::argv(),
        }
    } else if let Some(d) = parent_run {
        RecordTo::Parent { dir: d }
    } else {
        RecordTo::Nothing
    };
    // Every check has passed: now the first file may be written.
    a.load.create_csv()?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let mut session = Session::open(
        record,
        Threads::Exactly(a.load.runtime_threads()),
        stop.clone(),
    )?;
    let broker = if embedded && amqp {
        let store = store_dirs.first().cloned().unwrap_or_else(|| base.clone());
        let run_dir = session
            .run_dir()
            .map(PathBuf::from)
            .unwrap_or_else(|| base.join("run"));
        let mut o = broker::RabbitOptions::new(store, run_dir);
        o.binary = rabbit_binary;
        BrokerPlan::Rabbit(o)
    } else if embedded {
        copts.run_dir = session
            .run_dir()
            .map(PathBuf::from)
            .unwrap_or_else(|| base.join("run"));
        BrokerPlan::Embedded(copts)
    } else {
        let monitors = a
            .monitors
            .iter()
            .enumerate()
            .map(|(i, u)| (format!("s{}", i + 1), u.clone()))
            .collect();
        BrokerPlan::External { servers, monitors }
    };
    let clock = session.clock();
    let ran = session.run(broker, a.monitor_interval, true, async |live| {
        let progress = (!a.load.quiet).then(|| spawn_progress(&a.load, clock, live.stop.clone()));
        let r = load::run(&a.load, &live.load_env()).await;
        if let Some(p) = progress {
            p.abort();
        }
        r
    });
    if remove_store && embedded {
        // The stores of loads killed before they could remove theirs (a scenario phase
        // dying with its run); this one's goes with `_store`.
        super::clean_killed_stores(Path::new("/var/tmp"), "diskpulse-load-", "load");
    }
    let outcome = match ran.result {
        Ok(x) => x,
        Err(e) => {
            if let Some(p) = &a.load.csv {
                // Nothing was measured: CSVs with their headers, so scripts read an empty run.
                let _ = ::format::atomic::write(p, format!("{}\n", style.csv_header()).as_bytes());
                let _ = ::format::atomic::write(
                    &load::natscli::extras_path(p),
                    format!("{}\n", output::EXTRAS_CSV_HEADER).as_bytes(),
                );
            }
            if session.records() {
                session.events().error("load", "run", &format!("{e:#}"));
                let dir = session.run_dir().map(PathBuf::from).unwrap_or_default();
                session.close(None)?;
                eprintln!("(recording kept in {})", dir.display());
            }
            return Err(e);
        }
    };
    let roles = output::summarize(&outcome.clients, outcome.started_ns);
    let run_id = output::run_id();
    let mut saved = vec![];
    if let Some(p) = &a.load.csv {
        ::format::atomic::write(p, style.csv(&run_id, &outcome.clients).as_bytes())?;
        let x = load::natscli::extras_path(p);
        ::format::atomic::write(
            &x,
            output::extras_csv(&run_id, &roles, &outcome.clients).as_bytes(),
        )?;
        saved.push(format!("Saved metric data in csv file {}", p.display()));
        saved.push(format!(
            "Saved diskpulse's extra columns in {}",
            x.display()
        ));
        let mut title = ::format::redact::argv(&super::argv());
        if let Some(first) = title.first_mut() {
            *first = "diskpulse".into();
        }
        match load::client_chart::write(p, &title.join(" "), &outcome.clients) {
            Ok([png, svg]) => saved.push(format!(
                "Saved the per-client rates chart in {} and {}",
                png.display(),
                svg.display()
            )),
            // The figures are in the CSVs; a chart that cannot be drawn says why.
            Err(e) => eprintln!("warning: no per-client chart: {e:#}"),
        }
    }
    let json = load::output::LoadReport {
        run_id,
        mode: a.load.mode.cli_name(),
        servers: a
            .load
            .connect
            .server_list()
            .iter()
            .map(|s| load::connect::redact_url(s))
            .collect(),
        auth: a.load.connect.describe(),
        roles,
        clients: outcome.clients,
        js_context: outcome.js_context,
        load_csv_rows: outcome.csv_rows,
        stream_check: outcome.stream_check,
        proxy: outcome.proxies,
    };
    if a.load.json {
        // Through a Value: its keys, nested structs' too, print sorted, as they always have.
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&json)?)?
        );
    } else if style == Style::NatsBench {
        println!();
        print!("{}", load::natscli::report(&json.clients));
        eprint!("{}", output::human(&json.roles, &json.clients));
    } else if let Style::NatsBenchV2(k) = style {
        // natscli's printResults: a blank line, the report, a blank line.
        println!();
        println!("{}", load::natscli_v2::report(&k, &json.clients));
        eprint!("{}", output::human(&json.roles, &json.clients));
    } else {
        print!("{}", output::human(&json.roles, &json.clients));
    }
    if !a.load.json {
        // What --inject-latency asked and what the proxies added, per direction.
        for p in &json.proxy {
            println!("{}", engines::proxy::human(p));
        }
    }
    if !a.load.json {
        for l in &saved {
            println!("{l}");
        }
    }
    let mut data_loss = None;
    if let Some(c) = &json.stream_check {
        // The figures are in the --json document; the loss is loud in every mode.
        let (line, loss) = output::stream_check_line(c);
        if !a.load.json {
            println!("{line}");
        }
        if let Some(loss) = loss {
            session.events().error("load", "data_loss", &loss);
            eprintln!("{loss}");
            data_loss = Some(loss);
        }
    }
    if let Some(m) = ran.cluster_meta {
        session.set(&m)?;
    }
    session.set(&json)?;
    if let Some((dir, s, warnings)) = session.close(Some(&ReportOptions::default()))? {
        eprint!("{}", report::table(&s));
        println!("{}", dir.display());
        // What reading the recording back found (as `report` prints it), once.
        for w in warnings {
            eprintln!("warning: {w}");
        }
    }
    if let Some(d) = ran.died {
        eprintln!("Error: {d}");
        return Ok(1);
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(130);
    }
    if let Some(line) = output::error_line(&json.roles) {
        eprintln!("Error: {line}");
        // Failure is loud: the last line says what, when and how many.
        for f in output::failures(&json.roles) {
            eprintln!("{}", f.line);
        }
        if let Some(loss) = &data_loss {
            eprintln!("{loss}");
        }
        return Ok(1);
    }
    if let Some(loss) = data_loss {
        // An acked message missing from the stream fails the run even when no
        // operation failed.
        eprintln!("Error: {loss}");
        return Ok(1);
    }
    Ok(0)
}

/// A progress line on stderr while the load runs, only when stderr is a terminal.
fn spawn_progress(
    a: &LoadArgs,
    clock: Clock,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    use std::io::IsTerminal;
    let total = a.total_ops();
    let duration = a.duration;
    let enabled = std::io::stderr().is_terminal();
    tokio::spawn(async move {
        if !enabled {
            return;
        }
        let pb = match (duration, total) {
            (Some(d), _) => indicatif::ProgressBar::new(d.as_millis() as u64),
            (None, Some(_)) | (None, None) => indicatif::ProgressBar::new_spinner(),
        };
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:40}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let t0 = clock.now_ns();
        while !stop.load(Ordering::Relaxed) {
            let ms = (clock.now_ns() - t0) / 1_000_000;
            pb.set_position(ms);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        pb.finish_and_clear();
    })
}

/// Removes a directory when dropped: the default store of an embedded broker, on every
/// path out of `load`.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
