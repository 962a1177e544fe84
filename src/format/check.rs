//! `check.json` in a run directory (`diskpulse check --json > RUN/check.json`, or a
//! scenario's check phase): the parts the report shows. The document is `check`'s own
//! (`format_version` 1 of `check::render`); see the README's `diskpulse check` section.

use std::path::Path;

use serde::Deserialize;

pub const FILE: &str = "check.json";

/// How many findings of each level.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Counts {
    pub fail: u64,
    pub warn: u64,
    pub pass: u64,
    pub info: u64,
}

/// One finding.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Finding {
    /// PASS, INFO, WARN or FAIL.
    pub level: String,
    pub code: String,
    /// The argument checked (None for machine-wide findings).
    pub target: Option<String>,
    pub device: Option<String>,
    pub message: String,
    pub advice: String,
}

/// The parts of check.json the report reads.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CheckDoc {
    #[serde(default)]
    pub counts: Option<Counts>,
    pub findings: Vec<Finding>,
}

/// `None` when the run has no check.json; `Some(Err)` when it is not check's output.
pub fn read(dir: &Path) -> Option<anyhow::Result<CheckDoc>> {
    let p = dir.join(FILE);
    let bytes = std::fs::read(&p).ok()?;
    Some(
        serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!("{}: not diskpulse check --json output: {e}", p.display())
        }),
    )
}
