//! `rates.csv`: written by `report`, per device and window (`--window`, 100 ms; 1s to
//! set beside `iostat -x 1`), rates derived from the raw diskstats counters (the
//! window's share of each counter delta).
//!
//! - `t_ns`: the window's START on the run clock; the row covers `[t_ns, t_ns + window_ns)`.
//! - `unix_ms`: the same instant on the wall clock, ms since the epoch
//!   (`(clock_zero_unix_ns + t_ns) / 1e6`, see meta.json), for Grafana and pandas.
//! - `window_ns`: the window's length.
//! - `device`; `read_mib_s`, `write_mib_s` (MiB/s); `read_iops`, `write_iops` (I/O/s);
//!   `flushes_per_s` (empty before kernel 5.5); `util_pct` (share of the window with I/O
//!   in flight, %); `r_await_ms`, `w_await_ms` (mean ms per completed I/O; empty without
//!   I/O); `in_flight_max` (the highest in-flight gauge sampled in the window).
//! - Then `iostat -x`'s columns under its own names and units (sysstat 12.6), computed
//!   as iostat computes them from the same counters, for the window: [`IOSTAT_COLUMNS`].
//!   kB is 1024 bytes, awaits ms, `*req-sz` kB per request, `%*rqm` merged share of
//!   requests, `aqu-sz` time-weighted queue length (the weighted-ms counter over the
//!   window), `%util` as `util_pct`. As iostat prints them, awaits and sizes are 0.00 in
//!   a window without I/O; discard (`d*`) and flush (`f*`) cells are empty on kernels
//!   without those counters (before 4.18 and 5.5).
//!
//! The iostat columns were added after `in_flight_max` (our own columns keep their names
//! and places, so scripts written for them still work); a `rates.csv` written before has
//! none of them and reads with [`RatesRow::iostat`] `None`.

use std::path::Path;

use super::csv::{line, read_rows};

pub const FILE: &str = "rates.csv";

/// The header: every column, in file order (the one list writers and readers use).
pub const HEADER: &str = "t_ns,unix_ms,window_ns,device,read_mib_s,write_mib_s,read_iops,write_iops,flushes_per_s,util_pct,r_await_ms,w_await_ms,in_flight_max,r/s,rkB/s,rrqm/s,%rrqm,r_await,rareq-sz,w/s,wkB/s,wrqm/s,%wrqm,w_await,wareq-sz,d/s,dkB/s,drqm/s,%drqm,d_await,dareq-sz,f/s,f_await,aqu-sz,%util";

/// `iostat -x`'s columns, in iostat's order: the tail of [`HEADER`].
#[cfg(test)]
const IOSTAT_COLUMNS: [&str; 22] = [
    "r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s", "wkB/s", "wrqm/s", "%wrqm",
    "w_await", "wareq-sz", "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz", "f/s",
    "f_await", "aqu-sz", "%util",
];

/// One direction of `iostat -x` (read, write or discard): its six columns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IostatDir {
    /// `r/s`: requests completed per second.
    pub per_s: f64,
    /// `rkB/s`: kB (1024 bytes) per second.
    pub kb_s: f64,
    /// `rrqm/s`: requests merged per second.
    pub rqm_s: f64,
    /// `%rrqm`: merged requests as a share of all (merged + completed), %.
    pub rqm_pct: f64,
    /// `r_await`: mean ms per completed request (0 without requests).
    pub await_ms: f64,
    /// `rareq-sz`: mean kB per completed request (0 without requests).
    pub req_sz_kb: f64,
}

/// `iostat -x`'s columns of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Iostat {
    pub r: IostatDir,
    pub w: IostatDir,
    /// Discards; `None` before kernel 4.18.
    pub d: Option<IostatDir>,
    /// `f/s` and `f_await`; `None` before kernel 5.5.
    pub f: Option<(f64, f64)>,
    /// `aqu-sz`: time-weighted mean queue length.
    pub aqu_sz: f64,
    /// `%util`.
    pub util_pct: f64,
}

