//! Findings as rules: what `check` saw, how much it matters, and what to do next.
//!
//! Each finding is one [`Rule`]: a table entry carrying its stable `code` (`--json`'s
//! `code`, the `check` table in docs/commands/check.md), the levels it can give, and one function holding
//! the condition under which it applies and the two lines it then says: what was seen
//! (`message`) and what to do next (`advice`, like hyperfine's warnings). Nothing about a
//! finding lives anywhere else. The rules sit in tables by what they look at, in the
//! order they are reported:
//! - [`device::CACHE`] and [`device::IO`]: each device of a target (a partition's cache
//!   is judged once, on its whole disk);
//! - [`mount::MOUNT`]: a target's mount options;
//! - [`flush::TESTS`] and [`flush::RATES`]: the empirical flush tests, and their rate
//!   against each spinning disk at the bottom of the stack;
//! - [`system::SYSTEM`]: the machine.
//!
//! Levels:
//! - FAIL: durability is not what the stack claims (fsynced data can be lost) or a
//!   spinning disk acknowledges flushes faster than it can turn. Exit 1 always.
//! - WARN: a benchmark run now would measure something else than you think (other I/O,
//!   a cache that is off, barriers dropped, a sync mount). Exit 1 with `--strict`.
//! - INFO: context that explains numbers (a virtual disk, a loop device, write through).
//! - PASS: checked and fine.
//!
//! Thresholds (and why):
//! - flush cost: durable writes (O_DIRECT|O_DSYNC p50) within 1.25x of plain O_DIRECT
//!   writes count as "as slow as each other" ([`SAME_COST_RATIO`]);
//! - physical flush limit of a spinning disk: a sequential rewrite after a flush waits
//!   about one revolution, ~120/s at 7,200 rpm, ~250/s at 15,000 rpm; more than
//!   [`MAX_SPINNING_FLUSHES_PER_S`] durable writes/s is not a platter;
//! - a busy device: more than [`BUSY_MIB_S`] MiB/s or [`BUSY_IOPS`] I/O/s during the sample;
//! - dirty memory waiting: [`DIRTY_PENDING_MIB`] MiB or more.

pub mod device;
pub mod flush;
pub mod mount;
pub mod system;
#[cfg(test)]
mod tests;

use serde::Serialize;

use super::{Facts, IoDelta};

pub const SAME_COST_RATIO: f64 = 1.25;
pub const MAX_SPINNING_FLUSHES_PER_S: f64 = 250.0;
pub const BUSY_MIB_S: f64 = 1.0;
pub const BUSY_IOPS: f64 = 50.0;
pub const DIRTY_PENDING_MIB: f64 = 64.0;
pub const READ_AHEAD_LARGE_KB: u64 = 4096;

/// How much a finding matters, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Pass,
    Info,
    Warn,
    Fail,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Pass, Level::Info, Level::Warn, Level::Fail];

    pub fn as_str(&self) -> &'static str {
        match self {
            Level::Pass => "PASS",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// What a finding is about, which decides where the report shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One device of a target (shown under the device).
    Device,
    /// A target's mount options (shown with the target's tests).
    Mount,
    /// The empirical flush tests (shown with them, even when about one disk).
    Tests,
    /// The machine.
    System,
}

/// One finding: a rule's code and level with what it said.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub code: &'static str,
    pub level: Level,
    pub scope: Scope,
    /// What was seen, one line.
    pub message: String,
    /// What to do next, one line.
    pub advice: String,
}

/// One finding, as a table entry: its code, the levels it can give and `judge`, which
/// says whether it applies to context `C` and, if so, what it says.
pub struct Rule<J> {
    pub code: &'static str,
    /// The levels it gives: the first unless `judge` says otherwise ([`Said::at`]).
    pub levels: &'static [Level],
    pub judge: J,
}

/// What a rule says when it applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    message: String,
    advice: String,
    /// Set by [`Said::at`] (one of the rule's `levels`); `None` means the first.
    level: Option<Level>,
}

impl Said {
    /// The level when it depends on the facts (one of the rule's `levels`).
    pub fn at(mut self, level: Level) -> Said {
        self.level = Some(level);
        self
    }
}

