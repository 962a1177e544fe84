//! `diskpulse check PATH|DEVICE...`: everything to know before a benchmark.
//!
//! Exit codes: 0 nothing worse than INFO/PASS (or WARN without `--strict`); 1 any FAIL,
//! or any WARN with `--strict`; 2 bad usage (unknown device, a path with no block
//! device such as tmpfs, a missing path); 130 interrupted (the test file is removed).
//! See `src/check/` for the stages and the findings.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use collectors::check::flush;

use engines::check::{self, check_args, render, rules, CheckArgs, Options};

pub fn run(a: CheckArgs) -> anyhow::Result<i32> {
    check_args(&a)?;
    let o = Options {
        quick: a.quick,
        allow_destructive: a.allow_destructive,
        sample: a.sample,
        flush: flush::Config {
            time_per_mode: a.test_time,
            ..Default::default()
        },
        sysfs: PathBuf::from("/sys"),
        procfs: PathBuf::from("/proc"),
    };
    // All input is checked before anything is measured or written.
    let targets = check::resolve_all(&a.targets, &o)?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    if !a.json && std::io::stderr().is_terminal() {
        let tests = if a.quick {
            String::new()
        } else {
            format!(
                ", then flush tests ({} per mode)",
                ::format::cli::fmt_duration(a.test_time)
            )
        };
        eprintln!(
            "diskpulse check: watching I/O for {}{tests}...",
            ::format::cli::fmt_duration(a.sample)
        );
    }
    let facts = check::gather(targets, &o, &stop);
    let found = rules::judge(&facts);
    let mut code = rules::exit_code(&found, a.strict);
    if facts.interrupted || stop.load(Ordering::Relaxed) {
        code = 130;
    }
    let mut text = if a.json {
        // Through a Value: every object's keys print sorted, as they always have.
        serde_json::to_string_pretty(&serde_json::to_value(render::json(&facts, &found, code))?)?
    } else {
        render::human(&facts, &found, code)
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(anyhow::Error::new(e).context("writing the report to stdout"));
        }
    }
    Ok(code)
}
