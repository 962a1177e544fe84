//! `load.hlog` and `probe.hlog`: HdrHistogram interval logs (the standard text format
//! HdrHistogram's `HistogramLogProcessor` reads: a header of `#` lines with
//! `#[StartTime: ...]` and `#[BaseTime: ...]`, then per line
//! `Tag=TAG,start_s,duration_s,max,BASE64 V2-deflate histogram`), one interval per window
//! and tag. They keep every window's latency as a mergeable histogram, so the percentiles
//! of any span (a broker's write burst, a restart's read burst) are computed exactly by
//! merging the span's intervals, never by averaging per-window percentiles.
//!
//! ## Units and clock
//! - Histogram values: latency in NANOSECONDS (1 ns to 1 h, 3 significant digits).
//! - `start_s`: the window's START on the run clock, seconds since the run's zero, with
//!   9 decimals (ns): the same grid as `load.csv`/`probe.csv` `t_ns`. `BaseTime` (and
//!   `StartTime`) in the header is the run's zero on the wall clock (`meta.json`
//!   `clock_zero_unix_ns`), so a Java `HistogramLogProcessor` places intervals in real time.
//! - `duration_s`: the window's length (`window_ns`), 9 decimals.
//! - `max`: the interval's largest value (ns), as the format wants it (informational).
//!
//! hdrhistogram's `IntervalLogWriter` writes timestamps with 3 decimals (ms); windows may
//! be any length from 1 ms (`--window 1500us`), so the interval line is written here with
//! ns precision in the same shape, the histogram through the crate's
//! `V2DeflateSerializer`, and read back with its `IntervalLogIterator` and `Deserializer`.
//! The header comes from the crate's `IntervalLogWriterBuilder`.
//!
//! ## Tags
//! - probe: `read`, `write` (completion latency), `sync` (each fsync/fdatasync);
//! - load: the role name (`js-pub`, `kv-put`, ...), latency from the actual send;
//! - a `.co` suffix: the coordinated-omission-corrected latency (from the intended start);
//! - a `p<INDEX>:` prefix when the writer runs inside a scenario phase (env
//!   [`super::ENV_PHASE`]): `p3:write`, `p2:js-pub.co`.
//!
//! ## What must stay true
//! Intervals are appended (and flushed) as each window closes, like the CSV rows, so a
//! crash keeps what was written; the reader ignores a torn last line. Several writers
//! (phases of one run in separate processes) append to one file: one header (written
//! under `flock` by whoever finds the file empty), and each chunk of whole lines is one
//! locked `write` with `O_APPEND`, so lines never interleave. Intervals of different
//! writers are therefore not in time order: readers must not assume it.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use base64::Engine;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry,
};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

pub const LOAD_FILE: &str = "load.hlog";
pub const PROBE_FILE: &str = "probe.hlog";

/// One window of one tag.
#[derive(Debug, Clone)]
pub struct Interval {
    /// See [`parse_tag`].
    pub tag: String,
    /// The window's START on the run clock (same grid as load.csv/probe.csv `t_ns`).
    pub start_ns: u64,
    /// The window's length.
    pub duration_ns: u64,
    /// Values in NANOSECONDS, kept compact ([`Sparse`]): a decoded histogram of the log's
    /// range is ~0.5 MB whatever it holds, and an hour of a load's 100 ms windows is 72,000
    /// of them (17 GB once, when they were kept decoded).
    pub hist: Sparse,
}

/// A histogram's recorded buckets as varint pairs (value delta from the previous bucket's,
/// count): a few bytes a bucket. Added into a histogram of the same precision (3
/// significant digits, what the logs are written with) it gives exactly the counts the
/// decoded histogram had, so percentiles are unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sparse {
    bytes: Vec<u8>,
    len: u64,
}

