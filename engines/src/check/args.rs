//! `diskpulse check`'s flags ([`CheckArgs`]) and the checks of the flags alone
//! ([`check_args`]), beside the library they drive, so `diskpulse run --dry-run` checks
//! a scenario's check phase exactly as the command would, without running it.

use std::time::Duration;

use clap::Args;
use format::cli::parse_duration;
use format::usage;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// A path on the file system to check (a directory or a file), or a block device
    /// (vda, /dev/loop0, 7:0). Repeatable.
    #[arg(value_name = "PATH|DEVICE", required = true)]
    pub targets: Vec<String>,
    /// Print JSON (fields in docs/commands/check.md) instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 on any WARN too (any FAIL always exits 1).
    #[arg(long)]
    pub strict: bool,
    /// Skip the empirical write tests (flush cost, fsync rate); read settings and
    /// sample other I/O only.
    #[arg(long)]
    pub quick: bool,
    /// For a DEVICE that is not mounted and holds no file system or partition table: run
    /// the write tests on the raw device (overwrites its first 4 MiB).
    #[arg(long)]
    pub allow_destructive: bool,
    /// How long to watch other processes' I/O and the devices' counters.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sample: Duration,
    /// How long each flush test writes.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub test_time: Duration,
}

/// The checks of the arguments alone (not of the targets): also for `diskpulse run
/// --dry-run`, which checks a scenario's check phases without running them.
pub fn check_args(a: &CheckArgs) -> anyhow::Result<()> {
    for (flag, v) in [("--sample", a.sample), ("--test-time", a.test_time)] {
        if v < Duration::from_millis(10) || v > Duration::from_secs(600) {
            return Err(usage!(
                "check: {flag} takes 10ms to 10m; got {}",
                format::cli::fmt_duration(v)
            ));
        }
    }
    Ok(())
}
