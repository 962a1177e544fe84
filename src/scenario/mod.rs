//! Scenarios: a whole storage study from one file (`diskpulse run SCENARIO.toml`).

pub mod spec;