impl Sparse {
    /// The recorded buckets of `h`.
    pub fn of(h: &Histogram<u64>) -> Sparse {
        let mut bytes = Vec::new();
        let mut prev = 0u64;
        for v in h.iter_recorded() {
            let value = h.highest_equivalent(v.value_iterated_to());
            put_varint(&mut bytes, value - prev);
            put_varint(&mut bytes, v.count_at_value());
            prev = value;
        }
        bytes.shrink_to_fit();
        Sparse {
            bytes,
            len: h.len(),
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each recorded bucket as (its highest equivalent value, count), ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut at = 0usize;
        let mut prev = 0u64;
        std::iter::from_fn(move || {
            if at >= self.bytes.len() {
                return None;
            }
            prev += get_varint(&self.bytes, &mut at);
            let n = get_varint(&self.bytes, &mut at);
            Some((prev, n))
        })
    }

    /// Adds its values into `h` (auto-resizing, or of a range that holds them).
    fn add_to(&self, h: &mut Histogram<u64>) {
        for (v, n) in self.buckets() {
            h.record_n(v, n)
                .expect("an auto-resizing histogram takes any value");
        }
    }

    /// As a histogram again (the log's range and precision).
    pub fn to_histogram(&self) -> Histogram<u64> {
        let mut h = empty();
        self.add_to(&mut h);
        h
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&x) = b.get(*at) {
        *at += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            break;
        }
        shift += 7;
    }
    v
}

impl Interval {
    /// The end of the window on the run clock.
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns
    }
}

/// A tag split into its parts: `p3:js-pub.co` is phase 3, name `js-pub`, corrected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub phase: Option<u32>,
    pub name: String,
    pub co: bool,
}

/// Splits a tag; a tag without a (numeric) `p<INDEX>:` prefix has no phase.
pub fn parse_tag(s: &str) -> Tag {
    let (phase, rest) = match s.split_once(':') {
        Some((p, rest)) => match p.strip_prefix('p').and_then(|n| n.parse::<u32>().ok()) {
            Some(n) => (Some(n), rest),
            None => (None, s),
        },
        None => (None, s),
    };
    let (name, co) = match rest.strip_suffix(".co") {
        Some(n) => (n, true),
        None => (rest, false),
    };
    Tag {
        phase,
        name: name.to_string(),
        co,
    }
}

/// The tag of `name` (a probe direction or a load role) in `phase`, corrected or not.
pub fn tag(phase: Option<u32>, name: &str, co: bool) -> String {
    let mut s = String::new();
    if let Some(p) = phase {
        s.push_str(&format!("p{p}:"));
    }
    s.push_str(name);
    if co {
        s.push_str(".co");
    }
    s
}

/// A histogram that holds any latency a writer records (1 ns to 1 h, 3 digits) and
/// grows past that rather than fail.
fn empty() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds");
    h.auto(true);
    h
}

/// All the intervals' histograms added into one (`None` when there is none).
pub fn merge<'a>(it: impl IntoIterator<Item = &'a Interval>) -> Option<Histogram<u64>> {
    let mut out: Option<Histogram<u64>> = None;
    for i in it {
        i.hist.add_to(out.get_or_insert_with(empty));
    }
    out
}

/// The header of a new log: what it is, then `StartTime` and `BaseTime` = the run's
/// zero on the wall clock (`clock_zero_unix_ns`), then the column legend.
pub fn header(what: &str, clock_zero_unix_ns: u64) -> String {
    let zero = UNIX_EPOCH + Duration::from_nanos(clock_zero_unix_ns);
    let mut b = IntervalLogWriterBuilder::new();
    b.add_comment(&format!(
        "diskpulse {what}: one interval per window and tag, latency in ns, timestamps in s since the run's zero (BaseTime)"
    ))
    .with_start_time(zero)
    .with_base_time(zero);
    let mut out = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    b.begin_log_with(&mut out, &mut ser)
        .expect("writing to a Vec cannot fail");
    let mut s = String::from_utf8(out).expect("the header is text");
    s.push_str(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    );
    s
}

/// Formats interval lines with reused buffers (one per writer).
pub struct LineWriter {
    ser: V2DeflateSerializer,
    bin: Vec<u8>,
    b64: String,
}

impl Default for LineWriter {
    fn default() -> Self {
        Self::new()
    }
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

impl LineWriter {
    pub fn new() -> LineWriter {
        LineWriter {
            ser: V2DeflateSerializer::new(),
            bin: Vec::new(),
            b64: String::new(),
        }
    }

