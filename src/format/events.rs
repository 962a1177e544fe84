//! `events.jsonl`: one JSON object a line, `{"t_ns":..,"kind":..,"detail":{..}}`, written
//! by `recording::EventLog` (each event written and flushed at once: a crash loses
//! none). `t_ns` is the event's instant on the run clock. Kinds are listed in the
//! README; `detail` depends on the kind (an `error` has `source`, `kind`, `message`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::csv::{for_each_line, Bad, MAX_T_NS};

pub const FILE: &str = "events.jsonl";

/// One line of events.jsonl.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub t_ns: u64,
    pub kind: String,
    #[serde(default)]
    pub detail: Value,
}

impl Event {
    /// A text field of `detail` (`node`, `phase`, ...).
    pub fn detail_str(&self, key: &str) -> Option<&str> {
        self.detail.get(key).and_then(Value::as_str)
    }
    pub fn detail_f64(&self, key: &str) -> Option<f64> {
        self.detail.get(key).and_then(Value::as_f64)
    }
}

/// Reads events.jsonl (empty when the run has none). A line that is not an event (or
/// whose `t_ns` is past [`super::csv::MAX_T_NS`]) is skipped and a cut-off last line
/// left out, each with a warning naming file:line; a first line that is not an event
/// refuses the file (it is not diskpulse's).
pub fn read_noted(dir: &Path) -> anyhow::Result<(Vec<Event>, Vec<String>)> {
    let p = dir.join(FILE);
    let mut events = vec![];
    if !p.exists() || std::fs::metadata(&p).is_ok_and(|m| m.len() == 0) {
        return Ok((events, vec![]));
    }
    let warnings = for_each_line(&p, |_, line| {
        let e = serde_json::from_str::<Event>(line)
            .map_err(|e| Bad::Line(format!("not an event ({e})")))?;
        if e.t_ns > MAX_T_NS {
            return Err(Bad::Line(format!(
                "t_ns {} is past the {} days a report reads",
                e.t_ns,
                super::csv::MAX_DAYS
            )));
        }
        events.push(e);
        Ok(())
    })?;
    Ok((events, warnings))
}

/// [`read_noted`] without the warnings.
pub fn read(dir: &Path) -> anyhow::Result<Vec<Event>> {
    Ok(read_noted(dir)?.0)
}
