//! The report on a synthetic recording with known bursts finds exactly those, and reads a
//! recording whose gzip stream was cut off.

mod common;
use common::*;

use std::io::Write;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// Writes a recording: device `syn0` sampled every 1 ms for `secs` s, idle but for bursts
/// (start_ms, duration_ms, MiB/s); rows for every sample (as if nothing were suppressed).
fn synth(dir: &Path, secs: u64, bursts: &[(u64, u64, u64)]) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse", "duration_ns": secs * 1_000_000_000,
        "devices": [{"name": "syn0", "major": 250, "minor": 0, "why": "named"}],
        "samplers": {"diskstats": {"interval_us": 1000}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(dir.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let mut sectors = 0u64;
    let mut writes = 0u64;
    let mut total = 0u64;
    for ms in 0..=secs * 1000 {
        if ms > 0 {
            for &(s, d, rate) in bursts {
                if ms > s && ms <= s + d {
                    let bytes = rate * MIB / 1000;
                    sectors += bytes / 512;
                    writes += bytes / 4096;
                    total += bytes / 512 * 512;
                }
            }
        }
        writeln!(
            gz,
            "{},syn0,250,0,0,0,0,0,{writes},0,{sectors},0,0,0,0,0,0,0,0,0,0",
            ms * 1_000_000
        )
        .unwrap();
    }
    gz.finish().unwrap();
    total
}

#[test]
fn finds_exactly_the_synthetic_bursts() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // Seven bursts every 4 s, 50 ms at 800 MiB/s, over 30 s.
    let bursts: Vec<(u64, u64, u64)> = (0..7).map(|k| (1000 + k * 4000, 50, 800)).collect();
    let total = synth(&run, 30, &bursts);
    let o = diskpulse().args(["report"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let w = &device(&s, "syn0")["write"];
    let b = &w["bursts"];
    assert_eq!(b["count"], 7, "{b:#}");
    assert!((b["period_s"].as_f64().unwrap() - 4.0).abs() < 1e-6);
    assert_eq!(b["regular"], true);
    for (k, x) in b["list"].as_array().unwrap().iter().enumerate() {
        assert!((x["start_s"].as_f64().unwrap() - (1.0 + 4.0 * k as f64)).abs() < 0.0101);
        assert!((x["duration_ms"].as_f64().unwrap() - 50.0).abs() <= 10.0);
        let bytes = x["bytes"].as_f64().unwrap();
        assert!(
            (bytes - 40.0 * MIB as f64).abs() < 0.01 * 40.0 * MIB as f64,
            "{bytes}"
        );
    }
    assert!((w["bytes"].as_f64().unwrap() - total as f64).abs() < 1.0);
    let p10 = w["peak_mib_s"]["10ms"].as_f64().unwrap();
    assert!((p10 - 800.0).abs() < 8.0, "10 ms peak {p10}");
    // 30 s "UI" average: 7 x 40 MiB / 30 s.
    let ui = w["ui_average_mib_s"].as_f64().unwrap();
    assert!((ui - 280.0 / 30.0).abs() < 0.1, "ui {ui}");
    assert!((w["hidden_factor"].as_f64().unwrap() - p10 / ui).abs() < 1e-6);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("every 4.00 s"), "{stdout}");
    assert!(run.join("timeline.png").exists() && run.join("timeline.svg").exists());
}

#[test]
fn a_steady_writer_has_no_bursts() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // One "burst" that lasts the whole run is a steady writer.
    synth(&run, 10, &[(0, 10_000, 100)]);
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = read_json(&run.join("summary.json"));
    let b = &device(&s, "syn0")["write"]["bursts"];
    assert!(b["count"].as_u64().unwrap() <= 1, "{b:#}");
    assert_eq!(b["regular"], false);
}

#[test]
fn reads_a_cut_off_recording() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 10, &[(2000, 50, 500), (6000, 50, 500)]);
    // Cut the gzip stream as a kill -9 would.
    let p = run.join("diskstats.csv.gz");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let b = &device(&s, "syn0")["write"]["bursts"];
    assert!(b["count"].as_u64().unwrap() >= 1, "{b:#}");
}

#[test]
fn a_recording_of_another_format_version_is_refused_with_both_versions_named() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 2, &[(500, 50, 500)]);
    let p = run.join("meta.json");
    let mut meta = read_json(&p);
    meta["format_version"] = serde_json::json!(1);
    std::fs::write(&p, meta.to_string()).unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("format_version 1")
            && err.contains(&format!("version {}", diskpulse::format::FORMAT_VERSION)),
        "{err}"
    );
    assert!(!run.join("summary.json").exists());
}

#[test]
fn write_time_that_wraps_at_32_bits_gives_the_true_await() {
    // 49.7 days of uptime: write_ms passes 2^32 mid-run. 1000 writes of 2 ms each.
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let meta = serde_json::json!({"format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse", "duration_ns": 1_000_000_000u64});
    std::fs::write(run.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(run.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let start_ms: u64 = (1u64 << 32) - 1000;
    for ms in 0..=1000u64 {
        let write_ms = (start_ms + 2 * ms) % (1u64 << 32);
        writeln!(
            gz,
            "{},old0,8,0,0,0,0,0,{ms},0,{},{write_ms},0,{},{},,,,,,",
            ms * 1_000_000,
            ms * 8,
            ms,
            2 * ms
        )
        .unwrap();
    }
    gz.finish().unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let w = &device(&s, "old0")["write"];
    assert_eq!(w["ios"].as_f64().unwrap(), 1000.0);
    assert!(
        (w["await_ms"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{w:#}"
    );
    // A 14-column kernel: no flush counters, so no flush figures rather than zeros.
    assert!(device(&s, "old0")["flushes"].is_null());
}
