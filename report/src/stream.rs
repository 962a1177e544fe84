//! The report's one pass over the diskstats rows (issue 13 item 3): the rows are read as
//! a stream ([`format::diskstats::for_each_row_in`], gzip decoded as it goes) and
//! each row is handed to accumulators that hold what the report needs, never the rows:
//! window sums (peaks, the UI average, the burst finder's 10 ms bins, rates.csv, the
//! restart windows; report.html's zoom windows come from `zoom_data`), running
//! totals and maxima, and the charts' series folded into pixel columns as they arrive
//! ([`charts::Folding`]). What a device holds is O(windows of the run at 10 ms and
//! coarser + chart width), not O(rows): an hour of 1 ms rows (3.6 M a device) takes a few
//! MB a device.
//!
//! Everything is the same arithmetic as [`super::analysis`] on rows held in memory, in
//! the same order (a window's sum adds its intervals' shares one after the other), so the
//! figures are equal to the bit; the test `report_memory` compares them.
//!
//! What must be known before the pass is known from the small files, read first: the
//! run's end (meta.json's duration, checked against the last row after the pass: when it
//! turns out otherwise, e.g. a recording cut off, the pass is made again with the end the
//! rows give), the restart windows (events.jsonl), the span the broker's own I/O was
//! sampled (proc_io.csv).
//!
//! Long because the accumulators are many small ones (window sums, maxima, the settled
//! tail, rates, the chart columns, per direction and device) that exist only to be fed by
//! this one pass; apart, each would need the pass's row type and order spelled again.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use charts::{Folding, Series, Style};
use collectors::diskstats::{self as ds, counter_delta, MAX_FIELDS};

use super::spill::Words;
use format::diskstats::{self, Device, Row};

/// Sector fields -> bytes.
const SECTOR: f64 = super::analysis::SECTOR_BYTES;

/// The zero `Iterator::sum` of f64 starts from (so a total of nothing is what the
/// in-memory code gives, sign of zero included).
fn sum_zero() -> f64 {
    std::iter::empty::<f64>().sum()
}

/// Spreads an interval's value `v` over windows `[k*w, (k+1)*w)`, `k < n`, in proportion
/// to overlap: exactly [`super::analysis::window_sums`]' loop for one interval.
#[inline]
pub fn spread(t0: u64, t1: u64, v: f64, width: u64, n: usize, mut add: impl FnMut(usize, f64)) {
    if v == 0.0 || t1 <= t0 {
        return;
    }
    let span = (t1 - t0) as f64;
    let mut k = (t0 / width) as usize;
    while k < n {
        let w0 = k as u64 * width;
        let w1 = w0 + width;
        if w0 >= t1 {
            break;
        }
        let o0 = t0.max(w0);
        let o1 = t1.min(w1);
        if o1 > o0 {
            add(k, v * (o1 - o0) as f64 / span);
        }
        k += 1;
    }
}

/// Window sums held whole (`n` windows).
#[derive(Debug, Clone, Default)]
pub struct Sums {
    pub width: u64,
    pub v: Vec<f64>,
}

impl Sums {
    pub fn new(width: u64, n: usize) -> Sums {
        Sums {
            width,
            v: vec![0.0; n],
        }
    }
    #[inline]
    pub fn add(&mut self, t0: u64, t1: u64, v: f64) {
        let out = &mut self.v;
        spread(t0, t1, v, self.width, out.len(), |k, x| out[k] += x);
    }
}

/// The highest window sum of `n` windows, holding only the window being filled (windows
/// come in order: a device's intervals follow each other).
#[derive(Debug, Clone)]
pub struct MaxSum {
    width: u64,
    n: usize,
    cur_k: usize,
    cur: f64,
    max: f64,
}

