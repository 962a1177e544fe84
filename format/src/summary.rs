//! `summary.json`: what `report` derives from a run (also `report --json`). Written by
//! `report`, read back by the study. Units are in the field names: `_s` seconds, `_ms`
//! milliseconds, `_us` microseconds, `_mib_s` MiB/s (MiB = 2^20 bytes), `bytes` bytes,
//! `_pct` percent; peaks are the highest rate over aligned windows of that width.

pub use crate::failure::{kind_words, Failure};
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use super::meta::SamplerMeta;

pub const FILE: &str = "summary.json";

/// One burst: a run of busy bins.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Burst {
    pub start_s: f64,
    pub duration_ms: f64,
    pub bytes: f64,
    /// Highest rate in one bin of the burst, MiB/s.
    pub peak_mib_s: f64,
}

/// The burst finder's verdict on one series.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Bursts {
    pub bin_ms: f64,
    pub threshold_mib_s: f64,
    pub count: usize,
    /// Median time between burst starts, s (None: fewer than 3 bursts).
    pub period_s: Option<f64>,
    /// Coefficient of variation of the time between starts (stddev / mean; None: fewer
    /// than 4 bursts).
    pub period_cv: Option<f64>,
    /// At least 4 bursts and period_cv < 0.25.
    pub regular: bool,
    pub mean_bytes: Option<f64>,
    pub mean_duration_ms: Option<f64>,
    /// Share of all bytes that were written inside bursts.
    pub share_of_bytes: f64,
    pub list: Vec<Burst>,
}

/// Peak rates over windows of 1 ms, 10 ms, 100 ms and 1 s, MiB/s.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Peaks {
    #[serde(rename = "1ms")]
    pub p1ms: f64,
    #[serde(rename = "10ms")]
    pub p10ms: f64,
    #[serde(rename = "100ms")]
    pub p100ms: f64,
    #[serde(rename = "1s")]
    pub p1s: f64,
}

/// One direction (write or read) of one device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Direction {
    pub bytes: f64,
    pub ios: f64,
    pub mean_mib_s: f64,
    pub peak_mib_s: Peaks,
    pub peak_iops_10ms: f64,
    /// Mean time per completed I/O (Δ read_ms or write_ms / Δ I/Os), ms: iostat's r_await/w_await.
    pub await_ms: Option<f64>,
    /// The highest of the UI-window averages (the run mean if shorter than one window).
    pub ui_average_mib_s: f64,
    /// The 10 ms peak the headline quotes / UI average: `headline_peak_10ms_mib_s` over
    /// `ui_average_mib_s` (the 10 ms peak itself unless that is completion bunching).
    pub hidden_factor: Option<f64>,
    pub bursts: Bursts,
    /// The peaks with each interval's bytes counted over the time its I/Os were in
    /// service rather than at the instant they completed (`report::bunching`), MiB/s;
    /// None in a summary older than them.
    #[serde(default)]
    pub service_peak_mib_s: Option<Peaks>,
    /// The widths (`1ms`, `10ms`, `100ms`, `1s`) whose `peak_mib_s` is completion
    /// bunching (more than 2x `service_peak_mib_s`): bytes that completed together after
    /// waiting, not a rate the device did.
    #[serde(default)]
    pub bunched: Vec<String>,
    /// The 10 ms peak the headline quotes, MiB/s: `peak_mib_s.10ms`, or
    /// `service_peak_mib_s.10ms` when the 10 ms completion peak is bunching.
    #[serde(default)]
    pub headline_peak_10ms_mib_s: Option<f64>,
}

/// One device's figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceSummary {
    pub name: String,
    pub why: Option<String>,
    pub write: Direction,
    pub read: Direction,
    pub flushes: Option<f64>,
    pub peak_flushes_per_s_100ms: Option<f64>,
    pub max_in_flight: f64,
    /// Share of the run the device was busy (io_ms), %.
    pub util_pct: f64,
    pub rows: usize,
}

/// Page cache from meminfo.csv.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemorySummary {
    pub dirty_max_mib: Option<f64>,
    pub writeback_max_mib: Option<f64>,
    pub samples: usize,
}

/// CPU time of all cores over the run, from cpu.csv, %.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuSummary {
    /// user + nice.
    pub user_pct: f64,
    /// system + irq + softirq.
    pub system_pct: f64,
    pub iowait_pct: f64,
    pub idle_pct: f64,
}

