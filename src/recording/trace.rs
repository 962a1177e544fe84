//! `--trace` (issue 11): the tracefs collector (`collectors::tracefs`) wired into a
//! recording. It writes `fsync_calls.csv.gz` and `block_requests.csv.gz`
//! ([`crate::format::fsync_calls`], [`crate::format::block_requests`]), the meta.json
//! `trace` section ([`crate::format::meta::TraceMeta`]) and a `trace_lost` event when the
//! kernel lost events.
//!
//! What must stay true: tracing is off unless asked for; when it is asked for but cannot
//! run (not root, no tracefs, a tracepoint missing) the recording says so in one line
//! (stderr and an `error` event, `source` `trace`) and everything else records.

use std::sync::{Arc, Mutex};

/// What to trace. The run's devices (`SamplerSetup::devices`) are the block devices
/// traced (every device when the run lists none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSetup {
    /// Processes whose sync calls are recorded: every thread of each.
    pub pids: Vec<u32>,
    /// Process names (the kernel's comm: at most 15 bytes), filtered in the kernel.
    pub comms: Vec<String>,
    /// Also the processes the traced pids start, and theirs (`record -- CMD --trace`).
    pub children: bool,
}

/// The traced pids, shared with the collector so pids known only after the recording
/// started (the command of `record -- CMD`, embedded brokers) are added while it runs:
/// [`crate::recording::Recording::trace_pid`].
#[derive(Debug, Clone, Default)]
pub struct TracedPids(pub Arc<Mutex<Vec<u32>>>);

impl TracedPids {
    pub fn add(&self, pid: u32) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !v.contains(&pid) {
            v.push(pid);
        }
    }
    pub fn get(&self) -> Vec<u32> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
