//! diskpulse: a message broker's load and the block devices under it on one
//! millisecond timeline. This crate is the application: the run session, scenarios and
//! studies, the progress line, `view`, and the commands. The layers under it are
//! crates of their own: `collectors` and `charts` (the OS and drawing), `format` (every
//! file of a run directory), `report` (a run directory's figures and pages) and
//! `engines` (recording, load, brokers, lab, probe, fsync, check, agents).

pub mod commands;
pub mod progress;
pub mod scenario;
pub mod session;
pub mod view;

// The layers' modules under their old paths, for the integration tests and benches.
pub use engines::{agent, broker, check, export, fsync, lab, live, load, probe, proxy, recording};
pub use format::{cli, redact, units};
pub use {format, report};
