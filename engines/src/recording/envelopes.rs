//! Multi-resolution envelopes written while recording (`envelopes.csv.gz`, format and
//! definitions in [`format::envelopes`]).
//!
//! The diskstats sampler hands every row it writes to an [`EnvelopeFeed`] (one call
//! beside the row's formatting): a `Copy` sample appended to a reused buffer, which goes
//! to the envelope thread every 50 ms, as [`super::writer::ChunkSink`] does with text:
//! no allocation on the sampler thread in the steady state, and no arithmetic beyond a
//! copy. The envelope thread folds the samples into windows of every level
//! ([`Aggregator`]) and writes the closed windows' rows through a `ChunkSink` of its own.
//! Because it sees exactly the rows `diskstats.csv.gz` gets, in the same order, its
//! output is a function of the raw file (tests/envelopes.rs rebuilds it from there).

use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use collectors::diskstats::{self as ds, counter_delta, DiskCounters};

use super::writer::ChunkSink;
use format::envelopes::{self as fmt, LEVELS_NS, MEASURES, M_IN_FLIGHT};

const HANDOFF_NS: u64 = 50_000_000;
/// Samples a buffer holds before it is handed over early (4 devices x 50 ms is 200).
const BATCH: usize = 4096;

/// One diskstats row as the sampler wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub dev: u32,
    pub t_ns: u64,
    pub c: DiskCounters,
}

enum Msg {
    Device(u32, String),
    Batch(Vec<Sample>),
}

/// The sampler-side end.
pub struct EnvelopeFeed {
    buf: Vec<Sample>,
    tx: Option<SyncSender<Msg>>,
    free: Receiver<Vec<Sample>>,
    last_handoff_ns: u64,
    thread: Option<JoinHandle<anyhow::Result<u64>>>,
}

impl EnvelopeFeed {
    /// Creates `path` and starts the envelope thread.
    pub fn create(path: &Path) -> anyhow::Result<EnvelopeFeed> {
        Self::with_sink(ChunkSink::create(path, fmt::HEADER, true)?)
    }

    /// Starts the envelope thread writing into `sink` (its header written: a rotating
    /// one, `record --chunk`).
    pub(crate) fn with_sink(mut sink: ChunkSink) -> anyhow::Result<EnvelopeFeed> {
        let (tx, rx) = mpsc::sync_channel::<Msg>(64);
        let (free_tx, free) = mpsc::sync_channel::<Vec<Sample>>(8);
        for _ in 0..4 {
            let _ = free_tx.try_send(Vec::with_capacity(BATCH));
        }
        let thread = std::thread::Builder::new()
            .name("envelopes".into())
            .spawn(move || {
                let mut agg = Aggregator::default();
                while let Ok(m) = rx.recv() {
                    match m {
                        Msg::Device(i, name) => agg.device(i, name),
                        Msg::Batch(mut b) => {
                            for s in &b {
                                agg.add(s, sink.buf());
                            }
                            if let Some(s) = b.last() {
                                sink.row_done(s.t_ns);
                            }
                            b.clear();
                            let _ = free_tx.try_send(b);
                        }
                    }
                }
                agg.finish(sink.buf());
                sink.finish()
            })?;
        Ok(EnvelopeFeed {
            buf: Vec::with_capacity(BATCH),
            tx: Some(tx),
            free,
            last_handoff_ns: 0,
            thread: Some(thread),
        })
    }

    /// Names device `dev` (before its first sample; rare, may allocate).
    pub fn device(&mut self, dev: u32, name: &[u8]) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Device(dev, String::from_utf8_lossy(name).into_owned()));
        }
    }

    /// One row written for device `dev`.
    #[inline]
    pub fn push(&mut self, dev: u32, t_ns: u64, c: &DiskCounters) {
        if self.buf.len() == self.buf.capacity() {
            self.handoff();
        }
        self.buf.push(Sample { dev, t_ns, c: *c });
    }

    /// Call once per sample with its time: hands the buffer over every 50 ms.
    #[inline]
    pub fn done(&mut self, t_ns: u64) {
        if t_ns.saturating_sub(self.last_handoff_ns) >= HANDOFF_NS {
            self.handoff();
            self.last_handoff_ns = t_ns;
        }
    }

    fn handoff(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let full = std::mem::replace(&mut self.buf, next);
        if let Some(tx) = &self.tx {
            // A dead envelope thread (disk full) drops samples; finish() says why.
            let _ = tx.send(Msg::Batch(full));
        }
    }

    /// Hands over the rest, writes the open windows, closes the file.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> anyhow::Result<u64> {
        self.handoff();
        self.tx = None;
        match self.thread.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow::anyhow!("the envelope thread panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for EnvelopeFeed {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish_inner();
        }
    }
}