/// One role of load.csv over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadRoleSummary {
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    /// ops per second from the role's first to its last operation window (`active_ns`
    /// of load.csv clips the first and last).
    pub ops_per_s: f64,
    /// Payload MiB/s over the same time.
    pub mib_per_s: f64,
    /// The highest per-window p99 latency, µs (None for roles without latency).
    pub worst_window_lat_p99_us: Option<f64>,
    pub lat_max_us: Option<f64>,
    /// The highest per-window p99 from the intended start, µs.
    pub worst_window_co_p99_us: Option<f64>,
}

/// A node restart and the reads it caused on the devices that hold its store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RestartSummary {
    pub node: String,
    pub t_s: f64,
    pub devices: Vec<String>,
    /// Process start to the meta leader seeing the node current, and to /healthz ok, ms.
    pub current_ms: Option<f64>,
    pub healthy_ms: Option<f64>,
    /// From the restart to 30 s after the node was healthy (or the next restart / end).
    pub window_s: f64,
    pub read_bytes: f64,
    /// Highest read rate over 100 ms windows, MiB/s.
    pub read_peak_mib_s: f64,
    /// From the first to the last 10 ms bin reading faster than max(1 MiB/s, 10% of the peak bin).
    pub read_burst_s: f64,
    /// Where that read burst starts on the run clock, s (None: no bin was that busy).
    #[serde(default)]
    pub read_burst_start_s: Option<f64>,
}

/// Latency percentiles of a set of operations, from the merged HDR histograms of the
/// windows in a span (never an average of per-window percentiles), µs; `None` without
/// operations. HDR precision: 3 significant digits (0.1%).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    /// Operations in the span's windows.
    pub count: u64,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
}

/// One latency series (a `load.hlog` / `probe.hlog` tag) inside a device's write bursts
/// versus outside them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BurstInterference {
    /// The series in words: `probe write`, `p3 probe write`, `js-pub`, `js-pub (co)`.
    pub series: String,
    /// `probe` (probe.hlog) or `load` (load.hlog).
    pub source: String,
    /// The tag's name: `read`, `write`, `sync` or a load role.
    pub name: String,
    /// The scenario phase that wrote the series (None outside a scenario).
    pub phase: Option<u32>,
    /// Latency from the intended start (coordinated omission corrected).
    pub co: bool,
    /// The device whose write bursts (`devices[].write.bursts.list`) are the spans.
    pub device: String,
    /// The series' window length (the probe's `--window` / the load's `--stats-window`), ms.
    pub window_ms: f64,
    pub windows_inside: usize,
    pub windows_outside: usize,
    pub inside: Percentiles,
    pub outside: Percentiles,
    /// inside p99 / outside p99.
    pub p99_ratio: Option<f64>,
    /// Share of the series' operations whose lives overlapped a burst (weighted, see
    /// `report/episodes.rs`).
    pub share_in_bursts: f64,
    /// The sentence one can quote.
    pub line: String,
}

/// A load series during a restart's read burst versus before the node went down.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RestartInterference {
    /// `restarts[].node`.
    pub node: String,
    /// The restart on the run clock (`restarts[].t_s`), s.
    pub restart_s: f64,
    /// As in [`BurstInterference`].
    pub series: String,
    pub name: String,
    pub phase: Option<u32>,
    pub co: bool,
    /// Before: from the series' first window to when the node went down (its
    /// `node_stop`/`node_kill` event; the restart without one), s.
    pub before_from_s: f64,
    pub before_to_s: f64,
    /// During: the node's read burst (first to last busy 10 ms bin after the restart;
    /// the restart to healthy when it read nothing), s.
    pub during_from_s: f64,
    pub during_to_s: f64,
    pub before: Percentiles,
    pub during: Percentiles,
    /// during p99 / before p99.
    pub p99_ratio: Option<f64>,
    pub line: String,
}

/// How much one thing that ran at the same time hurt another: latency series from
/// `load.hlog`/`probe.hlog` measured inside versus outside each device's write bursts,
/// and a load's latency during a restart's read burst versus before it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Interference {
    /// The rule that puts a window inside a span, in words.
    pub rule: String,
    /// Per device with write bursts (the broker's devices first: meta.json `broker_nodes`,
    /// else those that hold a volume; busiest writer first) and series.
    pub bursts: Vec<BurstInterference>,
    pub restarts: Vec<RestartInterference>,
    /// The quotable sentences: every series (not the co-corrected twins) against the
    /// bursts of the first device of `bursts` (the broker's busiest), then every restart's,
    /// then every spike's.
    pub lines: Vec<String>,
    /// Each series' latency spikes, each with the episodes that overlap it or none
    /// (`report/spikes.rs`).
    #[serde(default)]
    pub spikes: Vec<Spike>,
    /// The harm episodes other than write bursts: stalls (a victim's operations stuck),
    /// device stalls, long flushes, CPU saturation (`report/episodes.rs`), in time order.
    #[serde(default)]
    pub episodes: Vec<EpisodeSummary>,
    /// Per episode kind and series: operations whose lives overlapped an episode of the
    /// kind versus the others.
    #[serde(default)]
    pub harm: Vec<HarmInterference>,
}

