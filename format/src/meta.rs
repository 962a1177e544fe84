//! `meta.json`: what the run is. Written by `recording::session` when the run starts
//! (`"complete": false`) and again at its end (with the samplers' statistics), each time
//! through a temporary file and a rename, so the file is always whole. Other parts of
//! diskpulse add their sections (`broker`, `broker_nodes`, `load`, `agents`, `phases`,
//! `record`, `trace`, `volumes`) through `Recording::set`, each a type that names its key
//! ([`Section`]); [`Meta`] reads back the parts diskpulse uses by type, beside the writers.
//!
//! Byte for byte: a section goes into the document as a `serde_json::Value` (serde_json
//! here has no `preserve_order`, so its keys come out sorted whatever the field order);
//! the writers' fields are declared in that sorted order all the same, so a struct printed
//! straight (`load --json`) reads as meta.json does.
//!
//! Units: `*_ns` nanoseconds, `*_us` microseconds; `start_wall`/`end_wall` RFC 3339 with
//! ns; `clock_zero_monotonic_ns` is the run's zero on CLOCK_MONOTONIC and
//! `clock_zero_unix_ns` the same instant in ns since the Unix epoch (read next to it), so
//! `unix_ns = clock_zero_unix_ns + t_ns` for every `t_ns` of the run.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const FILE: &str = "meta.json";

/// The keys `queue` may hold: sysfs queue attributes of the (whole) disk, its identity,
/// a loop device's backing file and the device's size in 512-byte sectors (written by
/// `collectors::devices::Resolver::queue_info`; an attribute the kernel lacks is absent).
pub use collectors::devices::queue_keys;

/// A recorded device and its sysfs queue attributes (strings, as sysfs prints them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MetaDevice {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub why: Option<String>,
    pub parent: Option<String>,
    #[serde(default)]
    pub queue: BTreeMap<String, String>,
}

/// One file of a recording whose rows stopped reaching the disk: `file`, `after_t_ns`
/// (its last whole row on the run clock; rows after it are lost; `None`: no row
/// reached it), `error` (why, e.g. no space left on the device).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Lost {
    pub file: String,
    pub after_t_ns: Option<u64>,
    pub error: String,
}

/// A sampler loop's statistics at the end of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SamplerStats {
    pub samples: u64,
    pub expected: u64,
    pub skipped: u64,
    pub jitter_p50_us: f64,
    pub jitter_p99_us: f64,
    pub jitter_max_us: f64,
    pub thread_cpu_ns: u64,
    pub cpu_share_of_core: f64,
    pub ns_per_sample_cpu: f64,
    pub realtime_priority: bool,
}

/// One sampler: its file and interval, where diskstats come from, and (once the run
/// ended) its loop statistics.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SamplerMeta {
    pub file: String,
    pub interval_us: u64,
    /// diskstats only: `/proc/diskstats` or the sysfs stat files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// None before the run ended (or when a field is missing).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stats: Option<SamplerStats>,
}

/// meta.json `clock`: the clock every timestamp of the run was read from, measured as the
/// recording started ([`collectors::clock::ClockFacts`]; `check`'s `clock` finding).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClockMeta {
    /// The kernel's clocksource (`tsc`, `kvm-clock`, `jiffies`...), when sysfs said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The smallest step `CLOCK_MONOTONIC` took between two reads (ns).
    pub step_ns: u64,
    /// What a read cost, mean (ns).
    pub read_ns: f64,
}

impl ClockMeta {
    pub fn of(f: &collectors::clock::ClockFacts) -> ClockMeta {
        ClockMeta {
            source: f.source.clone(),
            step_ns: f.step_ns,
            read_ns: (f.read_ns * 10.0).round() / 10.0,
        }
    }

