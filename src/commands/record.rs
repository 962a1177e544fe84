//! `diskpulse record`: sample block devices, dirty memory and CPU into a run directory
//! until the duration ends, the command exits, or Ctrl-C.

use std::path::PathBuf;
use std::process::Command as Proc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use ::format::cli::{fmt_duration, parse_duration};
use ::format::events::{self as ev, Body};
use ::format::usage;
use engines::recording::session::{default_run_dir, Recording};
use engines::recording::{SamplerArgs, TraceSetup};

#[derive(Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub samplers: SamplerArgs,
    /// Stop after this long (default 30s without a command; with a command, when it exits).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Run directory to create (must not exist or be empty). Default: diskpulse-runs/<time>-record.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Print a line a second per device (iostat -x's r/s w/s rkB/s wkB/s aqu-sz %util and
    /// the 10 ms peak MiB/s) on stdout also when it is not a terminal (on a terminal it is
    /// the default).
    #[arg(long, conflicts_with = "no_progress")]
    pub progress: bool,
    /// No per-second line, also on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// Serve live metrics at http://ADDR/metrics while recording (Prometheus text:
    /// node_exporter's disk counters plus 1/10/100 ms peaks since the last scrape, burst
    /// period and hidden factor), e.g. 127.0.0.1:9464; port 0 picks a free port (printed).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Also record these nodes' agents (`diskpulse agent --name NODE` on each host),
    /// through --server: their samples on this clock, in agents_*.csv files with a
    /// `node` column; each node's clock offset and bound in meta.json. Comma-separated.
    #[arg(long, value_name = "NODE,...", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// The NATS connection for --agents.
    #[command(flatten)]
    pub connect: engines::load::connect::ConnectArgs,
    #[command(flatten)]
    pub flight: FlightArgs,
    /// Command to run while recording; it gets DISKPULSE_RUN_DIR and DISKPULSE_CLOCK_ZERO_NS.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// `--trace` and what to trace (issue 11).
#[derive(Args, Debug, Clone, Default)]
pub struct TraceArgs {
    /// Trace sync calls (fsync, fdatasync, sync_file_range, msync) and every block request
    /// of the recorded devices through tracefs (root): fsync_calls.csv.gz and
    /// block_requests.csv.gz. Whose calls: --trace-pid/--trace-comm, the command after
    /// --, else every process's.
    #[arg(long)]
    pub trace: bool,
    /// Trace this process's sync calls (all its threads). Repeatable; needs --trace.
    #[arg(long = "trace-pid", value_name = "PID", requires = "trace")]
    pub trace_pids: Vec<u32>,
    /// Trace the sync calls of processes with this name (as `ps -o comm` shows it, at
    /// most 15 characters). Repeatable; needs --trace.
    #[arg(long = "trace-comm", value_name = "NAME", requires = "trace")]
    pub trace_comms: Vec<String>,
    /// Trace one half only: `block` (the block requests; no syscall tracepoint, whose cost
    /// falls on every system call of the machine) or `sync` (the sync calls). Needs --trace.
    #[arg(
        long = "trace-only",
        value_name = "WHAT",
        value_enum,
        requires = "trace"
    )]
    pub trace_only: Option<engines::recording::trace::TraceOnly>,
}