impl MaxSum {
    pub fn new(width: u64, n: usize) -> MaxSum {
        MaxSum {
            width,
            n,
            cur_k: usize::MAX,
            cur: 0.0,
            max: 0.0,
        }
    }
    #[inline]
    pub fn add(&mut self, t0: u64, t1: u64, v: f64) {
        let (width, n) = (self.width, self.n);
        spread(t0, t1, v, width, n, |k, x| {
            if k != self.cur_k {
                if self.cur_k != usize::MAX {
                    self.max = f64::max(self.max, self.cur);
                }
                self.cur_k = k;
                self.cur = 0.0;
            }
            self.cur += x;
        });
    }
    /// [`super::analysis::peak_rate`]: per second, NaN when no window fits the run.
    pub(crate) fn peak_rate(&self) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let max = if self.cur_k == usize::MAX {
            self.max
        } else {
            f64::max(self.max, self.cur)
        };
        max / (self.width as f64 / 1e9)
    }
}

/// Window sums from the first window touched on (a restart's windows: the run before it
/// is all zeros and not held).
#[derive(Debug, Clone, Default)]
pub struct TailSums {
    pub width: u64,
    pub n: usize,
    pub base: usize,
    pub v: Vec<f64>,
}

impl TailSums {
    fn new(width: u64, n: usize) -> TailSums {
        TailSums {
            width,
            n,
            base: 0,
            v: vec![],
        }
    }
    fn add(&mut self, t0: u64, t1: u64, v: f64) {
        let (width, n) = (self.width, self.n);
        spread(t0, t1, v, width, n, |k, x| {
            if self.v.is_empty() {
                self.base = k;
            }
            let i = k - self.base;
            if i >= self.v.len() {
                self.v.resize(i + 1, 0.0);
            }
            self.v[i] += x;
        });
    }
    /// Window `k`'s sum (0 outside what was touched), `k < n`.
    pub fn get(&self, k: usize) -> f64 {
        k.checked_sub(self.base)
            .and_then(|i| self.v.get(i))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Window sums of `n` windows handed on as they settle (issue 13: memory flat in the
/// run's length): a device's intervals follow each other, so once a row at `t` is in, no
/// later interval touches a window ending at or before `t`; those windows go to `out` (a
/// scratch file, [`Words`]) and only the windows an interval still spans stay here. Each
/// window's sum is made of the same additions, in the same order, as [`Sums`]'.
#[derive(Debug, Default)]
pub struct Settled {
    pub width: u64,
    pub n: usize,
    /// The first window not handed on yet.
    base: usize,
    pending: VecDeque<f64>,
    out: Words,
}

impl Settled {
    fn new(width: u64, n: usize, spill: Option<&Path>) -> anyhow::Result<Settled> {
        Ok(Settled {
            width,
            n,
            base: 0,
            pending: VecDeque::new(),
            out: if n == 0 {
                Words::default()
            } else {
                Words::new(spill)?
            },
        })
    }
    #[inline]
    fn add(&mut self, t0: u64, t1: u64, v: f64) {
        let (width, n, base) = (self.width, self.n, self.base);
        let pending = &mut self.pending;
        spread(t0, t1, v, width, n, |k, x| {
            // Rows come in time order ([`diskstats::for_each_row_in`]): k >= base.
            let Some(i) = k.checked_sub(base) else {
                debug_assert!(false, "window {k} settled before {base}");
                return;
            };
            if i >= pending.len() {
                pending.resize(i + 1, 0.0);
            }
            pending[i] += x;
        });
    }
    /// Hands on the windows that end at or before `t` (the latest row's time).
    #[inline]
    fn settle(&mut self, t: u64) {
        let upto = ((t / self.width) as usize).min(self.n);
        while self.base < upto {
            let x = self.pending.pop_front().unwrap_or(0.0);
            self.out.push_f64(x);
            self.base += 1;
        }
    }
    /// Hands on every window (the rows have ended).
    fn finish(&mut self) -> anyhow::Result<()> {
        while self.base < self.n {
            let x = self.pending.pop_front().unwrap_or(0.0);
            self.out.push_f64(x);
            self.base += 1;
        }
        self.pending = VecDeque::new();
        self.out.finish()
    }
    /// The `n` window sums, in order (after the pass).
    pub fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        self.out.iter_f64()
    }
}

/// rates.csv's windows of one device, handed on as they settle like [`Settled`]'s: per
/// window the sum of each field's changes (sectors as bytes; the in-flight slot unused)
/// and the in-flight maximum of the rows inside it (rows past the run's end count in the
/// last window, which settles only at the end).
#[derive(Debug, Default)]
pub struct Rates {
    pub width: u64,
    pub n: usize,
    base: usize,
    pending: VecDeque<([f64; MAX_FIELDS], u64)>,
    /// MAX_FIELDS sums (f64 bits), then the in-flight maximum, per window.
    out: Words,
}

impl Rates {
    fn new(width: u64, n: usize, spill: Option<&Path>) -> anyhow::Result<Rates> {
        Ok(Rates {
            width,
            n,
            base: 0,
            pending: VecDeque::new(),
            out: Words::new(spill)?,
        })
    }
    #[inline]
    fn slot(
        pending: &mut VecDeque<([f64; MAX_FIELDS], u64)>,
        i: usize,
    ) -> &mut ([f64; MAX_FIELDS], u64) {
        if i >= pending.len() {
            pending.resize(i + 1, ([0.0; MAX_FIELDS], 0));
        }
        &mut pending[i]
    }
    #[inline]
    fn in_flight(&mut self, t: u64, v: u64) {
        if self.n == 0 {
            return;
        }
        let k = ((t / self.width) as usize).min(self.n - 1);
        let Some(i) = k.checked_sub(self.base) else {
            debug_assert!(false, "window {k} settled before {}", self.base);
            return;
        };
        let s = Self::slot(&mut self.pending, i);
        s.1 = s.1.max(v);
    }
    #[inline]
    fn add(&mut self, field: usize, t0: u64, t1: u64, v: f64) {
        let (width, n, base) = (self.width, self.n, self.base);
        let pending = &mut self.pending;
        spread(t0, t1, v, width, n, |k, x| {
            let Some(i) = k.checked_sub(base) else {
                debug_assert!(false, "window {k} settled before {base}");
                return;
            };
            Self::slot(pending, i).0[field] += x;
        });
    }
    fn hand_on(&mut self) {
        let (s, m) = self.pending.pop_front().unwrap_or(([0.0; MAX_FIELDS], 0));
        for x in s {
            self.out.push_f64(x);
        }
        self.out.push(m);
        self.base += 1;
    }
    /// Hands on the windows that end at or before `t`, never the last one.
    #[inline]
    fn settle(&mut self, t: u64) {
        let upto = ((t / self.width) as usize).min(self.n.saturating_sub(1));
        while self.base < upto {
            self.hand_on();
        }
    }
    fn finish(&mut self) -> anyhow::Result<()> {
        while self.base < self.n {
            self.hand_on();
        }
        self.pending = VecDeque::new();
        self.out.finish()
    }
    /// The `n` windows in order (after the pass): the sums per field, the in-flight maximum.
    pub fn windows(&self) -> impl Iterator<Item = ([f64; MAX_FIELDS], u64)> + '_ {
        let mut it = self.out.iter();
        std::iter::from_fn(move || {
            let mut s = [0.0; MAX_FIELDS];
            for x in s.iter_mut() {
                *x = f64::from_bits(it.next()?);
            }
            Some((s, it.next()?))
        })
    }
}

/// What the charts take of a device's rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ChartMode {
    /// No chart series.
    Off,
    /// Folded into `columns` pixel columns over `range` ([`charts::Series::fold`]).
    Fold((f64, f64), usize),
    /// Every point (the reference the folded timeline is tested against; grows with the rows).
    Points,
}

