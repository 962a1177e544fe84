//! A per-sample file folded while it is read, for a report of any length: per column,
//! each time window's lowest and highest value at the instant it was seen (so no spike
//! is averaged away), the windows as fine as the rows until there are more than a cap,
//! then twice as wide (neighbours merged), again as often as needed. Memory is bounded by
//! the cap and the columns, never by the recording's length: a day of `meminfo.csv` at
//! 10 ms (8.6 M rows) is held as at most [`MAX_WINDOWS`] windows per column.
//!
//! Used for `meminfo.csv` (the page-cache panel and the memory summary); its maxima are
//! exact, and a run short enough to stay under the cap keeps every row's value.

use std::path::Path;

use format::csv::{self, Bad};
use format::procfs;

/// The most windows a column keeps before they double in width.
pub(crate) const MAX_WINDOWS: usize = 50_000;

/// The narrowest window (the rows of a 1 ms sampler each have their own).
const FIRST_WIDTH_NS: u64 = 1_000_000;

/// A column's extremes in one window: (t_ns, value) of the lowest and the highest.
#[derive(Debug, Clone, Copy)]
struct Ext {
    lo: (u64, f64),
    hi: (u64, f64),
}

impl Ext {
    fn of(t: u64, v: f64) -> Ext {
        Ext {
            lo: (t, v),
            hi: (t, v),
        }
    }
    fn add(&mut self, t: u64, v: f64) {
        if v < self.lo.1 {
            self.lo = (t, v);
        }
        if v > self.hi.1 {
            self.hi = (t, v);
        }
    }
    fn merge(&mut self, o: &Ext) {
        self.add(o.lo.0, o.lo.1);
        self.add(o.hi.0, o.hi.1);
    }
}

/// One window: its index at the current width and each column's extremes (`None`: no
/// number in that column there).
#[derive(Debug, Clone)]
struct Window {
    idx: u64,
    cols: Vec<Option<Ext>>,
}

/// A file read through [`Folded::read_chunked`].
#[derive(Debug, Clone, Default)]
pub struct Folded {
    pub columns: Vec<String>,
    /// Rows read.
    pub rows: usize,
    pub first_t_ns: Option<u64>,
    pub last_t_ns: Option<u64>,
    /// Each column's largest value (NaN never counts); `None` when it had none.
    pub max: Vec<Option<f64>>,
    /// The windows' width in the end (ns).
    pub(crate) width_ns: u64,
    windows: Vec<Window>,
}

impl Folded {
    fn new(columns: Vec<String>) -> Folded {
        Folded {
            max: vec![None; columns.len()],
            columns,
            width_ns: FIRST_WIDTH_NS,
            ..Default::default()
        }
    }

    fn push(&mut self, t: u64, vals: &[f64], cap: usize) {
        self.rows += 1;
        self.first_t_ns.get_or_insert(t);
        self.last_t_ns = Some(self.last_t_ns.map_or(t, |l| l.max(t)));
        let idx = t / self.width_ns;
        let n = self.columns.len();
        if self.windows.last().is_none_or(|w| w.idx != idx) {
            self.windows.push(Window {
                idx,
                cols: vec![None; n],
            });
        }
        let w = self.windows.last_mut().unwrap();
        for (i, &v) in vals.iter().enumerate().take(n) {
            if !v.is_finite() {
                continue;
            }
            match &mut w.cols[i] {
                Some(e) => e.add(t, v),
                c @ None => *c = Some(Ext::of(t, v)),
            }
            let m = &mut self.max[i];
            *m = Some(m.map_or(v, |m: f64| m.max(v)));
        }
        while self.windows.len() > cap {
            self.widen();
        }
    }

    /// Doubles the width: neighbours whose new index is the same become one window.
    fn widen(&mut self) {
        self.width_ns *= 2;
        let mut out: Vec<Window> = Vec::with_capacity(self.windows.len() / 2 + 1);
        for mut w in std::mem::take(&mut self.windows) {
            w.idx /= 2;
            match out.last_mut() {
                Some(o) if o.idx == w.idx => {
                    for (a, b) in o.cols.iter_mut().zip(&w.cols) {
                        match (a.as_mut(), b) {
                            (Some(a), Some(b)) => a.merge(b),
                            (None, Some(b)) => *a = Some(*b),
                            _ => {}
                        }
                    }
                }
                _ => out.push(w),
            }
        }
        self.windows = out;
    }

