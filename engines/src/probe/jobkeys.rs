//! fio's job-level vocabulary in a job file: the options that say how a job runs among
//! the others (`stonewall`, `new_group`, `wait_for`, `startdelay`, `exitall`,
//! `invalidate`, `description`: read by `jobset.rs`, not `probe` flags), fio's inline
//! comments, its aliases, the options its JSON never lists, and the engines refused.
//! Everything here follows fio 3.33's `options.c`/`parse.c` (decision 0089).

use std::time::Duration;

use format::usage;

use super::jobfile::truthy;

/// fio's job-level options: how a job runs among the others. The job set reads them
/// (`jobset.rs`); they are not `probe` flags.
#[derive(Debug, Clone)]
pub(crate) struct JobSem {
    /// `stonewall` / `wait_for_previous`: wait for every earlier job, start a new group.
    pub stonewall: bool,
    /// `new_group`: a new reporting group, without waiting.
    pub new_group: bool,
    /// `wait_for=NAME`: start when the job NAME (an earlier one) has ended.
    pub wait_for: Option<(String, String)>,
    /// `description`: shown in the JSON's options, as fio shows it.
    pub description: Option<String>,
    /// `startdelay`: wait this long before starting.
    pub startdelay: Duration,
    /// `exitall`: when this job ends, the jobs of its group end too (fio's exit_what=group).
    pub exitall: bool,
    /// `invalidate` (fio's default 1): drop the file's page cache before the job starts.
    pub invalidate: bool,
}

impl Default for JobSem {
    fn default() -> JobSem {
        JobSem {
            stonewall: false,
            new_group: false,
            wait_for: None,
            description: None,
            startdelay: Duration::ZERO,
            exitall: false,
            invalidate: true,
        }
    }
}

/// fio's inline comments: everything from the first `;` and from the first `#` of a
/// line is dropped, then the blanks around it (fio's `strip_blank_end`), so
/// `runtime=3600  # Max runtime` is `runtime=3600`.
pub(super) fn strip_comment(line: &str) -> &str {
    let cut = line.find([';', '#']).unwrap_or(line.len());
    line[..cut].trim()
}

/// fio's options of type FIO_OPT_STR_SET (a bare flag): fio's JSON never lists them in
/// `job options` or `global options` (seen with fio 3.33), so neither do we.
pub(super) const FIO_SET_ONLY: &[&str] = &[
    "bs_unaligned",
    "norandommap",
    "time_based",
    "verify_only",
    "exitall",
    "exitall_on_error",
    "stonewall",
    "wait_for_previous",
    "new_group",
    "thread",
    "group_reporting",
    "zero_buffers",
    "refill_buffers",
];

/// fio's own aliases that are not `probe` flags' names.
pub(super) fn fio_alias(key: &str) -> &str {
    match key {
        // fio: `.name = "runtime", .alias = "timeout"`.
        "timeout" => "runtime",
        k => k,
    }
}

/// Engines fio has that diskpulse does not run, by kind, for a one-line refusal.
pub(super) fn engine_refusal(v: &str) -> Option<&'static str> {
    Some(match v {
        "net" | "netsplice" | "rdma" | "http" | "nbd" | "nfs" | "rados" | "rbd" | "gfapi"
        | "gfapi_async" | "libhdfs" | "dfs" | "libiscsi" | "xnvme" | "nvme" => {
            "a network or remote-storage engine; diskpulse probe runs local files and block devices"
        }
        "libcufile" | "gpudirect" => "a GPU engine; diskpulse probe runs CPU buffers only",
        "libzbc" => "a zoned-device engine; diskpulse probe does not run zoned devices",
        "windowsaio" | "solarisaio" => "an engine of another operating system",
        "mmap" | "splice" | "posixaio" | "sg" | "mtd" | "e4defrag" | "falloc" | "ftruncate"
        | "null" | "cpuio" | "exec" | "pmemblk" | "dev-dax" | "libpmem" | "filecreate"
        | "filestat" | "filedelete" | "dircreate" | "dirstat" | "dirdelete" | "guasi" => {
            "not an engine diskpulse probe runs"
        }
        e if e.starts_with("external") => "an external engine; diskpulse probe runs its own",
        _ => return None,
    })
}

/// The engines diskpulse probe runs, for refusals.
pub(super) const ENGINES_WE_RUN: &str = "sync, psync, vsync, pvsync, pvsync2, libaio, io_uring";

/// A job-level key (fio's, read by the job set): Ok(true) when `key` is one.
pub(super) fn job_key(
    sem: &mut JobSem,
    key: &str,
    value: Option<&str>,
    at: &str,
) -> anyhow::Result<bool> {
    let flag = |v: Option<&str>| -> anyhow::Result<bool> {
        match v.map(truthy) {
            None | Some(Some(true)) => Ok(true),
            Some(Some(false)) => Ok(false),
            Some(None) => Err(usage!(
                "{at}: {key} is a flag: write '{key}' or '{key}=1' (or '{key}=0')"
            )),
        }
    };
    let need = |v: Option<&str>| -> anyhow::Result<String> {
        v.filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| usage!("{at}: option '{key}' needs a value, like {key}=..."))
    };
    match key {
        "stonewall" | "wait_for_previous" => sem.stonewall = flag(value)?,
        "new_group" => sem.new_group = flag(value)?,
        "exitall" => sem.exitall = flag(value)?,
        "invalidate" => sem.invalidate = flag(value)?,
        "wait_for" => sem.wait_for = Some((need(value)?, at.to_string())),
        "description" => sem.description = Some(need(value)?),
        "startdelay" => {
            let v = need(value)?;
            sem.startdelay =
                super::args::parse_seconds(&v).map_err(|e| usage!("{at}: startdelay: {e}"))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// fio's own name of an option a line may spell with one of fio's aliases (fio 3.33's
/// options.c: `.name` for `.alias`), as its JSON `job options` show it.
pub(super) fn fio_name(key: &str) -> &str {
    match key {
        "readwrite" => "rw",
        "iodepth_batch_submit" => "iodepth_batch",
        "iodepth_batch_complete" => "iodepth_batch_complete_min",
        "io_limit" => "io_size",
        "fill_fs" => "fill_device",
        "fileoffset" => "offset",
        "blocksize" => "bs",
        "blockalign" => "ba",
        "blocksize_range" => "bsrange",
        "blocksize_unaligned" => "bs_unaligned",
        "allrandrepeat" => "randrepeat",
        "nr_files" => "nrfiles",
        "timeout" => "runtime",
        "ratemin" => "rate_min",
        "ratecycle" => "rate_cycle",
        "log_max_value" => "log_window_value",
        other => other,
    }
}
