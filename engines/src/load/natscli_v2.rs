//! natscli's formats from v0.2 on (`nats bench pub|sub|service|js|kv ...`, natscli's
//! `internal/bench/stats.go`): the report `nats bench` prints and the CSV `--csv` writes,
//! with per-operation latency columns. The v0.1 flat form's formats are [`super::natscli`].
//!
//! What must stay true (read from natscli's source, not guessed):
//! - One benchmark is one kind ([`Kind`]): its clients are numbered `P0..` (senders) or
//!   `S0..` (receivers) in the CSV and `[1]..` in the report.
//! - The CSV header has 7 columns when the kind records no latencies (core `sub`, the
//!   service server) and 15 otherwise ([`CSV_HEADER_LAT`]); latencies are in microseconds
//!   as `%f` (6 decimals).
//! - Rates are integers truncated (`int64(msgs / secs)`), byte rates 1024-based
//!   (`humanize.IBytes`: `1.5 KiB`, `12 MiB`), report latencies `humanize.CommafWithDigits
//!   (x, 2)` (truncated to 2 decimals, trailing zeros dropped), counts with commas.
//! - Latencies here are each operation's own time (`lat`: send to completion), read from
//!   the client's HdrHistogram (3 significant digits), not a sorted Vec of every sample.

use std::fmt::Write;

use hdrhistogram::Histogram;

use super::natscli::commas;
use super::record::ClientTotals;

/// natscli v0.2's CSV header without latencies, exactly.
pub const CSV_HEADER: &str =
    "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs";
/// natscli v0.2's CSV header with latencies, exactly.
pub const CSV_HEADER_LAT: &str = "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,MinLatencyMicroSecs,AvgLatencyMicroSecs,MaxLatencyMicroSecs,P50LatencyMicroSecs,P90LatencyMicroSecs,P99LatencyMicroSecs,P99.9LatencyMicroSecs,StdDevLatencyMicroSecs";

/// One natscli v0.2 benchmark kind: its label (natscli's `GetBenchTypeLabel`), its
/// client prefix and whether it records latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub label: &'static str,
    /// `P` (senders), `S` (receivers) or `?` (the service server: nothing to report).
    pub prefix: &'static str,
    pub latencies: bool,
}

impl Kind {
    const fn new(label: &'static str, prefix: &'static str, latencies: bool) -> Kind {
        Kind {
            label,
            prefix,
            latencies,
        }
    }
    pub const CORE_PUB: Kind = Kind::new("Core NATS publisher", "P", true);
    pub const CORE_SUB: Kind = Kind::new("Core NATS subscriber", "S", false);
    pub const REQUEST: Kind = Kind::new("Core NATS service requester", "P", true);
    pub const SERVE: Kind = Kind::new("Core NATS service server", "?", false);
    pub const JS_SYNC_PUB: Kind = Kind::new("JetStream synchronous publisher", "P", true);
    pub const JS_ASYNC_PUB: Kind = Kind::new("JetStream asynchronous publisher", "P", true);
    pub const JS_ATOMIC_PUB: Kind = Kind::new("JetStream atomic batch publisher", "P", true);
    pub const JS_GET_SYNC: Kind = Kind::new("JetStream synchronous getter", "S", true);
    pub const JS_GET_BATCH: Kind = Kind::new("JetStream batched direct getter", "S", true);
    pub const JS_ORDERED: Kind = Kind::new("JetStream ordered ephemeral consumer", "S", true);
    pub const JS_CONSUME: Kind = Kind::new("JetStream durable consumer (callback)", "S", true);
    pub const JS_FETCH: Kind = Kind::new("JetStream durable consumer (fetch)", "S", true);
    pub const KV_PUT: Kind = Kind::new("JetStream KV putter", "P", true);
    pub const KV_GET: Kind = Kind::new("JetStream KV getter", "S", true);

    /// The CSV header of this kind.
    pub fn csv_header(&self) -> &'static str {
        if self.latencies {
            CSV_HEADER_LAT
        } else {
            CSV_HEADER
        }
    }
}

/// `humanize.IBytes`: `512 B`, `1.5 KiB`, `12 MiB`.
pub fn ibytes(b: u64) -> String {
    const SIZES: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 10 {
        return format!("{b} B");
    }
    let e = ((b as f64).ln() / 1024f64.ln()).floor() as usize;
    let e = e.min(SIZES.len() - 1);
    let val = ((b as f64) / 1024f64.powi(e as i32) * 10.0 + 0.5).floor() / 10.0;
    if val < 10.0 {
        format!("{val:.1} {}", SIZES[e])
    } else {
        format!("{val:.0} {}", SIZES[e])
    }
}