    /// Reads `file` of a run and its closed chunks (`record --chunk`) in order, as
    /// [`csv::read_table_chunked`] does (`t_ns` first, `needed` in the header, damaged
    /// rows skipped with warnings; chunks whose header differs are refused), folded as
    /// it goes with at most `cap` windows per column. `None` when the run has no such
    /// file.
    pub(crate) fn read_chunked(
        run_dir: &Path,
        file: &str,
        needed: &[&str],
        cap: usize,
    ) -> anyhow::Result<Option<(Folded, Vec<String>)>> {
        let mut out: Option<Folded> = None;
        let w = for_each_row(run_dir, file, needed, |cols, t, vals| {
            out.get_or_insert_with(|| Folded::new(cols.to_vec()))
                .push(t, vals, cap)
        })?;
        Ok(w.map(|w| (out.unwrap_or_else(|| Folded::new(vec![])), w)))
    }

    /// Column `name`'s points in time order: each window's lowest and highest value where
    /// they were seen (one point where they are the same sample). `None` without such a
    /// column.
    pub fn points(&self, name: &str) -> Option<(Vec<u64>, Vec<f64>)> {
        let i = self.columns.iter().position(|c| c == name)?;
        let mut t = Vec::with_capacity(self.windows.len() * 2);
        let mut v = Vec::with_capacity(self.windows.len() * 2);
        for w in &self.windows {
            let Some(e) = w.cols[i] else { continue };
            let (a, b) = if e.lo.0 <= e.hi.0 {
                (e.lo, e.hi)
            } else {
                (e.hi, e.lo)
            };
            t.push(a.0);
            v.push(a.1);
            if b.0 != a.0 {
                t.push(b.0);
                v.push(b.1);
            }
        }
        Some((t, v))
    }

    /// Column `name`'s largest value.
    pub(crate) fn max_of(&self, name: &str) -> Option<f64> {
        let i = self.columns.iter().position(|c| c == name)?;
        self.max[i]
    }
}

/// Calls `f` with the columns after `t_ns`, each row's `t_ns` and its numbers (NaN where
/// a cell is not one), over `file` of a run and its closed chunks in order. The warnings
/// of the reading ([`csv::for_each_line`]); `None` when the run has no such file.
fn for_each_row(
    run_dir: &Path,
    file: &str,
    needed: &[&str],
    mut f: impl FnMut(&[String], u64, &[f64]),
) -> anyhow::Result<Option<Vec<String>>> {
    let files = csv::chunked_files(run_dir, file);
    if files.is_empty() {
        return Ok(None);
    }
    let mut columns: Option<Vec<String>> = None;
    let mut warnings = vec![];
    let mut vals: Vec<f64> = vec![];
    for p in &files {
        let w = csv::for_each_line(p, |n, line| {
            if n == 1 {
                let cols: Vec<String> = line.split(',').map(str::to_string).collect();
                csv::need_columns(p, &cols, needed)?;
                let cols = cols[1..].to_vec();
                match &columns {
                    None => columns = Some(cols),
                    Some(c) if *c != cols => {
                        return Err(Bad::File(anyhow::anyhow!(
                            "{}: its columns differ from {}'s; the recording is damaged",
                            p.display(),
                            files[0].display()
                        )))
                    }
                    Some(_) => {}
                }
                return Ok(());
            }
            let cols = columns.as_deref().expect("the header came first");
            let mut it = line.split(',');
            let t = csv::t_ns_cell(it.next().unwrap_or("")).map_err(Bad::Line)?;
            vals.clear();
            vals.extend(it.map(|v| v.parse::<f64>().unwrap_or(f64::NAN)));
            if vals.len() != cols.len() {
                return Err(Bad::Line(format!(
                    "{} cells, the header has {}",
                    vals.len() + 1,
                    cols.len() + 1
                )));
            }
            f(cols, t, &vals);
            Ok(())
        });
        // A chunk that cannot be read at all is a hole, not the whole run refused.
        match w {
            Ok(w) => warnings.extend(w),
            Err(e) => warnings.push(csv::skip_chunk(p, e, files.len() > 1)?),
        }
    }
    Ok(Some(warnings))
}

