//! Everything diskpulse reads from the operating system.
//!
//! std threads, no tokio, no NATS, no plotting. Each reader takes a root path for
//! `/proc` and `/sys` so tests can feed fixture trees. Readers return raw kernel
//! counters; rates are derived later by `report` (raw first, derived later).

pub mod check;
pub mod clock;
pub mod devices;
pub mod directio;
pub mod diskstats;
pub mod durable;
pub mod fstype;
pub mod fsync;
pub mod gate;
pub mod mounts;
pub mod periodic;
pub mod probe;
pub mod procstat;
pub mod sysfs;
