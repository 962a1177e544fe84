//! A load that rides through a fault (issue 9): a real nats-server with a JetStream store
//! in a tempdir is SIGKILLed under `diskpulse load MODE` at 2 s and started again on the
//! same port and store at 4 s. The load must keep its --duration, resume once the server
//! is back, count the lost acks as timeouts, put the fault into summary.json (`faults`),
//! and lose nothing it counted as done: every acked message is in the stream, every
//! acked KV revision is readable. Needs `nats-server` on PATH (with `CI=true` a missing
//! one fails the test).

#[path = "../common/mod.rs"]
mod common;
mod harness;

mod core;
mod js_pub;
mod kv_obj;