/// The rate measures: (index in [`MEASURES`], diskstats field, scale to the unit).
pub(crate) const RATES: [(usize, usize, f64); 5] = [
    (0, ds::F_SECTORS_READ, 512.0 / 1_048_576.0),
    (1, ds::F_SECTORS_WRITTEN, 512.0 / 1_048_576.0),
    (2, ds::F_READS, 1.0),
    (3, ds::F_WRITES, 1.0),
    // io_ms (ms busy) per s of interval, in per cent: x 1e-3 s/ms x 100.
    (5, ds::F_IO_MS, 0.1),
];

/// A rate measure's value over an interval: `change x scale / dt` (dt in s). The
/// envelope thread and every reader that checks it use this one expression.
#[inline]
pub fn rate(change: u64, scale: f64, dt_ns: u64) -> f64 {
    change as f64 * scale / (dt_ns as f64 / 1e9)
}

#[derive(Debug, Clone, Copy)]
struct Acc {
    /// Window index (`t_ns / window_ns`).
    w: u64,
    min: f64,
    max: f64,
    /// Rates: the scaled changes; the gauge: the values.
    sum: f64,
    dt_ns: u64,
    count: u64,
}

struct Dev {
    name: String,
    last: Option<(u64, DiskCounters)>,
    acc: [[Option<Acc>; MEASURES.len()]; LEVELS_NS.len()],
}

/// Folds rows into windows of every level; writes a window's rows once a row of the
/// device lands past it.
#[derive(Default)]
struct Aggregator {
    devs: Vec<Option<Dev>>,
}

impl Aggregator {
    pub fn device(&mut self, dev: u32, name: String) {
        let i = dev as usize;
        if self.devs.len() <= i {
            self.devs.resize_with(i + 1, || None);
        }
        self.devs[i] = Some(Dev {
            name,
            last: None,
            acc: [[None; MEASURES.len()]; LEVELS_NS.len()],
        });
    }

    pub fn add(&mut self, s: &Sample, out: &mut Vec<u8>) {
        if self.devs.get(s.dev as usize).is_none_or(|d| d.is_none()) {
            self.device(s.dev, format!("dev{}", s.dev));
        }
        let Some(Some(d)) = self.devs.get_mut(s.dev as usize) else {
            return;
        };
        // (measure, value, what the mean sums, dt)
        let mut vals: [Option<(f64, f64, u64)>; MEASURES.len()] = [None; MEASURES.len()];
        if let Some((lt, lc)) = d.last {
            let dt = s.t_ns.saturating_sub(lt);
            if dt > 0 {
                for (m, field, scale) in RATES {
                    if let Some(ch) = counter_delta(field, lc.f[field], s.c.f[field]) {
                        vals[m] = Some((rate(ch, scale, dt), ch as f64 * scale, dt));
                    }
                }
            }
        }
        let g = s.c.f[ds::F_IN_FLIGHT] as f64;
        vals[M_IN_FLIGHT] = Some((g, g, 0));
        d.last = Some((s.t_ns, s.c));
        for (l, &len) in LEVELS_NS.iter().enumerate() {
            let w = s.t_ns / len;
            for (m, v) in vals.iter().enumerate() {
                let Some((v, x, dt)) = *v else { continue };
                let slot = &mut d.acc[l][m];
                if let Some(a) = slot.filter(|a| a.w != w) {
                    put(out, &d.name, l, m, &a);
                    *slot = None;
                }
                match slot {
                    Some(a) => {
                        a.min = a.min.min(v);
                        a.max = a.max.max(v);
                        a.sum += x;
                        a.dt_ns += dt;
                        a.count += 1;
                    }
                    None => {
                        *slot = Some(Acc {
                            w,
                            min: v,
                            max: v,
                            sum: x,
                            dt_ns: dt,
                            count: 1,
                        })
                    }
                }
            }
        }
    }

