//! Scenarios: a whole storage study from one file (`diskpulse run SCENARIO.toml`).

pub mod agents;
mod executor;
pub mod html;
mod matrix;
mod phases;
pub mod plan;
pub mod run;
pub mod schedule;
pub mod spec;
pub mod study;
pub mod study_charts;
pub mod study_page;
pub mod validate;
pub mod verdict;
mod volume_path;
