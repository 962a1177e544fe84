//! The files of `record --agents` (issue 15): the samples of other hosts' agents, on the
//! recorder's clock. Decision: files of their own with a leading `node` column, beside
//! the recorder's own `diskstats.csv.gz`/`meminfo.csv`/`cpu.csv` (unchanged, so every
//! reader of a one-host run reads them as before).
//!
//! - `agents_diskstats.csv.gz`: `node,` then the columns of `diskstats.csv.gz`
//!   ([`super::diskstats`]): `t_ns` (the sample's instant mapped onto the recorder's
//!   clock: agent time minus the node's offset estimate), device, major, minor and the
//!   17 raw counters. A node's rows are in time order; nodes interleave.
//! - `agents_meminfo.csv`, `agents_cpu.csv`: `node,` then the columns of `meminfo.csv`
//!   and `cpu.csv` ([`super::procfs`]).
//! - `agents_varz.csv`, `agents_jsz.csv`, `agents_proc_io.csv`: `node,` then the
//!   columns of `varz.csv`, `jsz.csv` ([`super::monitor`]) and `proc_io.csv`
//!   ([`super::proc_io`]): the broker on the agent's node (`--broker-monitor`,
//!   `--broker-pid`); a header only when no agent samples a broker.
//! - `agents_clock.csv`: `node,t_ns,offset_ns,rtt_ns`: every clock probe: when its reply
//!   came (recorder clock), the offset it gives (agent clock minus recorder clock, ns,
//!   signed) and its round trip without the agent's own time (ns). The offset used is the
//!   lowest-round-trip probe's of the last 30 s; its bound is half that round trip.
//!
//! `meta.json` `agents` ([`AgentsMeta`]) holds each node's offset, bound and counts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub const DISKSTATS_FILE: &str = "agents_diskstats.csv.gz";
pub const MEMINFO_FILE: &str = "agents_meminfo.csv";
pub const CPU_FILE: &str = "agents_cpu.csv";
pub const VARZ_FILE: &str = "agents_varz.csv";
pub const JSZ_FILE: &str = "agents_jsz.csv";
pub const PROC_IO_FILE: &str = "agents_proc_io.csv";
pub const CLOCK_FILE: &str = "agents_clock.csv";
pub const CLOCK_HEADER: &str = "node,t_ns,offset_ns,rtt_ns";

/// `node,` and the header of the recorder's own file of the same source.
pub fn header(source: &str) -> String {
    let own = match source {
        "diskstats" => super::diskstats::header(),
        "meminfo" => super::procfs::header(&super::procfs::MEM_COLUMNS),
        "varz" => super::monitor::VARZ_CSV_HEADER.to_string(),
        "jsz" => super::monitor::JSZ_CSV_HEADER.to_string(),
        "proc_io" => super::proc_io::HEADER.to_string(),
        _ => super::procfs::header(&super::procfs::CPU_COLUMNS),
    };
    format!("node,{own}")
}

/// The file of a source.
pub fn file(source: &str) -> &'static str {
    match source {
        "diskstats" => DISKSTATS_FILE,
        "meminfo" => MEMINFO_FILE,
        "varz" => VARZ_FILE,
        "jsz" => JSZ_FILE,
        "proc_io" => PROC_IO_FILE,
        _ => CPU_FILE,
    }
}

/// `meta.json` `agents`: the nodes recorded and how their samples came.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentsMeta {
    /// The servers the recorder subscribed through (redacted).
    pub servers: Vec<String>,
    pub nodes: BTreeMap<String, NodeMeta>,
}

impl super::meta::Section for AgentsMeta {
    const KEY: &'static str = "agents";
}

/// One node's clock and batches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeMeta {
    /// Agent clock minus recorder clock, ns (the probe with the lowest round trip of the
    /// last 30 s at the end); `None`: the agent never answered.
    pub offset_ns: Option<i64>,
    /// The true offset is within this of `offset_ns` (half that probe's round trip), ns.
    pub bound_ns: Option<u64>,
    pub probes: u64,
    /// The largest bound a sample was mapped with (early on, before the best probe).
    pub max_bound_used_ns: Option<u64>,
    /// Per source (`diskstats`, `meminfo`, `cpu`).
    pub sources: BTreeMap<String, SourceMeta>,
    /// From the agent's last heartbeat.
    pub agent_dropped_batches: u64,
    pub agent_reconnects: u64,
    pub agent_cpu_ns: u64,
    pub agent_published_bytes: u64,
    pub devices: Vec<String>,
    /// Why the agent samples each of `devices`, in the same order ("named", "holds
    /// /var/lib/nats", "backing file of loop0", ...); empty from an older agent.
    #[serde(default)]
    pub device_why: Vec<String>,
}

/// One source's batches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SourceMeta {
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Batches written (each once).
    pub batches: u64,
    /// Batches received again and not written.
    pub duplicates: u64,
    /// Batches never received (sequence numbers skipped after asking again).
    pub lost: u64,
    /// Batches asked for again (a gap seen).
    pub resend_requests: u64,
    pub rows: u64,
    /// Rows stamped before the recording started (not written).
    pub rows_before_start: u64,
    /// Bytes received (batch payloads).
    pub bytes: u64,
    /// The longest a batch's last row waited before it was written (its time on the run's
    /// clock to the write), ns: ~150-250 ms while the recorder keeps up (a batch every
    /// 100 ms of 50 ms chunks); growing when it falls behind, or across a broker outage.
    pub max_lag_ns: Option<u64>,
}