    /// Appends one interval line (with its newline) to `out`. `tag` must not hold
    /// `,`, ` ` or a line break (ours never do).
    pub fn line(
        &mut self,
        out: &mut Vec<u8>,
        tag: &str,
        start_ns: u64,
        duration_ns: u64,
        hist: &Histogram<u64>,
    ) -> anyhow::Result<()> {
        debug_assert!(!tag.contains([',', ' ', '\n', '\r']), "bad tag {tag:?}");
        self.bin.clear();
        self.b64.clear();
        self.ser
            .serialize(hist, &mut self.bin)
            .map_err(|e| anyhow::anyhow!("cannot encode the {tag} histogram: {e:?}"))?;
        base64::engine::general_purpose::STANDARD.encode_string(&self.bin, &mut self.b64);
        out.extend_from_slice(
            format!(
                "Tag={tag},{},{},{:.3},",
                secs(start_ns),
                secs(duration_ns),
                hist.max() as f64
            )
            .as_bytes(),
        );
        out.extend_from_slice(self.b64.as_bytes());
        out.push(b'\n');
        Ok(())
    }
}

/// Reads a run's interval log `name` (load.hlog, probe.hlog) with its closed chunks
/// `chunks/<stem>.NNNNNN.hlog` (`record --chunk`): the chunks by number, then the
/// current file; intervals in that order (not necessarily time order). Empty when the
/// run has none of them.
pub fn read_run(dir: &Path, name: &str) -> anyhow::Result<Vec<Interval>> {
    Ok(read_run_noted(dir, name)?.0)
}

/// [`read_run`] with the reading's warnings: a torn last line (the writer was cut short,
/// or the file cut since), and a chunk that cannot be read at all, skipped when the log
/// has others ([`super::csv::skip_chunk`]).
pub fn read_run_noted(dir: &Path, name: &str) -> anyhow::Result<(Vec<Interval>, Vec<String>)> {
    let mut out = vec![];
    let mut warnings = vec![];
    let files = super::csv::chunked_files(dir, name);
    for p in &files {
        match read_noted(p) {
            Ok((v, w)) => {
                out.extend(v);
                warnings.extend(w);
            }
            Err(e) => warnings.push(super::csv::skip_chunk(p, e, files.len() > 1)?),
        }
    }
    Ok((out, warnings))
}

/// Reads every interval of an interval log, in file order (not necessarily time
/// order). A torn last line (a writer killed mid-line) is ignored. A missing file is an
/// error that names it: callers check whether the run has one.
pub fn read(path: &Path) -> anyhow::Result<Vec<Interval>> {
    Ok(read_noted(path)?.0)
}

/// [`read`] with a warning when the last line is torn (left out).
pub fn read_noted(path: &Path) -> anyhow::Result<(Vec<Interval>, Option<String>)> {
    let raw =
        super::regular::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let whole = match raw.iter().rposition(|&b| b == b'\n') {
        Some(i) => &raw[..=i],
        None => &raw[..0],
    };
    let torn = (whole.len() < raw.len()).then(|| {
        format!(
            "{}: the last line is cut off after {} bytes (the recording was cut short, or the file since?); read up to the line before",
            path.display(),
            whole.len()
        )
    });
    let mut out = vec![];
    let mut de = Deserializer::new();
    let mut bin = Vec::new();
    for e in IntervalLogIterator::new(whole) {
        let e = e.map_err(|e| {
            anyhow::anyhow!(
                "{} is not an HdrHistogram interval log ({e:?}); was it written by diskpulse?",
                path.display()
            )
        })?;
        let LogEntry::Interval(i) = e else { continue };
        let tag = i.tag().map(|t| t.as_str().to_string()).unwrap_or_default();
        let start_ns = i.start_timestamp().as_nanos() as u64;
        bin.clear();
        base64::engine::general_purpose::STANDARD
            .decode_vec(i.encoded_histogram(), &mut bin)
            .with_context(|| {
                format!(
                    "{}: the {tag} interval at {start_ns} ns is not base64",
                    path.display()
                )
            })?;
        let hist: Histogram<u64> = de.deserialize(&mut &bin[..]).map_err(|e| {
            anyhow::anyhow!(
                "{}: the {tag} interval at {start_ns} ns does not decode: {e:?}",
                path.display()
            )
        })?;
        out.push(Interval {
            tag,
            start_ns,
            duration_ns: i.duration().as_nanos() as u64,
            hist: Sparse::of(&hist),
        });
    }
    Ok((out, torn))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = collectors::directio::latency_histogram();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn tags_split_into_phase_name_and_correction() {
        assert_eq!(
            parse_tag("p3:write"),
            Tag {
                phase: Some(3),
                name: "write".into(),
                co: false
            }
        );
        assert_eq!(
            parse_tag("p2:js-pub.co"),
            Tag {
                phase: Some(2),
                name: "js-pub".into(),
                co: true
            }
        );
        assert_eq!(parse_tag("kv-put").phase, None);
        assert_eq!(parse_tag("kv-put").name, "kv-put");
        assert_eq!(tag(Some(2), "js-pub", true), "p2:js-pub.co");
        assert_eq!(tag(None, "sync", false), "sync");
        for t in ["p0:read", "read.co", "p12:kv-get.co", "obj-put"] {
            let p = parse_tag(t);
            assert_eq!(tag(p.phase, &p.name, p.co), t);
        }
    }

    #[test]
    fn intervals_read_back_with_ns_timestamps_and_a_torn_line_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(PROBE_FILE);
        let mut text = header("probe.hlog", 1_700_000_000_123_456_789).into_bytes();
        text.push(b'\n');
        let mut w = LineWriter::new();
        let a = hist(&[1_000, 2_000, 3_000_000]);
        let b = hist(&[50_000; 7]);
        // 1.5 ms windows: not a whole number of ms.
        w.line(&mut text, "p1:write", 3_000_000, 1_500_000, &a)
            .unwrap();
        w.line(&mut text, "read.co", 1_500_000, 1_500_000, &b)
            .unwrap();
        let whole = text.len();
        w.line(&mut text, "read", 0, 1_500_000, &b).unwrap();
        text.truncate(whole + 20); // a writer killed mid-line
        std::fs::write(&p, &text).unwrap();
        let back = read(&p).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].tag, "p1:write");
        assert_eq!(back[0].start_ns, 3_000_000);
        assert_eq!(back[0].duration_ns, 1_500_000);
        assert_eq!(back[0].end_ns(), 4_500_000);
        assert_eq!(back[0].hist.to_histogram(), a);
        assert_eq!(back[0].hist, Sparse::of(&a));
        assert_eq!(back[1].start_ns, 1_500_000);
        assert_eq!(back[1].hist.len(), 7);
        // The crate's own parser sees the header's times.
        let starts: Vec<_> = IntervalLogIterator::new(&text[..whole])
            .filter_map(|e| match e {
                Ok(LogEntry::StartTime(t)) | Ok(LogEntry::BaseTime(t)) => Some(t.as_secs()),
                _ => None,
            })
            .collect();
        assert_eq!(starts, vec![1_700_000_000, 1_700_000_000]);
    }

    #[test]
    fn a_sparse_window_is_the_histogram_it_came_from_in_a_few_bytes_a_bucket() {
        // 200 latencies of one 100 ms window, 20 us to 500 ms, and the extremes.
        let mut values: Vec<u64> = (0..200u64)
            .map(|k| 20_000 + k * k * k * 62 + (k * 7919) % 1000)
            .collect();
        values.extend([1, 3_600_000_000_000]);
        let h = hist(&values);
        let s = Sparse::of(&h);
        assert_eq!(s.len(), 202);
        assert_eq!(s.to_histogram(), h, "same counts, min and max");
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                s.to_histogram().value_at_quantile(q),
                h.value_at_quantile(q)
            );
        }
        // The decoded histogram's counts array is ~0.5 MB; the sparse one a few bytes a
        // recorded bucket (a value delta and a count).
        let buckets = h.iter_recorded().count();
        assert!(
            s.bytes.len() <= buckets * 8,
            "{} bytes for {buckets} buckets",
            s.bytes.len()
        );
        assert!(Sparse::of(&hist(&[])).is_empty());
    }

    #[test]
    fn merged_intervals_give_the_percentiles_of_all_their_values() {
        let iv = |start_ns, values: &[u64]| Interval {
            tag: "write".into(),
            start_ns,
            duration_ns: 100,
            hist: Sparse::of(&hist(values)),
        };
        let all = [iv(0, &[100; 99]), iv(100, &[1_000_000])];
        let m = merge(&all).unwrap();
        assert_eq!(m.len(), 100);
        assert!(m.equivalent(m.value_at_quantile(0.5), 100));
        assert!(m.equivalent(m.max(), 1_000_000));
        assert!(merge(&all[..0]).is_none());
    }

    #[test]
    fn a_missing_or_foreign_file_is_an_error_that_names_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(LOAD_FILE);
        let e = read(&p).unwrap_err();
        assert!(format!("{e:#}").contains("load.hlog"), "{e:#}");
        std::fs::write(&p, "t_ns,window_ns\n1,2\n").unwrap();
        let e = read(&p).unwrap_err();
        assert!(format!("{e:#}").contains("not an HdrHistogram"), "{e:#}");
    }
}
