//! The load generator.
//!
//! Today it holds one load: [`js_publish`], a JetStream async publisher with a sliding
//! window of unacknowledged publishes (module [`js_pub`]), which writes per-window
//! statistics to `RUN/load.csv` (format in [`stats`]).
//!
//! Units: every timestamp is nanoseconds on the run clock ([`collectors::clock::Clock`]);
//! latencies are measured in nanoseconds and reported in microseconds (`*_us`); sizes
//! are bytes. Statistics are per-window HdrHistograms merged into a total, never a list
//! of every sample.

pub mod js_pub;
pub mod stats;

pub use js_pub::{
    js_context_settings, js_publish, publish_error_kind, JsContextSettings, JsPubOptions,
    JsPubSummary, ACK_TIMEOUT, DEFAULT_STATS_WINDOW, DEFAULT_WINDOW, DRAIN_TIMEOUT,
};
pub use stats::{LatencySummary, LOAD_CSV_HEADER};
