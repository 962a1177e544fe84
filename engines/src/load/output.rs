//! Results: per-role aggregates, the human summary, natscli-compatible CSV and JSON.
//! Pure functions from the collected totals to text (hyperfine's exporters).
//!
//! Aggregate rate of a role = its ops over the span from its first client's first op to
//! its last client's last op (not the sum of per-client rates, which overstates when
//! clients do not overlap). Across clients: min/avg/max and the population standard
//! deviation of per-client msgs/s.

use std::collections::BTreeMap;

use collectors::directio::latency_histogram;
use hdrhistogram::Histogram;
use serde::Serialize;

use super::record::{ClientTotals, Role};
use format::summary::{kind_words, Failure};

/// Latency figures in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatUs {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub stddev: f64,
}

impl LatUs {
    fn from_hist(h: &Histogram<u64>) -> Option<LatUs> {
        if h.is_empty() {
            return None;
        }
        let us = |v: u64| v as f64 / 1e3;
        Some(LatUs {
            count: h.len(),
            min: us(h.min()),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            stddev: h.stdev() / 1e3,
        })
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// Population standard deviation.
    pub stddev: f64,
}

impl Spread {
    pub fn of(v: &[f64]) -> Spread {
        if v.is_empty() {
            return Spread::default();
        }
        let n = v.len() as f64;
        let avg = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n;
        Spread {
            min: v.iter().cloned().fold(f64::INFINITY, f64::min),
            avg,
            max: v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            stddev: var.sqrt(),
        }
    }
}

/// One role's aggregate.
#[derive(Debug, Clone, Serialize)]
pub struct RoleSummary {
    pub role: Role,
    pub clients: usize,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<&'static str, u64>,
    pub duration_s: f64,
    pub msgs_per_s: f64,
    pub mib_per_s: f64,
    per_client_msgs_per_s: Spread,
    /// From the actual send (end to end for receivers).
    pub lat_us: Option<LatUs>,
    /// From the intended start (equals lat_us without --rate).
    pub co_lat_us: Option<LatUs>,
    pub latency_meaning: &'static str,
    /// Failed operations per kind, fewest first.
    pub failures: Vec<Failure>,
}

/// `diskpulse load --json`, also meta.json `load` of a recorded load (read back as
/// [`format::meta::LoadMeta`]). Fields in sorted order, as they print: a document is
/// printed through a `serde_json::Value`, whose keys (nested ones too) are sorted.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub auth: format::meta::AuthMeta,
    pub clients: Vec<ClientTotals>,
    pub js_context: format::meta::ClientContext,
    pub load_csv_rows: u64,
    /// The mode as the CLI spells it (`js-pub`).
    pub mode: String,
    /// --inject-latency: each server's proxy.
    pub proxy: Vec<crate::proxy::ProxyReport>,
    pub roles: Vec<RoleSummary>,
    pub run_id: String,
    /// The servers, credentials redacted.
    pub servers: Vec<String>,
    pub stream_check: Option<super::reconcile::StreamCheck>,
}

impl format::meta::Section for LoadReport {
    const KEY: &'static str = format::meta::LOAD_KEY;
}

/// meta.json `load` of a `demo`: its one js-pub load (stream DEMO, subject
/// demo.events), read back as [`format::meta::LoadMeta`].
#[derive(Debug, Clone, Serialize)]
pub struct DemoLoad {
    pub duration_ns: u64,
    pub js_context: format::meta::ClientContext,
    pub mode: String,
    pub msg_size: u64,
    pub roles: Vec<RoleSummary>,
    pub stream: String,
    pub subject: String,
    pub window: usize,
}

impl format::meta::Section for DemoLoad {
    const KEY: &'static str = format::meta::LOAD_KEY;
}

fn client_rate(c: &ClientTotals) -> f64 {
    let d = c.duration_s();
    if d > 0.0 {
        c.ops as f64 / d
    } else {
        0.0
    }
}