    /// What a report says when the timestamps moved too coarsely for 1 ms samples.
    pub fn warning(&self) -> Option<String> {
        let f = collectors::clock::ClockFacts {
            source: self.source.clone(),
            available: vec![],
            step_ns: self.step_ns,
            read_ns: self.read_ns,
        };
        f.coarse().then(|| {
            format!(
                "meta.json clock: the recording's clock (clocksource {}) moved in steps of {} \
                 us: 1 ms rates and microsecond latencies are not trustworthy (`diskpulse check` \
                 says how to choose a finer clocksource)",
                self.source.as_deref().unwrap_or("unknown"),
                self.step_ns as f64 / 1e3
            )
        })
    }
}

/// The document. Every field but `format_version` has a default when reading, so a
/// hand-made or cut-down meta.json still reads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    pub format_version: u32,
    pub tool: String,
    pub version: String,
    pub argv: Vec<String>,
    pub host: String,
    pub kernel: String,
    pub start_wall: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_wall: Option<String>,
    pub clock_zero_monotonic_ns: u64,
    pub clock_zero_unix_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    pub user_hz: u64,
    /// The clock the timestamps came from; absent in recordings made before it was noted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockMeta>,
    /// `all` (every device in /proc/diskstats) or `listed`.
    pub device_filter: String,
    pub devices: Vec<MetaDevice>,
    /// `diskstats`, `meminfo`, `cpu`.
    pub samplers: BTreeMap<String, SamplerMeta>,
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_events: Option<u64>,
    /// What a recording cut short lost (a full `--out`): one entry per file whose writer
    /// failed; absent when nothing was lost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<Lost>,
    /// `record --chunk/--keep/--trigger` (issue 13): the chunk list, what retention
    /// dropped and the windows triggers kept; absent in a run that never rotated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunksMeta>,
    /// The files the recording wrote and their sizes when it ended (see `manifest.rs`):
    /// absent while it runs, in a recording cut short and in one made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Manifest>,
    /// The sections other parts add (`broker`, `broker_nodes`, `load`, `phases`...), set
    /// by type through [`Meta::set`] and read by type through [`Meta::load`],
    /// [`Meta::broker`], [`Meta::broker_nodes`] and `Meta::phases` (beside its type in
    /// `phases.rs`). A section that does not parse reads as absent (a run of an older
    /// diskpulse still reports).
    #[serde(flatten)]
    pub sections: BTreeMap<String, Value>,
}

/// One file of the manifest: its size when the recording ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ManifestFile {
    pub bytes: u64,
}

/// meta.json `manifest` (see `manifest.rs`): path in the run directory -> the file as
/// the recording left it.
pub type Manifest = BTreeMap<String, ManifestFile>;

/// meta.json `chunks`: how diskstats.csv.gz is cut into chunks and what became of them,
/// rewritten as each chunk closes. Closed chunks are `chunks/diskstats.NNNNNN.csv.gz`
/// (whole gzip files, never written again); the last is `diskstats.csv.gz`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ChunksMeta {
    /// `--chunk DURATION`: a chunk holds the rows of one aligned span of the run clock
    /// (`[k * chunk_ns, (k + 1) * chunk_ns)`); `None` with a size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_ns: Option<u64>,
    /// `--chunk SIZE`: a chunk closes once its file holds this many (compressed) bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_bytes: Option<u64>,
    /// `--keep`: closed chunks whose last row is older than this (before the newest row)
    /// are deleted, unless a kept window overlaps them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_ns: Option<u64>,
    /// `--trigger` conditions as given (`write_mibps>400`), and `--trigger-window`
    /// (kept before and after each firing).
    pub triggers: Vec<String>,
    pub trigger_window_ns: u64,
    /// Every chunk closed so far, oldest first (deleted ones too: see `dropped`).
    pub closed: Vec<ChunkFile>,
    /// The chunks retention deleted, with why.
    pub dropped: Vec<ChunkFile>,
    /// The windows kept around trigger firings (merged where they overlap).
    pub kept_windows: Vec<KeptWindow>,
    /// The other per-sample files cut by the same rules (`meminfo.csv`, `cpu.csv`,
    /// `proc_io.csv`), by file name: their closed chunks `chunks/meminfo.NNNNNN.csv`, ...
    /// and what retention dropped; absent before one of them rotates.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, FileChunks>,
}

