//! `diskpulse agent`: sample this host's devices, memory and CPU and publish them over
//! NATS for a `diskpulse record --agents` elsewhere ([`crate::agent`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::record::SamplerArgs;
use crate::agent::{check_node_name, node, ENV_SKEW};
use crate::cli::{parse_duration, parse_size};
use crate::load::connect::ConnectArgs;
use crate::usage;

#[derive(Args, Debug)]
pub struct AgentArgs {
    #[command(flatten)]
    pub samplers: SamplerArgs,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// This node's name in subjects (diskpulse.NODE.*) and in the recording's `node`
    /// column. Default: the host name.
    #[arg(long, value_name = "NODE")]
    pub name: Option<String>,
    /// Batches held while the broker is unreachable (and kept for a recorder's resend);
    /// beyond it the oldest go, counted as dropped.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub buffer: u64,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

pub fn run(a: AgentArgs) -> anyhow::Result<i32> {
    let name = match &a.name {
        Some(n) => n.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    };
    check_node_name(&name).map_err(|e| usage!("--name {e}"))?;
    if a.connect.server_list().is_empty() {
        return Err(usage!(
            "--server: name the NATS server(s) to publish through, e.g. --server nats://10.0.0.1:4222 (or set $NATS_URL)"
        ));
    }
    a.connect.validate()?;
    let setup = a.samplers.setup()?;
    if a.buffer < 1 << 20 {
        return Err(usage!(
            "--buffer {}: too small to hold a second of batches; give at least 1MiB",
            a.buffer
        ));
    }
    if a.duration.is_some_and(|d| d.is_zero()) {
        return Err(usage!("--duration must be above 0, e.g. --duration 60s"));
    }
    let skew_ns = match std::env::var(ENV_SKEW) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse::<i64>().map_err(|_| {
            usage!("{ENV_SKEW}: takes a number of ns like 250000000; got '{v}' (it is for tests: unset it)")
        })?,
        _ => 0,
    };
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    node::run(
        node::AgentSetup {
            name,
            connect: a.connect,
            samplers: setup,
            skew_ns,
            buffer_bytes: a.buffer,
            duration: a.duration,
        },
        stop,
    )?;
    Ok(0)
}