/// Aggregates the clients of each role, in role order. `load_start_ns`: the load's start
/// on the run clock (its `load_start` event), which the failure lines count from.
pub fn summarize(clients: &[ClientTotals], load_start_ns: u64) -> Vec<RoleSummary> {
    let mut by: BTreeMap<Role, Vec<&ClientTotals>> = BTreeMap::new();
    for c in clients {
        by.entry(c.role).or_default().push(c);
    }
    by.into_iter()
        .map(|(role, cs)| {
            let mut lat = latency_histogram();
            let mut co = latency_histogram();
            let mut errors_by_kind = BTreeMap::new();
            let mut error_times_ns: BTreeMap<&'static str, [u64; 2]> = BTreeMap::new();
            for c in &cs {
                let _ = lat.add(&c.lat);
                let _ = co.add(&c.co);
                for (k, v) in &c.errors_by_kind {
                    *errors_by_kind.entry(*k).or_insert(0) += v;
                }
                for (k, [first, last]) in &c.error_times_ns {
                    let t = error_times_ns.entry(*k).or_insert([*first, *last]);
                    t[0] = t[0].min(*first);
                    t[1] = t[1].max(*last);
                }
            }
            let mut failures: Vec<Failure> = errors_by_kind
                .iter()
                .map(|(kind, count)| {
                    let [first, last] = error_times_ns.get(kind).copied().unwrap_or_default();
                    failure(role, kind, *count, [first, last], load_start_ns)
                })
                .collect();
            failures.sort_by_key(|f| f.count);
            let active: Vec<&&ClientTotals> = cs.iter().filter(|c| c.ops > 0).collect();
            let first = active.iter().map(|c| c.first_ns).min().unwrap_or(0);
            let last = active.iter().map(|c| c.last_ns).max().unwrap_or(0);
            let dur = last.saturating_sub(first) as f64 / 1e9;
            let ops: u64 = cs.iter().map(|c| c.ops).sum();
            let bytes: u64 = cs.iter().map(|c| c.bytes).sum();
            let rate = |x: f64| if dur > 0.0 { x / dur } else { 0.0 };
            let rates: Vec<f64> = cs.iter().map(|c| client_rate(c)).collect();
            RoleSummary {
                role,
                clients: cs.len(),
                ops,
                bytes,
                errors: cs.iter().map(|c| c.errors).sum(),
                errors_by_kind,
                duration_s: dur,
                msgs_per_s: rate(ops as f64),
                mib_per_s: rate(bytes as f64) / (1024.0 * 1024.0),
                per_client_msgs_per_s: Spread::of(&rates),
                lat_us: LatUs::from_hist(&lat),
                co_lat_us: LatUs::from_hist(&co),
                latency_meaning: role.latency_meaning(),
                failures,
            }
        })
        .collect()
}

