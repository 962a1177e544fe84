//! `RUN/probe.csv` and `RUN/probe.hlog`: the probe's per-window rows and latency
//! histograms when it runs inside a recording (columns, units and readers:
//! [`format::probe`], [`format::hist`]). Rows and intervals are written as
//! soon as every job is past the window (and flushed within 250 ms), stamped with the
//! window's start on the run's grid, with the scenario phase (`DISKPULSE_PHASE`) in the
//! `phase` column and the tags. Both files are appended to (one header), so probes of
//! overlapping phases share them.

use std::path::Path;

use collectors::clock::Clock;
use collectors::probe::stats::{READ, TRIM, WRITE};
use collectors::probe::{ProbeSpec, WindowRow};

use crate::recording::writer::ChunkSink;
use format::hist::{self, LineWriter};
use format::probe::{format_row, Kind, Window, HEADER};

pub(crate) struct ProbeCsv {
    sink: ChunkSink,
    hlog: ChunkSink,
    lines: LineWriter,
    clock: Clock,
    window_ns: u64,
    phase: Option<u32>,
    /// (what, its probe.csv direction, its .hlog tag, its corrected tag)
    kinds: Vec<(Kind, &'static str, String, Option<String>)>,
}

impl ProbeCsv {
    /// Opens (appends to) `dir/probe.csv` and `dir/probe.hlog`.
    pub fn create(
        dir: &Path,
        clock: Clock,
        spec: &ProbeSpec,
        phase: Option<u32>,
    ) -> anyhow::Result<ProbeCsv> {
        let mut kinds = vec![];
        let both = |name| {
            (
                hist::tag(phase, name, false),
                Some(hist::tag(phase, name, true)),
            )
        };
        if spec.rw.reads() {
            let (t, co) = both("read");
            kinds.push((Kind::Dir(READ), "read", t, co));
        }
        if spec.rw.writes() {
            let (t, co) = both("write");
            kinds.push((Kind::Dir(WRITE), "write", t, co));
        }
        if spec.rw.trims() {
            let (t, co) = both("trim");
            kinds.push((Kind::Dir(TRIM), "trim", t, co));
        }
        if spec.fsync.is_some() {
            kinds.push((Kind::Sync, "sync", hist::tag(phase, "sync", false), None));
        }
        let zero_unix = crate::recording::session::clock_zero_unix_ns(clock.zero_monotonic_ns());
        Ok(ProbeCsv {
            sink: ChunkSink::append(&dir.join(format::probe::FILE), HEADER)?,
            hlog: ChunkSink::append(
                &dir.join(hist::PROBE_FILE),
                &hist::header("probe.hlog", zero_unix),
            )?,
            lines: LineWriter::new(),
            clock,
            window_ns: spec.window_ns.max(1),
            phase,
            kinds,
        })
    }

    pub fn window(&mut self, row: &WindowRow) -> anyhow::Result<()> {
        let zero = self.clock.zero_monotonic_ns();
        // The row's start is the probe's start in its first window: the window itself
        // starts on the grid below it.
        let t0 = row.start_ns.saturating_sub(zero);
        let w = Window {
            t_ns: format::window_start(t0, self.window_ns),
            window_ns: self.window_ns,
            active_ns: row.end_ns.saturating_sub(row.start_ns),
            ramp: row.ramp,
            phase: self.phase,
            oldest_wait_ns: row.oldest_wait_ns,
        };
        for (kind, name, tag, co_tag) in &self.kinds {
            format_row(self.sink.buf(), &w, name, *kind, row.stats);
            // The ramp is not measured (as in the summary): no interval for it.
            if row.ramp {
                continue;
            }
            let (h, co) = match *kind {
                Kind::Dir(d) => (&row.stats.dir[d].clat, Some(&row.stats.dir[d].lat_co)),
                Kind::Sync => (&row.stats.sync, None),
            };
            let b = self.hlog.buf();
            self.lines.line(b, tag, w.t_ns, w.window_ns, h)?;
            if let (Some(co), Some(co_tag)) = (co, co_tag) {
                self.lines.line(b, co_tag, w.t_ns, w.window_ns, co)?;
            }
        }
        let t = row.end_ns.saturating_sub(zero);
        self.sink.row_done(t);
        self.hlog.row_done(t);
        Ok(())
    }

    pub fn finish(self) -> anyhow::Result<u64> {
        self.hlog.finish()?;
        self.sink.finish()
    }
}