/// meta.json `chunks.files.FILE`: one chunked file's closed and dropped chunks, as
/// diskstats.csv.gz's are in `chunks.closed` and `chunks.dropped`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FileChunks {
    pub closed: Vec<ChunkFile>,
    pub dropped: Vec<ChunkFile>,
}

/// One chunk file: its path in the run directory, the `t_ns` of its first and last row,
/// its rows and its size on disk (bytes, compressed); `why` for a dropped one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ChunkFile {
    pub file: String,
    pub first_t_ns: u64,
    pub last_t_ns: u64,
    pub rows: u64,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A span of the run clock kept from retention: `from_t_ns..to_t_ns` and what fired
/// (`write_mibps>400 on vdb: 812.3`, `signal USR1`; several joined by `; `).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct KeptWindow {
    pub from_t_ns: u64,
    pub to_t_ns: u64,
    pub what: String,
}

/// meta.json `trace` (`record --trace`, issue 11): what the tracefs collector traced and,
/// once the run ended, what it saw. The sampler entry `samplers.trace` names its file
/// (`fsync_calls.csv.gz`) and poll interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TraceMeta {
    /// The tracepoints enabled (`syscalls:sys_enter_fdatasync`, `block:block_rq_issue`, ...).
    pub events: Vec<String>,
    /// The processes traced by pid (all their threads; `children`: and what they start).
    pub pids: Vec<u32>,
    /// The process names traced (kernel filter `comm == NAME`).
    pub comms: Vec<String>,
    pub children: bool,
    /// The devices block requests are recorded for (`MAJ:MIN`); empty: every device.
    pub devices: Vec<String>,
    /// The trace clock (`mono`: CLOCK_MONOTONIC).
    pub clock: String,
    /// The trace clock minus CLOCK_MONOTONIC measured at the start (a marker written
    /// between two clock reads), and its bound: the gap between those reads.
    pub clock_offset_ns: i64,
    pub clock_offset_bound_ns: u64,
    /// The instance's per-CPU ring buffer, KiB.
    pub buffer_kib_per_cpu: u64,
    /// At the end: events lost in the kernel (per_cpu/cpuN/stats `overrun` + `dropped
    /// events`, and pages flagged as missing events); 0 in a complete trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<TraceStats>,
}

/// What the trace recorded, at the end of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TraceStats {
    /// Events read from the ring buffers.
    pub events: u64,
    /// Events the kernel lost (see [`TraceMeta::stats`]).
    pub lost_events: u64,
    /// Rows of fsync_calls.csv.gz and block_requests.csv.gz.
    pub calls: u64,
    pub requests: u64,
    /// Enters or issues without their exit or completion at the end (calls still
    /// running, requests in flight) and exits or completions without a start (begun
    /// before the trace).
    pub unpaired: u64,
}

/// A load role's figures over the whole run, as `diskpulse load --json` gives them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct RoleMeta {
    pub role: String,
    pub clients: Option<u64>,
    pub ops: Option<u64>,
    pub msgs_per_s: Option<f64>,
    pub mib_per_s: Option<f64>,
    pub latency_meaning: Option<String>,
    pub lat_us: Option<LatUsMeta>,
    /// Failed operations by kind (see [`super::failure::Failure`]).
    pub failures: Vec<super::failure::Failure>,
}

/// A latency summary of the run, µs.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct LatUsMeta {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// meta.json `load` (and a load phase's result): the mode (the CLI's spelling,
/// `js-pub`) and per-role figures.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct LoadMeta {
    pub mode: Option<String>,
    pub roles: Vec<RoleMeta>,
}

/// A section of meta.json that a part of diskpulse adds beside the recording's own
/// fields: a type that serializes to the section and names its top-level key.
/// `Recording::set` (and [`Meta::set`]) take one; nothing sets a section by a string.
pub trait Section: Serialize {
    /// Its top-level key in meta.json.
    const KEY: &'static str;
}