fn commas(v: f64) -> String {
    let s = format!("{:.0}", v);
    let (sign, digits) = s.strip_prefix('-').map(|d| ("-", d)).unwrap_or(("", &s));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

/// The human summary (nats bench's layout, with latencies and errors).
pub fn human(roles: &[RoleSummary], clients: &[ClientTotals]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for r in roles {
        let u = r.role.unit();
        // Objects are few and slow: rates with two decimals, as the storage study's tables.
        let rate = |v: f64| {
            if u == "objs" {
                format!("{v:.2}")
            } else {
                commas(v)
            }
        };
        let _ = writeln!(
            o,
            "{} stats: {} {u}/sec ~ {:.2} MiB/sec ({} {u}, {} clients, {:.2} s)",
            r.role.name(),
            rate(r.msgs_per_s),
            r.mib_per_s,
            commas(r.ops as f64),
            r.clients,
            r.duration_s
        );
        if r.clients > 1 {
            for c in clients.iter().filter(|c| c.role == r.role) {
                let _ = writeln!(
                    o,
                    " [{}] {} {u}/sec ~ {:.2} MiB/sec ({} {u}) {}",
                    c.index + 1,
                    rate(client_rate(c)),
                    if c.duration_s() > 0.0 {
                        c.bytes as f64 / c.duration_s() / 1048576.0
                    } else {
                        0.0
                    },
                    c.ops,
                    super::connect::redact_url(&c.server)
                );
            }
            let s = &r.per_client_msgs_per_s;
            let _ = writeln!(
                o,
                " min {} | avg {} | max {} | stddev {} {u}/sec",
                rate(s.min),
                rate(s.avg),
                rate(s.max),
                rate(s.stddev)
            );
        }
        if let Some(l) = &r.lat_us {
            let _ = writeln!(
                o,
                " latency ({}): min {:.1} | p50 {:.1} | p90 {:.1} | p99 {:.1} | p99.9 {:.1} | max {:.1} | mean {:.1} | stddev {:.1} us",
                r.latency_meaning, l.min, l.p50, l.p90, l.p99, l.p999, l.max, l.mean, l.stddev
            );
        }
        if let (Some(c), Some(l)) = (&r.co_lat_us, &r.lat_us) {
            if c != l {
                let _ = writeln!(
                    o,
                    " from intended start:  p50 {:.1} | p99 {:.1} | p99.9 {:.1} | max {:.1} us",
                    c.p50, c.p99, c.p999, c.max
                );
            }
        }
        if r.errors > 0 {
            let kinds: Vec<String> = r
                .errors_by_kind
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(o, " errors: {} ({})", r.errors, kinds.join(", "));
        }
    }
    o
}

/// What an error kind means and what to do about it (the end of the one error line).
fn error_hint(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "stream_full" => "the stream or bucket is at its limits (max bytes or messages, discard new); empty it with --purge or raise --max-bytes (or, for js-pub, --discard old to drop the oldest)",
        "storage_full" | "memory_full" | "insufficient_resources" | "account_limits" => {
            "the server's JetStream storage is full; free space or raise its max_file_store/max_memory_store"
        }
        "no_pong" => "the subscriber's PING at the end of the run got no PONG within 2 s: the server is stopped or hung (a quiet subject would have answered); when it stopped is not known to a subscriber alone",
        "no_responders" => "nothing serves the subject; start `diskpulse load reply` or add --reply N",
        "timeout" => "the server did not answer within --timeout, or the connection dropped with acks in flight (see the nats_client events)",
        "not_found" => "reads asked for keys, objects or stream sequences that were never put; put them first (kv-put with the same --keys, obj-put, js-pub with at least --msgs for js-get)",
        "mismatch" | "digest_mismatch" => "data read back is not what diskpulse wrote",
        "missing" => "messages never arrived (slow consumer drops); use fewer publishers or more subscribers",
        "stream_not_found" => "the stream is gone; create it with js-pub",
        "lost_unconfirmed" => "the connection to the broker dropped with publishes unconfirmed (see the amqp_disconnected events); the broker may or may not have stored them",
        "duplicate" => "messages were delivered again after their ack was lost with the connection (at least once); count them out of what was received",
        _ => return None,
    })
}

/// What one operation of a role is called, plural ("publishes failed").
fn op_noun(role: Role) -> &'static str {
    match role {
        Role::Pub | Role::JsPub | Role::AmqpPub | Role::AmqpCast => "publishes",
        Role::Sub | Role::JsConsume | Role::AmqpConsume | Role::AmqpServe => "messages",
        Role::Request | Role::AmqpCall => "requests",
        Role::Reply => "replies",
        Role::KvPut => "puts",
        Role::KvGet | Role::JsGet => "gets",
        Role::ObjPut => "object puts",
        Role::ObjGet => "object gets",
    }
}

/// One kind of failure of one role, with its loud line:
/// `the store filled up at 2.4 s into the load (insufficient resources): 1,590,189
/// publishes failed`. `[first_ns, last_ns]` and `load_start_ns` are on the run clock;
/// `first_s`/`last_s` stay on it, the line counts from the load's start (the broker's
/// start-up before the load is not in it), so `demo`, `load` and `run` say the same.
pub fn failure(
    role: Role,
    kind: &str,
    count: u64,
    [first_ns, last_ns]: [u64; 2],
    load_start_ns: u64,
) -> Failure {
    let (what, words) = kind_words(kind);
    let into_load_s = first_ns.saturating_sub(load_start_ns) as f64 / 1e9;
    Failure {
        role: role.name().to_string(),
        kind: kind.to_string(),
        what: what.to_string(),
        count,
        first_s: first_ns as f64 / 1e9,
        last_s: last_ns as f64 / 1e9,
        line: format!(
            "{what} at {into_load_s:.1} s into the load ({words}): {} {} failed",
            commas(count as f64),
            op_noun(role)
        ),
    }
}

