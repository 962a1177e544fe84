//! natscli's own formats for a load run: the 7-column CSV `nats bench --csv` writes
//! (receivers `S0..` first, then senders `P0..`, one row per client and nothing else),
//! the summary blocks `nats bench` prints (nats.go's `bench.Benchmark.Report`), and where
//! diskpulse's extra columns go (a second file beside the CSV, [`extras_path`]).
//!
//! natscli's figures are integers where nats.go truncates them (`MsgsPerSec`, the
//! `min | avg | max | stddev` line), its "MB/sec" is MiB (1024-based, nats.go's
//! `HumanBytes(x, false)`), a group's rate is its messages over the span from its
//! earliest client's first message to its latest client's last, and the stddev is the
//! population one.

use std::path::{Path, PathBuf};

use super::record::{ClientTotals, Role};

/// natscli's CSV header, exactly.
pub const CSV_HEADER: &str =
    "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs";

/// natscli's two groups: subscribers (`S`) and publishers (`P`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    Sub,
    Pub,
}

impl Group {
    pub fn prefix(self) -> &'static str {
        match self {
            Group::Sub => "S",
            Group::Pub => "P",
        }
    }
}

/// The natscli group of a role: what sends is a publisher (`nats bench --pub`: core and
/// JetStream publishers, requesters, KV putters), what receives or serves is a
/// subscriber (`--sub`: subscribers, consumers, responders, KV getters). Object-store
/// roles, which natscli has not, follow the same rule.
pub fn group(role: Role) -> Group {
    match role {
        Role::Pub
        | Role::Request
        | Role::JsPub
        | Role::KvPut
        | Role::ObjPut
        | Role::AmqpPub
        | Role::AmqpCall
        | Role::AmqpCast => Group::Pub,
        Role::Sub
        | Role::Reply
        | Role::JsConsume
        | Role::KvGet
        | Role::JsGet
        | Role::ObjGet
        | Role::AmqpConsume
        | Role::AmqpServe => Group::Sub,
    }
}

/// The clients in natscli's order with their ids: `S0, S1, .., P0, P1, ..` (within a
/// group, in the order the run lists them; a group's ids count across its roles).
pub fn ordered(clients: &[ClientTotals]) -> Vec<(String, &ClientTotals)> {
    let mut out = vec![];
    for g in [Group::Sub, Group::Pub] {
        for (i, c) in clients.iter().filter(|c| group(c.role) == g).enumerate() {
            out.push((format!("{}{i}", g.prefix()), c));
        }
    }
    out
}

/// A client's msgs/s as nats.go's `Sample.Rate` (truncated to an integer).
fn rate(c: &ClientTotals) -> u64 {
    let d = c.duration_s();
    if d > 0.0 {
        (c.ops as f64 / d) as u64
    } else {
        0
    }
}

/// A client's bytes/s (nats.go's `Sample.Throughput`).
fn throughput(c: &ClientTotals) -> f64 {
    let d = c.duration_s();
    if d > 0.0 {
        c.bytes as f64 / d
    } else {
        0.0
    }
}

/// natscli's CSV: [`CSV_HEADER`], then one row per client in [`ordered`] order.
pub fn csv(run_id: &str, clients: &[ClientTotals]) -> String {
    use std::fmt::Write;
    let mut o = format!("{CSV_HEADER}\n");
    for (id, c) in ordered(clients) {
        let _ = writeln!(
            o,
            "{run_id},{id},{},{},{},{:.6},{:.6}",
            c.ops,
            c.bytes,
            rate(c),
            throughput(c),
            c.duration_s()
        );
    }
    o
}

/// Where diskpulse's extra columns and aggregate rows go, beside the CSV `p`:
/// `results.csv` -> `results.diskpulse.csv`.
pub fn extras_path(p: &Path) -> PathBuf {
    sibling(p, "diskpulse.csv")
}