    /// Writes every open window (at the end of the run).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        for d in self.devs.iter_mut().flatten() {
            for l in 0..LEVELS_NS.len() {
                for m in 0..MEASURES.len() {
                    if let Some(a) = d.acc[l][m].take() {
                        put(out, &d.name, l, m, &a);
                    }
                }
            }
        }
    }
}

fn put(out: &mut Vec<u8>, name: &str, l: usize, m: usize, a: &Acc) {
    let len = LEVELS_NS[l];
    let mean = if m == M_IN_FLIGHT {
        a.sum / a.count as f64
    } else {
        a.sum / (a.dt_ns as f64 / 1e9)
    };
    fmt::put_row(
        out,
        a.w * len,
        len,
        name,
        MEASURES[m],
        a.min,
        a.max,
        mean,
        a.count,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(sectors_written: u64, in_flight: u64) -> DiskCounters {
        let mut c = DiskCounters {
            nfields: 17,
            ..Default::default()
        };
        c.f[ds::F_SECTORS_WRITTEN] = sectors_written;
        c.f[ds::F_IN_FLIGHT] = in_flight;
        c
    }

    fn rows(samples: &[(u64, DiskCounters)]) -> Vec<fmt::EnvelopeRow> {
        let mut a = Aggregator::default();
        a.device(0, "d".into());
        let mut out = vec![];
        for &(t_ns, c) in samples {
            a.add(&Sample { dev: 0, t_ns, c }, &mut out);
        }
        a.finish(&mut out);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("e.csv");
        let mut text = format!("{}\n", fmt::HEADER).into_bytes();
        text.extend(out);
        std::fs::write(&p, text).unwrap();
        let (r, w) = fmt::read(&p).unwrap();
        assert!(w.is_empty(), "{w:?}");
        r
    }

    fn find<'a>(r: &'a [fmt::EnvelopeRow], len: u64, t: u64, m: &str) -> &'a fmt::EnvelopeRow {
        r.iter()
            .find(|x| x.window_ns == len && x.t_ns == t && x.measure == m)
            .unwrap_or_else(|| panic!("no {m} row at {t} of {len}: {r:#?}"))
    }

    #[test]
    fn windows_take_whole_intervals_by_their_end_and_skip_a_reset() {
        const MS: u64 = 1_000_000;
        // 2048 sectors (1 MiB) in 1 ms, then an idle stretch of 500 ms as one interval,
        // then 1 MiB in 2 ms, then a reset (counters went back: no rate).
        let r = rows(&[
            (0, c(0, 1)),
            (MS, c(2048, 3)),
            (501 * MS, c(2048, 0)),
            (503 * MS, c(4096, 2)),
            (504 * MS, c(10, 0)),
        ]);
        let w = find(&r, 10 * MS, 0, "write_mib_s");
        assert_eq!((w.min, w.max, w.count), (1000.0, 1000.0, 1));
        // The idle interval ends at 501 ms: it belongs to [500, 510) with the 2 ms one.
        let w = find(&r, 10 * MS, 500 * MS, "write_mib_s");
        assert_eq!((w.min, w.max, w.count), (0.0, 500.0, 2));
        assert!((w.mean - 1.0 / 0.502).abs() < 1e-9, "{}", w.mean);
        // The whole second: 2 MiB over the 503 ms the rate intervals cover; the reset
        // gives no rate but its gauge counts.
        let w = find(&r, 1000 * MS, 0, "write_mib_s");
        assert_eq!(w.count, 3);
        assert!((w.mean - 2.0 / 0.503).abs() < 1e-9, "{}", w.mean);
        let g = find(&r, 1000 * MS, 0, "in_flight");
        assert_eq!((g.min, g.max, g.count), (0.0, 3.0, 5));
        assert!((g.mean - 6.0 / 5.0).abs() < 1e-12);
        // Every level has its row for the second; nothing at 10 ms between 10 and 500 ms.
        for len in LEVELS_NS {
            find(&r, len, 0, "in_flight");
        }
        assert!(!r
            .iter()
            .any(|x| x.window_ns == 10 * MS && x.t_ns > 0 && x.t_ns < 500 * MS));
    }
}