/// Every role's failures, fewest first, so the last is the one to print last.
pub fn failures(roles: &[RoleSummary]) -> Vec<Failure> {
    let mut all: Vec<Failure> = roles.iter().flat_map(|r| r.failures.clone()).collect();
    all.sort_by_key(|f| f.count);
    all
}

/// The one error line of a run with failed operations:
/// `9596 of 10000 js-pub operations failed (stream_full 9596): <hint>`.
pub fn error_line(roles: &[RoleSummary]) -> Option<String> {
    let failed: Vec<&RoleSummary> = roles.iter().filter(|r| r.errors > 0).collect();
    if failed.is_empty() {
        return None;
    }
    let parts: Vec<String> = failed
        .iter()
        .map(|r| {
            let kinds: Vec<String> = r
                .errors_by_kind
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            format!(
                "{} of {} {} operations failed ({})",
                r.errors,
                r.errors + r.ops,
                r.role.name(),
                kinds.join(", ")
            )
        })
        .collect();
    // The hint of the most frequent kind.
    let top = failed
        .iter()
        .flat_map(|r| r.errors_by_kind.iter())
        .max_by_key(|(_, v)| **v)
        .map(|(k, _)| *k);
    Some(match top.and_then(error_hint) {
        Some(h) => format!("{}: {h}", parts.join("; ")),
        None => parts.join("; "),
    })
}

/// The header of diskpulse's extras file beside a `--csv` file (see
/// [`super::natscli::extras_path`]): natscli's columns with the role, then errors and
/// latencies (microseconds).
pub const EXTRAS_CSV_HEADER: &str = "#RunID,ClientID,Role,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,Errors,LatMinUs,LatP50Us,LatP90Us,LatP99Us,LatP999Us,LatMaxUs,LatMeanUs,LatStddevUs";

fn lat_cols(l: Option<&LatUs>) -> String {
    match l {
        Some(l) => format!(
            "{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1}",
            l.min, l.p50, l.p90, l.p99, l.p999, l.max, l.mean, l.stddev
        ),
        None => ",,,,,,,".into(),
    }
}

/// diskpulse's extras beside natscli's CSV: one row per client with the same ClientID
/// as natscli's file (`S0..`, then `P0..`), then one aggregate row per role (ClientID
/// `S` or `P`). MsgCount counts messages, never acks.
pub fn extras_csv(run_id: &str, roles: &[RoleSummary], clients: &[ClientTotals]) -> String {
    use super::natscli::{group, ordered};
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "{EXTRAS_CSV_HEADER}");
    for (id, c) in ordered(clients) {
        let d = c.duration_s();
        let _ = writeln!(
            o,
            "{run_id},{id},{},{},{},{:.0},{:.6},{:.6},{},{}",
            c.role.name(),
            c.ops,
            c.bytes,
            client_rate(c),
            if d > 0.0 { c.bytes as f64 / d } else { 0.0 },
            d,
            c.errors,
            lat_cols(LatUs::from_hist(&c.lat).as_ref())
        );
    }
    let mut by_group: Vec<&RoleSummary> = roles.iter().collect();
    by_group.sort_by_key(|r| group(r.role));
    for r in by_group {
        let _ = writeln!(
            o,
            "{run_id},{},{},{},{},{:.0},{:.6},{:.6},{},{}",
            group(r.role).prefix(),
            r.role.name(),
            r.ops,
            r.bytes,
            r.msgs_per_s,
            r.mib_per_s * 1048576.0,
            r.duration_s,
            r.errors,
            lat_cols(r.lat_us.as_ref())
        );
    }
    o
}

