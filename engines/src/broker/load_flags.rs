//! Every check of the `load` command's flags alone ([`check_load_flags`]): the load's
//! own, the embedded broker's (`--cluster`, `--sync-interval`, `--store-dir`) and the
//! recording's. Here, above both the load generator and the broker, so `load` and `run
//! --dry-run` (a scenario's load phase) make the same checks.

use format::usage;

use super::SyncMode;
use crate::load::LoadCmdArgs;
use crate::recording::SamplerArgs;

/// Every check of the flags alone, before anything is looked up, made or started:
/// `load` runs it first, and `run --dry-run` on each load phase (issue 25 point 4:
/// a phase's `--cluster 7` or `--interval 10us` passed the dry run and failed in the
/// run). `under_a_recording`: inside `diskpulse record -- ...` (a scenario's phases
/// always are), where `--record` is refused.
pub fn check_load_flags(a: &LoadCmdArgs, under_a_recording: bool) -> anyhow::Result<()> {
    a.load.validate()?;
    check_record_flags(a)?;
    a.sync_interval
        .parse::<SyncMode>()
        .map_err(|e| usage!("--sync-interval: {e}"))?;
    if ![1, 3, 5].contains(&a.cluster) {
        return Err(usage!("--cluster takes 1, 3 or 5 nodes, got {}", a.cluster));
    }
    let amqp = a.load.mode.is_amqp();
    let embedded = if amqp {
        a.load.connect.servers.is_empty()
    } else {
        a.load.connect.server_list().is_empty()
    };
    if amqp {
        check_amqp_flags(a)?;
    }
    if !embedded && (a.cluster != 1 || !a.store_dir.is_empty()) {
        return Err(usage!(
            "--cluster and --store-dir are for the embedded broker; with --server, diskpulse does not start servers"
        ));
    }
    if a.trace && !a.record {
        return Err(usage!(
            "--trace needs --record (it traces into the load's own recording); under `diskpulse record -- ...` give --trace to record"
        ));
    }
    if a.trace && !embedded {
        return Err(usage!(
            "--trace traces the embedded servers; for servers you started use `diskpulse record --trace --trace-pid PID -- diskpulse load ...`"
        ));
    }
    if a.record && under_a_recording {
        return Err(usage!(
            "--record inside `diskpulse record -- ...`: the parent already records"
        ));
    }
    let s = &a.samplers;
    if a.record {
        s.check_intervals()?;
    }
    if a.record && !embedded && s.devices.is_empty() && s.paths.is_empty() {
        return Err(usage!(
            "--record with --server: name the broker's disks with --device or --path"
        ));
    }
    Ok(())
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
        super::monitor::check_url(u).map_err(|e| usage!("--monitor '{u}': {e:#}"))?;
    }
    if a.record {
        super::monitor::check_interval(a.monitor_interval)
            .map_err(|e| usage!("--monitor-interval {e}"))?;
    }
    if a.record {
        if let Some(dur) = a.load.duration {
            s.check_within(dur)?;
        }
    }
    Ok(())
}
