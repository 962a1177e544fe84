//! A load's failures as summary.json and meta.json spell them (`Failure`), and a
//! failure kind in words (`kind_words`), the one vocabulary for both.

use serde::{Deserialize, Serialize};

/// One kind of failed operation of one load role: what it means, when on the run clock,
/// how many. Written by the load into meta.json (`load.roles[].failures`), copied into
/// summary.json by `report`; `line` is what `demo`, `load` and `run` print last.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Failure {
    /// The load role, e.g. `js-pub`.
    pub role: String,
    /// The error kind as the load records it, e.g. `insufficient_resources`.
    pub kind: String,
    /// The kind in words, e.g. `the store filled up`.
    pub what: String,
    pub count: u64,
    /// First and last failure of this kind on the run clock, s.
    pub first_s: f64,
    pub last_s: f64,
    /// `the store filled up at 2.4 s into the load (insufficient resources): 1,590,189
    /// publishes failed` (its time from the load's start; `first_s`/`last_s` on the run clock).
    pub line: String,
}

/// An error kind in words: what happened (the start of the loud line) and the kind
/// spelled for people. Unknown kinds read as themselves.
pub fn kind_words(kind: &str) -> (&'static str, String) {
    let what = match kind {
        "insufficient_resources" | "storage_full" | "memory_full" => "the store filled up",
        "stream_full" => "the stream reached its limits",
        "account_limits" => "the account reached its JetStream limits",
        "timeout" => "the server stopped answering",
        "no_pong" => "the server no longer answered",
        "no_responders" => "nothing served the subject",
        "not_found" => "reads asked for what was never written",
        "mismatch" | "digest_mismatch" => "data read back differed from what was written",
        "missing" => "messages were lost",
        "stream_not_found" => "the stream went away",
        "disconnected" | "connection" | "connection_lost" => "the connection broke",
        "nack" => "the broker refused messages",
        "lost_unconfirmed" => "publishes were never confirmed",
        "not_sent" => "operations due by the schedule were never sent",
        "duplicate" => "messages were delivered twice",
        "broker_error" => "the broker closed the channel",
        _ => "operations failed",
    };
    (what, kind.replace('_', " "))
}
