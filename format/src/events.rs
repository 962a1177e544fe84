//! `events.jsonl`: one JSON object a line, `{"t_ns":..,"kind":..,"detail":{..}}`, written
//! by `recording::EventLog` (each event written and flushed at once: a crash loses
//! none). `t_ns` is the event's instant on the run clock. Kinds are listed in
//! docs/files.md; each is one variant of [`Body`], its `detail` a struct of the fields it has.
//!
//! ## What must stay true
//! - A line is byte-identical to what the `serde_json::json!` literals of the writers
//!   wrote before [`Body`] existed. serde_json here has no `preserve_order`, so those
//!   literals wrote `detail`'s keys sorted: every detail struct declares its fields in
//!   alphabetical order (nested objects too), integers stay integers and milliseconds
//!   `f64`. A field some writers leave out is skipped when `None`; a field written as
//!   `null` is a plain `Option` (never skipped); a field that is left out by one writer
//!   and `null` from another is `Option<Option<_>>` (outer `None`: absent).
//! - Reading never fails on a kind or a field it does not know: an unknown kind, or a
//!   known kind whose detail does not match its struct (a field missing, of another
//!   type, or one more than the struct has: structs deny unknown fields so that nothing
//!   read is dropped), reads as [`Body::Other`] with the detail as it was. A known
//!   kind whose detail only lacks fields (an older or hand-written file) reads as its
//!   variant with those fields at their defaults (`""`, 0, false, `null`).
//!
//! Long because it is the whole vocabulary: one struct per event kind (56), each a few
//! fields, and its tests (from `mod tests` on) read real lines of every kind back.

use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::csv::{for_each_line, Bad, MAX_T_NS};

pub const FILE: &str = "events.jsonl";

/// One line of events.jsonl: when and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub t_ns: u64,
    pub body: Body,
}

impl Event {
    /// The line's `kind` (`phase_start`, `error`, ...; an unknown one as it was written).
    pub fn kind(&self) -> &str {
        self.body.kind()
    }

    /// The line's `detail` as JSON (for showing it as it is; read fields from [`Body`]).
    pub fn detail(&self) -> Value {
        self.body.detail()
    }

    /// The line's `detail` as one line of JSON text, as written (keys sorted), for showing
    /// it to a reader (report.html's events table); empty when the kind has none (`{}`).
    pub fn detail_text(&self) -> String {
        match self.detail() {
            Value::Object(m) if m.is_empty() => String::new(),
            Value::Null => String::new(),
            d => d.to_string(),
        }
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Line<'a> {
            t_ns: u64,
            #[serde(flatten)]
            body: &'a Body,
        }
        Line {
            t_ns: self.t_ns,
            body: &self.body,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        #[derive(Deserialize)]
        struct Line {
            t_ns: u64,
            kind: String,
            #[serde(default)]
            detail: Value,
        }
        let l = Line::deserialize(d)?;
        Ok(Event {
            t_ns: l.t_ns,
            body: Body::parse(l.kind, l.detail),
        })
    }
}

