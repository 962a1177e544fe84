//! The `load` command's flags ([`LoadCmdArgs`]): the load's own ([`LoadArgs`]) and,
//! around them, the embedded broker's, the recording's and the samplers'. Here, beside
//! the load generator, so `diskpulse run --dry-run` parses a scenario's load phase with
//! the command's own types.

use std::path::PathBuf;

use clap::Args;

use super::LoadArgs;
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