/// `cpu.csv` read for a report: the share of all cores busy and in iowait between each
/// row and the one before (%), folded as [`Folded`]; and the first and last rows'
/// cumulative ticks, from which the run's shares come.
#[derive(Debug, Clone, Default)]
pub struct CpuFolded {
    /// `busy_pct` and `iowait_pct`, at the later row's `t_ns` (an interval without ticks
    /// has none).
    pub pct: Folded,
    /// cpu.csv's columns after `t_ns`.
    pub columns: Vec<String>,
    pub first: Vec<f64>,
    pub last: Vec<f64>,
    pub rows: usize,
}

impl CpuFolded {
    /// The percentages' columns in [`CpuFolded::pct`].
    pub(crate) const BUSY: &'static str = "busy_pct";
    pub(crate) const IOWAIT: &'static str = "iowait_pct";

    /// Reads cpu.csv of a run and its chunks ([`procfs::CPU_FILE`], with every column
    /// of [`procfs::cpu_columns`]); `None` without one.
    pub(crate) fn read_chunked(
        run_dir: &Path,
        cap: usize,
    ) -> anyhow::Result<Option<(CpuFolded, Vec<String>)>> {
        let needed = procfs::cpu_columns();
        let file = procfs::CPU_FILE;
        // The CPU-time columns, in /proc/stat's order (idle 4th, iowait 5th).
        let ticks = &procfs::CPU_COLUMNS[..procfs::CPU_TICK_COLUMNS];
        let mut c = CpuFolded {
            pct: Folded::new(vec![Self::BUSY.into(), Self::IOWAIT.into()]),
            ..Default::default()
        };
        let mut idx: Vec<usize> = vec![];
        let w = for_each_row(run_dir, file, &needed, |cols, t, vals| {
            if idx.is_empty() {
                c.columns = cols.to_vec();
                idx = ticks
                    .iter()
                    .map(|n| cols.iter().position(|c| c == n).expect("needed"))
                    .collect();
            }
            if c.rows > 0 {
                let d = |i: usize| vals[idx[i]] - c.last[idx[i]];
                let tot: f64 = (0..idx.len()).map(d).sum();
                if tot > 0.0 {
                    // idle and iowait are /proc/stat's 4th and 5th.
                    let (idle, iowait) = (d(3), d(4));
                    c.pct.push(
                        t,
                        &[100.0 * (tot - idle - iowait) / tot, 100.0 * iowait / tot],
                        cap,
                    );
                }
            } else {
                c.first = vals.to_vec();
            }
            c.last.clear();
            c.last.extend_from_slice(vals);
            c.rows += 1;
        })?;
        Ok(w.map(|w| (c, w)))
    }