/// Deserializes a field that is there (`null` included) as `Some`: with
/// `#[serde(default)]`, `Option<Option<T>>` tells a left-out field (`None`) from a `null`
/// (`Some(None)`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Declares [`Body`]: one variant per kind, its detail struct, and the kind's name once.
macro_rules! bodies {
    ($($(#[$doc:meta])* $kind:literal => $variant:ident($detail:ty),)*) => {
        /// What happened: one variant per event kind, each with its detail's fields (see
        /// the module for how they are written and read).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", content = "detail")]
        pub enum Body {
            $($(#[$doc])* #[serde(rename = $kind)] $variant($detail),)*
            /// A kind this version does not know, or a known kind whose detail does not
            /// match its struct: kept as it was read (and written back the same).
            #[serde(untagged)]
            Other {
                kind: String,
                #[serde(default)]
                detail: Value,
            },
        }

        impl Body {
            /// Every kind this version knows, in [`Body`]'s order.
            #[cfg(test)]
            const KINDS: &'static [&'static str] = &[$($kind),*];

            /// A known kind's detail with every field at its default (`""`, 0, false,
            /// `null`, or left out), as written; `None` for a kind this version does not
            /// know.
            fn default_detail(kind: &str) -> Option<Value> {
                match kind {
                    $($kind => serde_json::to_value(<$detail as Default>::default()).ok(),)*
                    _ => None,
                }
            }

            /// The `kind` written for this body.
            pub fn kind(&self) -> &str {
                match self {
                    $(Body::$variant(_) => $kind,)*
                    Body::Other { kind, .. } => kind,
                }
            }
        }
    };
}

bodies! {
    /// `record --agents` got a source's first batch.
    "agent_first_batch" => AgentFirstBatch(AgentFirstBatch),
    /// `record --agents` asked an agent for a gap again.
    "agent_resend" => AgentResend(AgentResend),
    /// A scenario's agents all answered.
    "agents_ready" => AgentsReady(AgentsReady),
    /// An AMQP client saw its connection break.
    "amqp_disconnected" => AmqpDisconnected(AmqpDisconnected),
    /// An AMQP client connected again.
    "amqp_reconnected" => AmqpReconnected(AmqpReconnect),
    /// An AMQP client gave up reconnecting (after 60 s, or the run stopped).
    "amqp_reconnect_failed" => AmqpReconnectFailed(AmqpReconnect),
    /// An embedded server exited during a `load` or `demo`.
    "broker_died" => BrokerDied(BrokerDied),
    /// A RabbitMQ VM or epmd a crashed run left on the store, killed at the next start.
    "broker_leftover_killed" => BrokerLeftoverKilled(BrokerLeftoverKilled),
    /// A restarting nats-server's log line about recovering its store.
    "broker_log" => BrokerLog(BrokerLog),
    /// A server could not bind its ports: started again on fresh ones.
    "broker_port_clash" => BrokerPortClash(BrokerPortClash),
    /// A server answers (JetStream, or AMQP).
    "broker_ready" => BrokerReady(BrokerReady),
    /// A server was spawned.
    "broker_start" => BrokerStart(BrokerStart),
    /// A server stopped (or was found exited).
    "broker_stop" => BrokerStop(BrokerStop),
    /// `record --keep` dropped a chunk.
    "chunk_dropped" => ChunkDropped(ChunkDropped),
    /// A cluster (or one node of it, started again) is ready.
    "cluster_ready" => ClusterReady(ClusterReady),
    /// `diskpulse record`'s command exited.
    "command_exit" => CommandExit(CommandExit),
    /// `diskpulse record`'s command was started.
    "command_start" => CommandStart(CommandStart),
    /// `diskpulse record` stopped its command (the run's end came first).
    "command_stopped" => CommandStopped(NoDetail),
    /// A sampled device appeared.
    "device_appeared" => DeviceAppeared(DeviceAppeared),
    /// A device that was gone is back.
    "device_back" => DeviceBack(DeviceBack),
    /// A sampled device is gone.
    "device_gone" => DeviceGone(DeviceGone),
    /// A scenario phase dropped the page cache.
    "drop_caches" => DropCaches(DropCaches),
    /// Something failed; the run went on.
    "error" => Error(Error),
    /// A client's first operation that succeeded after a reconnect (`t_ns`: its completion).
    "first_ack_after_reconnect" => FirstAckAfterReconnect(AckAfterReconnect),
    /// `pub --sub M`: publishers wait for their subscribers.
    "flow_control" => FlowControl(FlowControl),
    /// A subscriber the publishers stopped waiting for.
    "flow_control_left_behind" => FlowControlLeftBehind(FlowControlLeftBehind),
    /// `diskpulse record` was interrupted.
    "interrupted" => Interrupted(NoDetail),
    /// Workers' windows that came late, counted in the first row not yet written.
    "load_late_windows" => LoadLateWindows(LoadLateWindows),
    /// A load began.
    "load_start" => LoadStart(LoadStart),
    /// A load ended.
    "load_stop" => LoadStop(NoDetail),
    /// A detached loop device bound again; its rows go on.
    "loop_attached" => LoopAttached(LoopAttached),
    /// `cast --reply`: requests sent that no responder served.
    "missing" => Missing(Missing),
    /// A monitored server answers again.
    "monitor_back" => MonitorBack(MonitorBack),
    /// The broker monitor began polling.
    "monitor_start" => MonitorStart(MonitorStart),
    /// The broker monitor stopped, with what it polled.
    "monitor_stop" => MonitorStop(MonitorStop),
    /// js-pub `--msg-id`: what the retry of the lost publishes found.
    "msg_id_retry" => MsgIdRetry(MsgIdRetry),
    /// A NATS client's connection event (`connected`, `disconnected`, ...).
    "nats_client" => NatsClient(NatsClient),
    /// The run ended before a reconnected client's operation succeeded.
    "no_ack_after_reconnect" => NoAckAfterReconnect(AckAfterReconnect),
    /// A scenario phase killed a node.
    "node_kill" => NodeKill(NodeKill),
    /// A scenario phase stopped a node.
    "node_stop" => NodeStop(NodeStop),
    /// A phase ended.
    "phase_end" => PhaseEnd(Phase),
    /// A phase began.
    "phase_start" => PhaseStart(Phase),
    /// Time 0 of a probe (and of `--write-lat-log`'s files).
    "probe_start" => ProbeStart(ProbeStart),
    /// A sampled broker process ended; its last row is its last sample.
    "proc_io_gone" => ProcIoGone(ProcIoGone),
    /// A broker node started again mid-run, sampled and traced from then on.
    "process_watched" => ProcessWatched(ProcessWatched),
    /// The load goes through latency proxies.
    "proxy" => Proxy(Proxy),
    /// The recording began.
    "record_start" => RecordStart(NoDetail),
    /// The recording stopped.
    "record_stop" => RecordStop(NoDetail),
    /// A scenario phase started a node again.
    "restart" => Restart(Restart),
    /// A node started again answers.
    "restart_ready" => RestartReady(RestartReady),
    /// When the nodes stop, one per embedded node: its store's file system.
    "store_volume" => StoreVolume(StoreVolume),
    /// `record --trace` lost events in the kernel.
    "trace_lost" => TraceLost(TraceLost),
    /// `record --trigger` fired (or `kill -USR1`).
    "trigger" => Trigger(Trigger),
}

impl Body {
    /// An `error` event: where it happened (`source`), its kind and what it says.
    pub fn error(source: &str, kind: &str, message: &str) -> Body {
        Body::Error(Error {
            kind: kind.to_string(),
            message: message.to_string(),
            source: source.to_string(),
            ..Default::default()
        })
    }

    /// The body of a line: its typed variant, or [`Body::Other`] when `kind` is not
    /// known or `detail` does not match it.
    pub fn parse(kind: String, detail: Value) -> Body {
        let line = Value::Object(
            [
                ("kind".to_string(), Value::String(kind)),
                ("detail".to_string(), detail),
            ]
            .into_iter()
            .collect(),
        );
        match Body::deserialize(&line) {
            Ok(Body::Other { kind, detail }) => Body::lenient(kind, detail),
            Ok(b) => b,
            Err(_) => {
                // Not reached (Other takes any kind and detail), but never lose a line.
                let Value::Object(mut m) = line else {
                    unreachable!("built as an object above")
                };
                let detail = m.remove("detail").unwrap_or_default();
                match m.remove("kind") {
                    Some(Value::String(kind)) => Body::Other { kind, detail },
                    _ => Body::Other {
                        kind: String::new(),
                        detail,
                    },
                }
            }
        }
    }

    /// A known kind whose detail lacks fields (an older or hand-written file: `restart`
    /// with only its `node`) as its variant, the missing fields at their defaults; still
    /// [`Body::Other`] when a field is of another type or one the kind does not have.
    fn lenient(kind: String, detail: Value) -> Body {
        let (Some(Value::Object(mut full)), Value::Object(given)) =
            (Body::default_detail(&kind), &detail)
        else {
            return Body::Other { kind, detail };
        };
        for (k, v) in given {
            full.insert(k.clone(), v.clone());
        }
        let line = serde_json::json!({"kind": kind, "detail": Value::Object(full)});
        match Body::deserialize(&line) {
            Ok(Body::Other { .. }) | Err(_) => Body::Other { kind, detail },
            Ok(b) => b,
        }
    }

    /// The broker node a scenario's node phase acted on (`node_stop`, `node_kill`,
    /// `restart`, `restart_ready`, `broker_log`); `None` for every other kind.
    pub fn node(&self) -> Option<&str> {
        match self {
            Body::NodeStop(NodeStop { node })
            | Body::NodeKill(NodeKill { node, .. })
            | Body::Restart(Restart { node, .. })
            | Body::RestartReady(RestartReady { node, .. })
            | Body::BrokerLog(BrokerLog { node, .. }) => Some(node),
            _ => None,
        }
    }

    /// The `detail` as JSON, as it is written.
    pub fn detail(&self) -> Value {
        match self {
            Body::Other { detail, .. } => detail.clone(),
            b => serde_json::to_value(b)
                .ok()
                .and_then(|mut v| v.get_mut("detail").map(Value::take))
                .unwrap_or_default(),
        }
    }
}

/// The detail of a kind that has none: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoDetail {}

// The detail structs, their fields in alphabetical order (see the module).

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFirstBatch {
    pub node: String,
    pub seq: u64,
    pub source: String,
}

/// Batches `from..=to` of a node's source, asked for again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentResend {
    pub from: u64,
    pub node: String,
    pub source: String,
    pub to: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsReady {
    pub nodes: Vec<String>,
    pub waited_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpDisconnected {
    pub client: String,
    pub error: String,
    pub role: String,
}

/// `amqp_reconnected` (no `error`) and `amqp_reconnect_failed` (the last `error`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpReconnect {
    pub attempts: u64,
    pub client: String,
    pub down_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub role: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerDied {
    pub name: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerLeftoverKilled {
    pub kind: String,
    pub node: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerLog {
    pub line: String,
    pub node: String,
}

/// nats-server: `client_port`, `monitor_port`, `cluster_port` (`null` alone); RabbitMQ:
/// `kind` `rabbitmq` and `amqp_port`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerPortClash {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp_port: Option<u16>,
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_port: Option<Option<u16>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_port: Option<u16>,
    pub name: String,
}

/// `kind` `rabbitmq` for a RabbitMQ node, left out for nats-server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerReady {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    pub pid: u32,
    pub ready_ms: f64,
}

/// nats-server: `client_port`, `monitor_port`, `cluster_port`; RabbitMQ: `kind`
/// `rabbitmq`, `node`, `epmd_pid` and the AMQP, distribution, epmd and Prometheus ports.
/// `start` counts the node's starts from 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerStart {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp_port: Option<u16>,
    pub binary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_port: Option<Option<u16>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dist_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epmd_pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epmd_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_port: Option<u16>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prometheus_port: Option<u16>,
    pub start: u32,
    pub version: String,
}

/// `how` it stopped (`sigterm`, `sigkill`, `exited_early`, `start_timeout`, ...), its
/// exit `status` (`null` when none was reaped; left out at a start timeout) and how long
/// stopping took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerStop {
    pub how: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    pub pid: u32,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkDropped {
    pub file: String,
    pub first_t_ns: u64,
    pub last_t_ns: u64,
    pub rows: u64,
}

/// At the start: `cluster_name`, `ready_ms`; after nodes started again: `restarted`
/// (one name, or the names of several started at once) and `current_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterReady {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_name: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_ms: Option<f64>,
    pub meta_leader: Option<String>,
    pub nodes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted: Option<Restarted>,
}

/// The node (or nodes) a `cluster_ready` came after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Restarted {
    One(String),
    Many(Vec<String>),
}

/// The command's exit code (`null` when a signal ended it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandExit {
    pub status: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandStart {
    pub argv: Vec<String>,
    pub pid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceAppeared {
    pub device: String,
    pub major: u32,
    pub minor: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceBack {
    pub device: String,
}

/// `why` when a loop device was detached: `loop device detached (it was bound to FILE)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceGone {
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// How long dropping the page cache took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropCaches {
    pub ms: f64,
}

/// `source` (`monitor`, `trace`, `load`, ...), its `kind` of failure and `message`; the
/// monitor's also the `server` and `url` it could not reach.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Error {
    pub kind: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A reconnected client's operations: when it saw the new connection, how long until the
/// first success (`null`: none before the run ended), what failed meanwhile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckAfterReconnect {
    pub after_reconnect_ns: Option<u64>,
    pub client: String,
    pub failed: u64,
    pub reconnect_ns: u64,
    pub role: String,
    pub timeouts: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowControl {
    pub subscribers: u64,
    pub window_msgs: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowControlLeftBehind {
    pub client: String,
    pub received: u64,
    pub sent: u64,
    pub stalled_ns: u64,
    pub window: u64,
}

/// Windows that came more than `max_hold_ms` after their end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadLateWindows {
    pub max_hold_ms: u64,
    pub windows: u64,
}

/// NATS: `mode`, `clients`, `servers`; AMQP also `broker`, `queue`, `queue_type`,
/// `persistent`. Servers' URLs without their passwords.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadStart {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker: Option<String>,
    pub clients: u64,
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_type: Option<String>,
    pub servers: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopAttached {
    pub backing_file: Option<String>,
    pub device: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Missing {
    pub missing: u64,
    pub sent: u64,
    pub served: u64,
}

/// The polls that failed during the outage (nats-server's monitor only) and its length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorBack {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_polls: Option<u64>,
    pub outage_ms: f64,
    pub server: String,
    pub url: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorStart {
    pub interval_us: u64,
    pub servers: Vec<MonitorServer>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorServer {
    pub server: String,
    pub url: String,
}

/// nats-server's monitor: `interval_us` and per server its `/varz` and `/jsz` rows;
/// RabbitMQ's: its `rows`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorStop {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_us: Option<u64>,
    pub servers: Vec<ServerPolls>,
}

/// One server's polls: attempted, failed, skipped (the one before ran past their
/// deadline), the outages, the rows written, the slowest poll.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPolls {
    pub failed_polls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jsz_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_us_max: Option<u64>,
    pub polls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    pub server: String,
    pub skipped: u64,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub varz_rows: Option<u64>,
}

/// Publishes whose ack never came (`lost`), of those the ones the stream held already
/// (`lost_stored`) and the ones stored now (`republished`), retries without an ack
/// either, the stream's messages after the retry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgIdRetry {
    pub lost: u64,
    pub lost_stored: u64,
    pub msgs_final: Option<u64>,
    pub republished: u64,
    pub retry_failed: u64,
}

/// A raw subscriber's disconnection also says how many messages it had `received`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsClient {
    pub client: String,
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeKill {
    pub node: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeStop {
    pub node: String,
}

/// A scenario's phase: `index`, `phase` and `name` (its label), `kind`, at the start its
/// `args`, at the end `ok` and `stopped`; `demo`'s one phase only `phase`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<bool>,
}

/// The probe's phase number, its ramp and `--write-lat-log`'s prefix (`null`: none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeStart {
    pub lat_log: Option<String>,
    pub phase: Option<u32>,
    pub ramp_ns: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcIoGone {
    pub comm: String,
    pub pid: u32,
    pub why: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessWatched {
    pub name: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proxy {
    pub delay_ms: f64,
    pub jitter_ms: f64,
    pub proxies: Vec<ProxyRoute>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyRoute {
    pub listen: String,
    pub upstream: String,
}

/// `after` the phase kind that took it down (`stop`, `kill`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restart {
    pub after: String,
    pub drop_caches: bool,
    pub node: String,
}

/// Milliseconds until the node was current, and healthy (`null`: never within the wait).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartReady {
    pub current_ms: f64,
    pub healthy_ms: Option<f64>,
    pub node: String,
}

/// statvfs of a node's store (`free_bytes`: free for non-root); the mount it is on
/// (`null`s when /proc/self/mountinfo does not say).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreVolume {
    pub device: Option<String>,
    pub free_bytes: u64,
    pub fstype: Option<String>,
    pub mount: Option<String>,
    pub node: String,
    pub size_bytes: u64,
    pub store_dir: String,
    pub used_bytes: u64,
    pub used_pct: f64,
}

/// Events lost since the previous `trace_lost`, and in all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLost {
    pub lost_events: u64,
    pub total: u64,
}

