//! `diskpulse proxy`: the latency proxy ([`engines::proxy`]) on its own, for any TCP client
//! (NATS, AMQP, ...): `--listen` here, `--upstream` there, each direction delayed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use ::format::cli::parse_duration;
use ::format::usage;
use engines::proxy::{self, Jitter, JitterDist};

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Address clients connect to (`host:port`; port 0: a free one, printed).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "HOST:PORT")]
    pub listen: String,
    /// The server the proxy forwards to (`host:port`).
    #[arg(long, value_name = "HOST:PORT")]
    pub upstream: String,
    /// Delay added to each direction (10ms, 0ms).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Duration,
    /// Jitter around the delay: ± this (uniform) or its standard deviation (normal).
    #[arg(long, value_parser = parse_duration)]
    pub jitter: Option<Duration>,
    /// How the jitter is drawn.
    #[arg(long, value_enum, default_value_t = JitterDist::Uniform)]
    pub jitter_dist: JitterDist,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// The figures at the end as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--jitter` and `--jitter-dist` as a [`Jitter`] (none for a zero or absent jitter).
pub fn jitter_of(jitter: Option<Duration>, dist: JitterDist) -> Option<Jitter> {
    jitter
        .filter(|j| !j.is_zero())
        .map(|amount| Jitter { amount, dist })
}

pub fn run(a: ProxyArgs) -> anyhow::Result<i32> {
    let jitter = jitter_of(a.jitter, a.jitter_dist);
    proxy::check("--delay", a.delay, jitter).map_err(|e| usage!("{e}"))?;
    if a.duration.is_some_and(|d| d.is_zero()) {
        return Err(usage!(
            "--duration must be more than 0s (or left out: until Ctrl-C)"
        ));
    }
    // host:port with a port of 1..=65535: port 0 means "any free port" to a listener
    // and is no server a connection can reach (it was accepted, and every client's
    // connection then failed).
    let port = a
        .upstream
        .rsplit_once(':')
        .map(|(_, p)| p.trim_end_matches(']'));
    match port.map(str::parse::<u16>) {
        Some(Ok(p)) if p > 0 => {}
        Some(Ok(_)) => {
            return Err(usage!(
                "--upstream '{}': port 0 is not a server's port (it means any free port to a listener); give the port the server listens on, like 127.0.0.1:4222",
                ::format::redact::text(&a.upstream)
            ))
        }
        _ => {
            return Err(usage!(
                "--upstream '{}': expected host:port with a port of 1 to 65535, like 127.0.0.1:4222",
                ::format::cli::cut(&::format::redact::text(&a.upstream), ::format::cli::ECHO_MAX)
            ))
        }
    }
    let (local, mut handle) =
        proxy::spawn_on(&a.listen, &a.upstream, a.delay, jitter).map_err(|e| usage!("{e:#}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    eprintln!(
        "diskpulse proxy: listening on {local}, forwarding to {}, +{} each way (Ctrl-C ends)",
        ::format::redact::text(&a.upstream),
        ::format::cli::fmt_duration(a.delay)
    );
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && a.duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    handle.close();
    let r = handle.report();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("{}", proxy::human(&r));
    }
    Ok(if stop.load(Ordering::Relaxed) { 130 } else { 0 })
}