/// One chart series as it is built.
#[derive(Debug, Clone)]
pub enum SeriesAcc {
    Off,
    Fold(Box<Folding>),
    Points(Vec<f64>, Vec<f64>),
}

impl SeriesAcc {
    fn new(m: ChartMode) -> SeriesAcc {
        match m {
            ChartMode::Off => SeriesAcc::Off,
            ChartMode::Fold(r, c) => SeriesAcc::Fold(Box::new(Folding::new(r, c))),
            ChartMode::Points => SeriesAcc::Points(vec![], vec![]),
        }
    }
    #[inline]
    fn push(&mut self, t: f64, v: f64) {
        match self {
            SeriesAcc::Off => {}
            SeriesAcc::Fold(f) => f.push(t, v),
            SeriesAcc::Points(ts, vs) => {
                ts.push(t);
                vs.push(v);
            }
        }
    }
    /// One interval's rate times `k` as two points: at its start (+1 ns, so the previous
    /// interval's end keeps its own value) and at its end, so a long quiet interval draws
    /// as a flat step, never as a slope from the last busy sample.
    #[inline]
    fn push_rate(&mut self, t0: u64, t1: u64, v: Option<f64>, k: Option<f64>) {
        if matches!(self, SeriesAcc::Off) {
            return;
        }
        let dt = (t1 - t0) as f64 / 1e9;
        let mut r = match v {
            Some(x) if dt > 0.0 => x / dt,
            _ => f64::NAN,
        };
        if let Some(k) = k {
            r *= k;
        }
        self.push((t0 + 1) as f64 / 1e9, r);
        self.push(t1 as f64 / 1e9, r);
    }
    /// The series, labelled, styled and coloured.
    pub fn finish(self, label: &str, style: Style, color: &str) -> Series {
        let s = Series {
            label: label.into(),
            t_s: vec![],
            v: vec![],
            style,
            color: Some(color.into()),
            folded: None,
        };
        match self {
            SeriesAcc::Off => s,
            SeriesAcc::Fold(f) => f.finish(s),
            SeriesAcc::Points(t_s, v) => Series { t_s, v, ..s },
        }
    }
}

