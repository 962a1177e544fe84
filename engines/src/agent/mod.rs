//! Samples from other hosts (issue 15): `diskpulse agent` on every broker node
//! ([`node`]) publishes its samplers' rows over NATS; `diskpulse record --agents`
//! ([`collect`]) subscribes, measures each agent's clock offset and writes the rows,
//! mapped onto the recorder's clock, into the run directory ([`format::agents`]).
//!
//! ## Subjects
//! `diskpulse.<node>.<source>` (`diskstats`, `meminfo`, `cpu`, and the local broker's
//! `varz`, `jsz`, `proc_io`): batches;
//! `diskpulse.<node>.clock`: clock requests (reply: the agent's receive and send times);
//! `diskpulse.<node>.status`: a heartbeat a second (JSON, [`Status`]);
//! `diskpulse.<node>.resend`: a recorder asks for batches again (`<source> <from> <to>`).
//!
//! ## The wire format: a batch
//! Compact text, one message per source about every 100 ms, never one per sample:
//! a first line `DP1 <source> <seq> <base_ns>` then the rows exactly as the local files
//! hold them (`diskstats.csv.gz` rows: written only when a counter changed, see
//! [`crate::recording::samplers`]), whose `t_ns` is on the agent's run clock.
//! `base_ns` is the agent's clock zero in ns since the epoch (plus the test-only
//! skew, [`ENV_SKEW`]): a row's time on the agent's clock is `base_ns + t_ns`. `seq`
//! counts the batches of one source from 1 without gaps: the recorder finds a lost
//! batch (a gap) or a repeated one (a duplicate) by it.
//!
//! ## The clock estimate
//! Cristian/NTP: the recorder sends a request at `t1` (its clock), the agent stamps its
//! receipt `t2` and its reply `t3` (its clock), the recorder receives it at `t4`.
//! offset = ((t2 - t1) + (t3 - t4)) / 2, round trip = (t4 - t1) - (t3 - t2); whatever
//! the path's asymmetry, the true offset lies within half the round trip of the
//! estimate. Of the probes (ten at the start, then one every 2 s), the one with the
//! lowest round trip among the last 30 s is used, and half its round trip is the bound.

pub mod collect;
pub mod node;

/// The environment variable that adds a known offset (ns, may be negative) to an
/// agent's clock: test-only, so a test can prove the estimate finds it.
pub const ENV_SKEW: &str = "DISKPULSE_AGENT_CLOCK_SKEW_NS";

/// The sources an agent publishes, in this order: its host's samplers, then the local
/// nats-server's `/varz`, `/jsz` and `/proc/PID/io` (only when it samples a broker:
/// `--broker-monitor`, `--broker-pid`, or the one nats-server it finds).
pub const SOURCES: [&str; 6] = ["diskstats", "meminfo", "cpu", "varz", "jsz", "proc_io"];

/// The subject of `node`'s `what` (a source, `clock`, `status`, `resend`).
pub fn subject(node: &str, what: &str) -> String {
    format!("diskpulse.{node}.{what}")
}

/// Checks a node name: 1 to 64 of `A-Z a-z 0-9 _ -` (it is a subject token and a CSV
/// field).
pub fn check_node_name(n: &str) -> Result<(), String> {
    if n.is_empty()
        || n.len() > 64
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "'{n}' is not a node name: use 1 to 64 letters, digits, '_' or '-' (it becomes a subject token and a CSV field)"
        ));
    }
    Ok(())
}

/// The refusal of a node named twice in one recording (`--agents a,a`, `[agents] nodes`):
/// two agents under one name would write into each other's rows.
pub fn named_twice(n: &str) -> String {
    format!("'{n}' is named twice; each agent needs a name of its own (--name)")
}

/// A batch's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchHead {
    pub source: String,
    pub seq: u64,
    pub base_ns: u64,
}

/// Builds a batch: the head line and `rows` (whole lines).
pub fn encode_batch(source: &str, seq: u64, base_ns: u64, rows: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rows.len() + 48);
    v.extend_from_slice(format!("DP1 {source} {seq} {base_ns}\n").as_bytes());
    v.extend_from_slice(rows);
    v
}

/// Splits a batch into its head and its rows; `None` when it is not one.
fn decode_batch(b: &[u8]) -> Option<(BatchHead, &[u8])> {
    let nl = b.iter().position(|&c| c == b'\n')?;
    let head = std::str::from_utf8(&b[..nl]).ok()?;
    let mut it = head.split(' ');
    if it.next()? != "DP1" {
        return None;
    }
    let source = it.next()?.to_string();
    let seq = it.next()?.parse().ok()?;
    let base_ns = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((
        BatchHead {
            source,
            seq,
            base_ns,
        },
        &b[nl + 1..],
    ))
}

