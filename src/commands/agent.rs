//! `diskpulse agent`: sample this host's devices, memory and CPU and publish them over
//! NATS for a `diskpulse record --agents` elsewhere ([`engines::agent`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use ::format::cli::{parse_duration, parse_size};
use ::format::usage;
use engines::agent::{check_node_name, node, ENV_SKEW};
use engines::load::connect::ConnectArgs;
use engines::recording::SamplerArgs;

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
    /// The local nats-server's monitoring URL: its /varz and /jsz every 250 ms, published
    /// as `varz`, `jsz` (record --agents writes agents_varz.csv, agents_jsz.csv).
    /// Default: found when exactly one nats-server process runs here and its monitor
    /// port answers.
    #[arg(long, value_name = "URL")]
    pub broker_monitor: Option<String>,
    /// The local nats-server's pid: its /proc/PID/io every 10 ms, published as `proc_io`
    /// (agents_proc_io.csv). Default: as --broker-monitor.
    #[arg(long, value_name = "PID")]
    pub broker_pid: Option<u32>,
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
    // The buffer is held in memory: one larger than the host's would be taken and then
    // exhaust it while the broker is away (18446744073709551615 was accepted).
    if let Some(mem) = mem_total_bytes().filter(|m| a.buffer > *m / 2) {
        return Err(usage!(
            "--buffer {}: more than half of this host's memory ({} MiB); the batches are held in memory, so give at most {}MiB (the default is 64MiB)",
            a.buffer,
            mem >> 20,
            mem >> 21
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
    let broker = broker_target(&a.broker_monitor, a.broker_pid, &setup.procfs)?;
    match (&broker.monitor, broker.pid) {
        (None, None) => eprintln!(
            "diskpulse agent: no local nats-server sampled (none or several here, or its monitor port does not answer): give --broker-monitor URL / --broker-pid PID to sample one"
        ),
        (m, p) => eprintln!(
            "diskpulse agent: sampling the local nats-server: monitor {}, pid {}",
            m.as_deref().map(engines::load::connect::redact_url).unwrap_or_else(|| "-".into()),
            p.map(|p| p.to_string()).unwrap_or_else(|| "-".into())
        ),
    }
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    node::run(
        node::AgentSetup {
            name,
            connect: a.connect,
            samplers: setup,
            skew_ns,
            buffer_bytes: a.buffer,
            duration: a.duration,
            broker,
        },
        stop,
    )?;
    Ok(0)
}

/// The broker to sample: the flags as given (checked), else the one nats-server process
/// visible in `procfs` whose monitor port (its `-m`/`--http_port`, else 8222) answers
/// /varz on 127.0.0.1; none when there are none or several.
fn broker_target(
    monitor: &Option<String>,
    pid: Option<u32>,
    procfs: &std::path::Path,
) -> anyhow::Result<node::BrokerTarget> {
    if let Some(u) = monitor {
        engines::broker::monitor::check_url(u).map_err(|e| {
            usage!(
                "--broker-monitor '{}': {e:#}; give the monitoring URL, e.g. http://127.0.0.1:8222",
                engines::load::connect::redact_url(u)
            )
        })?;
    }
    if let Some(p) = pid {
        if !procfs.join(p.to_string()).join("io").exists() {
            return Err(usage!(
                "--broker-pid {p}: no {}/{p}/io here; give the pid of the nats-server on this host",
                procfs.display()
            ));
        }
    }
    if monitor.is_some() || pid.is_some() {
        return Ok(node::BrokerTarget {
            monitor: monitor.clone(),
            pid,
        });
    }
    let found = nats_server_pids(procfs);
    let [(p, port)] = found.as_slice() else {
        return Ok(node::BrokerTarget::default());
    };
    let url = format!("http://127.0.0.1:{port}");
    let answers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(engines::broker::monitor::http_get(
            &url,
            "/varz",
            Duration::from_secs(1),
        ))
        .is_ok();
    Ok(if answers {
        node::BrokerTarget {
            monitor: Some(url),
            pid: Some(*p),
        }
    } else {
        node::BrokerTarget::default()
    })
}

/// The nats-server processes in `procfs` and each one's monitor port (`-m N`,
/// `--http_port N`, `-m=N`; 8222 when its command line does not say).
fn nats_server_pids(procfs: &std::path::Path) -> Vec<(u32, u16)> {
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(procfs) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() != "nats-server" {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        out.push((pid, monitor_port(&cmd).unwrap_or(8222)));
    }
    out
}

/// The monitor port a nats-server command line (NUL-separated) gives, if any.
fn monitor_port(cmdline: &[u8]) -> Option<u16> {
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).to_string())
        .collect();
    for (i, a) in args.iter().enumerate() {
        let flag = a.split('=').next().unwrap_or("");
        if ["-m", "--m", "--http_port", "-http_port"].contains(&flag) {
            let v = match a.split_once('=') {
                Some((_, v)) => Some(v.to_string()),
                None => args.get(i + 1).cloned(),
            };
            return v.and_then(|v| v.parse().ok());
        }
    }
    None
}

/// MemTotal of /proc/meminfo in bytes, if it reads.
fn mem_total_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_monitor_port_comes_from_the_command_line() {
        assert_eq!(
            super::monitor_port(b"nats-server\x00-js\x00-m\x008333"),
            Some(8333)
        );
        assert_eq!(
            super::monitor_port(b"nats-server\x00--http_port=9000"),
            Some(9000)
        );
        assert_eq!(super::monitor_port(b"nats-server\x00-p\x004222"), None);
    }
}