/// One harm episode: what, when, where, who was hurt and why where the data says.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct EpisodeSummary {
    /// `stall` (load roles' or probe directions' operations outstanding, none
    /// completing), `device stall` (requests in flight, none completing), `flush` (a
    /// flush of 20 ms or more), `cpu` (CPU over 90% busy).
    pub kind: String,
    /// Run clock, s.
    pub start_s: f64,
    pub end_s: f64,
    pub duration_ms: f64,
    /// The devices it was on (device stalls, flushes; for a stall, the devices stalled or
    /// flushing in it).
    pub devices: Vec<String>,
    /// The series stalled in it (`js-pub`, `probe write`); for other kinds, the series
    /// that had a stall overlapping it.
    pub victims: Vec<String>,
    /// What overlaps a stall and may be its cause, in words; None when nothing the run
    /// recorded does.
    pub cause: Option<String>,
    pub line: String,
}

/// One series' operations that lived through episodes of one kind versus the others.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HarmInterference {
    /// The episodes' kind (`EpisodeSummary.kind`).
    pub kind: String,
    pub episodes: usize,
    pub series: String,
    pub source: String,
    pub name: String,
    pub phase: Option<u32>,
    pub co: bool,
    pub inside: Percentiles,
    pub outside: Percentiles,
    /// inside p99 / outside p99; None without both.
    pub p99_ratio: Option<f64>,
    /// Share of the series' operations whose lives overlapped one (weighted).
    pub share_inside: f64,
    pub line: String,
}

/// A latency spike of one series: windows whose p99 stands out from the series' median
/// window, and what the run saw at that time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Spike {
    pub series: String,
    /// The spike's windows, run clock s.
    pub start_s: f64,
    pub end_s: f64,
    /// The highest window p99 in it, and the series' median window p99, µs.
    pub p99_us: f64,
    pub median_window_p99_us: f64,
    /// The episodes that overlap it (write bursts, CPU saturation, faults), in words;
    /// empty when none does.
    pub explained_by: Vec<String>,
    pub line: String,
}

/// One fault under the load (issue 9): the broker gone and back, from `events.jsonl`. A
/// fault is a span in which a node was stopped or killed (`node_stop` / `node_kill` until
/// its `restart_ready`) and/or the load's clients lost their server (`nats_client`
/// `disconnected` until `connected`); overlapping spans are one fault. Times on the run
/// clock, s; durations ms.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Fault {
    /// `node_kill`, `node_stop`, or `disconnect` (clients lost their server, no node
    /// event says why: a server that is not the run's own).
    pub cause: String,
    /// The node stopped or killed, when a node event says so.
    pub node: Option<String>,
    /// The node stop/kill or the first client disconnect, whichever came first.
    pub start_s: f64,
    /// The broker back: the first client reconnect of the fault, else the node's
    /// `restart_ready`; `None` when the run ended first.
    pub end_s: Option<f64>,
    pub outage_ms: Option<f64>,
    /// The clients that lost their server in it.
    pub clients: Vec<String>,
    /// The first load operation that succeeded after the broker was back (exact, from
    /// the load's `first_ack_after_reconnect` events); `None`: none did before the end.
    pub first_ack_s: Option<f64>,
    /// From `end_s` to `first_ack_s`.
    pub time_to_first_ack_ms: Option<f64>,
    /// Load operations that failed from each client's last success before the fault to
    /// its first success after it (an ack lost at the reconnect, a request timed out).
    pub ops_lost: u64,
    /// Of those, the ones that timed out (kind `timeout`).
    pub timeouts: u64,
    /// Every client's failed operations (load.csv `errors`, all roles) in the windows
    /// from the fault's start until the load recovered: also the clients that never lost
    /// their server but were refused meanwhile (a stream electing a new leader).
    pub errors_all_clients: u64,
    /// The start of the first load.csv window after the broker was back with successful
    /// operations and no errors: the load recovered (s, run clock); `None` if it did not
    /// before the end.
    pub recovered_s: Option<f64>,
}

