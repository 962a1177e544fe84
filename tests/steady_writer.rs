//! A steady writer is not a burst: `record -- diskpulse probe` writing O_DIRECT at a fixed
//! rate on a loop device of its own gives no write bursts for that device in
//! summary.json, a report that says "steady at X, no bursts", nothing shaded, and no
//! inside/outside-burst interference ratio for it. (The finder used to call the whole run
//! one 22.7 s burst, so every panel was shaded and "100.0% of its writes fell in bursts".)
//!
//! Needs root and losetup (a loop device the run has to itself).

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Command;

/// A loop device over a file on tmpfs: a memory copy, so the writer stays steady. Over
/// /var/tmp the shared virtual disk stalls the loop device for hundreds of ms now and
/// then, and the probe's open-loop schedule catches up after it: a real burst, which the
/// finder rightly reports (seen: 3.6 MiB in 10 ms after a 300 ms stall).
struct ShmLoop {
    image: PathBuf,
    dev: String,
}

impl ShmLoop {
    fn new(size: &str) -> ShmLoop {
        let image = PathBuf::from(format!(
            "/dev/shm/diskpulse-test-{}-{}.img",
            std::process::id(),
            unique_suffix()
        ));
        sh("truncate", &["-s", size, image.to_str().unwrap()]);
        let dev = sh("losetup", &["-f", "--show", image.to_str().unwrap()]);
        ShmLoop { image, dev }
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for ShmLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

#[test]
fn a_steady_direct_writer_has_no_bursts_no_shading_and_no_interference_ratio() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = ShmLoop::new("128M");
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    // 64 KiB O_DIRECT writes at 40 a second straight to the device (no file to lay out:
    // a probe that creates its file writes it all at once first, a real burst): 2.5 MiB/s
    // for 6 s, one write every 25 ms. So most 10 ms bins are empty (p25 = 0) and every
    // write's bin is busy, 25 ms apart: the old finder's one burst as long as the run.
    let out = diskpulse()
        .args(["record", "--device", lo.name(), "--out"])
        .arg(&run)
        .args([
            "--",
            bin,
            "probe",
            "--allow-destructive",
            "--filename",
            &lo.dev,
        ])
        .args([
            "--size",
            "64m",
            "--rw",
            "write",
            "--bs",
            "64k",
            "--rate_iops",
            "40",
            "--time-based",
            "--runtime",
            "6s",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = diskpulse().arg("report").arg(&run).output().unwrap();
    let stdout = String::from_utf8_lossy(&rep.stdout);
    assert!(
        rep.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&rep.stderr)
    );

    let s = read_json(&run.join("summary.json"));
    let w = &device(&s, lo.name())["write"];
    // The writer really wrote: about 15 MiB (the probe's 6 s at 2.5 MiB/s).
    let mib = w["bytes"].as_f64().unwrap() / (1 << 20) as f64;
    assert!((12.0..20.0).contains(&mib), "{mib} MiB written: {w:#}");
    let b = &w["bursts"];
    assert_eq!(b["count"], 0, "{b:#}");
    assert!(b["list"].as_array().unwrap().is_empty(), "{b:#}");
    assert!(b["period_s"].is_null() && b["period_cv"].is_null(), "{b:#}");
    assert_eq!(b["share_of_bytes"], 0.0, "{b:#}");

    // The headline, on stdout and in summary.json, says so.
    let want = format!("{}: writes steady at ", lo.name());
    let headline: Vec<&str> = s["headline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h.as_str())
        .collect();
    let line = headline
        .iter()
        .find(|h| h.starts_with(&want))
        .unwrap_or_else(|| panic!("no steady headline for {}: {headline:#?}", lo.name()));
    assert!(line.contains("no bursts"), "{line}");
    assert!(!line.contains("every"), "{line}");
    assert!(stdout.contains(line), "{stdout}");

    // Interference: the probe's histograms are there, but nothing to be inside of.
    let x = &s["interference"];
    assert!(x.is_object(), "no interference section: {s:#}");
    let against: Vec<_> = x["bursts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["device"] == lo.name())
        .collect();
    assert!(against.is_empty(), "{against:#?}");
    let lines: Vec<&str> = x["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(
        lines.iter().all(|l| !l.contains("fell in bursts")),
        "{lines:#?}"
    );

    // report.html: the Bursts section says steady, and no span is shaded.
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("{} write: steady at ", lo.name())),
        "no steady line in report.html"
    );
    // The static timeline's burst shades (tests/interference.rs counts them the same way).
    assert_eq!(html.matches("fill=\"#FFA500\"").count(), 0, "shaded spans");
}