/// A restart's read-burst window ([`super::derive::restarts`]): intervals that end after
/// `t_ns` and start before `end_ns` count, summed in 100 ms and 10 ms windows.
#[derive(Debug, Clone)]
pub struct RestartWindow {
    pub t_ns: u64,
    pub end_ns: u64,
    /// The node's devices; None: every device.
    pub devices: Option<Vec<String>>,
}

/// What the pass needs to know before it starts.
#[derive(Debug, Clone)]
pub struct Plan {
    pub duration_ns: u64,
    pub ui_window_ns: u64,
    pub bin_ns: u64,
    /// rates.csv's window; None: no rates.
    pub rates_window_ns: Option<u64>,
    pub charts: ChartMode,
    pub restarts: Vec<RestartWindow>,
    /// The span proc_io.csv sampled the broker over: the device bytes inside it.
    pub broker_span: Option<(u64, u64)>,
    /// Where the windows that grow with the run (the burst bins, rates.csv's sums) are
    /// written as they settle ([`Words`]: an unnamed scratch file); None: in memory.
    pub spill: Option<PathBuf>,
    /// Rows past this time are damage ([`diskstats::for_each_row_until`]): a finished
    /// run's end with slack; None: every row.
    pub row_limit_ns: Option<u64>,
}

impl Plan {
    /// A pass that only counts (devices, rows, first and last row): what
    /// [`super::run::Run::read`] needs.
    pub(crate) fn count_only() -> Plan {
        Plan {
            duration_ns: 0,
            ui_window_ns: u64::MAX,
            bin_ns: u64::MAX,
            rates_window_ns: None,
            charts: ChartMode::Off,
            restarts: vec![],
            broker_span: None,
            spill: None,
            row_limit_ns: None,
        }
    }
}

/// One direction (write or read) of a device.
#[derive(Debug)]
pub struct DirAcc {
    /// Bytes at 1 ms, 10 ms, 100 ms, 1 s.
    pub peaks: [MaxSum; 4],
    pub(crate) ios_10ms: MaxSum,
    pub ui: Sums,
    /// The burst finder's bins: bytes per `bin_ns`, handed on as they settle.
    pub bins: Settled,
    pub bytes: f64,
    pub ios: f64,
    pub(crate) busy_ms: f64,
    /// The peaks with bytes counted over their I/Os' service time ([`super::bunching`]).
    pub service: super::bunching::Service,
}