/// Reads `meta.json` `agents`, if the run has one.
pub fn read_meta(dir: &Path) -> Option<AgentsMeta> {
    let text = super::regular::read_to_string(&dir.join(super::meta::FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    serde_json::from_value(v.get(<AgentsMeta as super::meta::Section>::KEY)?.clone()).ok()
}

/// One node's device as `report` draws it: the row times and the read and written
/// sector counters.
#[derive(Debug, Clone, Default)]
pub struct NodeDisk {
    pub node: String,
    pub device: String,
    pub t_ns: Vec<u64>,
    pub sectors_read: Vec<u64>,
    pub sectors_written: Vec<u64>,
}

/// Calls `f` with every row (headers left out) of the run's `file` (an agents file), its
/// closed chunks first (`record --chunk`: `chunks/agents_diskstats.NNNNNN.csv.gz`, ...)
/// then the file itself, as one file; a `.gz` is read as gzip. A file cut by kill -9
/// ends at what could be read of it. `Ok(false)` when the run has none of them.
pub fn for_each_row(dir: &Path, file: &str, mut f: impl FnMut(&str)) -> anyhow::Result<bool> {
    use std::io::BufRead;
    let files = super::csv::chunked_files(dir, file);
    for p in &files {
        let fh = super::regular::open(p)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", p.display()))?;
        let r: Box<dyn BufRead> = if p.extension().is_some_and(|e| e == "gz") {
            Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(
                fh,
            )))
        } else {
            Box::new(std::io::BufReader::new(fh))
        };
        for line in r.lines().skip(1) {
            // A recording cut by kill -9 ends inside a gzip member: keep what was read.
            let Ok(line) = line else { break };
            f(&line);
        }
    }
    Ok(!files.is_empty())
}

/// Reads `agents_diskstats.csv.gz` (and its chunks) if the run has it: per node and
/// device, in file order (a node's rows are in time order). Damaged lines are skipped.
pub fn read_diskstats(dir: &Path) -> anyhow::Result<Option<Vec<NodeDisk>>> {
    let head = header("diskstats");
    let cols: Vec<&str> = head.split(',').collect();
    let at = |name: &str| cols.iter().position(|c| *c == name).unwrap_or(0);
    let (sr, sw) = (at("sectors_read"), at("sectors_written"));
    let mut out: Vec<NodeDisk> = vec![];
    let mut index: BTreeMap<(String, String), usize> = BTreeMap::new();
    let any = for_each_row(dir, DISKSTATS_FILE, |line| {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < cols.len() {
            return;
        }
        let (Ok(t), Ok(r), Ok(w)) = (
            f[1].parse::<u64>(),
            f[sr].parse::<u64>(),
            f[sw].parse::<u64>(),
        ) else {
            return;
        };
        let key = (f[0].to_string(), f[2].to_string());
        let k = *index.entry(key.clone()).or_insert_with(|| {
            out.push(NodeDisk {
                node: key.0.clone(),
                device: key.1.clone(),
                ..Default::default()
            });
            out.len() - 1
        });
        let d = &mut out[k];
        d.t_ns.push(t);
        d.sectors_read.push(r);
        d.sectors_written.push(w);
    })?;
    Ok(any.then_some(out))
}

/// One node's rows of a small agents source (`varz`, `jsz`, `proc_io`, `meminfo`,
/// `cpu`): the row times and the asked columns as numbers (NaN where a value is not one).
#[derive(Debug, Clone, Default)]
pub struct NodeSeries {
    pub t_ns: Vec<u64>,
    /// One vector per asked column, in the order asked.
    pub cols: Vec<Vec<f64>>,
}

/// Reads `columns` of `source`'s agents file (and its chunks) per node (empty when the run has no such
/// file or only its header; a column the header lacks reads as NaN). Damaged lines are
/// skipped.
pub fn read_source(
    dir: &Path,
    source: &str,
    columns: &[&str],
) -> anyhow::Result<BTreeMap<String, NodeSeries>> {
    let mut out: BTreeMap<String, NodeSeries> = BTreeMap::new();
    let head = header(source);
    let cols: Vec<&str> = head.split(',').collect();
    let at: Vec<Option<usize>> = columns
        .iter()
        .map(|c| cols.iter().position(|h| h == c))
        .collect();
    for_each_row(dir, file(source), |line| {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < cols.len() {
            return;
        }
        let Ok(t) = f[1].parse::<u64>() else { return };
        let s = out.entry(f[0].to_string()).or_insert_with(|| NodeSeries {
            t_ns: vec![],
            cols: vec![vec![]; columns.len()],
        });
        s.t_ns.push(t);
        for (i, a) in at.iter().enumerate() {
            s.cols[i].push(a.and_then(|a| f[a].parse::<f64>().ok()).unwrap_or(f64::NAN));
        }
    })?;
    Ok(out)
}