/// `humanize.CommafWithDigits(x, 2)`: commas in the integer part, at most 2 decimals
/// (truncated, not rounded), no trailing zeros.
pub fn commaf2(x: f64) -> String {
    let s = format!("{}", x.max(0.0));
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let int = commas(int.parse::<u64>().unwrap_or(0));
    let frac = &frac[..frac.len().min(2)];
    if frac.is_empty() {
        int
    } else {
        format!("{int}.{frac}")
    }
}

/// natscli's latency figures of one histogram (ns) in microseconds: min, avg, max, P50,
/// P90, P99, P99.9, stddev (all 0 when empty).
fn lat_us(h: &Histogram<u64>) -> [f64; 8] {
    if h.is_empty() {
        return [0.0; 8];
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    [
        us(h.min()),
        h.mean() / 1000.0,
        us(h.max()),
        us(h.value_at_quantile(0.5)),
        us(h.value_at_quantile(0.9)),
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        h.stdev() / 1000.0,
    ]
}

/// A client's (msgs/s truncated, bytes/s).
fn rates(c: &ClientTotals) -> (u64, f64) {
    let d = c.duration_s();
    if d > 0.0 {
        ((c.ops as f64 / d) as u64, c.bytes as f64 / d)
    } else {
        (0, 0.0)
    }
}

/// natscli's `BenchSample.String`: `rate msgs/sec ~ bytes/sec` and, with latencies,
/// `~ min: Xus ~ avg: .. ~ P99.9: Xus`.
fn sample_line(rate: u64, bps: f64, lat: Option<&Histogram<u64>>) -> String {
    let mut o = format!("{} msgs/sec ~ {}/sec", commas(rate), ibytes(bps as u64));
    if let Some(h) = lat.filter(|h| !h.is_empty()) {
        let l = lat_us(h);
        let _ = write!(
            o,
            " ~ min: {}us ~ avg: {}us ~ max: {}us ~ P50: {}us ~ P90: {}us ~ P99: {}us ~ P99.9: {}us",
            commaf2(l[0]),
            commaf2(l[1]),
            commaf2(l[2]),
            commaf2(l[3]),
            commaf2(l[4]),
            commaf2(l[5]),
            commaf2(l[6])
        );
    }
    o
}

/// The clients natscli would have in this benchmark: those of the kind's group.
fn members<'a>(kind: &Kind, clients: &'a [ClientTotals]) -> Vec<&'a ClientTotals> {
    use super::natscli::{group, Group};
    let want = match kind.prefix {
        "P" => Group::Pub,
        "S" => Group::Sub,
        _ => return vec![],
    };
    clients.iter().filter(|c| group(c.role) == want).collect()
}

/// All the members' latencies in one histogram.
fn merged(cs: &[&ClientTotals]) -> Histogram<u64> {
    let mut h = collectors::directio::latency_histogram();
    for c in cs {
        let _ = h.add(&c.lat);
    }
    h
}

