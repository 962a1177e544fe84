//! A recording session: creates the run directory, writes `meta.json`, runs the sampler
//! threads, and closes everything on [`Recording::finish`] (also from Drop, so an error
//! path still leaves a readable recording).
//!
//! `meta.json` is written when the run starts (`"complete": false`) and rewritten at the
//! end with the samplers' statistics; both writes go through a temporary file and a
//! rename, so the file is always whole.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::clock::Clock;
use collectors::devices::{Device, Resolver};
use collectors::periodic::LoopStats;
use serde_json::{json, Value};

use super::samplers::{self, DeviceFilter, SamplerThread};
use super::EventLog;

/// Current recording format.
pub const FORMAT_VERSION: u32 = 1;

/// What to sample and how often.
#[derive(Debug, Clone)]
pub struct SamplerSetup {
    /// Devices to record; empty = every device in /proc/diskstats.
    pub devices: Vec<Device>,
    pub disk_interval: Duration,
    pub mem_interval: Duration,
    pub cpu_interval: Duration,
    pub procfs: PathBuf,
}

/// A running recording.
pub struct Recording {
    pub dir: PathBuf,
    pub clock: Clock,
    pub events: EventLog,
    pub stop: Arc<AtomicBool>,
    threads: Vec<SamplerThread>,
    meta: Value,
    finished: bool,
}

/// Replaces secrets in an argument vector with `***`.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    const SECRET_FLAGS: [&str; 5] = ["--password", "--token", "--creds", "--nkey", "--tls-key"];
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for a in argv {
        if hide_next {
            out.push("***".to_string());
            hide_next = false;
            continue;
        }
        if let Some((k, _)) = a.split_once('=') {
            if SECRET_FLAGS.contains(&k) {
                out.push(format!("{k}=***"));
                continue;
            }
        }
        if SECRET_FLAGS.contains(&a.as_str()) {
            hide_next = true;
        }
        // nats://user:pass@host URLs
        if let Some(i) = a.find("://") {
            if let Some(at) = a[i + 3..].find('@') {
                out.push(format!("{}***@{}", &a[..i + 3], &a[i + 3 + at + 1..]));
                continue;
            }
        }
        out.push(a.clone());
    }
    out
}

