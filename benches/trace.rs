//! What `record --trace` costs and how well its block latencies agree with fio's (issue
//! 11): fio at its highest IOPS (randwrite 4k, O_DIRECT, libaio, iodepth 32) on a loop
//! device over a file in /var/tmp, alternately without and with `diskpulse record
//! --trace --device LOOP` running beside it. Prints per pair the IOPS ratio, fio's
//! completion latency p50/p99 against the traced requests' issue-to-completion p50/p99,
//! the events/s the trace read and the events it lost.
//!
//! Run (root, fio): `cargo bench --bench trace` (release build), or without a release
//! build `cargo bench --profile dev --bench trace`. `DISKPULSE_BENCH_SECS` sets each fio
//! run's length (default 8), `DISKPULSE_BENCH_PAIRS` the number of pairs (default 3).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use diskpulse::format::block_requests;

fn sh(prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {prog}: {e}"));
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

struct Loop {
    dev: String,
    image: PathBuf,
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// fio's write IOPS and completion latency p50/p99 (ns).
fn fio(dev: &str, secs: u64) -> (f64, f64, f64) {
    let out = sh(
        "fio",
        &[
            "--name=trace-bench",
            &format!("--filename={dev}"),
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=32",
            "--size=256M",
            "--time_based",
            &format!("--runtime={secs}"),
            "--output-format=json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("fio JSON");
    let w = &v["jobs"][0]["write"];
    let p = |q: &str| w["clat_ns"]["percentile"][q].as_f64().unwrap_or(f64::NAN);
    (
        w["iops"].as_f64().unwrap_or(f64::NAN),
        p("50.000000"),
        p("99.000000"),
    )
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize] as f64
}

struct Traced {
    fio: (f64, f64, f64),
    p50_ns: f64,
    p99_ns: f64,
    requests: usize,
    events_per_s: f64,
    lost: u64,
}

fn traced_fio(lo: &Loop, name: &str, secs: u64, runs: &Path, i: usize) -> Traced {
    let dir = runs.join(format!("run{i}"));
    let mut rec = Command::new(env!("CARGO_BIN_EXE_diskpulse"))
        .args(["record", "--trace", "--device", name, "--duration", "1h"])
        .arg("--out")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the trace to run.
    for _ in 0..500 {
        if std::fs::read_to_string(dir.join("meta.json")).is_ok_and(|t| t.contains("\"trace\"")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let f = fio(&lo.dev, secs);
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let _ = rec.wait();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let stats = &meta["trace"]["stats"];
    let dur_s = meta["duration_ns"].as_f64().unwrap_or(f64::NAN) / 1e9;
    let (rows, _) = block_requests::read(&dir).unwrap();
    let mut lat: Vec<u64> = rows
        .iter()
        .filter(|r| r.device == name && r.op == "write")
        .map(|r| r.queue_ns.unwrap_or(0) + r.service_ns)
        .collect();
    let requests = lat.len();
    let _ = std::fs::remove_dir_all(&dir);
    Traced {
        fio: f,
        p50_ns: percentile(&mut lat, 0.5),
        p99_ns: percentile(&mut lat, 0.99),
        requests,
        events_per_s: stats["events"].as_f64().unwrap_or(f64::NAN) / dur_s,
        lost: stats["lost_events"].as_u64().unwrap_or(u64::MAX),
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: the trace bench needs root (tracefs, loop devices)");
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("skipping: fio not found (apt-get install fio)");
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let secs = env("DISKPULSE_BENCH_SECS", 8);
    let pairs = env("DISKPULSE_BENCH_PAIRS", 3) as usize;
    let image = PathBuf::from(format!(
        "/var/tmp/diskpulse-trace-bench-{}.img",
        std::process::id()
    ));
    sh("truncate", &["-s", "256M", image.to_str().unwrap()]);
    let lo = Loop {
        dev: sh("losetup", &["-f", "--show", image.to_str().unwrap()]),
        image,
    };
    let name = lo.dev.trim_start_matches("/dev/").to_string();
    let runs = tempfile::tempdir().unwrap();
    // Warm up: the image's blocks allocated, the page cache filled.
    fio(&lo.dev, 2);
    println!(
        "fio randwrite 4k direct libaio iodepth 32 on {name} (over /var/tmp), {secs} s a run, {pairs} pairs"
    );
    println!("pair  iops_off  iops_on  on/off  fio_clat_p50_us  trace_p50_us  fio_clat_p99_us  trace_p99_us  requests  events_per_s  lost");
    let mut ratios = vec![];
    for i in 0..pairs {
        let off = fio(&lo.dev, secs);
        let on = traced_fio(&lo, &name, secs, runs.path(), i);
        let ratio = on.fio.0 / off.0;
        ratios.push(ratio);
        println!(
            "{i:>4}  {:>8.0}  {:>7.0}  {:>6.3}  {:>15.1}  {:>12.1}  {:>15.1}  {:>12.1}  {:>8}  {:>12.0}  {:>4}",
            off.0,
            on.fio.0,
            ratio,
            on.fio.1 / 1e3,
            on.p50_ns / 1e3,
            on.fio.2 / 1e3,
            on.p99_ns / 1e3,
            on.requests,
            on.events_per_s,
            on.lost
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median on/off IOPS ratio {:.3} (tracing costs {:.1}%)",
        ratios[ratios.len() / 2],
        (1.0 - ratios[ratios.len() / 2]) * 100.0
    );
}