/// meta.json `broker`, as written: one nats-server (`demo`), an embedded nats-server
/// cluster (`load`, `run`) or a RabbitMQ node. The report reads the parts it shows as
/// [`BrokerMeta`], whichever it is.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum BrokerSection {
    Server(ServerMeta),
    Cluster(ClusterMeta),
    Rabbit(RabbitNodeMeta),
}

impl Section for BrokerSection {
    const KEY: &'static str = "broker";
}

/// An embedded nats-server as meta.json records it (`broker`, `broker.servers[]`).
/// Paths are as diskpulse gave them; `exe` is the file actually running (a PATH entry
/// may be a wrapper such as a pyenv shim); `ready_ms` how long until it served.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerMeta {
    pub binary: String,
    pub client_port: u16,
    pub client_url: String,
    pub cluster_name: Option<String>,
    pub cluster_port: Option<u16>,
    /// The configuration file's text.
    pub config: String,
    pub config_path: String,
    pub exe: Option<String>,
    pub log_path: String,
    pub monitor_port: u16,
    pub monitor_url: String,
    pub name: String,
    pub pid: u32,
    pub ready_ms: f64,
    /// Tries of the last start (a taken port means fresh ports and another try).
    pub start_attempts: u32,
    /// Starts so far (a restart phase starts it again).
    pub starts: u32,
    pub store_dir: String,
    /// JetStream's `sync_interval` (`always`, `1s`...).
    pub sync: String,
    pub version: String,
}

/// An embedded nats-server cluster (of one node or more) as meta.json records it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterMeta {
    pub cluster_name: Option<String>,
    /// The JetStream meta leader once every node was current.
    pub meta_leader_at_start: Option<String>,
    pub nodes: usize,
    pub ready_ms: f64,
    pub servers: Vec<ServerMeta>,
    /// `run` sets it to the first server's, so a cluster's `broker.version` reads as
    /// one server's does; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An embedded RabbitMQ node as meta.json records it (`kind` is always `rabbitmq`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RabbitNodeMeta {
    pub amqp_port: u16,
    pub binary: String,
    pub client_url: String,
    pub config: String,
    pub config_path: String,
    pub dist_port: u16,
    pub epmd_pid: u32,
    pub epmd_port: u16,
    pub kind: String,
    pub log_path: String,
    pub metrics_url: String,
    pub name: String,
    /// The Erlang node name (`rabbit@localhost`...).
    pub node: String,
    pub pid: u32,
    pub prometheus_port: u16,
    pub ready_ms: f64,
    pub starts: u32,
    pub store_dir: String,
    pub version: String,
}

/// meta.json `record` (`diskpulse record`): `--duration`, if given.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RecordMeta {
    pub duration_limit_ns: Option<u64>,
}

impl Section for RecordMeta {
    const KEY: &'static str = "record";
}

/// meta.json `volumes[]` (`run`): a scenario volume, its directory and, for a lab
/// volume, its loop devices and cgroup.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct VolumeMeta {
    pub dir: std::path::PathBuf,
    pub lab: Option<VolumeLab>,
    pub name: String,
}

/// A lab volume's loop devices (`/dev/loop3`) and cgroup directory.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct VolumeLab {
    pub cgroup: Option<std::path::PathBuf>,
    pub loop_devices: Vec<String>,
}

/// meta.json `volumes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Volumes(pub Vec<VolumeMeta>);

impl Section for Volumes {
    const KEY: &'static str = "volumes";
}

impl Section for TraceMeta {
    const KEY: &'static str = "trace";
}

/// meta.json `load.js_context` (and `load --json`'s): the client's settings the load ran
/// with: a JetStream context's limits, or for RabbitMQ the queue and the channel's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ClientContext {
    Amqp(AmqpContextMeta),
    Nats(JsContextMeta),
}

/// A RabbitMQ load's queue and channel: `window` unconfirmed publishes at most,
/// `prefetch` unacked deliveries per consumer, publisher confirms on or off.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AmqpContextMeta {
    /// Always `rabbitmq`.
    pub broker: String,
    pub confirms: bool,
    pub persistent: bool,
    pub prefetch: u16,
    pub queue: String,
    pub queue_type: String,
    pub window: usize,
}

