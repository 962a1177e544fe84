//! Everything diskpulse reads from the operating system.
//!
//! std threads, no tokio, no NATS, no plotting. Each reader takes a root path for
//! `/proc` and `/sys` so tests can feed fixture trees. Readers return raw kernel
//! counters; rates are derived later by `report` (raw first, derived later).
//!
//! One of each OS fact, used by every command: [`mounts`] (the mount table), [`fstype`]
//! (statfs magic -> name), [`sysfs`] (block devices' counters and queue attributes),
//! [`gate`] (may this block device be overwritten?), [`durable`] (the timed durable-write
//! loop), [`exec`] (every external tool waited for, with a timeout), [`tracefs`] (sync calls and block requests from the kernel's tracepoints). meminfo, /proc/stat, /proc/PID/{io,stat,fd} and mountinfo lines are parsed by
//! procfs-core from buffers we read; the 1 ms diskstats path keeps its own parser
//! ([`diskstats`]; `cargo bench -p collectors --bench diskstats_vs_procfs` shows why).

pub mod check;
pub mod clock;
pub mod devices;
pub mod devnum;
pub mod directio;
pub mod diskstats;
pub mod durable;
pub mod exec;
pub mod fstype;
pub mod fsync;
pub mod gate;
pub mod mounts;
pub mod periodic;
pub mod probe;
pub mod procio;
pub mod procstat;
pub(crate) mod reread;
pub mod sysfs;
pub mod tracefs;
