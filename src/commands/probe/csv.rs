//! `RUN/probe.csv`: the probe's per-window rows when it runs inside a recording (columns,
//! units and reader: [`crate::format::probe`]). Rows are written as soon as every job
//! is past the window (and flushed within 250 ms), stamped with the window's start on
//! the run's grid.

use std::path::Path;

use collectors::clock::Clock;
use collectors::probe::stats::{READ, WRITE};
use collectors::probe::{ProbeSpec, WindowRow};

use crate::format::probe::{format_row, Kind, Window, HEADER};
use crate::recording::writer::ChunkSink;

pub struct ProbeCsv {
    sink: ChunkSink,
    clock: Clock,
    window_ns: u64,
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
            window_ns: spec.window_ns.max(1),
            kinds,
        })
    }

    pub fn window(&mut self, row: &WindowRow) {
        let zero = self.clock.zero_monotonic_ns();
        // The row's start is the probe's start in its first window: the window itself
        // starts on the grid below it.
        let t0 = row.start_ns.saturating_sub(zero);
        let w = Window {
            t_ns: crate::format::window_start(t0, self.window_ns),
            window_ns: self.window_ns,
            active_ns: row.end_ns.saturating_sub(row.start_ns),
            ramp: row.ramp,
        };
        for &(kind, name) in &self.kinds {
            format_row(self.sink.buf(), &w, name, kind, row.stats);
        }
        self.sink.row_done(row.end_ns.saturating_sub(zero));
    }

    pub fn finish(self) -> anyhow::Result<u64> {
        self.sink.finish()
    }
}