impl Fault {
    /// The cause of faults no node event explains.
    pub const DISCONNECT: &'static str = "disconnect";

    /// Whether the node was killed (SIGKILL, `node_kill`) rather than stopped.
    pub fn is_kill(&self) -> bool {
        self.cause == "node_kill"
    }
}

/// One broker process's `/proc/PID/io` over the run (proc_io.csv: last row minus first).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProcessIo {
    pub pid: u32,
    pub comm: String,
    /// Seconds between its first and last sample.
    pub sampled_s: f64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    /// Highest `write_bytes` rate over aligned 100 ms windows, MiB/s.
    pub write_peak_mib_s_100ms: f64,
}

/// How much of one device's traffic the broker's processes account for, over the span
/// they were sampled: every broker process's `write_bytes` (dirtied or O_DIRECT-written
/// by it) against the device's written bytes from diskstats (at completion, writeback
/// included), and the same for reads.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DeviceShare {
    pub device: String,
    pub broker_write_bytes: u64,
    pub device_write_bytes: f64,
    /// broker / device, %; None when the device wrote nothing. Can exceed 100: bytes
    /// dirtied and never written back before the end, or the same page dirtied twice
    /// and written once, count for the process, not the device.
    pub write_share_pct: Option<f64>,
    pub broker_read_bytes: u64,
    pub device_read_bytes: f64,
    pub read_share_pct: Option<f64>,
    pub line: String,
}

/// The broker's own I/O (proc_io.csv) beside its devices'.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BrokerIo {
    pub processes: Vec<ProcessIo>,
    /// The broker's devices ([`Interference`]'s preferred devices; every device when the
    /// run does not say).
    pub devices: Vec<DeviceShare>,
}

/// One log2 bucket of a distribution (biolatency's and bitesize's view): values `v`
/// with `lo <= v < hi`, `hi = 2 * lo` (the first bucket is `0 <= v < 1`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Log2Bucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// One traced process's sync calls (fsync_calls.csv.gz).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FsyncProcess {
    pub pid: u32,
    pub comm: String,
    /// Calls per kind (`fsync`, `fdatasync`, ...).
    pub by_call: BTreeMap<String, u64>,
    /// Calls that returned an error.
    pub errors: u64,
    /// Time inside sync calls, s (summed over threads).
    pub total_s: f64,
    /// Call duration (`count` = calls).
    pub latency: Percentiles,
}

/// The block requests of one device and op (block_requests.csv.gz).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RequestGroup {
    pub device: String,
    /// `read`, `write`, `flush`, `discard`, `write_zeroes`, `other`.
    pub op: String,
    pub bytes: u64,
    /// Requests with the kernel's FUA / PREFLUSH flag, and that failed.
    pub fua: u64,
    pub preflush: u64,
    pub errors: u64,
    /// Issue to completion (the device's time); `count` = requests.
    pub service: Percentiles,
    /// Insert to issue (the queue's time), of the requests with an insert.
    pub queue: Percentiles,
    /// Service time in log2 buckets of µs (`lo`, `hi` µs).
    pub service_hist_us: Vec<Log2Bucket>,
    /// Request sizes in log2 buckets of bytes.
    pub size_hist_bytes: Vec<Log2Bucket>,
}

/// What else was going on at one instant (a slow call's or request's start): the load's
/// window, the broker's /varz poll, the probe's window, the write burst it fell in.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AtThatMs {
    /// The broker device whose write burst holds the instant, if any.
    pub in_write_burst: Option<String>,
    /// load.csv's window holding it, per role: `role`, `window_start_s`, `ops_per_s`,
    /// `lat_p99_us`.
    pub load: Vec<LoadAt>,
    /// varz.csv per server: `server`, `cpu_pct` and `in_msgs_per_s` between the polls
    /// around the instant.
    pub broker: Vec<BrokerAt>,
    /// probe.csv's window holding it, per direction: `direction`, `window_start_s`,
    /// `iops`, `clat_p99_us`.
    pub probe: Vec<ProbeAt>,
    /// All of it in words.
    pub line: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LoadAt {
    pub role: String,
    pub window_start_s: f64,
    pub ops_per_s: f64,
    pub lat_p99_us: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BrokerAt {
    pub server: String,
    pub cpu_pct: Option<f64>,
    pub in_msgs_per_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProbeAt {
    pub direction: String,
    pub window_start_s: f64,
    pub iops: f64,
    pub clat_p99_us: Option<f64>,
}

/// One of the slowest sync calls.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SlowFsync {
    /// The call's start on the run clock, s.
    pub t_s: f64,
    pub dur_ms: f64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub call: String,
    pub file: String,
    pub ret: i64,
    pub at: AtThatMs,
}

/// One of the slowest block requests (by service time).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SlowRequest {
    /// Issue time on the run clock, s.
    pub t_s: f64,
    pub device: String,
    pub op: String,
    pub flags: String,
    pub sector: u64,
    pub bytes: u64,
    pub queue_ms: Option<f64>,
    pub service_ms: f64,
    pub error: i32,
    pub comm: String,
    pub at: AtThatMs,
}