impl DirAcc {
    fn new(p: &Plan) -> anyhow::Result<DirAcc> {
        let d = p.duration_ns;
        let m = |w: u64| MaxSum::new(w, (d / w) as usize);
        Ok(DirAcc {
            peaks: [
                m(1_000_000),
                m(10_000_000),
                m(100_000_000),
                m(1_000_000_000),
            ],
            ios_10ms: m(10_000_000),
            ui: Sums::new(p.ui_window_ns, (d / p.ui_window_ns) as usize),
            bins: Settled::new(p.bin_ns, (d / p.bin_ns) as usize, p.spill.as_deref())?,
            bytes: sum_zero(),
            ios: sum_zero(),
            busy_ms: sum_zero(),
            service: super::bunching::Service::new(d),
        })
    }
}

/// The chart series of a device ([`super::charts_build`]).
#[derive(Debug, Clone)]
pub struct DeviceCharts {
    pub write_mib_s: SeriesAcc,
    pub read_mib_s: SeriesAcc,
    pub write_iops: SeriesAcc,
    pub read_iops: SeriesAcc,
    pub in_flight: SeriesAcc,
    pub flushes: SeriesAcc,
}

impl DeviceCharts {
    /// Empty series.
    pub fn new(mode: ChartMode) -> DeviceCharts {
        let c = || SeriesAcc::new(mode);
        DeviceCharts {
            write_mib_s: c(),
            read_mib_s: c(),
            write_iops: c(),
            read_iops: c(),
            in_flight: c(),
            flushes: c(),
        }
    }

    /// How they are built.
    pub fn mode(&self) -> ChartMode {
        match &self.write_mib_s {
            SeriesAcc::Off => ChartMode::Off,
            SeriesAcc::Fold(f) => ChartMode::Fold(f.range(), f.columns()),
            SeriesAcc::Points(..) => ChartMode::Points,
        }
    }
}

/// Everything the report keeps of one device's rows.
#[derive(Debug)]
pub struct DevAcc {
    prev: Option<(u64, Row)>,
    pub rows: usize,
    pub first_t_ns: Option<u64>,
    pub last_t_ns: Option<u64>,
    pub max_in_flight: u64,
    /// Whether any row holds field `i`.
    pub has: [bool; MAX_FIELDS],
    pub write: DirAcc,
    pub read: DirAcc,
    pub flushes: f64,
    pub(crate) flush_peak_100ms: MaxSum,
    pub io_ms: f64,
    /// rates.csv: per window each field's sum (sectors as bytes) and the in-flight maximum.
    pub rates: Option<Rates>,
    /// Per restart of the plan: its 100 ms and 10 ms read-byte windows (None: not one of
    /// the node's devices).
    pub restarts: Vec<Option<(TailSums, TailSums)>>,
    /// Bytes written and read inside the plan's broker span.
    pub(crate) broker_bytes: (f64, f64),
    pub charts: DeviceCharts,
    /// Device stalls and long flushes ([`super::episodes`]).
    pub harm: super::episodes::DiskHarm,
    /// Set on every row (count-only passes need nothing else).
    count_only: bool,
}

fn scale(field: usize) -> f64 {
    if matches!(
        field,
        ds::F_SECTORS_READ | ds::F_SECTORS_WRITTEN | ds::F_SECTORS_DISCARDED
    ) {
        SECTOR
    } else {
        1.0
    }
}

impl DevAcc {
    fn new(p: &Plan, dev: &Device, count_only: bool) -> anyhow::Result<DevAcc> {
        let d = p.duration_ns;
        let rates = p
            .rates_window_ns
            .map(|w| Rates::new(w, d.div_ceil(w) as usize, p.spill.as_deref()))
            .transpose()?;
        Ok(DevAcc {
            prev: None,
            rows: 0,
            first_t_ns: None,
            last_t_ns: None,
            max_in_flight: 0,
            has: [false; MAX_FIELDS],
            write: DirAcc::new(p)?,
            read: DirAcc::new(p)?,
            flushes: sum_zero(),
            flush_peak_100ms: MaxSum::new(100_000_000, (d / 100_000_000) as usize),
            io_ms: sum_zero(),
            rates,
            restarts: p
                .restarts
                .iter()
                .map(|r| {
                    r.devices
                        .as_ref()
                        .is_none_or(|v| v.contains(&dev.name))
                        .then(|| {
                            (
                                TailSums::new(100_000_000, (r.end_ns / 100_000_000 + 1) as usize),
                                TailSums::new(10_000_000, (r.end_ns / 10_000_000 + 1) as usize),
                            )
                        })
                })
                .collect(),
            broker_bytes: (sum_zero(), sum_zero()),
            charts: DeviceCharts::new(p.charts),
            harm: Default::default(),
            count_only,
        })
    }