/// The JetStream context's limits (async-nats defaults hide them: see STYLE.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JsContextMeta {
    pub ack_timeout_s: f64,
    pub backpressure_on_inflight: bool,
    pub client_capacity: usize,
    pub max_ack_inflight: usize,
}

/// meta.json `load.auth` (and `load --json`'s): which kind of auth the load used, every
/// secret (and a credentials file's name) as `***`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AuthMeta {
    pub creds: Option<String>,
    pub nkey: Option<String>,
    pub password: Option<String>,
    pub tls_ca: Option<std::path::PathBuf>,
    pub tls_cert: Option<std::path::PathBuf>,
    pub tls_key: Option<String>,
    pub token: Option<String>,
    pub user: Option<String>,
}

/// The key of meta.json `load`, whose writers (`load --json`'s document, `demo`'s
/// section) are built from the load engine's own types; read back as [`LoadMeta`].
pub const LOAD_KEY: &str = "load";

/// meta.json `broker`: the parts the report shows.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct BrokerMeta {
    /// `rabbitmq` for an embedded RabbitMQ node; absent for nats-server (the runs before
    /// RabbitMQ came have none).
    pub kind: Option<String>,
    pub version: Option<String>,
    pub sync: Option<String>,
    pub store_dir: Option<String>,
}

/// meta.json `broker_nodes[]` (written by `run` for a scenario's broker): the devices
/// that hold a node's store, and the scenario volume it is on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NodeDevices {
    pub devices: Vec<String>,
    pub node: String,
    /// The scenario volume's name; absent in runs made before it was noted.
    pub volume: Option<String>,
}

/// meta.json `broker_nodes`: every node of a scenario's broker.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct BrokerNodes(pub Vec<NodeDevices>);

impl Section for BrokerNodes {
    const KEY: &'static str = "broker_nodes";
}

impl BrokerMeta {
    /// The broker's program as the report names it: `rabbitmq` or `nats-server`.
    pub fn program(&self) -> &'static str {
        match self.kind.as_deref() {
            Some("rabbitmq") => "rabbitmq",
            _ => "nats-server",
        }
    }
}

impl Meta {
    /// Sets (or replaces) a section.
    pub fn set<S: Section>(&mut self, s: &S) -> serde_json::Result<()> {
        self.sections
            .insert(S::KEY.to_string(), serde_json::to_value(s)?);
        Ok(())
    }

    /// Section `key` read as `T`: `None` when absent or when it does not parse.
    pub(crate) fn section<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.sections
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }
    pub fn load(&self) -> Option<LoadMeta> {
        self.section(LOAD_KEY)
    }
    pub fn broker(&self) -> Option<BrokerMeta> {
        self.section(BrokerSection::KEY)
    }
    pub fn broker_nodes(&self) -> Option<Vec<NodeDevices>> {
        self.section(BrokerNodes::KEY)
    }
    pub fn trace(&self) -> Option<TraceMeta> {
        self.section(TraceMeta::KEY)
    }
    pub fn record(&self) -> Option<RecordMeta> {
        self.section(RecordMeta::KEY)
    }
    pub fn volumes(&self) -> Option<Vec<VolumeMeta>> {
        self.section(Volumes::KEY)
    }

    /// The reason a device is in the run, if recorded.
    pub fn device_why(&self, name: &str) -> Option<String> {
        self.devices
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.why.clone())
    }

    /// Writes `path` through a temporary file and a rename ([`crate::atomic`]).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        crate::atomic::write(path, &serde_json::to_vec_pretty(self)?)
    }

    /// Reads a run's `meta.json`. Errors say what is wrong: no file, not JSON, not
    /// diskpulse's, another format version (see [`super::check_version`]).
    pub fn read(dir: &Path) -> Result<Meta, MetaError> {
        let p = dir.join(FILE);
        let text = super::regular::read_to_string(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => MetaError::NotARecording("no meta.json"),
            std::io::ErrorKind::InvalidData => {
                MetaError::NotARecording("meta.json is not text (UTF-8): it is damaged")
            }
            _ => MetaError::Unreadable(format!("cannot read {}: {e}", p.display())),
        })?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| MetaError::NotARecording("meta.json is not JSON"))?;
        let version = v.get("format_version").and_then(Value::as_u64);
        if v.get("tool").and_then(Value::as_str) != Some("diskpulse") || version.is_none() {
            return Err(MetaError::NotARecording(
                "meta.json was not written by diskpulse",
            ));
        }
        super::check_version(version.unwrap_or(0)).map_err(MetaError::Version)?;
        serde_json::from_value(v).map_err(|e| MetaError::Invalid(e.to_string()))
    }
}