/// The condition (`trigger`) and the window kept. A device's: `device`, `value` (MiB/s
/// or ms), `span_ns` (the window measured); an ack latency's: `role`, `value` (ms),
/// `window_ns` (its load.csv row) and `seen_t_ns`; `kill -USR1`: only the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub keep_from_t_ns: u64,
    pub keep_to_t_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_t_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_ns: Option<u64>,
    pub trigger: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_ns: Option<u64>,
}

/// Reads events.jsonl (empty when the run has none). A line that is not an event (or
/// whose `t_ns` is past [`super::csv::MAX_T_NS`]) is skipped and a cut-off last line
/// left out, each with a warning naming file:line; a first line that is not an event
/// refuses the file (it is not diskpulse's).
pub fn read_noted(dir: &Path) -> anyhow::Result<(Vec<Event>, Vec<String>)> {
    let p = dir.join(FILE);
    let mut events = vec![];
    super::regular::check(&p).map_err(anyhow::Error::msg)?;
    if !p.exists() || std::fs::metadata(&p).is_ok_and(|m| m.len() == 0) {
        return Ok((events, vec![]));
    }
    let warnings = for_each_line(&p, |_, line| {
        let e = serde_json::from_str::<Event>(line)
            .map_err(|e| Bad::Line(format!("not an event ({e})")))?;
        if e.t_ns > MAX_T_NS {
            return Err(Bad::Line(format!(
                "t_ns {} is past the {} days a report reads",
                e.t_ns,
                super::csv::MAX_DAYS
            )));
        }
        events.push(e);
        Ok(())
    })?;
    Ok((events, warnings))
}