    /// Hands on every window still held (the rows have ended).
    fn finish(&mut self) -> anyhow::Result<()> {
        self.write.bins.finish()?;
        self.read.bins.finish()?;
        if let Some(r) = &mut self.rates {
            r.finish()?;
        }
        self.harm.finish(self.last_t_ns);
        Ok(())
    }

    fn row(&mut self, p: &Plan, t: u64, r: &Row) {
        self.rows += 1;
        self.first_t_ns.get_or_insert(t);
        self.last_t_ns = Some(t);
        if self.count_only {
            // Only what tells a busy device: bytes written and read.
            if let Some((_, prev)) = self.prev.replace((t, *r)) {
                for (f, total) in [
                    (ds::F_SECTORS_WRITTEN, &mut self.write.bytes),
                    (ds::F_SECTORS_READ, &mut self.read.bytes),
                ] {
                    if let (Some(a), Some(b)) = (prev.get(f), r.get(f)) {
                        if let Some(x) = counter_delta(f, a, b) {
                            *total += x as f64 * SECTOR;
                        }
                    }
                }
            }
            return;
        }
        for (i, h) in self.has.iter_mut().enumerate() {
            *h |= r.get(i).is_some();
        }
        let inflight = r.get(ds::F_IN_FLIGHT);
        if let Some(v) = inflight {
            self.max_in_flight = self.max_in_flight.max(v);
        }
        self.charts.in_flight.push(
            t as f64 / 1e9,
            inflight.map(|x| x as f64).unwrap_or(f64::NAN),
        );
        if let (Some(rates), Some(v)) = (&mut self.rates, inflight) {
            rates.in_flight(t, v);
        }
        let Some((t0, prev)) = self.prev.replace((t, *r)) else {
            return;
        };
        self.interval(p, t0, t, &prev, r);
        // No later interval starts before `t`.
        self.write.bins.settle(t);
        self.read.bins.settle(t);
        if let Some(rates) = &mut self.rates {
            rates.settle(t);
        }
    }