/// A run id like natscli's (22 characters of base62).
pub fn run_id() -> String {
    const A: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut x = super::record::realtime_ns() ^ (std::process::id() as u64).rotate_left(32);
    (0..22)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            A[(x % 62) as usize] as char
        })
        .collect()
}

/// js-pub's reconciliation as a line, and the loud data-loss line when acked messages
/// are missing from the stream.
pub fn stream_check_line(c: &super::StreamCheck) -> (String, Option<String>) {
    let Some(after) = c.msgs_after else {
        return (
            format!(
                "stream {}: {} publishes acked; the server did not answer stream info after the run: not checked",
                c.stream, c.acked
            ),
            None,
        );
    };
    let stored = after.saturating_sub(c.msgs_before);
    let line = format!(
        "stream {}: holds {after} messages ({} before the run, {stored} new); {} publishes acked{}",
        c.stream,
        c.msgs_before,
        c.acked,
        if stored >= c.acked {
            ": every acked message is there"
        } else {
            ""
        }
    );
    let line = match &c.msg_id {
        None => line,
        Some(r) => format!(
            "{line}\n--msg-id: {} publishes lost their ack; sent again with their id: {} were already stored (duplicate), {} stored now, {} not acked again; {}",
            r.lost,
            r.lost_stored,
            r.republished,
            r.retry_failed,
            match c.exact() {
                Some(true) => format!(
                    "exact: {stored} stored = {} acked + {} lost but stored; the stream now holds {} messages",
                    c.acked,
                    r.lost_stored,
                    r.msgs_final.map(|m| m.to_string()).unwrap_or("?".into())
                ),
                Some(false) => format!(
                    "NOT EXACT: {stored} stored != {} acked + {} lost but stored",
                    c.acked, r.lost_stored
                ),
                None => "not reconciled (some retries got no ack)".into(),
            }
        ),
    };
    let loss = c.missing().filter(|&m| m > 0).map(|m| {
        format!(
            "POSSIBLE DATA LOSS: {m} acked publishes are missing from stream {} ({} acked, {stored} stored during the run)",
            c.stream, c.acked
        )
    });
    (line, loss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acked_messages_missing_from_the_stream_are_called_possible_data_loss() {
        let mut c = crate::load::StreamCheck {
            stream: "S".into(),
            msgs_before: 100,
            msgs_after: Some(1_100),
            acked: 1_000,
            msg_id: None,
        };
        let (line, loss) = stream_check_line(&c);
        assert!(line.contains("every acked message is there"), "{line}");
        assert_eq!(loss, None);
        c.msgs_after = Some(1_090);
        let (line, loss) = stream_check_line(&c);
        assert!(!line.contains("every acked"), "{line}");
        assert!(loss.unwrap().starts_with("POSSIBLE DATA LOSS: 10 acked"));
        c.msgs_after = None;
        assert_eq!(stream_check_line(&c).1, None);
    }

    #[test]
    fn spread_is_the_population_stddev() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((s.min, s.avg, s.max), (2.0, 5.0, 9.0));
        assert!((s.stddev - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_full_store_reads_as_words_with_time_and_count() {
        // The load started 0.5 s after the run's zero (the broker's start-up).
        let f = failure(
            Role::JsPub,
            "insufficient_resources",
            1_590_189,
            [2_900_000_000, 9e9 as u64],
            500_000_000,
        );
        assert_eq!(
            f.line,
            "the store filled up at 2.4 s into the load (insufficient resources): 1,590,189 publishes failed"
        );
        assert_eq!((f.first_s, f.last_s), (2.9, 9.0), "run clock");
        let f = failure(Role::KvGet, "weird_thing", 3, [0, 0], 0);
        assert_eq!(
            f.line,
            "operations failed at 0.0 s into the load (weird thing): 3 gets failed"
        );
    }

    #[test]
    fn commas_group_thousands() {
        assert_eq!(commas(7323895.4), "7,323,895");
        assert_eq!(commas(432.0), "432");
    }

    #[test]
    fn run_ids_look_like_natscli() {
        let r = run_id();
        assert_eq!(r.len(), 22);
        assert!(r.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
