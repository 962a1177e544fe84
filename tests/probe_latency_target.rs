//! fio's `latency_target` in `diskpulse probe` (issue 26, decision 0099): the queue-depth
//! search runs as fio's does. A target every depth meets ends at iodepth after doubling
//! 1, 2, 4, 8 and one final run whose figures alone are reported (the job ends before its
//! runtime); a target no I/O can meet ends the job at depth 1 with fio's error (110,
//! ETIMEDOUT); the options of the family without `latency_target` are refused.
//! Needs O_DIRECT in /var/tmp (a disk-backed file system).

mod common;
use common::*;

use std::process::Output;
use std::time::{Duration, Instant};

fn probe(args: &[&str]) -> Output {
    diskpulse().arg("probe").args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// A libaio randread job on a 16 MiB file of its own, with these extra lines.
fn job(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let p = dir.join("lt.fio");
    std::fs::write(
        &p,
        format!(
            "[lt]\nfilename={}\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=16m\niodepth=8\ntime_based\nruntime=20\n{extra}",
            dir.join("lt.dat").display()
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_target_every_depth_meets_doubles_to_iodepth_then_one_final_window_ends_the_job() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    // 2 s: every depth meets it; windows of 200 ms.
    let f = job(d.path(), "latency_target=2s\nlatency_window=200ms\n");
    let t0 = Instant::now();
    let o = probe(&["--output-format=json", f.to_str().unwrap()]);
    let wall = t0.elapsed();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let j = &v["jobs"][0];
    assert_eq!(j["latency_depth"], 8, "depth 1, 2, 4, 8 held: iodepth");
    assert_eq!(j["latency_target"], 2_000_000_000u64, "ns, as fio");
    assert_eq!(j["latency_window"], 200_000, "us, as fio");
    assert_eq!(j["error"], 0);
    // Windows at 1, 2, 4 and 8 (found: 8 stays 8), then the final run at 8: the job ends
    // after ~1 s, not after its 20 s runtime, and reports the final run alone.
    assert!(
        wall < Duration::from_secs(10),
        "the search ends the job: {wall:?}"
    );
    assert!(wall >= Duration::from_millis(900), "five windows: {wall:?}");
    let runtime_ms = j["job_runtime"].as_u64().unwrap();
    assert!(
        (150..=600).contains(&runtime_ms),
        "the figures start again at the final run (one 200 ms window): {runtime_ms} ms of {wall:?}"
    );
    assert!(j["read"]["total_ios"].as_u64().unwrap() > 0);
    // The human summary says it as fio does.
    let o = probe(&[f.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(
        out.contains("latency: target=2000000us, window=200000us, percentile=100.00%, depth=8"),
        "{out}"
    );
}

#[test]
fn a_target_no_io_meets_ends_the_job_at_depth_one_with_fios_error() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    // 1 us: no direct read of a disk-backed file comes back that fast.
    let f = job(d.path(), "latency_target=1\n");
    let o = probe(&["--output-format=json", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("exceeds specified max (1000 nsec)") && err.contains("latency_target"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["error"], libc::ETIMEDOUT, "fio's ETIMEDOUT");
    assert_eq!(v["jobs"][0]["latency_depth"], 1);
    // With a percentile below 100 a miss is counted, not fatal: the job runs on at depth 1.
    let f = job(
        d.path(),
        "latency_target=1\nlatency_percentile=50\nlatency_window=100ms\nruntime=1\n",
    );
    let o = probe(&["--output-format=json", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["latency_depth"], 1);
}

#[test]
fn the_searchs_options_without_latency_target_are_refused() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for extra in [
        "latency_window=1s\n",
        "latency_percentile=99\n",
        "latency_run\n",
    ] {
        let f = job(d.path(), extra);
        let o = probe(&[f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{extra}: {}", text(&o.stderr));
        let key = extra.split(['=', '\n']).next().unwrap().replace('_', "-");
        assert!(
            text(&o.stderr).contains(&format!("--{key} is part of the latency_target search")),
            "{extra}: {}",
            text(&o.stderr)
        );
    }
    assert!(!d.path().join("lt.dat").exists(), "nothing written");
}