/// `p` with its extension (if any) replaced by `ext`; never `p` itself.
pub(crate) fn sibling(p: &Path, ext: &str) -> PathBuf {
    let stem = match p.extension() {
        Some(e) if e == "csv" => p.with_extension(""),
        _ => p.to_path_buf(),
    };
    let mut s = stem.into_os_string();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// nats.go's `commaFormat`.
pub fn commas(n: u64) -> String {
    let d = n.to_string();
    let mut o = String::new();
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(ch);
    }
    o
}

/// nats.go's `HumanBytes(bytes, false)`: 1024-based, labelled KB, MB, ...
fn human_bytes(b: f64) -> String {
    const PRE: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if b < 1024.0 {
        return format!("{b:.2} B");
    }
    let exp = ((b.ln() / 1024f64.ln()) as usize).clamp(1, PRE.len());
    format!("{:.2} {}B", b / 1024f64.powi(exp as i32), PRE[exp - 1])
}

/// A set of clients as one nats.go sample: messages, bytes and the span they cover.
struct Span {
    msgs: u64,
    bytes: u64,
    secs: f64,
}

impl Span {
    fn of<'a>(cs: impl Iterator<Item = &'a ClientTotals>) -> Span {
        let (mut msgs, mut bytes, mut first, mut last) = (0, 0, u64::MAX, 0);
        for c in cs {
            msgs += c.ops;
            bytes += c.bytes;
            if c.ops > 0 {
                first = first.min(c.first_ns);
                last = last.max(c.last_ns);
            }
        }
        let secs = last.saturating_sub(first) as f64 / 1e9;
        Span { msgs, bytes, secs }
    }

    /// `7,323,895 msgs/sec ~ 894.03 MB/sec`
    fn line(&self) -> String {
        let (r, t) = if self.secs > 0.0 {
            (
                (self.msgs as f64 / self.secs) as u64,
                self.bytes as f64 / self.secs,
            )
        } else {
            (0, 0.0)
        };
        format!("{} msgs/sec ~ {}/sec", commas(r), human_bytes(t))
    }
}

/// nats.go's `SampleGroup.Statistics`: integer min, mean, max and population stddev.
fn statistics(rates: &[u64]) -> String {
    let n = rates.len().max(1) as f64;
    let min = rates.iter().copied().min().unwrap_or(0);
    let max = rates.iter().copied().max().unwrap_or(0);
    let avg = (rates.iter().sum::<u64>() as f64 / n) as u64;
    let var = rates
        .iter()
        .map(|&r| (r as f64 - avg as f64).powi(2))
        .sum::<f64>()
        / n;
    format!(
        "min {} | avg {} | max {} | stddev {} msgs",
        commas(min),
        commas(avg),
        commas(max),
        commas(var.sqrt() as u64)
    )
}

