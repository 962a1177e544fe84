//! `events.jsonl`: one JSON object a line, `{"t_ns":..,"kind":..,"detail":{..}}`, written
//! by `recording::EventLog` (each event written and flushed at once: a crash loses
//! none). `t_ns` is the event's instant on the run clock. Kinds are listed in the
//! README; `detail` depends on the kind (an `error` has `source`, `kind`, `message`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::csv::for_each_line;

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

/// Reads events.jsonl (empty when the run has none); lines that do not parse and a
/// cut-off last line are left out.
pub fn read(dir: &Path) -> anyhow::Result<Vec<Event>> {
    let p = dir.join(FILE);
    let mut events = vec![];
    if p.exists() {
        for_each_line(&p, |line| {
            if let Ok(e) = serde_json::from_str::<Event>(line) {
                events.push(e);
            }
        })
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    }
    Ok(events)
}
