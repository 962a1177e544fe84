//! Subcommands. Each validates all of its input before it writes anything, so bad input
//! never leaves a half-made run directory.

pub mod agent;
pub mod bench;
mod bench_whole;
pub mod check;
pub mod demo;
pub mod export;
pub use engines::fsync;
pub mod lab;
pub mod load;
pub mod nats_bench;
pub mod nats_bench_v2;
pub use engines::probe;
pub mod proxy;
pub mod record;
pub mod report;
pub mod run;
pub mod view;

use clap::{Parser, Subcommand};

/// diskpulse: a message broker's load and the block devices under it on one millisecond timeline.
#[derive(Parser, Debug)]
#[command(name = "diskpulse", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record block devices (diskstats every 1 ms), dirty/writeback memory and CPU into a run directory.
    #[command(after_help = "\
Examples:
  diskpulse record --path /var/lib/nats --duration 60s --out runs/idle
  diskpulse record --device vda --interval 500us -- ./my-benchmark.sh
  diskpulse record --path /mnt/vol0 -- diskpulse probe --filename /mnt/vol0/p.dat --preset array-check
  diskpulse record --trace --trace-comm nats-server --path /var/lib/nats
  diskpulse record --path /var/lib/nats --chunk 10m --keep 6h --trigger 'await_ms>50'  (kill -USR1 PID: keep now)

Exit codes: 0 done, 2 bad input (nothing written), 130 interrupted (the recording is kept);
with a command: the command's exit code (128 + the signal when a signal killed it).")]
    Record(Box<record::RecordArgs>),
    /// Analyse a run directory: rates, bursts, the UI average, summary.json, timeline.png/.svg.
    #[command(after_help = "\
Examples:
  diskpulse report runs/idle
  diskpulse report runs/idle --window 10ms --ui-average 5s
  diskpulse report runs/idle --json --no-charts > summary.json")]
    Report(report::ReportArgs),
    /// Zero-setup demo: embedded nats-server, JetStream publisher, 1 ms disk recording, report.
    #[command(after_help = "\
Examples:
  diskpulse demo
  diskpulse demo --duration 10s --sync-interval always --out runs/demo-always
  diskpulse demo --size 1KiB --store-dir /mnt/vol0/js")]
    Demo(demo::DemoArgs),
    /// Measure the sampler itself: ns per diskstats sample, CPU share, samples vs expected, jitter.
    #[command(after_help = "\
Examples:
  diskpulse bench
  diskpulse bench --duration 30s --interval 500us --devices 1

Exit codes: 0 done, 2 bad input, 130 interrupted (its scratch directory is removed).")]
    Bench(bench::BenchArgs),
    /// fio-like direct-I/O probe: rates, queue depths, mixes, fsync, latency percentiles, fio JSON.
    Probe(Box<probe::ProbeArgs>),
    /// pg_test_fsync's questions with percentiles: which way to make writes durable is fastest.
    #[command(after_help = "\
Examples:
  diskpulse fsync --dir /var/lib/postgresql
  diskpulse fsync --dir /mnt/vol0 --secs-per-test 2s --json")]
    Fsync(fsync::FsyncArgs),
    /// Everything to know before a benchmark: caches, flush cost, settings, other I/O.
    #[command(after_help = "\
Examples:
  diskpulse check /var/lib/nats
  diskpulse check /mnt/vol0 --quick --json
  diskpulse check /dev/vdb --strict")]
    Check(engines::check::CheckArgs),
    /// The load generator: core pub/sub, request/reply, JetStream, KV, object store.
    #[command(after_help = "\
Examples:
  diskpulse load pub --duration 10s
  diskpulse load js-pub --server nats://127.0.0.1:4222 --size 1KiB --rate 5000 --duration 30s
  diskpulse load kv-put --record --out runs/kv")]
    Load(Box<load::LoadCmdArgs>),
    /// natscli's `nats bench` command line, run by the load generator: its summary and its CSV.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "\
Two forms: natscli v0.2's `nats-bench pub|sub|service|js|kv ...` (a first word that is one of
those), and v0.1's flat `nats-bench SUBJECT --pub N --sub M ...` (a subject spelled like one
of those words goes after `--`: `nats-bench --pub 1 -- pub`).

