//! `record --trace` under fio at its highest rate (issue 11, the benchmark's slice): every
//! request fio makes is traced, none lost, and the pairing of issue and completion is
//! consistent with what fio allows in flight. The figures themselves (what tracing costs
//! fio in IOPS, how the traced latencies compare with fio's) are `cargo bench --bench
//! trace`'s: benchmarks print figures, tests do not time things.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use diskpulse::format::block_requests;

fn can_trace_fio() -> bool {
    can_use_loop_devices()
        && have_tool("fio", "fio")
        && (Path::new("/sys/kernel/tracing").is_dir()
            || skip("no tracefs in this kernel (CONFIG_TRACING)"))
}

/// `record --trace --device DEV --out DIR`, returned once its trace runs.
fn start_record(dir: &Path, dev: &str) -> Child {
    let mut c = diskpulse()
        .args(["record", "--trace", "--device", dev, "--out"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(dir.join("meta.json")).is_ok_and(|t| t.contains("\"trace\"")) {
        if let Some(st) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            panic!(
                "record ended before tracing ({st}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "trace not ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    c
}

/// The most requests between issue and completion at any instant.
fn most_in_flight(rows: &[&block_requests::BlockRequest]) -> usize {
    let mut edges: Vec<(u64, i32)> = rows
        .iter()
        .flat_map(|r| [(r.t_ns, 1), (r.t_ns + r.service_ns, -1)])
        .collect();
    // A completion at the same ns as an issue frees its slot first.
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// 8192 random 4 KiB O_DIRECT writes at iodepth 32 (fio at full speed, 100,000 and
/// more requests a second here): the trace has them all (their bytes add up to fio's
/// exactly, whatever the block layer merged), lost none, paired every completion, and
/// never has more than 32 requests between issue and completion, which fio's iodepth
/// makes impossible (a completion paired with the wrong issue would break it).
#[test]
fn fio_at_full_speed_is_traced_whole_with_none_lost_and_at_most_its_iodepth_in_flight() {
    if !can_trace_fio() {
        return;
    }
    let lo = LoopDev::new("64M");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let rec = start_record(&dir, lo.name());
    const BYTES: u64 = 32 << 20;
    const IODEPTH: usize = 32;
    let fio = std::process::Command::new("fio")
        .args([
            "--name=trace-perf",
            &format!("--filename={}", lo.dev),
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            &format!("--iodepth={IODEPTH}"),
            &format!("--size={BYTES}"),
            "--output-format=json",
        ])
        .output()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let rec_out = rec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&rec_out.stderr);
    assert!(
        fio.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&fio.stderr)
    );
    assert_eq!(rec_out.status.code(), Some(130), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&fio.stdout).unwrap();
    let fio_bytes = v["jobs"][0]["write"]["io_bytes"].as_u64().unwrap();
    assert_eq!(fio_bytes, BYTES, "fio wrote its size");

    let stats = read_json(&dir.join("meta.json"))["trace"]["stats"].clone();
    assert_eq!(stats["lost_events"], 0, "{stats}");
    let (rows, warnings) = block_requests::read(&dir).unwrap();
    assert!(warnings.is_empty(), "every row reads back: {warnings:?}");
    assert_eq!(
        rows.len() as u64,
        stats["requests"].as_u64().unwrap(),
        "a row per paired request"
    );
    let writes: Vec<&block_requests::BlockRequest> = rows
        .iter()
        .filter(|r| r.device == lo.name() && r.op == "write")
        .collect();
    assert_eq!(
        writes.iter().map(|r| r.bytes).sum::<u64>(),
        BYTES,
        "the traced writes add up to fio's bytes ({} requests)",
        writes.len()
    );
    assert!(
        writes.iter().all(|r| r.error == 0 && r.flags.contains('W')),
        "every write completed without error"
    );
    let most = most_in_flight(&writes);
    assert!(
        (1..=IODEPTH).contains(&most),
        "at most fio's iodepth {IODEPTH} in flight, traced {most}"
    );
}
