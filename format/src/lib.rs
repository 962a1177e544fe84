//! The recording format: one module per file of a run directory, each with its typed row
//! or document, its column list (one constant), its writer and its reader side by side.
//! Every other module (recording, load, probe, fsync, report, charts, HTML, the study)
//! writes and reads these files only through here.
//!
//! ## The clock
//! Every `t_ns` in every file is nanoseconds since the run's zero on `CLOCK_MONOTONIC`
//! (`meta.json` `clock_zero_monotonic_ns`; a child of `diskpulse record` gets it as
//! `DISKPULSE_CLOCK_ZERO_NS`). The same instant on the wall clock is
//! `meta.json` `clock_zero_unix_ns`, read next to the monotonic zero, so
//! `unix_ns = clock_zero_unix_ns + t_ns` (`rates.csv` carries that as `unix_ms`).
//!
//! ## Windowed rows: WINDOW START
//! A row that summarises a window (`load.csv`, `probe.csv`, `rates.csv`) has `t_ns` =
//! the START of its window and covers `[t_ns, t_ns + window_ns)`; `window_ns` is the
//! window's length in every file. Windows lie on one grid, multiples of `window_ns`
//! from the run's zero, so rows of different files with the same `t_ns` and
//! `window_ns` cover the same time. Where a source was active for only part of a window
//! (the first and last window of a load or probe), `active_ns` says how long.
//! `fsync.csv` rows are spans, not windows: `t_ns` (start) and `t_end_ns` (end).
//!
//! ## Versions
//! `meta.json` carries [`FORMAT_VERSION`]. Readers read version 3 and version 2 (the
//! same files without the `phase` column of `load.csv`/`probe.csv`, which reads as
//! empty, and without `load.hlog`/`probe.hlog`: readers check that they exist). They
//! refuse, with a message that says so, version 1 (it stamped `load.csv` and `probe.csv`
//! rows with the window END, and reading it as version 2 would shift every join by a
//! window) and newer versions.

pub mod agents;
pub mod atomic;
pub mod block_requests;
pub mod check;
pub mod chunklist;
pub mod cli;
pub mod csv;
pub mod diskstats;
pub mod envelopes;
pub mod events;
pub mod failure;
pub mod fsync;
pub mod fsync_calls;
pub mod hist;
pub mod load;
pub mod manifest;
pub mod meta;
pub mod monitor;
pub mod phases;
pub mod probe;
pub mod proc_io;
pub mod procfs;
pub mod rates;
pub mod redact;
pub mod regular;
pub mod study;
pub mod summary;
pub mod units;

/// The environment variable a scenario phase's child gets: the phase's index (meta.json
/// `phases[].index`), so rows that concurrent phases append to one file say whose they
/// are: `load.csv`/`probe.csv` put it in their `phase` column and the `.hlog` files in
/// their tags (`p3:write`). Unset outside a scenario.
pub const ENV_PHASE: &str = "DISKPULSE_PHASE";

/// The phase index from [`ENV_PHASE`]: `None` when unset or empty; an error naming the
/// variable when it is not a number.
pub fn phase_from_env() -> anyhow::Result<Option<u32>> {
    match std::env::var(ENV_PHASE) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v.trim().parse::<u32>().map(Some).map_err(|_| {
            anyhow::anyhow!(
                "{ENV_PHASE} takes a phase index like 3; got '{v}' (unset it outside a scenario)"
            )
        }),
        Err(_) => Ok(None),
    }
}

/// The run directory's format. 2: windowed rows stamped with the window start,
/// `active_ns` in load.csv/probe.csv, `clock_zero_unix_ns` in meta.json, `unix_ms` in
/// rates.csv. 3: `phase` in load.csv/probe.csv (rows of overlapping phases appended to
/// one file), `load.hlog`/`probe.hlog`.
pub const FORMAT_VERSION: u32 = 3;

/// The oldest version this diskpulse still reads.
const OLDEST_READABLE_VERSION: u32 = 2;

/// `Ok` for a recording this diskpulse reads; otherwise an error that names both versions.
fn check_version(found: u64) -> anyhow::Result<()> {
    if (OLDEST_READABLE_VERSION as u64..=FORMAT_VERSION as u64).contains(&found) {
        return Ok(());
    }
    let why = if found < FORMAT_VERSION as u64 {
        "an older diskpulse wrote it (version 1 stamped load.csv and probe.csv rows with the window end)"
    } else {
        "a newer diskpulse wrote it"
    };
    Err(anyhow::anyhow!(
        "recording format_version {found}, this diskpulse reads version {FORMAT_VERSION} (and back to {OLDEST_READABLE_VERSION}): {why}; report it with the diskpulse that recorded it"
    ))
}

/// The start of the window of length `window_ns` that holds `t_ns` (the grid of every
/// windowed file).
pub fn window_start(t_ns: u64, window_ns: u64) -> u64 {
    t_ns - t_ns % window_ns.max(1)
}