/// How the sync calls line up with a device's write bursts: the done-means figure of
/// `demo --trace` (issue 11).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FsyncsInBursts {
    pub device: String,
    pub bursts: usize,
    /// Bursts with a sync call inside them or starting up to `lead_ms` before them.
    pub bursts_with_fsync: usize,
    pub calls: usize,
    /// Calls inside a burst (or up to `lead_ms` before its start).
    pub calls_in_bursts: usize,
    pub lead_ms: f64,
    pub line: String,
}

/// summary.json `trace` (`--trace`, issue 11): the traced sync calls and block requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TraceSummary {
    /// What was traced, from meta.json's `trace`, in words.
    pub source: String,
    pub calls: u64,
    pub requests: u64,
    /// Events the kernel lost (meta.json `trace.stats.lost_events`); 0 in a complete
    /// trace. Not 0: the figures below undercount, `lost_line` says so.
    pub lost_events: u64,
    pub lost_line: Option<String>,
    /// Per process, most calls first.
    pub fsync: Vec<FsyncProcess>,
    /// Per device and op, busiest device first.
    pub requests_by_op: Vec<RequestGroup>,
    /// The slowest 10, slowest first.
    pub slowest_fsyncs: Vec<SlowFsync>,
    pub slowest_requests: Vec<SlowRequest>,
    /// Per broker device with write bursts.
    pub fsyncs_in_bursts: Vec<FsyncsInBursts>,
    /// The sentences the report prints.
    pub lines: Vec<String>,
}

/// The document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// The recording's format version (see [`super::FORMAT_VERSION`]).
    pub format_version: u32,
    pub run: String,
    pub duration_s: f64,
    pub ui_window_s: f64,
    pub headline: Vec<String>,
    pub devices: Vec<DeviceSummary>,
    /// None without meminfo.csv.
    pub memory: Option<MemorySummary>,
    /// None without cpu.csv (or fewer than two samples).
    pub cpu: Option<CpuSummary>,
    /// Per role of load.csv; empty without load.
    pub load: BTreeMap<String, LoadRoleSummary>,
    /// meta.json's samplers.
    pub samplers: BTreeMap<String, SamplerMeta>,
    pub error_events: usize,
    /// One per `restart` event of a scenario: the read storm of a node re-reading its store.
    pub restarts: Vec<RestartSummary>,
    /// Latency inside versus outside write bursts and restart read bursts; None when the
    /// run has no latency histograms (`load.hlog` / `probe.hlog`).
    #[serde(default)]
    pub interference: Option<Interference>,
    /// Failed load operations per role and kind, fewest first (the last is the one line a
    /// command prints last); empty when nothing failed.
    #[serde(default)]
    pub failures: Vec<Failure>,
    /// Every fault under the load, in time order; empty without one.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// The broker processes' own I/O and their share of each device's; None without
    /// proc_io.csv.
    #[serde(default)]
    pub broker_io: Option<BrokerIo>,
    /// The traced sync calls and block requests; None without `--trace`.
    #[serde(default)]
    pub trace: Option<TraceSummary>,
}

impl Summary {
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        crate::atomic::write(&dir.join(FILE), &serde_json::to_vec_pretty(self)?)
    }

    /// Reads a run's summary.json (`None` when the run has none).
    pub fn read(dir: &Path) -> anyhow::Result<Option<Summary>> {
        let p = dir.join(FILE);
        let Ok(text) = std::fs::read_to_string(&p) else {
            return Ok(None);
        };
        let s: Summary = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{}: {e} (run `diskpulse report` on it again)", p.display())
        })?;
        super::check_version(s.format_version as u64)?;
        Ok(Some(s))
    }
}