/// [`read_noted`] without the warnings.
pub fn read(dir: &Path) -> anyhow::Result<Vec<Event>> {
    Ok(read_noted(dir)?.0)
}

/// One `store_volume` event in words: `store of node n1 (/mnt/x/store) on /dev/loop3
/// (ext4) was 76% full (28.0 MiB used of 40.0 MiB, 9.2 MiB free)`. No quote marks: the
/// line goes into report.html as it is.
pub fn store_volume_line(v: &StoreVolume) -> String {
    let s = |o: &Option<String>| o.clone().unwrap_or_else(|| "?".to_string());
    format!(
        "store of node {} ({}) on {} ({}) was {:.0}% full ({} used of {}, {} free)",
        v.node,
        v.store_dir,
        s(&v.device),
        s(&v.fstype),
        v.used_pct,
        crate::units::bytes(v.used_bytes as f64),
        crate::units::bytes(v.size_bytes as f64),
        crate::units::bytes(v.free_bytes as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Body {
        serde_json::from_str::<Event>(line).unwrap().body
    }

    #[test]
    fn a_detail_that_only_lacks_fields_reads_as_its_kind_and_a_wrong_one_does_not() {
        let b = read(r#"{"t_ns":1,"kind":"restart","detail":{"node":"n1"}}"#);
        assert_eq!(
            b,
            Body::Restart(Restart {
                node: "n1".into(),
                ..Default::default()
            })
        );
        assert_eq!(b.node(), Some("n1"));
        // A field of another type, or one the kind does not have: kept as it was.
        for line in [
            r#"{"t_ns":1,"kind":"restart","detail":{"node":1}}"#,
            r#"{"t_ns":1,"kind":"restart","detail":{"node":"n1","colour":"red"}}"#,
        ] {
            assert!(matches!(read(line), Body::Other { .. }), "{line}");
        }
    }

    #[test]
    fn a_store_volume_reads_as_one_line() {
        let d = StoreVolume {
            node: "n1".into(),
            store_dir: "/m/s".into(),
            device: Some("/dev/loop3".into()),
            fstype: Some("ext4".into()),
            size_bytes: 40u64 << 20,
            used_bytes: 30u64 << 20,
            free_bytes: 10u64 << 20,
            used_pct: 75.0,
            ..Default::default()
        };
        let l = super::store_volume_line(&d);
        assert!(
            l.starts_with("store of node n1 (/m/s) on /dev/loop3 (ext4) was 75% full ("),
            "{l}"
        );
    }

    /// One body of every kind, the optional fields filled in some and not in others.
    fn one_of_each() -> Vec<Body> {
        let s = |x: &str| Some(x.to_string());
        vec![
            Body::AgentFirstBatch(AgentFirstBatch {
                node: "n1".into(),
                seq: 3,
                source: "diskstats".into(),
            }),
            Body::AgentResend(AgentResend {
                from: 4,
                to: 9,
                ..Default::default()
            }),
            Body::AgentsReady(AgentsReady {
                nodes: vec!["a".into(), "b".into()],
                waited_ms: 12.5,
            }),
            Body::AmqpDisconnected(AmqpDisconnected::default()),
            Body::AmqpReconnected(AmqpReconnect {
                attempts: 2,
                down_ms: 1.0,
                ..Default::default()
            }),
            Body::AmqpReconnectFailed(AmqpReconnect {
                error: s("the run was stopped"),
                ..Default::default()
            }),
            Body::BrokerDied(BrokerDied::default()),
            Body::BrokerLeftoverKilled(BrokerLeftoverKilled::default()),
            Body::BrokerLog(BrokerLog::default()),
            Body::BrokerPortClash(BrokerPortClash {
                cluster_port: Some(None),
                client_port: Some(4222),
                monitor_port: Some(8222),
                ..Default::default()
            }),
            Body::BrokerReady(BrokerReady {
                kind: s("rabbitmq"),
                ready_ms: 0.5,
                ..Default::default()
            }),
            Body::BrokerStart(BrokerStart {
                epmd_pid: Some(7),
                node: s("rabbit@h"),
                ..Default::default()
            }),
            Body::BrokerStop(BrokerStop {
                status: Some(None),
                stop_ms: Some(3.25),
                ..Default::default()
            }),
            Body::ChunkDropped(ChunkDropped::default()),
            Body::ClusterReady(ClusterReady {
                restarted: Some(Restarted::Many(vec!["n1".into(), "n2".into()])),
                current_ms: Some(9.0),
                meta_leader: s("n2"),
                ..Default::default()
            }),
            Body::CommandExit(CommandExit { status: Some(1) }),
            Body::CommandStart(CommandStart::default()),
            Body::CommandStopped(NoDetail {}),
            Body::DeviceAppeared(DeviceAppeared::default()),
            Body::DeviceBack(DeviceBack::default()),
            Body::DeviceGone(DeviceGone {
                why: s("loop device detached (it was bound to /x)"),
                ..Default::default()
            }),
            Body::DropCaches(DropCaches { ms: 2.0 }),
            Body::error("trace", "unavailable", "no bpftrace"),
            Body::FirstAckAfterReconnect(AckAfterReconnect {
                after_reconnect_ns: Some(5),
                ..Default::default()
            }),
            Body::FlowControl(FlowControl::default()),
            Body::FlowControlLeftBehind(FlowControlLeftBehind::default()),
            Body::Interrupted(NoDetail {}),
            Body::LoadLateWindows(LoadLateWindows::default()),
            Body::LoadStart(LoadStart {
                broker: s("rabbitmq"),
                persistent: Some(true),
                ..Default::default()
            }),
            Body::LoadStop(NoDetail {}),
            Body::LoopAttached(LoopAttached::default()),
            Body::Missing(Missing::default()),
            Body::MonitorBack(MonitorBack::default()),
            Body::MonitorStart(MonitorStart {
                interval_us: 250_000,
                servers: vec![MonitorServer::default()],
            }),
            Body::MonitorStop(MonitorStop {
                interval_us: Some(1),
                servers: vec![ServerPolls {
                    rows: Some(3),
                    ..Default::default()
                }],
            }),
            Body::MsgIdRetry(MsgIdRetry::default()),
            Body::NatsClient(NatsClient {
                received: Some(10),
                ..Default::default()
            }),
            Body::NoAckAfterReconnect(AckAfterReconnect::default()),
            Body::NodeKill(NodeKill::default()),
            Body::NodeStop(NodeStop::default()),
            Body::PhaseEnd(Phase {
                ok: Some(false),
                ..Default::default()
            }),
            Body::PhaseStart(Phase {
                args: Some(vec!["js-pub".into()]),
                index: Some(0),
                ..Default::default()
            }),
            Body::ProbeStart(ProbeStart::default()),
            Body::ProcIoGone(ProcIoGone::default()),
            Body::ProcessWatched(ProcessWatched::default()),
            Body::Proxy(Proxy {
                proxies: vec![ProxyRoute::default()],
                ..Default::default()
            }),
            Body::RecordStart(NoDetail {}),
            Body::RecordStop(NoDetail {}),
            Body::Restart(Restart::default()),
            Body::RestartReady(RestartReady::default()),
            Body::StoreVolume(StoreVolume::default()),
            Body::TraceLost(TraceLost::default()),
            Body::Trigger(Trigger {
                value: Some(f64::MAX),
                ..Default::default()
            }),
            Body::Other {
                kind: "from_a_newer_version".into(),
                detail: serde_json::json!({"x": [1, 2]}),
            },
        ]
    }

    #[test]
    fn every_kind_round_trips() {
        let all = one_of_each();
        let kinds: Vec<&str> = all.iter().map(Body::kind).collect();
        for k in Body::KINDS {
            assert!(kinds.contains(k), "no {k} in one_of_each");
        }
        for (i, body) in all.into_iter().enumerate() {
            let e = Event {
                t_ns: i as u64,
                body,
            };
            let line = serde_json::to_string(&e).unwrap();
            let back: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(back, e, "{line}");
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
            assert!(
                line.starts_with(&format!(
                    "{{\"t_ns\":{i},\"kind\":\"{}\",\"detail\":",
                    e.kind()
                )),
                "{line}"
            );
        }
    }

    /// A line parses to its typed variant (not `Other`) and is written back byte for byte
    /// as the writers before `Body` wrote it, the detail a `serde_json::Value`. (serde_json, without
    /// its `float_roundtrip` feature, may read a float's last digits a little off, e.g.
    /// `11.298347999999999` as `11.298348`: both sides go through that same reading.)
    fn reads_typed_and_back(line: &str) {
        let e: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(
            !matches!(e.body, Body::Other { .. }),
            "{line} read as Other"
        );
        /// The line type of the writers before `Body`: the detail a `Value`.
        #[derive(Serialize, Deserialize)]
        struct Before {
            t_ns: u64,
            kind: String,
            detail: Value,
        }
        let b: Before = serde_json::from_str(line).unwrap();
        let before = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::to_string(&e).unwrap(), before);
        if !line.contains('.') {
            assert_eq!(before, line, "no float to read off, so the very bytes");
        }
    }

    #[test]
    fn the_fixtures_lines_read_typed_and_write_back_the_same() {
        let runs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/runs");
        let mut n = 0;
        for run in std::fs::read_dir(&runs).unwrap() {
            let p = run.unwrap().path().join(FILE);
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            for line in text.lines().filter(|l| !l.is_empty()) {
                reads_typed_and_back(line);
                n += 1;
            }
        }
        assert!(n > 20, "only {n} lines in {}", runs.display());
    }

    /// Lines as the writers wrote them before `Body` (runs of `diskpulse demo --trigger`,
    /// `record -- CMD` with a `kill -USR1` and a Ctrl-C, `load amqp-pub --record` and
    /// `load pub --sub 1 --inject-latency 1ms --record`), of the kinds and field sets the
    /// fixtures lack.
    const WRITTEN: &[&str] = &[
        r#"{"t_ns":19494491378,"kind":"broker_ready","detail":{"kind":"rabbitmq","name":"rabbit","pid":16331,"ready_ms":19476.902151000002}}"#,
        r#"{"t_ns":26255369,"kind":"broker_start","detail":{"amqp_port":45203,"binary":"/usr/lib/rabbitmq/bin/rabbitmq-server","dist_port":42947,"epmd_pid":16330,"epmd_port":40237,"kind":"rabbitmq","name":"rabbit","node":"dp-rabbit-16317@localhost","pid":16331,"prometheus_port":44039,"start":1,"version":"3.10.8"}}"#,
        r#"{"t_ns":29659811569,"kind":"broker_stop","detail":{"how":"sigterm","kind":"rabbitmq","name":"rabbit","pid":16331,"status":"exit status: 0","stop_ms":6188.614784}}"#,
        r#"{"t_ns":2041130788,"kind":"command_exit","detail":{"status":3}}"#,
        r#"{"t_ns":17916338,"kind":"command_start","detail":{"argv":["sh","-c","sleep 1; kill -USR1 $PPID; sleep 1; exit 3"],"pid":15537}}"#,
        r#"{"t_ns":931265082,"kind":"flow_control","detail":{"subscribers":1,"window_msgs":87381}}"#,
        r#"{"t_ns":3981508527,"kind":"interrupted","detail":{}}"#,
        r#"{"t_ns":20142654322,"kind":"load_start","detail":{"broker":"rabbitmq","clients":1,"mode":"amqp-pub","persistent":true,"queue":"diskpulse","queue_type":"classic","servers":["amqp://127.0.0.1:45203/%2f"]}}"#,
        r#"{"t_ns":23470861416,"kind":"monitor_stop","detail":{"servers":[{"failed_polls":0,"polls":16,"rows":16,"server":"rabbit","skipped":1,"url":"http://127.0.0.1:44039/metrics"}]}}"#,
        r#"{"t_ns":802935868,"kind":"proxy","detail":{"delay_ms":1.0,"jitter_ms":0.0,"proxies":[{"listen":"127.0.0.1:34089","upstream":"127.0.0.1:46289"}]}}"#,
        r#"{"t_ns":604481016,"kind":"trigger","detail":{"device":"vda","keep_from_t_ns":0,"keep_to_t_ns":120604481016,"span_ns":10994440,"trigger":"write_mibps>0.001","value":0.35529322093712823}}"#,
        r#"{"t_ns":700000000,"kind":"trigger","detail":{"keep_from_t_ns":0,"keep_to_t_ns":120800000000,"role":"js-pub","seen_t_ns":1169977641,"trigger":"ack_p99_ms>0.001","value":6.9263,"window_ns":100000000}}"#,
        r#"{"t_ns":1029681039,"kind":"trigger","detail":{"keep_from_t_ns":0,"keep_to_t_ns":121029681039,"trigger":"signal USR1"}}"#,
    ];

    #[test]
    fn lines_written_before_the_types_read_typed_and_write_back_the_same() {
        for line in WRITTEN {
            reads_typed_and_back(line);
        }
    }

    #[test]
    fn the_readme_lists_every_kind() {
        let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/files.md");
        let text = std::fs::read_to_string(&readme).unwrap();
        let row = text
            .lines()
            .find(|l| l.starts_with("| `events.jsonl` | one JSON object a line"))
            .expect("docs/files.md's events.jsonl row");
        for k in Body::KINDS {
            assert!(
                row.contains(&format!("`{k}`")),
                "docs/files.md's events.jsonl row lacks `{k}`"
            );
        }
    }

    #[test]
    fn an_unknown_kind_or_a_detail_that_does_not_match_reads_as_other() {
        for line in [
            r#"{"t_ns":1,"kind":"from_a_newer_version","detail":{"x":1}}"#,
            r#"{"t_ns":1,"kind":"node_stop","detail":{"node":"n1","extra":true}}"#,
            r#"{"t_ns":1,"kind":"node_stop","detail":{"node":7}}"#,
        ] {
            let e: Event = serde_json::from_str(line).unwrap();
            assert!(matches!(e.body, Body::Other { .. }), "{line}: {e:?}");
            assert_eq!(
                e.kind(),
                serde_json::from_str::<Value>(line).unwrap()["kind"]
            );
            let back: Value = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
            assert_eq!(back, serde_json::from_str::<Value>(line).unwrap(), "{line}");
        }
    }

    #[test]
    fn detail_text_is_the_written_json_or_empty_for_a_kind_without_one() {
        let e: Event =
            serde_json::from_str(r#"{"t_ns":1,"kind":"node_stop","detail":{"node":"n1"}}"#)
                .unwrap();
        assert_eq!(e.detail_text(), r#"{"node":"n1"}"#);
        let e: Event =
            serde_json::from_str(r#"{"t_ns":1,"kind":"from_a_newer_version","detail":{}}"#)
                .unwrap();
        assert_eq!(e.detail_text(), "");
    }
}