/// A rule applies: what was seen and what to do.
pub fn said(message: impl Into<String>, advice: impl Into<String>) -> Option<Said> {
    Some(Said {
        message: message.into(),
        advice: advice.into(),
        level: None,
    })
}

impl<J> Rule<J> {
    fn apply<C>(&self, scope: Scope, c: &C) -> Option<Finding>
    where
        J: Fn(&C) -> Option<Said>,
    {
        let s = (self.judge)(c)?;
        let level = s.level.unwrap_or(self.levels[0]);
        debug_assert!(self.levels.contains(&level), "{}: {level:?}", self.code);
        Some(Finding {
            code: self.code,
            level,
            scope,
            message: s.message,
            advice: s.advice,
        })
    }
}

/// Every rule's code and levels, in report order (for docs/commands/check.md's table and tests).
pub fn all() -> Vec<(&'static str, &'static [Level])> {
    fn codes<J>(t: &[Rule<J>]) -> impl Iterator<Item = (&'static str, &'static [Level])> + '_ {
        t.iter().map(|r| (r.code, r.levels))
    }
    codes(device::CACHE)
        .chain(codes(device::IO))
        .chain(codes(mount::MOUNT))
        .chain(codes(flush::TESTS))
        .chain(codes(flush::RATES))
        .chain(codes(system::SYSTEM))
        .collect()
}

/// A finding and where it belongs.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// Index of the target (argument); `None` for machine-wide findings.
    pub target: Option<usize>,
    /// The device it is about, if one.
    pub device: Option<String>,
    pub finding: Finding,
}

/// Microseconds as the findings print them.
fn us(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1} us")
    } else {
        format!("{v:.0} us")
    }
}

/// Whether a device did more I/O than [`BUSY_MIB_S`] or [`BUSY_IOPS`] during the sample.
fn is_busy(io: &IoDelta) -> bool {
    io.read_mib_s() + io.write_mib_s() > BUSY_MIB_S || io.iops() > BUSY_IOPS
}

/// Judges every fact: each table's rules in order, for each thing they look at.
pub fn judge(f: &Facts) -> Vec<Placed> {
    let mut out = vec![];
    let sample_s = f.system.sample_ns as f64 / 1e9;
    for (ti, t) in f.targets.iter().enumerate() {
        for d in &t.devices {
            let c = device::DeviceCtx {
                facts: f,
                target: t,
                dev: d,
                sample_s,
            };
            // A partition shares its whole disk's queue and cache: judge those once, on
            // the disk.
            let cache = if c.disk_listed() {
                &[][..]
            } else {
                device::CACHE
            };
            for r in cache.iter().chain(device::IO) {
                if let Some(x) = r.apply(Scope::Device, &c) {
                    out.push(Placed {
                        target: Some(ti),
                        device: Some(d.dev.name.clone()),
                        finding: x,
                    });
                }
            }
        }
        let at_target = |finding| Placed {
            target: Some(ti),
            device: None,
            finding,
        };
        if let Some(c) = mount::MountCtx::of(t) {
            out.extend(
                mount::MOUNT
                    .iter()
                    .filter_map(|r| r.apply(Scope::Mount, &c))
                    .map(at_target),
            );
        }
        let c = flush::TestsCtx::of(t);
        out.extend(
            flush::TESTS
                .iter()
                .filter_map(|r| r.apply(Scope::Tests, &c))
                .map(at_target),
        );
        for c in flush::RateCtx::of(&c) {
            for r in flush::RATES {
                if let Some(x) = r.apply(Scope::Tests, &c) {
                    out.push(Placed {
                        target: Some(ti),
                        device: Some(c.disk.disk.clone()),
                        finding: x,
                    });
                }
            }
        }
    }
    for r in system::SYSTEM {
        if let Some(x) = r.apply(Scope::System, f) {
            out.push(Placed {
                target: None,
                device: None,
                finding: x,
            });
        }
    }
    out
}

/// The exit code: 1 on any FAIL, or on any WARN with `--strict`; else 0.
pub fn exit_code(findings: &[Placed], strict: bool) -> i32 {
    let worst = findings.iter().map(|p| p.finding.level).max();
    match worst {
        Some(Level::Fail) => 1,
        Some(Level::Warn) if strict => 1,
        _ => 0,
    }
}
