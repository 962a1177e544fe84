//! The writer of `RUN/events.jsonl` (the format, its reader and its vocabulary, one
//! [`format::events::Body`] variant per kind: [`format::events`]).
//!
//! Events are rare (phase changes, errors, devices that vanish), so each one is written
//! and flushed at once: a crash loses none.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use collectors::clock::Clock;
use format::events::Body;

/// A shared, thread-safe event log. Cloning is cheap (an `Arc`).
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Mutex<Option<BufWriter<File>>>>,
    clock: Clock,
    errors: Arc<std::sync::atomic::AtomicU64>,
}

impl EventLog {
    /// Creates (truncates) `path`, then writes it in O_APPEND mode like its children: a
    /// writer at its own offset would overwrite the lines a child appended meanwhile.
    pub fn create(path: &Path, clock: Clock) -> anyhow::Result<EventLog> {
        File::create(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        Ok(EventLog {
            inner: Arc::new(Mutex::new(Some(BufWriter::new(f)))),
            clock,
            errors: Default::default(),
        })
    }

    /// Appends to an existing `path` (a child of `diskpulse record` adding its events to
    /// the parent's run; each event is one `write` in O_APPEND mode, so lines do not mix).
    pub fn append(path: &Path, clock: Clock) -> anyhow::Result<EventLog> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        Ok(EventLog {
            inner: Arc::new(Mutex::new(Some(BufWriter::new(f)))),
            clock,
            errors: Default::default(),
        })
    }

    /// An event log that drops everything (for commands run outside a recording).
    pub fn disabled(clock: Clock) -> EventLog {
        EventLog {
            inner: Arc::new(Mutex::new(None)),
            clock,
            errors: Default::default(),
        }
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Records an event stamped now.
    pub fn event(&self, body: Body) {
        self.event_at(self.clock.now_ns(), body)
    }

    /// Records an event at a given run-relative time.
    pub fn event_at(&self, t_ns: u64, body: Body) {
        if matches!(body, Body::Error(_)) {
            self.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let line = format::events::Event { t_ns, body };
        let Ok(line) = serde_json::to_string(&line) else {
            return;
        };
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = g.as_mut() {
            // An event log that cannot be written must not stop the run: the samplers
            // and their files are worth more than one event line.
            let _ = writeln!(w, "{line}").and_then(|_| w.flush());
        }
    }

    /// Records an `error` event: `{"source":..,"kind":..,"message":..}`.
    pub fn error(&self, source: &str, kind: &str, message: &str) {
        self.event(Body::error(source, kind, message));
    }

    /// How many `error` events were recorded.
    pub fn error_count(&self) -> u64 {
        self.errors.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_appended_lines_survive_the_parents_next_event() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("events.jsonl");
        let clock = Clock::start();
        let parent = EventLog::create(&p, clock).unwrap();
        let phase = format::events::Phase {
            index: Some(0),
            ..Default::default()
        };
        parent.event(Body::PhaseStart(phase.clone()));
        let child = EventLog::append(&p, clock).unwrap();
        child.event(Body::LoadStart(format::events::LoadStart::default()));
        child.event(Body::LoadStop(format::events::NoDetail {}));
        parent.event(Body::PhaseEnd(phase));
        let text = std::fs::read_to_string(&p).unwrap();
        let kinds: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"].to_string())
            .collect();
        assert_eq!(
            kinds,
            [
                "\"phase_start\"",
                "\"load_start\"",
                "\"load_stop\"",
                "\"phase_end\""
            ]
        );
    }
}
