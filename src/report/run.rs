//! Reading a run directory back: `meta.json`, `events.jsonl`, `diskstats.csv.gz` and the
//! plain CSVs. A recording that was cut off (crash, `kill -9`, truncated gzip) is read up
//! to the last whole row.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use collectors::diskstats::MAX_FIELDS;
use serde_json::Value;

use crate::usage;

/// A CSV with `t_ns` first and numeric columns (NaN where a cell is empty).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub t_ns: Vec<u64>,
    pub cols: Vec<Vec<f64>>,
}

impl Table {
    pub fn col(&self, name: &str) -> Option<&[f64]> {
        self.columns
            .iter()
            .position(|c| c == name)
            .map(|i| self.cols[i].as_slice())
    }
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
}

/// The raw diskstats rows of one device.
#[derive(Debug, Clone, Default)]
pub struct DiskRows {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub t_ns: Vec<u64>,
    /// Counters per row; `None` where the kernel did not print the field.
    pub f: Vec<[Option<u64>; MAX_FIELDS]>,
}

/// One line of events.jsonl.
#[derive(Debug, Clone)]
pub struct Event {
    pub t_ns: u64,
    pub kind: String,
    pub detail: Value,
}

/// A recording, read back.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub meta: Value,
    pub disks: Vec<DiskRows>,
    pub mem: Option<Table>,
    pub cpu: Option<Table>,
    /// load.csv split by role (`js-pub`, `sub`, ...).
    pub load: BTreeMap<String, Table>,
    pub events: Vec<Event>,
    /// End of the recording: meta's duration, or the last timestamp seen if cut off.
    pub duration_ns: u64,
}

fn open_maybe_gz(p: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let f = File::open(p)?;
    let r: Box<dyn Read> = if p.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, r)))
}

/// Calls `f` with each whole line; stops quietly at a truncated end.
fn for_each_line(p: &Path, mut f: impl FnMut(&str)) -> std::io::Result<()> {
    let mut r = open_maybe_gz(p)?;
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                if !line.ends_with('\n') {
                    break; // a cut-off last row
                }
                f(line.trim_end());
            }
            Err(_) => break, // truncated gzip stream: keep what was read
        }
    }
    Ok(())
}