/// `--chunk`, `--keep`, `--trigger`: recording for days (issue 13).
#[derive(Args, Debug, Clone)]
pub struct FlightArgs {
    /// Cut diskstats.csv.gz (and meminfo.csv, cpu.csv, proc_io.csv, envelopes.csv.gz) into chunks of this
    /// much run time (1h, 10m, 5s; aligned on the run clock) or of this size on disk
    /// (256MiB): each closed chunk is fsynced and moved to chunks/diskstats.NNNNNN.csv.gz
    /// (chunks/meminfo.NNNNNN.csv, ...), never written again, and listed in meta.json;
    /// the current one keeps the file's name. `report` reads them as one.
    #[arg(long, value_name = "DURATION|SIZE", default_value = "1h")]
    pub chunk: String,
    /// Flight recorder: delete closed chunks whose rows are older than this (6h), never the
    /// current one nor one a trigger's window overlaps; meta.json `chunks.dropped` says
    /// which and why.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub keep: Option<Duration>,
    /// Keep the window around an event from --keep: 'write_mibps>400', 'read_mibps>400'
    /// (MiB/s of any recorded device over 10 ms) or 'await_ms>50' (iostat's await over
    /// 10 ms); 'vdb:await_ms>50' watches one device only; 'ack_p99_ms>50' a load.csv
    /// window's p99 ack latency (js-pub, kv-put, obj-put, amqp-pub; 'kv-put:ack_p99_ms>20'
    /// one role). Repeatable. `kill -USR1 PID` keeps the window around now as well. Each
    /// firing is a `trigger` event.
    #[arg(long = "trigger", value_name = "COND", value_parser = engines::recording::chunks::parse_trigger)]
    pub triggers: Vec<engines::recording::chunks::Trigger>,
    /// How much a trigger keeps before and after it fires.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub trigger_window: Duration,
}

/// The shortest `--chunk` duration and size.
pub const MIN_CHUNK: Duration = Duration::from_secs(1);
pub const MIN_CHUNK_BYTES: u64 = 64 << 10;

impl FlightArgs {
    /// Refuses a `--trigger` whose source this run never has
    /// ([`engines::recording::chunks::check_sources`]): exit 2, naming the trigger.
    pub fn check_sources(
        &self,
        s: &engines::recording::chunks::TriggerSources,
    ) -> anyhow::Result<()> {
        engines::recording::chunks::check_sources(&self.triggers, s)
            .map_err(|e| usage!("--trigger {e}"))
    }

    /// Checks the values before anything is written.
    pub fn setup(&self) -> anyhow::Result<engines::recording::chunks::ChunkSetup> {
        let (every_ns, every_bytes) = match parse_duration(&self.chunk) {
            Ok(d) if d < MIN_CHUNK => {
                return Err(usage!(
                    "--chunk {}: a chunk of less than {} would close files faster than they fill; give e.g. 1h, 10m or 5s",
                    self.chunk,
                    fmt_duration(MIN_CHUNK)
                ))
            }
            Ok(d) => (Some(d.as_nanos() as u64), None),
            Err(_) => match ::format::cli::parse_size(&self.chunk) {
                Ok(b) if b >= MIN_CHUNK_BYTES => (None, Some(b)),
                Ok(_) => {
                    return Err(usage!(
                        "--chunk {}: the smallest chunk size is 64KiB; give e.g. 256MiB, or a duration like 1h",
                        self.chunk
                    ))
                }
                Err(_) => {
                    return Err(usage!(
                        "--chunk '{}' is neither a duration (1h, 10m, 5s) nor a size (256MiB); give one of those",
                        self.chunk
                    ))
                }
            },
        };
        if self.triggers.len() > engines::recording::chunks::MAX_TRIGGERS {
            return Err(usage!(
                "--trigger given {} times: at most {} conditions; drop some",
                self.triggers.len(),
                engines::recording::chunks::MAX_TRIGGERS
            ));
        }
        if let Some(k) = self.keep {
            if k < MIN_CHUNK {
                return Err(usage!(
                    "--keep {}: keeps less than a second; give e.g. --keep 6h",
                    fmt_duration(k)
                ));
            }
            if self.trigger_window > k {
                return Err(usage!(
                    "--trigger-window {} is longer than --keep {}: the window before a trigger would already be deleted when it fires; shorten --trigger-window or lengthen --keep",
                    fmt_duration(self.trigger_window),
                    fmt_duration(k)
                ));
            }
        }
        Ok(engines::recording::chunks::ChunkSetup {
            every_ns,
            every_bytes,
            keep_ns: self.keep.map(|k| k.as_nanos() as u64),
            triggers: self.triggers.clone(),
            window_ns: self.trigger_window.as_nanos() as u64,
        })
    }
}

