//! The `load` command's flags ([`LoadCmdArgs`]): the load's own ([`LoadArgs`]) and,
//! around them, the embedded broker's, the recording's and the samplers'. Here, beside
//! the load generator, so `diskpulse run --dry-run` parses a scenario's load phase with
//! the command's own types.

use std::path::PathBuf;

use clap::Args;

use format::usage;

use super::LoadArgs;
use crate::broker::SyncMode;
use crate::recording::SamplerArgs;

#[derive(Args, Debug)]
pub struct LoadCmdArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Embedded broker: nodes on loopback (1, 3 or 5) when no --server is given.
    #[arg(long, default_value_t = 1)]
    pub cluster: usize,
    /// Embedded broker: JetStream store directory per node (comma-separated; default: fresh
    /// directories under /var/tmp, removed afterwards).
    #[arg(long, value_delimiter = ',', value_name = "DIR,..")]
    pub store_dir: Vec<PathBuf>,
    /// Embedded broker: JetStream sync_interval, `always` or a duration.
    #[arg(long, default_value = "5s")]
    pub sync_interval: String,
    /// Embedded broker: the nats-server binary (default: found on PATH).
    #[arg(long, value_name = "PATH")]
    pub nats_server: Option<PathBuf>,
    /// Monitoring URL of a server to poll (/varz, /jsz) into the recording; repeatable.
    /// Embedded servers are polled without it.
    #[arg(long = "monitor", value_name = "URL")]
    pub monitors: Vec<String>,
    /// How often to poll the servers' /varz and /jsz when recording.
    #[arg(long, default_value = "250ms", value_parser = format::cli::parse_duration)]
    pub monitor_interval: std::time::Duration,
    /// Record the disks (the store's devices, or --device/--path) beside the load, then report.
    #[arg(long)]
    pub record: bool,
    /// With --record and the embedded broker: trace the servers' sync calls (fsync,
    /// fdatasync, ...) and every block request of the recorded devices through tracefs
    /// (root). Without root or tracefs: one line, and the load runs without it.
    #[arg(long)]
    pub trace: bool,
    /// Run directory for --record. Default: diskpulse-runs/<time>-load.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub samplers: SamplerArgs,
}

impl LoadCmdArgs {
    /// Every check of the flags alone, before anything is looked up, made or started:
    /// `load` runs it first, and `run --dry-run` on each load phase (issue 25 point 4:
    /// a phase's `--cluster 7` or `--interval 10us` passed the dry run and failed in the
    /// run). `under_a_recording`: inside `diskpulse record -- ...` (a scenario's phases
    /// always are), where `--record` is refused.
    pub fn check(&self, under_a_recording: bool) -> anyhow::Result<()> {
        self.load.validate()?;
        check_record_flags(self)?;
        self.sync_interval
            .parse::<SyncMode>()
            .map_err(|e| usage!("--sync-interval: {e}"))?;
        if ![1, 3, 5].contains(&self.cluster) {
            return Err(usage!(
                "--cluster takes 1, 3 or 5 nodes, got {}",
                self.cluster
            ));
        }
        let amqp = self.load.mode.is_amqp();
        let embedded = if amqp {
            self.load.connect.servers.is_empty()
        } else {
            self.load.connect.server_list().is_empty()
        };
        if amqp {
            check_amqp_flags(self)?;
        }
        if !embedded && (self.cluster != 1 || !self.store_dir.is_empty()) {
            return Err(usage!(
                "--cluster and --store-dir are for the embedded broker; with --server, diskpulse does not start servers"
            ));
        }
        if self.trace && !self.record {
            return Err(usage!(
                "--trace needs --record (it traces into the load's own recording); under `diskpulse record -- ...` give --trace to record"
            ));
        }
        if self.trace && !embedded {
            return Err(usage!(
                "--trace traces the embedded servers; for servers you started use `diskpulse record --trace --trace-pid PID -- diskpulse load ...`"
            ));
        }
        if self.record && under_a_recording {
            return Err(usage!(
                "--record inside `diskpulse record -- ...`: the parent already records"
            ));
        }
        let s = &self.samplers;
        if self.record {
            s.check_intervals()?;
        }
        if self.record && !embedded && s.devices.is_empty() && s.paths.is_empty() {
            return Err(usage!(
                "--record with --server: name the broker's disks with --device or --path"
            ));
        }
        Ok(())
    }
}

/// Flags of the embedded nats-server that an AMQP mode cannot use.
fn check_amqp_flags(a: &LoadCmdArgs) -> anyhow::Result<()> {
    let mode = a.load.mode.cli_name();
    if a.cluster != 1 {
        return Err(usage!(
            "--cluster: {mode} runs one embedded RabbitMQ node (clusters are NATS only); leave --cluster out"
        ));
    }
    if a.store_dir.len() > 1 {
        return Err(usage!(
            "--store-dir: one directory for the RabbitMQ node's data (got {})",
            a.store_dir.len()
        ));
    }
    if a.nats_server.is_some() {
        return Err(usage!(
            "--nats-server: {mode} starts RabbitMQ, not nats-server; leave it out"
        ));
    }
    if a.sync_interval != "5s" {
        return Err(usage!(
            "--sync-interval is nats-server's JetStream setting; RabbitMQ's writes follow --queue-type"
        ));
    }
    if !a.monitors.is_empty() {
        return Err(usage!(
            "--monitor polls a nats-server's /varz; not for {mode}"
        ));
    }
    Ok(())
}

/// The recording flags: each needs --record (without it they were silently ignored), the
/// monitor URLs and interval are checked now (they failed after the recording had
/// begun), and no sampler interval is longer than the run.
fn check_record_flags(a: &LoadCmdArgs) -> anyhow::Result<()> {
    // The defaults as clap gives them (one source for them: the attributes).
    let d = {
        use clap::{Args as _, FromArgMatches as _};
        let m = SamplerArgs::augment_args(clap::Command::new("defaults"))
            .get_matches_from(["defaults"]);
        SamplerArgs::from_arg_matches(&m)?
    };
    let s = &a.samplers;
    if !a.record {
        let given = [
            ("--out", a.out.is_some()),
            ("--device", !s.devices.is_empty()),
            ("--path", !s.paths.is_empty()),
            ("--interval", s.interval != d.interval),
            ("--mem-interval", s.mem_interval != d.mem_interval),
            ("--cpu-interval", s.cpu_interval != d.cpu_interval),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            return Err(usage!(
                "{flag} is a recording flag and needs --record (without it nothing is recorded); add --record or leave {flag} out"
            ));
        }
    }
    for u in &a.monitors {
        crate::broker::monitor::check_url(u).map_err(|e| usage!("--monitor '{u}': {e:#}"))?;
    }
    if a.record {
        crate::broker::monitor::check_interval(a.monitor_interval)
            .map_err(|e| usage!("--monitor-interval {e}"))?;
    }
    if a.record {
        if let Some(dur) = a.load.duration {
            s.check_within(dur)?;
        }
    }
    Ok(())
}