/// Answers clock requests on `diskpulse.<node>.clock` with the receive and send stamps
/// `now` gives (ns on the agent's clock): the reply is `<t2> <t3>`. The task runs until
/// aborted or the connection ends.
pub async fn answer_clock(
    client: &async_nats::Client,
    node: &str,
    now: impl Fn() -> u64 + Send + 'static,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use futures::StreamExt;
    let mut sub = client.subscribe(subject(node, "clock")).await?;
    let c = client.clone();
    Ok(tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let t2 = now();
            if let Some(reply) = m.reply {
                let t3 = now();
                let _ = c
                    .publish(reply, bytes::Bytes::from(format!("{t2} {t3}")))
                    .await;
            }
        }
    }))
}

/// An agent's heartbeat (`diskpulse.<node>.status`, JSON, every second).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Status {
    pub node: String,
    /// The last sequence number given to a batch, per source.
    pub last_seq: std::collections::BTreeMap<String, u64>,
    /// Batches dropped unsent because the buffer was full (the broker was unreachable
    /// for longer than the buffer holds).
    pub dropped_batches: u64,
    /// Batches waiting to be published.
    pub buffered_batches: u64,
    /// Bytes held (unsent and kept for a resend).
    pub buffered_bytes: u64,
    /// Batches asked for again that were no longer held.
    pub resend_missing: u64,
    /// Times the connection came back.
    pub reconnects: u64,
    pub devices: Vec<String>,
    /// Why each of `devices` is sampled, in the same order ("named", "holds /mnt/x",
    /// "backing file of loop0", ...); empty from an agent older than this field.
    #[serde(default)]
    pub device_why: Vec<String>,
    pub interval_us: u64,
    /// The agent's sampler thread CPU so far (getrusage of the whole process), ns.
    pub process_cpu_ns: u64,
    /// Bytes of batches published so far (payloads, first sends and resends).
    pub published_bytes: u64,
}

/// One clock probe's four timestamps: `t1`, `t4` on the recorder's clock, `t2`, `t3`
/// on the agent's (all ns, on the same epoch for the offset to be a small number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub t1: i128,
    t2: i128,
    t3: i128,
    t4: i128,
}

impl Probe {
    /// Agent clock minus recorder clock, ns.
    pub fn offset_ns(&self) -> i128 {
        ((self.t2 - self.t1) + (self.t3 - self.t4)) / 2
    }

    /// The round trip without the agent's own time, ns (never below 0).
    pub fn rtt_ns(&self) -> i128 {
        ((self.t4 - self.t1) - (self.t3 - self.t2)).max(0)
    }
}

/// The probe with the lowest round trip among `probes` whose `t4` is at most `window_ns`
/// before the latest: the one the offset and its bound come from.
fn best_probe(probes: &[Probe], window_ns: i128) -> Option<Probe> {
    let latest = probes.iter().map(|p| p.t4).max()?;
    probes
        .iter()
        .filter(|p| latest - p.t4 <= window_ns)
        .min_by_key(|p| p.rtt_ns())
        .copied()
}

/// The process's CPU time (user + system) so far, ns: `getrusage(RUSAGE_SELF)`.
fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_back_and_junk_is_refused() {
        let b = encode_batch("diskstats", 7, 1_700_000_000_000_000_000, b"1,vda,253,0\n");
        let (h, rows) = decode_batch(&b).unwrap();
        assert_eq!(h.source, "diskstats");
        assert_eq!((h.seq, h.base_ns), (7, 1_700_000_000_000_000_000));
        assert_eq!(rows, b"1,vda,253,0\n");
        assert!(decode_batch(b"DP2 x 1 2\n").is_none());
        assert!(decode_batch(b"DP1 x one 2\n").is_none());
        assert!(decode_batch(b"no newline").is_none());
    }

    #[test]
    fn the_estimate_finds_an_offset_within_half_the_round_trip() {
        // Agent 250 ms ahead; 300 us out, 700 us back (asymmetric), 50 us in the agent.
        let off = 250_000_000i128;
        let t1 = 1_000_000_000i128;
        let t2 = t1 + 300_000 + off;
        let t3 = t2 + 50_000;
        let t4 = t3 - off + 700_000;
        let p = Probe { t1, t2, t3, t4 };
        assert_eq!(p.rtt_ns(), 1_000_000);
        assert!((p.offset_ns() - off).abs() <= p.rtt_ns() / 2);
        // The lowest round trip wins, within the window only.
        let slow = Probe {
            t1: t1 + 10,
            t2: t2 + 10,
            t3: t3 + 10,
            t4: t4 + 5_000_000,
        };
        assert_eq!(best_probe(&[p, slow], 1_000_000_000), Some(p));
        let later = Probe {
            t1: t1 + 40_000_000_000,
            t2: t2 + 40_000_000_000,
            t3: t3 + 40_000_000_000,
            t4: t4 + 40_000_000_000 + 2_000_000,
        };
        assert_eq!(
            best_probe(&[p, later], 30_000_000_000),
            Some(later),
            "a probe older than the window is not used"
        );
    }

    #[test]
    fn node_names() {
        assert!(check_node_name("node-a_1").is_ok());
        for bad in ["", "a.b", "a b", "*", ">"] {
            assert!(check_node_name(bad).is_err(), "{bad}");
        }
    }
}
