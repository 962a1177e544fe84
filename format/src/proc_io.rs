//! `proc_io.csv`: `/proc/PID/io` of the broker's processes (the embedded nats-servers),
//! every 10 ms, one row per process and sample (written by
//! `recording::samplers::procio`, which formats rows with itoa into a reused buffer; the
//! header and the row type live here).
//!
//! Columns: `t_ns` (the read's instant, run clock), `pid`, `comm` (as `/proc/PID/comm`
//! said when sampling started), then the seven counters of [`collectors::procio::FIELDS`]
//! as the kernel prints them, cumulative since the process started: `rchar`, `wchar`
//! (bytes through read/write calls, page cache or not), `syscr`, `syscw` (those calls),
//! `read_bytes`, `write_bytes` (bytes the process made the storage layer read, and sent
//! toward it: dirtied pages and O_DIRECT writes, charged when dirtied), and
//! `cancelled_write_bytes` (dirtied, never written). Bytes and calls; no rates: the
//! reader derives them ([`rates`]), and a counter that goes down (a pid reused) gives no
//! rate, never a negative one.

use std::collections::BTreeMap;
use std::path::Path;

pub use collectors::procio::FIELDS;

use super::csv::{read_rows_chunked, t_ns_cell};

pub const FILE: &str = "proc_io.csv";

/// The header: every column, in file order.
pub const HEADER: &str =
    "t_ns,pid,comm,rchar,wchar,syscr,syscw,read_bytes,write_bytes,cancelled_write_bytes";

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// One row of `proc_io.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcIoRow {
    pub t_ns: u64,
    pub pid: u32,
    pub comm: String,
    /// The counters in [`FIELDS`] order.
    pub counters: [u64; 7],
}

impl ProcIoRow {
    pub fn write_bytes(&self) -> u64 {
        self.counters[collectors::procio::WRITE_BYTES]
    }
    pub fn read_bytes(&self) -> u64 {
        self.counters[collectors::procio::READ_BYTES]
    }

    /// Appends the row as a CSV line (with its newline) to `buf` without allocating.
    pub fn write_to(buf: &mut Vec<u8>, t_ns: u64, pid: u32, comm: &str, c: &[u64; 7]) {
        let mut b = itoa::Buffer::new();
        buf.extend_from_slice(b.format(t_ns).as_bytes());
        buf.push(b',');
        buf.extend_from_slice(b.format(pid).as_bytes());
        buf.push(b',');
        buf.extend_from_slice(super::csv::quote(comm).as_bytes());
        for v in c {
            buf.push(b',');
            buf.extend_from_slice(b.format(*v).as_bytes());
        }
        buf.push(b'\n');
    }
}

/// One process's rows, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcRows {
    pub pid: u32,
    pub comm: String,
    pub rows: Vec<ProcIoRow>,
}

/// Reads `proc_io.csv` by pid (`None` when the run has none), with the reading's
/// warnings: a damaged row (a number that is not one, another count of cells, a `t_ns`
/// past [`super::csv::MAX_T_NS`]) is skipped naming file:line; a header without the
/// columns refuses the file.
pub fn read_noted(dir: &Path) -> anyhow::Result<(Option<Vec<ProcRows>>, Vec<String>)> {
    let mut by: BTreeMap<u32, ProcRows> = BTreeMap::new();
    let w = read_rows_chunked(dir, FILE, &columns(), |c| {
        let t_ns = t_ns_cell(c.str("t_ns"))?;
        let pid: u32 = c
            .str("pid")
            .parse()
            .map_err(|_| format!("pid '{}' is not a number", c.str("pid")))?;
        let mut counters = [0u64; 7];
        for (i, f) in FIELDS.iter().enumerate() {
            counters[i] = c
                .u64(f)
                .ok_or_else(|| format!("{f} '{}' is not a counter", c.str(f)))?;
        }
        let comm = c.str("comm").to_string();
        let e = by.entry(pid).or_insert_with(|| ProcRows {
            pid,
            comm: comm.clone(),
            rows: vec![],
        });
        e.rows.push(ProcIoRow {
            t_ns,
            pid,
            comm,
            counters,
        });
        Ok(())
    })?;
    let Some(warnings) = w else {
        return Ok((None, vec![]));
    };
    let mut out: Vec<ProcRows> = by.into_values().collect();
    for p in &mut out {
        p.rows.sort_by_key(|r| r.t_ns);
    }
    Ok((Some(out), warnings))
}

/// One interval between two consecutive rows of a process: `(t0_ns, t1_ns, delta)` of
/// counter `field`; an interval whose counter went down (a reused pid) is left out.
pub fn intervals(p: &ProcRows, field: usize) -> Vec<(u64, u64, u64)> {
    p.rows
        .windows(2)
        .filter_map(|w| {
            let d = w[1].counters[field].checked_sub(w[0].counters[field])?;
            (w[1].t_ns > w[0].t_ns).then_some((w[0].t_ns, w[1].t_ns, d))
        })
        .collect()
}

/// Rates of counter `field` per interval, per second: `(t_mid_s, per_s)`; `None` rates
/// (a counter going down) are left out.
pub fn rates(p: &ProcRows, field: usize) -> Vec<(f64, f64)> {
    intervals(p, field)
        .into_iter()
        .map(|(a, b, d)| {
            let dt = (b - a) as f64 / 1e9;
            ((a + b) as f64 / 2e9, d as f64 / dt)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: u64, pid: u32, w: u64) -> Vec<u8> {
        let mut b = vec![];
        ProcIoRow::write_to(&mut b, t, pid, "nats-server", &[1, 2, 3, 4, 5, w, 0]);
        b
    }

    #[test]
    fn rows_read_back_by_pid_and_rates_skip_a_counter_that_went_down() {
        let d = tempfile::tempdir().unwrap();
        let mut text = format!("{HEADER}\n").into_bytes();
        for (t, w) in [(0u64, 0u64), (10_000_000, 1 << 20), (20_000_000, 100)] {
            text.extend(row(t, 7, w));
        }
        text.extend(row(5_000_000, 9, 0));
        text.extend(b"30000000,7,nats-server,1,2,x,4,5,6,0\n");
        text.extend(b"40000000,7,nats");
        std::fs::write(d.path().join(FILE), &text).unwrap();
        let (got, w) = read_noted(d.path()).unwrap();
        let got = got.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].pid, 7);
        assert_eq!(got[0].rows.len(), 3);
        assert_eq!(got[0].comm, "nats-server");
        assert!(w.iter().any(|w| w.contains("proc_io.csv:6")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("cut off")), "{w:?}");
        let r = rates(&got[0], collectors::procio::WRITE_BYTES);
        // 1 MiB in 10 ms; the drop back to 100 is no rate at all.
        assert_eq!(r, vec![(0.005, (1u64 << 20) as f64 * 100.0)]);
        assert!(read_noted(&d.path().join("none")).unwrap().0.is_none());
    }

    #[test]
    fn a_header_without_the_counters_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), "t_ns,pid,comm\n1,2,x\n").unwrap();
        let e = read_noted(d.path()).unwrap_err();
        assert!(e.to_string().contains("rchar"), "{e}");
    }
}