/// The summary blocks `nats bench` prints (nats.go's `Benchmark.Report`): with both
/// groups `NATS Pub/Sub stats: ...` then each group indented by one space; per group
/// its line, and with more than one client `[i] ... (N msgs)` per client and the
/// `min | avg | max | stddev` line.
pub fn report(clients: &[ClientTotals]) -> String {
    use std::fmt::Write;
    let pubs: Vec<&ClientTotals> = clients
        .iter()
        .filter(|c| group(c.role) == Group::Pub)
        .collect();
    let subs: Vec<&ClientTotals> = clients
        .iter()
        .filter(|c| group(c.role) == Group::Sub)
        .collect();
    if pubs.is_empty() && subs.is_empty() {
        return "No publisher or subscribers. Nothing to report.\n".into();
    }
    let mut o = String::new();
    let mut indent = "";
    if !pubs.is_empty() && !subs.is_empty() {
        let _ = writeln!(o, "NATS Pub/Sub stats: {}", Span::of(clients.iter()).line());
        indent = " ";
    }
    for (name, g) in [("Pub", &pubs), ("Sub", &subs)] {
        if g.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "{indent}{name} stats: {}",
            Span::of(g.iter().copied()).line()
        );
        if g.len() > 1 {
            for (i, c) in g.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "{indent} [{}] {} msgs/sec ~ {}/sec ({} msgs)",
                    i + 1,
                    commas(rate(c)),
                    human_bytes(throughput(c)),
                    c.ops
                );
            }
            let rates: Vec<u64> = g.iter().map(|c| rate(c)).collect();
            let _ = writeln!(o, "{indent} {}", statistics(&rates));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(role: Role, index: usize, ops: u64, secs: f64) -> ClientTotals {
        ClientTotals {
            role,
            index,
            server: "nats://127.0.0.1:4222".into(),
            ops,
            bytes: ops * 128,
            errors: 0,
            errors_by_kind: Default::default(),
            error_times_ns: Default::default(),
            first_ns: 1_000_000_000,
            last_ns: 1_000_000_000 + (secs * 1e9) as u64,
            lat: collectors::directio::latency_histogram(),
            co: collectors::directio::latency_histogram(),
        }
    }

    #[test]
    fn the_csv_is_natscli_s_subscribers_first_and_nothing_else() {
        let cs = vec![
            client(Role::Pub, 0, 250_000, 0.5),
            client(Role::Pub, 1, 250_000, 0.5),
            client(Role::Sub, 0, 1_000_000, 0.8),
            client(Role::Sub, 1, 1_000_000, 1.0),
        ];
        let text = csv("RUN", &cs);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[1],
            "RUN,S0,1000000,128000000,1250000,160000000.000000,0.800000"
        );
        assert_eq!(
            lines[2],
            "RUN,S1,1000000,128000000,1000000,128000000.000000,1.000000"
        );
        assert!(
            lines[3].starts_with("RUN,P0,250000,32000000,500000,"),
            "{text}"
        );
        assert!(lines[4].starts_with("RUN,P1,"), "{text}");
        assert!(lines.iter().all(|l| l.split(',').count() == 7));
    }

    #[test]
    fn the_report_reads_like_nats_bench() {
        let cs = vec![
            client(Role::Pub, 0, 250_000, 0.5),
            client(Role::Pub, 1, 250_000, 0.5),
            client(Role::Sub, 0, 1_000_000, 1.0),
        ];
        let r = report(&cs);
        let l: Vec<&str> = r.lines().collect();
        // 1.5 M messages over 1 s, 192 MB.
        assert_eq!(
            l[0],
            "NATS Pub/Sub stats: 1,500,000 msgs/sec ~ 183.11 MB/sec"
        );
        assert_eq!(l[1], " Pub stats: 1,000,000 msgs/sec ~ 122.07 MB/sec");
        assert_eq!(l[2], "  [1] 500,000 msgs/sec ~ 61.04 MB/sec (250000 msgs)");
        assert_eq!(
            l[4],
            "  min 500,000 | avg 500,000 | max 500,000 | stddev 0 msgs"
        );
        // One subscriber: its line and no per-client lines.
        assert_eq!(l[5], " Sub stats: 1,000,000 msgs/sec ~ 122.07 MB/sec");
        assert_eq!(l.len(), 6, "{r}");
    }

    #[test]
    fn natscli_units_and_numbers() {
        assert_eq!(human_bytes(187_858_690.0), "179.16 MB");
        assert_eq!(human_bytes(512.0), "512.00 B");
        assert_eq!(commas(7_323_895), "7,323,895");
        assert_eq!(
            statistics(&[372_417, 371_332, 371_941, 371_441]),
            "min 371,332 | avg 371,782 | max 372,417 | stddev 432 msgs"
        );
        assert_eq!(
            extras_path(Path::new("/x/results.csv")),
            Path::new("/x/results.diskpulse.csv")
        );
        assert_eq!(sibling(Path::new("r"), "png"), Path::new("r.png"));
        assert_eq!(sibling(Path::new("r.csv"), "svg"), Path::new("r.svg"));
    }
}
