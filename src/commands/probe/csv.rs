//! `RUN/probe.csv`: the probe's per-window rows when it runs inside a recording.
//!
//! ```text
//! t_ns,window_ns,direction,ios,bytes,short_ios,clat_mean_us,clat_p50_us,clat_p90_us,clat_p99_us,clat_p999_us,clat_max_us,lat_co_p50_us,lat_co_p99_us,lat_co_p999_us,lat_co_max_us,ramp
//! ```
//! One row per window (`--window`, 100 ms by default) and direction the job has
//! (`read`, `write`, and `sync` with `--fsync`/`--fdatasync`), all jobs merged, written
//! as soon as every job is past the window (and flushed within 250 ms):
//! - `t_ns`: the window's end on the run clock (ns since the recording's zero, the
//!   `DISKPULSE_CLOCK_ZERO_NS` that `diskpulse record` hands down); the last window ends
//!   at the last completion. Windows sit on a grid anchored at the end of `--ramp`.
//! - `window_ns`: the window's actual length (the first and last may be short).
//! - `ios`, `bytes`, `short_ios`: completions in the window (counts, not rates: a
//!   column's sum is the run's total); I/Os count in the window where they completed.
//! - `clat_*_us`: completion latency (from submission; for `sync` rows, the sync's own
//!   latency), microseconds with one decimal; empty when the window had no completion.
//! - `lat_co_*_us`: latency from the intended start on the `--rate-iops` schedule
//!   (coordinated omission corrected); without a rate, from when the queue slot came
//!   free. Empty on `sync` rows.
//! - `ramp`: 1 for windows inside `--ramp` (not in the summary's totals), else 0.

use std::path::Path;

use collectors::clock::Clock;
use collectors::probe::stats::{WindowStats, READ, WRITE};
use collectors::probe::{ProbeSpec, WindowRow};
use hdrhistogram::Histogram;

use crate::recording::writer::{put_u64, ChunkSink};

pub const HEADER: &str = "t_ns,window_ns,direction,ios,bytes,short_ios,clat_mean_us,clat_p50_us,clat_p90_us,clat_p99_us,clat_p999_us,clat_max_us,lat_co_p50_us,lat_co_p99_us,lat_co_p999_us,lat_co_max_us,ramp";

#[derive(Clone, Copy)]
enum Kind {
    Dir(usize),
    Sync,
}

pub struct ProbeCsv {
    sink: ChunkSink,
    clock: Clock,
    kinds: Vec<(Kind, &'static str)>,
}

impl ProbeCsv {
    pub fn create(path: &Path, clock: Clock, spec: &ProbeSpec) -> anyhow::Result<ProbeCsv> {
        let mut kinds = vec![];
        if spec.rw.reads() {
            kinds.push((Kind::Dir(READ), "read"));
        }
        if spec.rw.writes() {
            kinds.push((Kind::Dir(WRITE), "write"));
        }
        if spec.fsync.is_some() {
            kinds.push((Kind::Sync, "sync"));
        }
        Ok(ProbeCsv {
            sink: ChunkSink::create(path, HEADER, false)?,
            clock,
            kinds,
        })
    }

    pub fn window(&mut self, row: &WindowRow) {
        let zero = self.clock.zero_monotonic_ns();
        let t = row.end_ns.saturating_sub(zero);
        let window_ns = row.end_ns.saturating_sub(row.start_ns);
        for &(kind, name) in &self.kinds {
            format_row(
                self.sink.buf(),
                t,
                window_ns,
                name,
                kind,
                row.stats,
                row.ramp,
            );
        }
        self.sink.row_done(t);
    }

    pub fn finish(self) -> anyhow::Result<u64> {
        self.sink.finish()
    }
}

fn format_row(
    b: &mut Vec<u8>,
    t_ns: u64,
    window_ns: u64,
    name: &str,
    kind: Kind,
    s: &WindowStats,
    ramp: bool,
) {
    put_u64(b, t_ns);
    b.push(b',');
    put_u64(b, window_ns);
    b.push(b',');
    b.extend_from_slice(name.as_bytes());
    let (ios, bytes, short, clat, mean, max, co): (u64, u64, u64, &Histogram<u64>, f64, u64, _) =
        match kind {
            Kind::Dir(d) => {
                let x = &s.dir[d];
                (
                    x.ios,
                    x.bytes,
                    x.short_ios,
                    &x.clat,
                    x.clat_m.mean(),
                    x.clat_m.max,
                    Some(&x.lat_co),
                )
            }
            Kind::Sync => (
                s.sync_ios,
                0,
                0,
                &s.sync,
                s.sync_m.mean(),
                s.sync_m.max,
                None,
            ),
        };
    for v in [ios, bytes, short] {
        b.push(b',');
        put_u64(b, v);
    }
    let empty = ios == 0;
    b.push(b',');
    if !empty {
        push_us_1dp(b, mean.round() as u64);
    }
    for q in [0.5, 0.9, 0.99, 0.999] {
        b.push(b',');
        if !empty {
            // The exact max caps the histogram's bucket value.
            push_us_1dp(b, clat.value_at_quantile(q).min(max));
        }
    }
    b.push(b',');
    if !empty {
        push_us_1dp(b, max);
    }
    for q in [Some(0.5), Some(0.99), Some(0.999), None] {
        b.push(b',');
        if let (false, Some(h)) = (empty, co) {
            push_us_1dp(
                b,
                match q {
                    Some(q) => h.value_at_quantile(q),
                    None => h.max(),
                },
            );
        }
    }
    b.extend_from_slice(if ramp { b",1\n" } else { b",0\n" });
}

/// Nanoseconds as microseconds with one decimal, rounded half up (1234567 -> 1234.6).
fn push_us_1dp(out: &mut Vec<u8>, ns: u64) {
    let tenths = ns.saturating_add(50) / 100;
    put_u64(out, tenths / 10);
    out.push(b'.');
    out.push(b'0' + (tenths % 10) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_every_column_and_empty_latencies_without_ios() {
        let mut s = WindowStats::new();
        s.record_io(READ, 8192, 8192, 0, 1_000, 1_000, 81_000, true);
        let mut b = vec![];
        format_row(
            &mut b,
            5_000_000,
            100_000_000,
            "read",
            Kind::Dir(READ),
            &s,
            false,
        );
        format_row(
            &mut b,
            5_000_000,
            100_000_000,
            "write",
            Kind::Dir(WRITE),
            &s,
            true,
        );
        let text = String::from_utf8(b).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        let n = HEADER.split(',').count();
        assert_eq!(rows[0].split(',').count(), n, "{}", rows[0]);
        assert_eq!(rows[1].split(',').count(), n, "{}", rows[1]);
        assert!(
            rows[0].starts_with("5000000,100000000,read,1,8192,0,80.0,80.0,"),
            "{}",
            rows[0]
        );
        assert!(rows[0].ends_with(",81.0,81.0,81.0,81.0,0"), "{}", rows[0]);
        assert_eq!(rows[1], "5000000,100000000,write,0,0,0,,,,,,,,,,,1");
    }
}