impl Iostat {
    /// The 22 cells, in [`IOSTAT_COLUMNS`] order, 2 decimals as iostat prints them.
    fn cells(&self) -> Vec<String> {
        let f2 = |v: f64| format!("{v:.2}");
        let dir = |d: Option<&IostatDir>| -> Vec<String> {
            match d {
                Some(d) => [d.per_s, d.kb_s, d.rqm_s, d.rqm_pct, d.await_ms, d.req_sz_kb]
                    .map(f2)
                    .to_vec(),
                None => vec![String::new(); 6],
            }
        };
        let mut out = dir(Some(&self.r));
        out.extend(dir(Some(&self.w)));
        out.extend(dir(self.d.as_ref()));
        match self.f {
            Some((s, a)) => out.extend([f2(s), f2(a)]),
            None => out.extend([String::new(), String::new()]),
        }
        out.push(f2(self.aqu_sz));
        out.push(f2(self.util_pct));
        out
    }

    /// From a row's cells; `None` when the file predates the iostat columns.
    fn read(c: &super::csv::Cells) -> Option<Iostat> {
        if !c.columns.iter().any(|h| h == "w/s") {
            return None;
        }
        let n = |name: &str| c.f64(name).unwrap_or(f64::NAN);
        let dir = |p: &str| IostatDir {
            per_s: n(&format!("{p}/s")),
            kb_s: n(&format!("{p}kB/s")),
            rqm_s: n(&format!("{p}rqm/s")),
            rqm_pct: n(&format!("%{p}rqm")),
            await_ms: n(&format!("{p}_await")),
            req_sz_kb: n(&format!("{p}areq-sz")),
        };
        Some(Iostat {
            r: dir("r"),
            w: dir("w"),
            d: c.f64("d/s").is_some().then(|| dir("d")),
            f: c.f64("f/s")
                .map(|s| (s, c.f64("f_await").unwrap_or(f64::NAN))),
            aqu_sz: n("aqu-sz"),
            util_pct: n("%util"),
        })
    }
}

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// One row of `rates.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RatesRow {
    pub t_ns: u64,
    pub unix_ms: u64,
    pub window_ns: u64,
    pub device: String,
    pub read_mib_s: f64,
    pub write_mib_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub flushes_per_s: Option<f64>,
    pub util_pct: f64,
    pub r_await_ms: Option<f64>,
    pub w_await_ms: Option<f64>,
    pub in_flight_max: u64,
    /// iostat -x's columns; `None` read from a file written before they existed.
    pub iostat: Option<Iostat>,
}

fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map(|v| format!("{v:.decimals$}")).unwrap_or_default()
}

impl RatesRow {
    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        let mut cells = vec![
            self.t_ns.to_string(),
            self.unix_ms.to_string(),
            self.window_ns.to_string(),
            self.device.clone(),
            format!("{:.3}", self.read_mib_s),
            format!("{:.3}", self.write_mib_s),
            format!("{:.1}", self.read_iops),
            format!("{:.1}", self.write_iops),
            opt(self.flushes_per_s, 1),
            format!("{:.1}", self.util_pct),
            opt(self.r_await_ms, 3),
            opt(self.w_await_ms, 3),
            self.in_flight_max.to_string(),
        ];
        cells.extend(self.iostat.unwrap_or_default().cells());
        line(&cells)
    }
}

/// Writes `rows` under the header.
pub fn write(path: &Path, rows: &[RatesRow]) -> anyhow::Result<()> {
    write_rows(path, rows.iter().cloned())
}

/// [`write`] from rows as they are made (a long run's rows are not held together).
pub fn write_rows(path: &Path, rows: impl IntoIterator<Item = RatesRow>) -> anyhow::Result<()> {
    use std::io::Write as _;
    crate::atomic::write_with(path, |f| {
        let mut out = std::io::BufWriter::with_capacity(256 * 1024, f);
        out.write_all(HEADER.as_bytes())?;
        out.write_all(b"\n")?;
        for r in rows {
            out.write_all(r.to_line().as_bytes())?;
        }
        out.flush()
    })
}

