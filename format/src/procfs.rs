//! `meminfo.csv` and `cpu.csv`: /proc/meminfo and /proc/stat, every sample (written by
//! `recording::samplers`; header from here). `t_ns` is the sample's instant.
//!
//! - `meminfo.csv`: `t_ns,dirty_kib,writeback_kib,cached_kib,mem_available_kib` (KiB).
//! - `cpu.csv`: `t_ns,user_ticks,nice_ticks,system_ticks,idle_ticks,iowait_ticks,
//!   irq_ticks,softirq_ticks,steal_ticks,procs_running,procs_blocked`: cumulative USER_HZ
//!   ticks of all CPUs (`user_hz` in meta.json); the last two are gauges.

use std::path::Path;

pub use collectors::procstat::{CPU_COLUMNS, CPU_TICK_COLUMNS, MEM_COLUMNS};

use super::csv::{read_table_chunked, Table};

pub const MEMINFO_FILE: &str = "meminfo.csv";
pub const CPU_FILE: &str = "cpu.csv";

/// `t_ns` then `columns`: the header of a per-sample /proc file.
pub fn header(columns: &[&str]) -> String {
    let mut h = String::from("t_ns");
    for c in columns {
        h.push(',');
        h.push_str(c);
    }
    h
}

pub fn meminfo_columns() -> Vec<&'static str> {
    std::iter::once("t_ns").chain(MEM_COLUMNS).collect()
}

pub fn cpu_columns() -> Vec<&'static str> {
    std::iter::once("t_ns").chain(CPU_COLUMNS).collect()
}

/// Reads `meminfo.csv` or `cpu.csv` if the run has it (`t_ns` and at least one column),
/// with the reading's warnings (see [`super::csv::read_table`]).
/// A chunked recording's (`record --chunk`) closed chunks in `chunks/` are read first,
/// in order, as one file.
pub fn read(dir: &Path, file: &str) -> anyhow::Result<Option<(Table, Vec<String>)>> {
    let needed = if file == CPU_FILE {
        cpu_columns()
    } else {
        meminfo_columns()
    };
    read_table_chunked(dir, file, &needed)
}
