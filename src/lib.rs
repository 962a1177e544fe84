//! diskpulse: a message broker's load and the block devices under it on one
//! millisecond timeline. This crate is the CLI and everything async: the run session,
//! broker processes, the load generator and the report. OS readers live in the
//! `collectors` crate, drawing in the `charts` crate.

pub mod agent;
pub mod broker;
pub mod check;
pub mod cli;
pub mod commands;
pub mod export;
pub mod format;
pub mod lab;
pub mod live;
pub mod load;
pub mod progress;
pub mod proxy;
pub mod recording;
pub mod redact;
pub mod report;
pub mod scenario;
pub mod session;
pub mod units;
pub mod view;