/// Reads `rates.csv`; empty when the run has none.
pub fn read(dir: &Path) -> anyhow::Result<Vec<RatesRow>> {
    let mut rows = vec![];
    read_rows(&dir.join(FILE), &["t_ns", "window_ns", "device"], |c| {
        let (Some(t_ns), Some(window_ns)) = (c.u64("t_ns"), c.u64("window_ns")) else {
            return Err("t_ns or window_ns is not a number".to_string());
        };
        let n = |name: &str| c.f64(name).unwrap_or(f64::NAN);
        rows.push(RatesRow {
            t_ns,
            unix_ms: c.u64("unix_ms").unwrap_or(0),
            window_ns,
            device: c.str("device").to_string(),
            read_mib_s: n("read_mib_s"),
            write_mib_s: n("write_mib_s"),
            read_iops: n("read_iops"),
            write_iops: n("write_iops"),
            flushes_per_s: c.f64("flushes_per_s"),
            util_pct: n("util_pct"),
            r_await_ms: c.f64("r_await_ms"),
            w_await_ms: c.f64("w_await_ms"),
            in_flight_max: c.u64("in_flight_max").unwrap_or(0),
            iostat: Iostat::read(c),
        });
        Ok(())
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_ends_with_iostats_columns_in_iostats_order() {
        let cols = columns();
        assert_eq!(cols[cols.len() - IOSTAT_COLUMNS.len()..], IOSTAT_COLUMNS);
        // As `iostat -x` (sysstat 12.6) prints its header line.
        assert_eq!(
            IOSTAT_COLUMNS.join(" "),
            "r/s rkB/s rrqm/s %rrqm r_await rareq-sz w/s wkB/s wrqm/s %wrqm w_await wareq-sz \
             d/s dkB/s drqm/s %drqm d_await dareq-sz f/s f_await aqu-sz %util"
        );
    }

    #[test]
    fn rows_round_trip_and_older_files_read_without_iostat_columns() {
        let dir = tempfile::tempdir().unwrap();
        let w = IostatDir {
            per_s: 2000.0,
            kb_s: 8000.0,
            rqm_s: 0.0,
            rqm_pct: 0.0,
            await_ms: 3.25,
            req_sz_kb: 4.0,
        };
        let row = RatesRow {
            t_ns: 1_000_000_000,
            unix_ms: 5,
            window_ns: 1_000_000_000,
            device: "loop3".into(),
            write_mib_s: 7.8125,
            write_iops: 2000.0,
            util_pct: 99.5,
            iostat: Some(Iostat {
                w,
                f: Some((1.0, 0.5)),
                aqu_sz: 7.5,
                util_pct: 99.5,
                ..Default::default()
            }),
            ..Default::default()
        };
        write(&dir.path().join(FILE), std::slice::from_ref(&row)).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back.len(), 1);
        let io = back[0].iostat.unwrap();
        assert_eq!(io.w, w);
        assert_eq!(io.d, None, "no discard counters: empty cells");
        assert_eq!(io.f, Some((1.0, 0.5)));
        assert_eq!(io.aqu_sz, 7.5);

        // A rates.csv of before the iostat columns.
        std::fs::write(
            dir.path().join(FILE),
            "t_ns,unix_ms,window_ns,device,read_mib_s,write_mib_s,read_iops,write_iops,flushes_per_s,util_pct,r_await_ms,w_await_ms,in_flight_max\n\
             0,5,1000000000,loop3,0.000,7.812,0.0,2000.0,,99.5,,3.250,8\n",
        )
        .unwrap();
        let old = read(dir.path()).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(old[0].write_iops, 2000.0);
        assert_eq!(old[0].in_flight_max, 8);
        assert!(old[0].iostat.is_none());
    }
}