    /// The interval from the row `prev` at `t0` to the row `r` at `t1`.
    #[inline]
    fn interval(&mut self, p: &Plan, t0: u64, t1: u64, prev: &Row, r: &Row) {
        // Each field's change over the interval, scaled (sectors as bytes).
        let mut v = [None; MAX_FIELDS];
        for (i, x) in v.iter_mut().enumerate() {
            if i == ds::F_IN_FLIGHT {
                continue;
            }
            *x = match (prev.get(i), r.get(i)) {
                (Some(a), Some(b)) => counter_delta(i, a, b).map(|x| x as f64 * scale(i)),
                _ => None,
            };
        }
        let wb = v[ds::F_SECTORS_WRITTEN];
        let rb = v[ds::F_SECTORS_READ];
        for (dir, bytes, ios, ms) in [
            (&mut self.write, wb, v[ds::F_WRITES], v[ds::F_WRITE_MS]),
            (&mut self.read, rb, v[ds::F_READS], v[ds::F_READ_MS]),
        ] {
            if let Some(b) = bytes {
                for m in dir.peaks.iter_mut() {
                    m.add(t0, t1, b);
                }
                dir.ui.add(t0, t1, b);
                dir.bins.add(t0, t1, b);
                dir.bytes += b;
                dir.service.add(t0, t1, b, ios, ms);
            }
            if let Some(x) = ios {
                dir.ios_10ms.add(t0, t1, x);
                dir.ios += x;
            }
            if let Some(x) = ms {
                dir.busy_ms += x;
            }
        }
        let completed = [ds::F_READS, ds::F_WRITES, ds::F_DISCARDS, ds::F_FLUSHES]
            .iter()
            .any(|&f| v[f].is_some_and(|x| x > 0.0));
        self.harm.interval(
            (t0, t1),
            (prev.get(ds::F_IN_FLIGHT), r.get(ds::F_IN_FLIGHT)),
            completed,
            v[ds::F_FLUSHES],
            v[ds::F_FLUSH_MS],
        );
        if let Some(x) = v[ds::F_FLUSHES] {
            self.flushes += x;
            self.flush_peak_100ms.add(t0, t1, x);
        }
        if let Some(x) = v[ds::F_IO_MS] {
            self.io_ms += x;
        }
        if let Some(rates) = &mut self.rates {
            for (i, x) in v.iter().enumerate() {
                if let Some(x) = *x {
                    rates.add(i, t0, t1, x);
                }
            }
        }
        if let Some(x) = rb {
            for (rw, acc) in p.restarts.iter().zip(self.restarts.iter_mut()) {
                if let Some((w100, w10)) = acc {
                    if t1 > rw.t_ns && t0 < rw.end_ns {
                        w100.add(t0, t1, x);
                        w10.add(t0, t1, x);
                    }
                }
            }
        }
        if let Some((a, b)) = p.broker_span {
            let between = |x: f64| {
                let (o0, o1) = (t0.max(a), t1.min(b));
                (o1 > o0 && t1 > t0).then(|| x * (o1 - o0) as f64 / (t1 - t0) as f64)
            };
            if let Some(x) = wb.and_then(between) {
                self.broker_bytes.0 += x;
            }
            if let Some(x) = rb.and_then(between) {
                self.broker_bytes.1 += x;
            }
        }
        let c = &mut self.charts;
        let per_mib = Some(1.0 / super::analysis::MIB);
        c.write_mib_s.push_rate(t0, t1, wb, per_mib);
        c.read_mib_s.push_rate(t0, t1, rb, per_mib);
        c.write_iops.push_rate(t0, t1, v[ds::F_WRITES], None);
        c.read_iops.push_rate(t0, t1, v[ds::F_READS], None);
        c.flushes.push_rate(t0, t1, v[ds::F_FLUSHES], None);
    }
}

/// The pass's result: the devices in order of first appearance, their accumulators and
/// the reading's warnings.
pub struct Pass {
    pub devices: Vec<Device>,
    pub accs: Vec<DevAcc>,
    pub warnings: Vec<String>,
}

impl Pass {
    /// The last row's time of any device.
    pub fn last_t_ns(&self) -> Option<u64> {
        self.accs.iter().filter_map(|a| a.last_t_ns).max()
    }
}

/// Reads the diskstats `files` (in order) once, feeding every row to its device's
/// accumulators as `plan` asks.
pub fn pass(files: &[PathBuf], plan: &Plan) -> anyhow::Result<Pass> {
    pass_with(files, plan, false)
}

/// [`pass`] that only counts rows and their span per device.
pub fn count(files: &[PathBuf], row_limit_ns: Option<u64>) -> anyhow::Result<Pass> {
    let plan = Plan {
        row_limit_ns,
        ..Plan::count_only()
    };
    pass_with(files, &plan, true)
}

fn pass_with(files: &[PathBuf], plan: &Plan, count_only: bool) -> anyhow::Result<Pass> {
    let mut accs: Vec<DevAcc> = vec![];
    let mut err = None;
    let (devices, warnings) =
        diskstats::for_each_row_until(files, plan.row_limit_ns, |k, dev, t, row| {
            if k == accs.len() {
                match DevAcc::new(plan, dev, count_only) {
                    Ok(a) => accs.push(a),
                    Err(e) => {
                        err.get_or_insert(e);
                        return;
                    }
                }
            }
            if let Some(a) = accs.get_mut(k) {
                a.row(plan, t, row);
            }
        })?;
    if let Some(e) = err {
        return Err(e);
    }
    for a in accs.iter_mut() {
        a.finish()?;
    }
    Ok(Pass {
        devices,
        accs,
        warnings,
    })
}