Examples:
  diskpulse nats-bench pub foo --clients 10 --msgs 10000 --size 512
  diskpulse nats-bench js pub foo --create --batch 1000 --csv=results.csv
  diskpulse nats-bench my_subject --msgs 1000000 --pub 4 --sub 4 --csv=results.csv
  diskpulse nats-bench benchsubject --js --purge --pub 1 --sub 2 --no-progress
  diskpulse nats-bench benchsubject --pub 10 --sub 2 --request --server nats://a:4222,nats://b:4222
  NATS_USER=bench NATS_PASSWORD=... diskpulse nats-bench s --kv --pub 1 --server nats://host:4222

Without --server (or $NATS_URL) it starts an embedded nats-server, as `load` does.
--csv FILE is natscli's CSV; FILE.diskpulse.csv holds diskpulse's extra columns, FILE.png
and FILE.svg the per-client rates.
Exit codes: 0 done, 1 operations failed or messages were lost, 2 bad input (nothing written)."
    )]
    NatsBench(Box<nats_bench::NatsBenchArgs>),
    /// Run a whole study from a scenario file: volumes, broker, phases, matrix, report.
    #[command(after_help = "\
Examples:
  diskpulse run scenarios/demo.toml --dry-run
  diskpulse run scenarios/raid0-vs-raid1.toml --out studies/raid")]
    Run(run::RunArgs),
    /// A run's series as OpenMetrics (Prometheus backfill) or Influx line protocol.
    #[command(after_help = "\
Examples:
  diskpulse export runs/idle --format openmetrics --out idle.om
  promtool tsdb create-blocks-from openmetrics idle.om ./prom-data
  diskpulse export runs/idle --format influx --step 100ms > idle.lp

Exit codes: 0 done, 2 bad input (nothing written).")]
    Export(export::ExportArgs),
    /// Serve a run's report.html on 127.0.0.1, with 1 ms data for any span the page zooms into.
    #[command(after_help = "\
Examples:
  diskpulse view runs/overnight
  diskpulse view runs/overnight --listen 127.0.0.1:8080
  diskpulse view runs/overnight --listen 0.0.0.0:9465 --allow-remote

Open the printed URL; zoom in and the page fetches the span's data: envelopes for wide
spans, the raw 1 ms rows for narrow ones. The same report.html opened as a file keeps
what it embeds. Ctrl-C stops it.
Exit codes: 0 stopped, 2 bad input (not a run directory, no report.html, --listen not
loopback without --allow-remote, port in use).")]
    View(view::ViewArgs),
    /// Lab volumes: ext4, xfs or btrfs RAID 0/1/10 on loop devices, optionally throttled.
    #[command(after_help = "\
Examples:
  diskpulse lab up vol0 --size 2G --fs xfs
  diskpulse lab list
  diskpulse lab down vol0")]
    Lab(lab::LabArgs),
    /// A TCP proxy that delays each direction (tc netem's delay without root), for any client.
    #[command(after_help = "\
Examples:
  diskpulse proxy --listen 127.0.0.1:14222 --upstream 127.0.0.1:4222 --delay 10ms
  diskpulse proxy --upstream 127.0.0.1:5672 --delay 50ms --jitter 5ms --duration 60s --json

At the end (Ctrl-C or --duration) it prints the delay each direction actually added
(p50/p99/max per chunk, from its read to the end of its write) beside the delay asked.
Exit codes: 0 done, 2 bad input, 130 interrupted (the figures are printed).")]
    Proxy(proxy::ProxyArgs),
    /// Sample this host (diskstats every 1 ms, memory, CPU) and publish it over NATS for `record --agents`.
    #[command(after_help = "\
Examples:
  diskpulse agent --server nats://10.0.0.1:4222 --path /var/lib/nats --name node-a
  diskpulse agent --server nats://127.0.0.1:4222 --device vdb --device vdc

Publishes on diskpulse.NODE.{diskstats,meminfo,cpu} (batches every 100 ms), answers
clock requests on diskpulse.NODE.clock, and keeps going across broker restarts.
Exit codes: 0 stopped (Ctrl-C or --duration), 2 bad input.")]
    Agent(Box<agent::AgentArgs>),
}