/// The report `nats bench` v0.2 prints (natscli's `BenchmarkResults.Report`).
pub fn report(kind: &Kind, clients: &[ClientTotals]) -> String {
    let cs = members(kind, clients);
    if cs.is_empty() {
        return "No publisher or subscribers. Nothing to report.".into();
    }
    let all = merged(&cs);
    let lat = kind.latencies.then_some(&all);
    // The group's span: earliest first operation to latest last one.
    let msgs: u64 = cs.iter().map(|c| c.ops).sum();
    let bytes: u64 = cs.iter().map(|c| c.bytes).sum();
    let first = cs.iter().map(|c| c.first_ns).min().unwrap_or(0);
    let last = cs.iter().map(|c| c.last_ns).max().unwrap_or(0);
    let secs = last.saturating_sub(first) as f64 / 1e9;
    let (rate, bps) = if secs > 0.0 {
        ((msgs as f64 / secs) as u64, bytes as f64 / secs)
    } else {
        (0, 0.0)
    };
    let mut o = String::new();
    if cs.len() == 1 {
        let _ = writeln!(
            o,
            "NATS {} stats: {}",
            kind.label,
            sample_line(rate, bps, lat)
        );
        return o;
    }
    let mut per = vec![];
    for (i, c) in cs.iter().enumerate() {
        let (r, b) = rates(c);
        per.push(r);
        let _ = writeln!(
            o,
            " [{}] {} ({} msgs)",
            i + 1,
            sample_line(r, b, kind.latencies.then_some(&c.lat)),
            commas(c.ops)
        );
    }
    let _ = writeln!(
        o,
        "\n NATS {} aggregated stats: {}",
        kind.label,
        sample_line(rate, bps, None)
    );
    let n = per.len() as f64;
    let avg = (per.iter().sum::<u64>() as f64 / n) as u64;
    let sd = (per
        .iter()
        .map(|&r| (r as f64 - avg as f64).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let _ = writeln!(
        o,
        " message rates min {} | avg {} | max {} | stddev {} msgs",
        commas(per.iter().copied().min().unwrap_or(0)),
        commas(avg),
        commas(per.iter().copied().max().unwrap_or(0)),
        commas(sd as u64)
    );
    if kind.latencies && !all.is_empty() {
        let l = lat_us(&all);
        let _ = writeln!(
            o,
            " latencies per operation min {}us | avg {}us | max {}us | stddev {}us | P50 {}us | P90 {}us | P99 {}us | P99.9: {}us",
            commaf2(l[0]),
            commaf2(l[1]),
            commaf2(l[2]),
            commaf2(l[7]),
            commaf2(l[3]),
            commaf2(l[4]),
            commaf2(l[5]),
            commaf2(l[6])
        );
    }
    o
}

/// natscli v0.2's CSV: [`Kind::csv_header`], then one row per client of the kind.
pub fn csv(kind: &Kind, run_id: &str, clients: &[ClientTotals]) -> String {
    let mut o = format!("{}\n", kind.csv_header());
    for (j, c) in members(kind, clients).iter().enumerate() {
        let (r, b) = rates(c);
        let _ = write!(
            o,
            "{run_id},{}{j},{},{},{r},{b:.6},{:.6}",
            kind.prefix,
            c.ops,
            c.bytes,
            c.duration_s()
        );
        if kind.latencies {
            for v in lat_us(&c.lat) {
                let _ = write!(o, ",{v:.6}");
            }
        }
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::record::Role;

    fn client(role: Role, ops: u64, secs: f64, lat_ns: &[u64]) -> ClientTotals {
        let mut lat = collectors::directio::latency_histogram();
        for &l in lat_ns {
            lat.record(l).unwrap();
        }
        ClientTotals {
            role,
            index: 0,
            server: "nats://127.0.0.1:4222".into(),
            ops,
            bytes: ops * 128,
            errors: 0,
            errors_by_kind: Default::default(),
            error_times_ns: Default::default(),
            first_ns: 1_000_000_000,
            last_ns: 1_000_000_000 + (secs * 1e9) as u64,
            lat,
            co: collectors::directio::latency_histogram(),
        }
    }

    #[test]
    fn humanize_as_natscli_uses_it() {
        assert_eq!(ibytes(5), "5 B");
        assert_eq!(ibytes(512), "512 B");
        assert_eq!(ibytes(1536), "1.5 KiB");
        assert_eq!(ibytes(12 << 20), "12 MiB");
        assert_eq!(commaf2(12.3456), "12.34");
        assert_eq!(commaf2(3.0), "3");
        assert_eq!(commaf2(1234.5), "1,234.5");
    }

    #[test]
    fn one_client_is_one_line_with_its_latencies() {
        // Below 2048 ns the histogram holds values exactly.
        let cs = [client(Role::Pub, 1000, 0.5, &[1000, 2000, 2000])];
        let r = report(&Kind::CORE_PUB, &cs);
        assert_eq!(
            r,
            "NATS Core NATS publisher stats: 2,000 msgs/sec ~ 250 KiB/sec ~ min: 1us ~ avg: 1.66us ~ max: 2us ~ P50: 2us ~ P90: 2us ~ P99: 2us ~ P99.9: 2us\n"
        );
        let csv = csv(&Kind::CORE_PUB, "RUN", &cs);
        let l: Vec<&str> = csv.lines().collect();
        assert_eq!(l[0], CSV_HEADER_LAT);
        assert_eq!(l[1].split(',').count(), 15);
        assert!(
            l[1].starts_with("RUN,P0,1000,128000,2000,256000.000000,0.500000,1.000000,"),
            "{}",
            l[1]
        );
    }

    #[test]
    fn several_clients_give_per_client_lines_and_the_aggregate() {
        let cs = [
            client(Role::Sub, 100, 1.0, &[]),
            client(Role::Sub, 300, 1.0, &[]),
            client(Role::Pub, 5, 1.0, &[]),
        ];
        let r = report(&Kind::CORE_SUB, &cs);
        let l: Vec<&str> = r.lines().collect();
        assert_eq!(l[0], " [1] 100 msgs/sec ~ 12 KiB/sec (100 msgs)");
        assert_eq!(l[1], " [2] 300 msgs/sec ~ 38 KiB/sec (300 msgs)");
        assert_eq!(l[2], "");
        assert_eq!(
            l[3],
            " NATS Core NATS subscriber aggregated stats: 400 msgs/sec ~ 50 KiB/sec"
        );
        assert_eq!(
            l[4],
            " message rates min 100 | avg 200 | max 300 | stddev 100 msgs"
        );
        assert_eq!(l.len(), 5, "{r}");
        let csv = csv(&Kind::CORE_SUB, "R", &cs);
        assert_eq!(csv.lines().next(), Some(CSV_HEADER));
        assert_eq!(
            csv.lines().count(),
            3,
            "the publisher is not a subscriber: {csv}"
        );
        assert_eq!(
            report(&Kind::SERVE, &cs),
            "No publisher or subscribers. Nothing to report."
        );
    }
}