    /// Column `name`'s ticks over the run (last row minus first).
    pub fn ticks(&self, name: &str) -> Option<f64> {
        let i = self.columns.iter().position(|c| c == name)?;
        Some(self.last[i] - self.first[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rows: &[(u64, f64, f64)]) {
        let mut s = String::from("t_ns,dirty_kib,writeback_kib\n");
        for (t, a, b) in rows {
            s.push_str(&format!("{t},{a},{b}\n"));
        }
        std::fs::write(dir.join("m.csv"), s).unwrap();
    }

    #[test]
    fn under_the_cap_every_row_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let rows: Vec<(u64, f64, f64)> = (0..100)
            .map(|i| (i * 10_000_000, i as f64, 100.0 - i as f64))
            .collect();
        write(d.path(), &rows);
        let (f, w) = Folded::read_chunked(d.path(), "m.csv", &["t_ns"], 1000)
            .unwrap()
            .unwrap();
        assert!(w.is_empty());
        assert_eq!((f.rows, f.width_ns), (100, FIRST_WIDTH_NS));
        let (t, v) = f.points("dirty_kib").unwrap();
        assert_eq!(t, rows.iter().map(|r| r.0).collect::<Vec<_>>());
        assert_eq!(v, rows.iter().map(|r| r.1).collect::<Vec<_>>());
        assert_eq!(f.max_of("writeback_kib"), Some(100.0));
        assert_eq!(f.last_t_ns, Some(990_000_000));
    }

    /// 100,000 rows into 100 windows: widths double until they fit, and each window's
    /// extremes are those of the raw rows in it, at their own instants: a one-row spike
    /// survives any folding.
    #[test]
    fn over_the_cap_windows_keep_the_raw_extremes() {
        let d = tempfile::tempdir().unwrap();
        let n = 100_000u64;
        let val = |i: u64| ((i * 7919) % 1000) as f64;
        let mut rows: Vec<(u64, f64, f64)> =
            (0..n).map(|i| (i * 1_000_000, val(i), f64::NAN)).collect();
        rows[54_321].1 = 1e9; // a spike
        rows[77_777].1 = -5.0; // a dip
        write(d.path(), &rows);
        let cap = 100;
        let (f, _) = Folded::read_chunked(d.path(), "m.csv", &["t_ns"], cap)
            .unwrap()
            .unwrap();
        assert_eq!(f.rows, n as usize);
        assert!(f.windows.len() <= cap, "{}", f.windows.len());
        // 100 s of rows in at most 100 windows: the first power-of-two ms width >= 1 s.
        assert_eq!(f.width_ns, 1_024_000_000);
        let (t, v) = f.points("dirty_kib").unwrap();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "time order");
        // Every point is a raw row's (t, value), and each window's min and max are there.
        for (&t, &v) in t.iter().zip(&v) {
            assert_eq!(rows[(t / 1_000_000) as usize].1, v, "at {t}");
        }
        for k in 0..(n * 1_000_000).div_ceil(f.width_ns) {
            let inside: Vec<f64> = rows
                .iter()
                .filter(|r| r.0 / f.width_ns == k)
                .map(|r| r.1)
                .collect();
            let pts: Vec<f64> = t
                .iter()
                .zip(&v)
                .filter(|(t, _)| **t / f.width_ns == k)
                .map(|(_, v)| *v)
                .collect();
            let lo = inside.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = inside.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            assert!(
                pts.contains(&lo) && pts.contains(&hi),
                "window {k}: {pts:?}"
            );
        }
        assert!(v.contains(&1e9) && v.contains(&-5.0));
        assert_eq!(f.max_of("dirty_kib"), Some(1e9));
        // A column with no number at all: no points, no max.
        assert_eq!(f.points("writeback_kib").unwrap().0.len(), 0);
        assert_eq!(f.max_of("writeback_kib"), None);
        assert!(f.points("cached_kib").is_none());
    }

    /// cpu.csv: the busy and iowait shares between consecutive rows, as the CPU panel
    /// computed them from every row, and the run's tick totals from the first and last.
    #[test]
    fn cpu_shares_between_rows_and_ticks_over_the_run() {
        let d = tempfile::tempdir().unwrap();
        let mut s = procfs::header(&procfs::CPU_COLUMNS);
        s.push('\n');
        // user nice system idle iowait irq softirq steal running blocked
        let rows = [
            (0u64, [100, 0, 50, 1000, 10, 0, 0, 0, 1, 0]),
            (100_000_000, [130, 0, 60, 1050, 20, 0, 0, 0, 3, 1]), // 100 ticks: 40 busy, 10 iowait
            (200_000_000, [130, 0, 60, 1050, 20, 0, 0, 0, 1, 0]), // no ticks: no share
            (300_000_000, [130, 0, 60, 1150, 20, 0, 0, 0, 1, 0]), // all idle
        ];
        for (t, v) in rows {
            s.push_str(&t.to_string());
            for x in v {
                s.push_str(&format!(",{x}"));
            }
            s.push('\n');
        }
        std::fs::write(d.path().join(procfs::CPU_FILE), s).unwrap();
        let (c, w) = CpuFolded::read_chunked(d.path(), 1000).unwrap().unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.rows, 4);
        let (t, busy) = c.pct.points(CpuFolded::BUSY).unwrap();
        assert_eq!(t, [100_000_000, 300_000_000]);
        assert!((busy[0] - 40.0).abs() < 1e-9 && busy[1] == 0.0, "{busy:?}");
        let (_, iow) = c.pct.points(CpuFolded::IOWAIT).unwrap();
        assert!((iow[0] - 10.0).abs() < 1e-9, "{iow:?}");
        assert_eq!(c.ticks("idle_ticks"), Some(150.0));
        assert_eq!(c.ticks("user_ticks"), Some(30.0));
        assert_eq!(c.ticks("no_such"), None);
        assert!(CpuFolded::read_chunked(&d.path().join("x"), 10)
            .unwrap()
            .is_none());
    }
}