/// Parses the command line and runs the command; returns the exit code.
pub fn main() -> anyhow::Result<i32> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return Ok(clap_exit(&e)),
    };
    match cli.command {
        Command::Record(a) => record::run(*a),
        Command::Report(a) => report::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Probe(a) => probe::run(*a),
        Command::Fsync(a) => fsync::run(a),
        Command::Check(a) => check::run(a),
        Command::Load(a) => load::run(*a),
        Command::NatsBench(a) => nats_bench::run(*a),
        Command::Run(a) => run::run(a),
        Command::Export(a) => export::run(a),
        Command::View(a) => view::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Proxy(a) => proxy::run(a),
        Command::Agent(a) => agent::run(*a),
    }
}

/// What clap's own `exit` does (help and version on stdout with 0, errors on stderr with
/// 2), but a stdout that cannot take the help or the version (`--help > /dev/full`) is a
/// failure said on stderr (exit 1), not a silent 0.
fn clap_exit(e: &clap::Error) -> i32 {
    use std::io::Write as _;
    let printed = e.print().and_then(|_| std::io::stdout().flush());
    match printed {
        Ok(()) => e.exit_code(),
        Err(w) if !e.use_stderr() => {
            let what = match e.kind() {
                clap::error::ErrorKind::DisplayVersion => "the version",
                _ => "the help",
            };
            let _ = writeln!(
                std::io::stderr(),
                "Error: cannot write {what} to stdout: {w}; send it to a file or terminal that takes it"
            );
            1
        }
        Err(_) => e.exit_code(),
    }
}

/// `--progress` / `--no-progress` of `demo` and `run` (as `record`'s, on stderr).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ProgressArgs {
    /// Show the progress line on stderr also when stderr is not a terminal (then one
    /// plain line a second; on a terminal a bar redrawn in place is the default).
    #[arg(long, conflicts_with = "no_progress")]
    pub progress: bool,
    /// No progress line, also on a terminal.
    #[arg(long)]
    pub no_progress: bool,
}

impl ProgressArgs {
    pub fn output(&self) -> crate::progress::Output {
        crate::progress::choose_for_stderr(self.progress, self.no_progress)
    }
}

/// The full argv, for meta.json (secrets are redacted there). An argument that is not
/// UTF-8 (a path) is kept lossily: `std::env::args` would panic on it.
pub fn argv() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Checks a broker store directory (`--store-dir`) before anything is started: an existing
/// directory, or a missing one whose parent is a directory (only the last level is made,
/// never a tree: a typo must not create `/nonexistent/dir` on `/`), and not on a kernel
/// pseudo file system (the broker would fail after the recording started).
pub fn check_store_dir(flag: &str, dir: &std::path::Path) -> anyhow::Result<()> {
    let shown = dir.display();
    let on = match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => dir.to_path_buf(),
        Ok(_) => {
            return Err(::format::usage!(
                "{flag} {shown}: exists and is not a directory; name a directory on a disk"
            ))
        }
        Err(_) => {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => std::path::Path::new("."),
            };
            if !parent.is_dir() {
                return Err(::format::usage!(
                    "{flag} {shown}: its parent {} is not an existing directory; diskpulse makes only the last directory, never a tree: create the parent first",
                    parent.display()
                ));
            }
            parent.to_path_buf()
        }
    };
    if let Some(fs) = collectors::probe::target::pseudo_fs_name(&on) {
        return Err(::format::usage!(
            "{flag} {shown}: is on {fs}, a kernel pseudo file system, not storage; name a directory on a disk-backed file system"
        ));
    }
    Ok(())
}

/// Removes the default stores of `demo`s or `load`s that were killed (`kill -9`, or a
/// scenario phase dying with its `run`: no end to remove them; their nats-server died
/// with them): `<prefix><pid>` directories whose pid is not a running diskpulse. Says
/// what it removed.
pub fn clean_killed_stores(parent: &std::path::Path, prefix: &str, what: &str) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "diskpulse" || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        match std::fs::remove_dir_all(&p) {
            Ok(()) => eprintln!(
                "diskpulse {what}: removed {}, the store of a {what} that was killed (pid {pid} is gone)",
                p.display()
            ),
            Err(err) => eprintln!(
                "diskpulse {what}: cannot remove {}, the store of a killed {what}: {err}",
                p.display()
            ),
        }
    }
}