/// The longest process name the kernel keeps (TASK_COMM_LEN 16, with its NUL).
pub const COMM_MAX: usize = 15;

impl TraceArgs {
    /// Checks the pids and names before anything is written: the setup, or `None`
    /// without `--trace`. `command` says whether `record -- CMD` runs one (then its
    /// process tree is traced).
    pub fn setup(&self, command: bool) -> anyhow::Result<Option<TraceSetup>> {
        if !self.trace {
            return Ok(None);
        }
        engines::recording::trace::buffer_kib_from_env().map_err(|e| usage!("{e}"))?;
        for pid in &self.trace_pids {
            if *pid == 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(usage!(
                    "--trace-pid {pid}: no such process; name a running process's pid (pgrep nats-server)"
                ));
            }
        }
        for c in &self.trace_comms {
            if c.is_empty() || c.len() > COMM_MAX || c.contains(['"', '\\', '\n']) {
                return Err(usage!(
                    "--trace-comm '{c}': a process name is 1 to {COMM_MAX} characters without quotes or backslashes (the kernel keeps {COMM_MAX}: `ps -o comm` shows it); give the name as ps shows it"
                ));
            }
        }
        if self.trace_only == Some(engines::recording::trace::TraceOnly::Block)
            && (!self.trace_pids.is_empty() || !self.trace_comms.is_empty())
        {
            return Err(usage!(
                "--trace-only block traces no sync calls, so --trace-pid/--trace-comm would select nothing; drop them or --trace-only"
            ));
        }
        Ok(Some(TraceSetup {
            only: self.trace_only,
            pids: self.trace_pids.clone(),
            comms: self.trace_comms.clone(),
            children: command,
            every_process: self.trace_pids.is_empty() && self.trace_comms.is_empty() && !command,
        }))
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the record command's steps in order, each next to what it stops on an error"
)]
pub fn run(a: RecordArgs) -> anyhow::Result<i32> {
    let mut setup = a.samplers.setup()?;
    setup.trace = a.trace.setup(!a.cmd.is_empty())?;
    setup.chunks = a.flight.setup()?;
    // A trigger on a device not recorded, or on a load that never runs, never fires.
    let devices = engines::recording::recorded_names(&setup.devices);
    let no_load: [String; 0] = [];
    a.flight
        .check_sources(&engines::recording::chunks::TriggerSources {
            devices: Some(&devices),
            // `record -- CMD`: the command may write any load.csv role.
            roles: a.cmd.is_empty().then_some(&no_load[..]),
        })?;
    let duration = match (a.duration, a.cmd.is_empty()) {
        (Some(d), _) => Some(d),
        (None, true) => Some(Duration::from_secs(30)),
        (None, false) => None,
    };
    if let Some(d) = duration {
        if d.is_zero() {
            return Err(usage!("--duration must be above 0, e.g. --duration 30s"));
        }
        a.samplers.check_within(d)?;
    }
    if let Some(prog) = a.cmd.first() {
        find_program(prog)?;
    }
    let listener = a
        .listen
        .as_deref()
        .map(engines::live::http::bind)
        .transpose()?;
    let agents = connect_agents(&a)?;
    let dir = a.out.clone().unwrap_or_else(|| default_run_dir("record"));
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let live = listener
        .as_ref()
        .map(|_| engines::live::Live::new(setup.disk_interval.as_nanos() as u64));
    let mut rec = Recording::start_with_live(&dir, &setup, &super::argv(), live.clone())?;
    // `kill -USR1 PID`: keep the window around now from --keep.
    rec.keep_on_usr1()?;
    let _server = engines::live::serve_and_say(listener, live)?;
    let collector = match agents {
        Some(c) => Some(c.start(
            &rec.files(),
            rec.clock,
            engines::recording::session::clock_zero_unix_ns(rec.clock.zero_monotonic_ns()),
            rec.events.clone(),
        )?),
        None => None,
    };
    let progress = engines::recording::progress::for_record(
        a.progress,
        a.no_progress,
        &setup.devices,
        &setup.procfs,
    );
    let events = rec.events.clone();
    let clock = rec.clock;
    let mut child = None;
    if let Some((prog, args)) = a.cmd.split_first() {
        let c = Proc::new(prog)
            .args(args)
            .env(
                collectors::clock::ENV_ZERO,
                clock.zero_monotonic_ns().to_string(),
            )
            .env("DISKPULSE_RUN_DIR", &dir)
            .spawn();
        match c {
            Ok(c) => {
                rec.trace_pid(c.id());
                events.event(Body::CommandStart(ev::CommandStart {
                    pid: c.id(),
                    argv: engines::recording::session::redact_argv(&a.cmd),
                }));
                child = Some(c);
            }
            Err(e) => {
                rec.finish()?;
                anyhow::bail!(
                    "cannot start '{prog}': {e} (recording kept in {})",
                    dir.display()
                );
            }
        }
    }
    let mut exit_code = 0;
    let mut child_failed = None;
    loop {
        // A command's exit is seen within 5 ms (the recording ends with it); without one
        // the loop only waits for the duration or a signal, and wakes 20 times a second
        // (200 wake-ups a second were 0.4% of a core, an eighth of the recorder's cost).
        let nap = match (&child, duration) {
            (Some(_), _) => Duration::from_millis(5),
            (None, Some(d)) => d
                .saturating_sub(clock.elapsed())
                .clamp(Duration::from_millis(1), Duration::from_millis(50)),
            (None, None) => Duration::from_millis(50),
        };
        std::thread::sleep(nap);
        if let Some(c) = child.as_mut() {
            if let Some(st) = c.try_wait()? {
                events.event(Body::CommandExit(ev::CommandExit { status: st.code() }));
                if !st.success() {
                    child_failed = Some(st);
                }
                child = None;
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            events.event(Body::Interrupted(ev::NoDetail {}));
            exit_code = 130;
            break;
        }
        if duration.is_some_and(|d| clock.elapsed() >= d) {
            break;
        }
    }
    if let Some(mut c) = child.take() {
        // The duration ended or we were interrupted: ask the command to stop, then insist.
        // SAFETY: kill has no memory preconditions; the pid is our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let t0 = std::time::Instant::now();
        while c.try_wait()?.is_none() {
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        events.event(Body::CommandStopped(ev::NoDetail {}));
    }
    drop(progress);
    // Agents that never answered a clock request: the run fails, as `run`'s [agents] does.
    let mut silent_agents: Vec<String> = vec![];
    if let Some(c) = collector {
        match c.finish() {
            Ok(m) => {
                for (n, nm) in &m.nodes {
                    eprintln!(
                        "agent {n}: offset {} bound {}, {} diskstats batches, {} lost, {} duplicates dropped",
                        nm.offset_ns.map_or("unknown".into(), |o| format!("{:+.3} ms", o as f64 / 1e6)),
                        nm.bound_ns.map_or("-".into(), |b| format!("{:.3} ms", b as f64 / 1e6)),
                        nm.sources.get("diskstats").map_or(0, |s| s.batches),
                        nm.sources.values().map(|s| s.lost).sum::<u64>(),
                        nm.sources.values().map(|s| s.duplicates).sum::<u64>(),
                    );
                }
                rec.set(&m)?;
                silent_agents = m
                    .nodes
                    .iter()
                    .filter(|(_, nm)| nm.offset_ns.is_none())
                    .map(|(n, _)| n.clone())
                    .collect();
            }
            Err(e) => {
                events.error("agents", "collector", &format!("{e:#}"));
                eprintln!("Error: --agents: {e:#}");
            }
        }
    }
    rec.set(&::format::meta::RecordMeta {
        duration_limit_ns: duration.map(|d| d.as_nanos() as u64),
    })?;
    let meta = rec.finish()?;
    let ds = meta
        .samplers
        .get("diskstats")
        .and_then(|d| d.stats.as_ref());
    let or_null = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    eprintln!(
        "recorded {:.1} s: {} diskstats samples of {} expected, jitter p99 {:.0} us",
        meta.duration_ns.unwrap_or(0) as f64 / 1e9,
        or_null(ds.map(|d| d.samples)),
        or_null(ds.map(|d| d.expected)),
        ds.map_or(f64::NAN, |d| d.jitter_p99_us)
    );
    if let Some((trace, t)) = meta.trace().and_then(|m| m.stats.clone().map(|t| (m, t))) {
        let lost = t.lost_events;
        let on = |group: &str| trace.events.iter().any(|e| e.starts_with(group));
        let what = match (on("syscalls:"), on("block:")) {
            (true, true) => format!("{} sync calls and {} block requests", t.calls, t.requests),
            (true, false) => format!("{} sync calls (block requests not traced)", t.calls),
            _ => format!("{} block requests (sync calls not traced)", t.requests),
        };
        eprintln!(
            "traced {what} ({} events read, {lost} lost{})",
            t.events,
            if lost > 0 {
                ": the trace is incomplete, see events.jsonl trace_lost"
            } else {
                ""
            }
        );
    }
    println!("{}", dir.display());
    if !silent_agents.is_empty() {
        let urls = a
            .connect
            .server_list()
            .iter()
            .map(|u| engines::load::connect::redact_url(u))
            .collect::<Vec<_>>()
            .join(",");
        let start = silent_agents
            .iter()
            .map(|n| format!("`diskpulse agent --name {n} --server {urls}`"))
            .collect::<Vec<_>>()
            .join(", ");
        eprintln!(
            "Error: --agents: node(s) {} never answered a clock request (diskpulse.NODE.clock) during the recording: nothing of theirs was recorded; start {start} on each node's host (the recording is kept in {})",
            silent_agents.join(", "),
            dir.display()
        );
        if exit_code == 0 && child_failed.is_none() {
            return Ok(1);
        }
    }
    if let Some(st) = child_failed {
        let code = child_exit_code(st);
        eprintln!(
            "Error: the recorded command failed ({st}); diskpulse exits with its code {code}; the recording is kept"
        );
        return Ok(code);
    }
    Ok(exit_code)
}

/// Checks `--agents` and connects before anything is written: `None` without agents.
fn connect_agents(a: &RecordArgs) -> anyhow::Result<Option<engines::agent::collect::Connected>> {
    if a.agents.is_empty() {
        return Ok(None);
    }
    for (i, n) in a.agents.iter().enumerate() {
        engines::agent::check_node_name(n).map_err(|e| usage!("--agents: {e}"))?;
        if a.agents[..i].contains(n) {
            return Err(usage!("--agents: {}", engines::agent::named_twice(n)));
        }
    }
    if a.connect.server_list().is_empty() {
        return Err(usage!(
            "--agents needs --server (or $NATS_URL): the NATS servers the agents publish through"
        ));
    }
    a.connect.validate()?;
    engines::agent::collect::connect(&a.connect, a.agents.clone()).map(Some)
}

/// The exit code that passes a command's status on, as a shell does: its own code, or
/// 128 + the signal that killed it.
fn child_exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// Checks that `record -- PROG` can be started, before anything is written: a path must
/// be an executable file, a bare name must be one on `PATH` (what `execvp` will find).
fn find_program(prog: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.is_empty() {
        return Err(usage!(
            "record -- '': the command is empty; name a program after --"
        ));
    }
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        if runnable(&p) {
            return Ok(p);
        }
        let why = match std::fs::metadata(&p) {
            Err(e) => e.to_string(),
            Ok(m) if m.is_dir() => "is a directory".into(),
            Ok(_) => "is not executable (chmod +x)".into(),
        };
        return Err(usage!(
            "record -- {prog}: cannot run it ({why}); name an executable file"
        ));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| runnable(p))
        .ok_or_else(|| {
            usage!("record -- {prog}: no such command on PATH; give its path or install it")
        })
}
