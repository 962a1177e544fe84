//! diskpulse's engines: what records, loads, starts and probes. The run session
//! (`recording`), the load generator (`load`), the broker processes (`broker`), the lab
//! volumes (`lab`), the fio-like probe and pg_test_fsync's questions (`probe`, `fsync`),
//! `check`, the latency proxy, the agents, the live metrics page and the export. They
//! write and read run directories only through the `format` crate, and see `report`
//! only where they show a run's figures (`live`, `export`).

pub mod agent;
pub mod broker;
pub mod check;
pub mod export;
pub mod fsync;
pub mod lab;
pub mod live;
pub mod load;
pub mod probe;
pub mod proxy;
pub mod recording;
pub mod signals;
