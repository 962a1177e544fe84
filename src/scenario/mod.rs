//! Scenarios: a whole storage study from one file (`diskpulse run SCENARIO.toml`).

pub mod html;
pub mod run;
pub mod spec;
pub mod study;