/// Reads a `t_ns,...` CSV.
pub fn read_table(p: &Path) -> anyhow::Result<Table> {
    let mut t = Table::default();
    let mut first = true;
    for_each_line(p, |line| {
        if first {
            first = false;
            let cols: Vec<String> = line.split(',').map(|s| s.to_string()).collect();
            t.columns = cols[1..].to_vec();
            t.cols = vec![vec![]; t.columns.len()];
            return;
        }
        let mut it = line.split(',');
        let Some(ts) = it.next().and_then(|s| s.parse::<u64>().ok()) else {
            return;
        };
        let vals: Vec<&str> = it.collect();
        if vals.len() != t.columns.len() {
            return;
        }
        t.t_ns.push(ts);
        for (i, v) in vals.iter().enumerate() {
            t.cols[i].push(v.parse::<f64>().unwrap_or(f64::NAN));
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(t)
}

/// Reads a `t_ns,...` CSV with one text column `key` (e.g. load.csv's `role`), split into
/// one numeric [`Table`] per key value.
pub fn read_table_by(p: &Path, key: &str) -> anyhow::Result<BTreeMap<String, Table>> {
    let mut out: BTreeMap<String, Table> = BTreeMap::new();
    let mut cols: Vec<String> = vec![];
    let mut key_i = usize::MAX;
    let mut first = true;
    for_each_line(p, |line| {
        let f: Vec<&str> = line.split(',').collect();
        if first {
            first = false;
            key_i = f.iter().position(|c| *c == key).unwrap_or(usize::MAX);
            cols = f.iter().map(|s| s.to_string()).collect();
            return;
        }
        if f.len() != cols.len() || key_i >= f.len() {
            return;
        }
        let Ok(t) = f[0].parse::<u64>() else { return };
        let tab = out.entry(f[key_i].to_string()).or_insert_with(|| Table {
            columns: cols[1..]
                .iter()
                .enumerate()
                .filter(|(i, _)| i + 1 != key_i)
                .map(|(_, c)| c.clone())
                .collect(),
            t_ns: vec![],
            cols: vec![vec![]; cols.len() - 2],
        });
        tab.t_ns.push(t);
        let mut j = 0;
        for (i, v) in f.iter().enumerate().skip(1) {
            if i == key_i {
                continue;
            }
            tab.cols[j].push(v.parse::<f64>().unwrap_or(f64::NAN));
            j += 1;
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(out)
}

/// Reads `diskstats.csv.gz` (or a plain `diskstats.csv`) grouped by device.
pub fn read_diskstats(p: &Path) -> anyhow::Result<Vec<DiskRows>> {
    let mut by: BTreeMap<String, DiskRows> = BTreeMap::new();
    let mut order: Vec<String> = vec![];
    let mut first = true;
    for_each_line(p, |line| {
        if first {
            first = false;
            return;
        }
        let mut it = line.split(',');
        let (Some(t), Some(name), Some(ma), Some(mi)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return;
        };
        let (Ok(t), Ok(ma), Ok(mi)) = (t.parse::<u64>(), ma.parse::<u32>(), mi.parse::<u32>())
        else {
            return;
        };
        let mut f = [None; MAX_FIELDS];
        for (i, v) in it.take(MAX_FIELDS).enumerate() {
            f[i] = v.parse::<u64>().ok();
        }
        let d = by.entry(name.to_string()).or_insert_with(|| {
            order.push(name.to_string());
            DiskRows {
                name: name.to_string(),
                major: ma,
                minor: mi,
                ..Default::default()
            }
        });
        d.t_ns.push(t);
        d.f.push(f);
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(order.into_iter().filter_map(|n| by.remove(&n)).collect())
}

impl Run {
    /// Reads a run directory. A directory without a diskpulse `meta.json` is a usage error.
    pub fn read(dir: &Path) -> anyhow::Result<Run> {
        let not_rec = |why: &str| {
            usage!(
                "RUN '{}' is not a diskpulse recording ({why}); pass a directory made by `diskpulse record` or `diskpulse demo`",
                dir.display()
            )
        };
        if !dir.is_dir() {
            return Err(not_rec("not a directory"));
        }
        let meta_text =
            std::fs::read_to_string(dir.join("meta.json")).map_err(|_| not_rec("no meta.json"))?;
        let meta: Value =
            serde_json::from_str(&meta_text).map_err(|_| not_rec("meta.json is not JSON"))?;
        if meta.get("tool").and_then(|v| v.as_str()) != Some("diskpulse")
            || meta
                .get("format_version")
                .and_then(|v| v.as_u64())
                .is_none()
        {
            return Err(not_rec("meta.json was not written by diskpulse"));
        }
        let ds_gz = dir.join("diskstats.csv.gz");
        let ds_plain = dir.join("diskstats.csv");
        let disks = if ds_gz.exists() {
            read_diskstats(&ds_gz)?
        } else if ds_plain.exists() {
            read_diskstats(&ds_plain)?
        } else {
            return Err(not_rec("no diskstats.csv.gz"));
        };
        let opt = |name: &str| -> anyhow::Result<Option<Table>> {
            let p = dir.join(name);
            if p.exists() {
                Ok(Some(read_table(&p)?))
            } else {
                Ok(None)
            }
        };
        let mem = opt("meminfo.csv")?;
        let cpu = opt("cpu.csv")?;
        let lp = dir.join("load.csv");
        let load = if lp.exists() {
            read_table_by(&lp, "role")?
        } else {
            BTreeMap::new()
        };
        let mut events = vec![];
        let ev = dir.join("events.jsonl");
        if ev.exists() {
            for_each_line(&ev, |line| {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    events.push(Event {
                        t_ns: v["t_ns"].as_u64().unwrap_or(0),
                        kind: v["kind"].as_str().unwrap_or("").to_string(),
                        detail: v["detail"].clone(),
                    });
                }
            })?;
        }
        let last_seen = disks
            .iter()
            .filter_map(|d| d.t_ns.last().copied())
            .chain(mem.iter().filter_map(|t| t.t_ns.last().copied()))
            .max()
            .unwrap_or(0);
        let duration_ns = meta["duration_ns"]
            .as_u64()
            .unwrap_or(last_seen)
            .max(last_seen);
        Ok(Run {
            dir: dir.to_path_buf(),
            meta,
            disks,
            mem,
            cpu,
            load,
            events,
            duration_ns,
        })
    }

    /// The reason a device is in the run (from meta.json), if recorded.
    pub fn device_why(&self, name: &str) -> Option<String> {
        self.meta["devices"]
            .as_array()?
            .iter()
            .find(|d| d["name"] == name)
            .and_then(|d| d["why"].as_str().map(|s| s.to_string()))
    }
}
