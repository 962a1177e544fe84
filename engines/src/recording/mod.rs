//! The recording: a run directory with `meta.json`, `events.jsonl` and one CSV per source.
//! File formats are documented in the modules that write them and in docs/files.md.

pub(crate) mod ack_trigger;
pub mod chunks;
pub mod envelopes;
pub mod events;
pub mod progress;
mod sampler_args;
pub mod samplers;
pub mod session;
pub mod trace;
pub mod writer;

pub use events::EventLog;
pub use sampler_args::{recorded_names, Sampler, SamplerArgs, MIN_INTERVAL};
pub use session::{RecordSetup, Recording, SamplerSetup};
pub use trace::TraceSetup;

/// Running nodes; all stopped on [`Cluster::stop`] or drop.
/// Told `(name, pid)` of every node started again (restart/kill phases), so a recording
/// samples and traces the new process like the first one.
pub type OnNodeStart = std::sync::Arc<dyn Fn(&str, u32) + Send + Sync>;