fn write_json_atomic(path: &Path, v: &Value) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Creates a run directory: it must not exist, or be empty. Fails before anything is
/// written, with a usage error (exit 2) that names the directory.
pub fn create_run_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map(|mut r| r.next().is_none())
            .unwrap_or(false);
        if !dir.is_dir() || !empty {
            return Err(crate::usage!(
                "--out {}: exists and is not an empty directory; name a new directory",
                dir.display()
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        crate::usage!(
            "--out {}: cannot create the run directory ({e}); name a writable directory",
            dir.display()
        )
    })?;
    // Probe that files can be created in it (read-only mounts pass create_dir_all on an
    // existing directory).
    let probe = dir.join(".diskpulse-write-test");
    std::fs::write(&probe, b"").map_err(|e| {
        crate::usage!(
            "--out {}: cannot write into the run directory ({e}); name a writable directory",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// The default run directory: `diskpulse-runs/<local time>-<what>` under the cwd.
pub fn default_run_dir(what: &str) -> PathBuf {
    let ts = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let base = PathBuf::from("diskpulse-runs");
    let mut p = base.join(format!("{ts}-{what}"));
    let mut i = 2;
    while p.exists() {
        p = base.join(format!("{ts}-{what}-{i}"));
        i += 1;
    }
    p
}

impl Recording {
    /// Creates `dir` (see [`create_run_dir`]), writes `meta.json` and starts the samplers.
    pub fn start(dir: &Path, setup: &SamplerSetup, argv: &[String]) -> anyhow::Result<Recording> {
        create_run_dir(dir)?;
        let clock = Clock::start();
        let start_wall = chrono::Utc::now();
        let events = EventLog::create(&dir.join("events.jsonl"), clock)?;
        let stop = Arc::new(AtomicBool::new(false));
        let resolver = Resolver {
            sysfs: PathBuf::from("/sys"),
            procfs: setup.procfs.clone(),
        };
        let devices: Vec<Value> = setup
            .devices
            .iter()
            .map(|d| {
                let q = resolver.queue_info(d);
                let queue: serde_json::Map<String, Value> = q
                    .attrs
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                json!({"name": d.name, "major": d.num.major, "minor": d.num.minor,
                       "why": d.why, "parent": d.parent, "queue": queue})
            })
            .collect();
        let filter = if setup.devices.is_empty() {
            DeviceFilter::All
        } else {
            DeviceFilter::Only(
                setup
                    .devices
                    .iter()
                    .map(|d| (d.num.major, d.num.minor))
                    .collect(),
            )
        };
        let names: Vec<(u32, u32, String)> = setup
            .devices
            .iter()
            .map(|d| (d.num.major, d.num.minor, d.name.clone()))
            .collect();
        let source =
            samplers::DiskSource::auto(&setup.procfs, &PathBuf::from("/sys"), &filter, &names);
        let us = |d: Duration| d.as_micros() as u64;
        let meta = json!({
            "format_version": FORMAT_VERSION,
            "tool": "diskpulse",
            "version": env!("CARGO_PKG_VERSION"),
            "argv": redact_argv(argv),
            "host": hostname(),
            "kernel": kernel(),
            "start_wall": start_wall.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
            "clock_zero_monotonic_ns": clock.zero_monotonic_ns(),
            "user_hz": collectors::procstat::clock_ticks_per_s(),
            "device_filter": if setup.devices.is_empty() { "all" } else { "listed" },
            "devices": devices,
            "samplers": {
                "diskstats": {"file": "diskstats.csv.gz", "interval_us": us(setup.disk_interval),
                              "source": source.describe()},
                "meminfo": {"file": "meminfo.csv", "interval_us": us(setup.mem_interval)},
                "cpu": {"file": "cpu.csv", "interval_us": us(setup.cpu_interval)},
            },
            "complete": false,
        });
        write_json_atomic(&dir.join("meta.json"), &meta)?;

        let mut rec = Recording {
            dir: dir.to_path_buf(),
            clock,
            events: events.clone(),
            stop: stop.clone(),
            threads: vec![],
            meta,
            finished: false,
        };
        let ds = samplers::DiskSampler::new(
            source,
            filter,
            &names,
            &dir.join("diskstats.csv.gz"),
            events.clone(),
        )?;
        rec.threads.push(samplers::spawn_disk(
            ds,
            setup.disk_interval.as_nanos() as u64,
            stop.clone(),
        )?);
        rec.threads.push(samplers::spawn_proc(
            samplers::ProcSource {
                name: "meminfo",
                file: "meminfo.csv",
                proc_path: setup.procfs.join("meminfo"),
                columns: collectors::procstat::MEM_COLUMNS,
                parse: samplers::mem_row,
            },
            dir,
            clock,
            setup.mem_interval.as_nanos() as u64,
            stop.clone(),
            events.clone(),
        )?);
        rec.threads.push(samplers::spawn_proc(
            samplers::ProcSource {
                name: "cpu",
                file: "cpu.csv",
                proc_path: setup.procfs.join("stat"),
                columns: collectors::procstat::CPU_COLUMNS,
                parse: samplers::cpu_row,
            },
            dir,
            clock,
            setup.cpu_interval.as_nanos() as u64,
            stop.clone(),
            events.clone(),
        )?);
        events.event("record_start", json!({}));
        Ok(rec)
    }

    /// Adds a top-level key to `meta.json` (broker, load options...); written at finish.
    pub fn set_meta(&mut self, key: &str, v: Value) -> anyhow::Result<()> {
        self.meta[key] = v;
        write_json_atomic(&self.dir.join("meta.json"), &self.meta)
    }

    /// Stops the samplers, closes every file and completes `meta.json`.
    pub fn finish(mut self) -> anyhow::Result<Value> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> anyhow::Result<Value> {
        self.finished = true;
        self.stop.store(true, Ordering::SeqCst);
        self.events.event("record_stop", json!({}));
        let mut first_err: Option<anyhow::Error> = None;
        let mut stats = serde_json::Map::new();
        for t in self.threads.drain(..) {
            let (name, _file, r) = t.join();
            match r {
                Ok(s) => {
                    stats.insert(name.to_string(), loop_stats_json(&s));
                }
                Err(e) => {
                    self.events.error(name, "sampler", &format!("{e:#}"));
                    first_err.get_or_insert(e);
                }
            }
        }
        for (k, v) in stats {
            if let Some(obj) = self.meta["samplers"][&k].as_object_mut() {
                if let Value::Object(m) = v {
                    obj.extend(m);
                }
            }
        }
        self.meta["duration_ns"] = json!(self.clock.now_ns());
        self.meta["end_wall"] =
            json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true));
        self.meta["error_events"] = json!(self.events.error_count());
        self.meta["complete"] = json!(true);
        write_json_atomic(&self.dir.join("meta.json"), &self.meta)?;
        match first_err {
            Some(e) => Err(e),
            None => Ok(self.meta.clone()),
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.finish_inner();
        }
    }
}

/// A sampler loop's statistics as they go into `meta.json`.
pub fn loop_stats_json(s: &LoopStats) -> Value {
    let wall = (s.ended_ns - s.started_ns).max(1) as f64;
    json!({
        "samples": s.samples,
        "expected": s.expected,
        "skipped": s.skipped,
        "jitter_p50_us": s.jitter_us(0.5),
        "jitter_p99_us": s.jitter_us(0.99),
        "jitter_max_us": s.jitter.max() as f64 / 1000.0,
        "thread_cpu_ns": s.thread_cpu_ns,
        "cpu_share_of_core": s.thread_cpu_ns as f64 / wall,
        "ns_per_sample_cpu": s.thread_cpu_ns as f64 / s.samples.max(1) as f64,
        "realtime_priority": s.realtime,
    })
}