/// Why a run's meta.json cannot be used.
#[derive(Debug)]
pub enum MetaError {
    /// Not a diskpulse recording at all (the reason).
    NotARecording(&'static str),
    /// A diskpulse recording of another format version.
    Version(anyhow::Error),
    /// The right version, but a field does not parse.
    Invalid(String),
    /// meta.json is there but cannot be read (not a regular file, no permission): why.
    Unreadable(String),
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaError::NotARecording(why) => write!(f, "{why}"),
            MetaError::Version(e) => write!(f, "{e}"),
            MetaError::Unreadable(e) => write!(f, "{e}"),
            MetaError::Invalid(e) => write!(
                f,
                "meta.json does not parse: {e}; the file is damaged (every *_ns is a whole number of ns)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer printed straight gives the bytes it gives through a `Value` (sorted keys):
    /// its fields are declared in sorted order, as the module doc says.
    fn declared_sorted<T: Serialize>(t: &T) {
        let straight = serde_json::to_string(t).unwrap();
        let sorted = serde_json::to_value(t).unwrap().to_string();
        assert_eq!(straight, sorted);
    }

    #[test]
    fn every_section_writer_declares_its_fields_sorted() {
        let server = ServerMeta::default();
        declared_sorted(&server);
        declared_sorted(&ClusterMeta {
            servers: vec![server],
            version: Some("2.10".into()),
            ..Default::default()
        });
        declared_sorted(&RabbitNodeMeta::default());
        declared_sorted(&RecordMeta::default());
        declared_sorted(&Volumes(vec![VolumeMeta {
            lab: Some(VolumeLab::default()),
            ..Default::default()
        }]));
        declared_sorted(&BrokerNodes(vec![NodeDevices::default()]));
        declared_sorted(&AuthMeta::default());
        declared_sorted(&ClientContext::Nats(JsContextMeta::default()));
        declared_sorted(&ClientContext::Amqp(AmqpContextMeta::default()));
    }

    #[test]
    fn a_section_set_by_type_reads_back_by_type() {
        let mut m = Meta::default();
        let nodes = vec![NodeDevices {
            devices: vec!["vdb".into()],
            node: "n1".into(),
            volume: Some("store".into()),
        }];
        m.set(&BrokerNodes(nodes.clone())).unwrap();
        m.set(&RecordMeta {
            duration_limit_ns: Some(2_000_000_000),
        })
        .unwrap();
        let mut rabbit = RabbitNodeMeta {
            kind: "rabbitmq".into(),
            version: "4.0.5".into(),
            ..Default::default()
        };
        rabbit.store_dir = "/var/tmp/s".into();
        m.set(&BrokerSection::Rabbit(rabbit)).unwrap();
        assert_eq!(m.broker_nodes(), Some(nodes));
        assert_eq!(
            m.record().and_then(|r| r.duration_limit_ns),
            Some(2_000_000_000)
        );
        let b = m.broker().unwrap();
        assert_eq!(b.program(), "rabbitmq");
        assert_eq!(b.version.as_deref(), Some("4.0.5"));
        assert_eq!(b.store_dir.as_deref(), Some("/var/tmp/s"));
        // An older run's broker_nodes (no volume) still reads.
        m.sections.insert(
            BrokerNodes::KEY.into(),
            serde_json::json!([{"node": "n1", "devices": ["vdb"]}]),
        );
        assert_eq!(m.broker_nodes().unwrap()[0].volume, None);
    }
}
