//! `diskpulse run` with real lab volumes, a real nats-server and real restarts: the
//! shipped scenarios expand, a broken file gets line and column, a restart's read burst is
//! found on the device that holds the store, the study report renders in Chromium, and
//! Ctrl-C mid-run leaves no loop device or mount behind.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

fn lab_root(d: &Path) -> String {
    d.join("lab").display().to_string()
}

/// Loop devices whose backing file lies under `dir`, and mounts under it.
fn leftovers(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    let mut v = vec![];
    let losetup = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&losetup.stdout).lines() {
        if l.contains(&d) {
            v.push(l.to_string());
        }
    }
    for l in std::fs::read_to_string("/proc/mounts").unwrap().lines() {
        if l.contains(&d) {
            v.push(l.to_string());
        }
    }
    v
}

#[test]
fn shipped_scenarios_expand() {
    for (f, runs) in [
        ("scenarios/reference-study.toml", 16),
        ("scenarios/raid0-vs-raid1.toml", 6),
        ("scenarios/restart.toml", 1),
        ("scenarios/demo.toml", 1),
        ("scenarios/probe-beside-load.toml", 12),
        ("scenarios/restart-under-load.toml", 1),
        ("scenarios/kill-under-load.toml", 1),
        ("scenarios/nats-call-vs-cast-latency.toml", 8),
        ("scenarios/rpc-call-vs-cast.toml", 16),
        ("scenarios/rabbitmq-queues.toml", 3),
    ] {
        let o = diskpulse().args(["run", f, "--dry-run"]).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains(&format!("= {runs} run(s)")), "{f}: {out}");
    }
    let o = diskpulse()
        .args(["run", "scenarios/reference-study.toml", "--dry-run"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    // Substituted per cell.
    assert!(
        out.contains("nodes-3_object_size-1024k_raid-1_sync-5s"),
        "{out}"
    );
    assert!(
        out.contains("--object-size 1024k") && out.contains("--replicas 3"),
        "{out}"
    );
    // The schedule: when each phase starts and what stops it.
    let dry = |f: &str| {
        let o = diskpulse().args(["run", f, "--dry-run"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let out = dry("scenarios/restart.toml");
    assert!(
        out.contains("#2 restart nodes [1]: after #1 sleep"),
        "{out}"
    );
    let out = dry("scenarios/probe-beside-load.toml");
    assert!(
        out.contains(": with #0 'load', stopped when #0 'load' ends"),
        "{out}"
    );
    let out = dry("scenarios/kill-under-load.toml");
    assert!(
        out.contains("#1 kill 'kill n2' nodes [2] down_for 5s: with #0 'load' + 10s"),
        "{out}"
    );
}

#[test]
fn a_broken_scenario_gets_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.toml");
    std::fs::write(
        &f,
        "name = \"bad\"\n[[volumes]]\nname = \"v\"\npath = \"/var/tmp\"\n[[phases]]\nkind = \"probe\"\nvolume = \"w\"\n",
    )
    .unwrap();
    let o = diskpulse().args(["run"]).arg(&f).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml:7:10"), "{err}");
    assert!(err.contains("no volume named 'w'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_restart_reads_the_store_back_from_its_device_and_the_study_renders() {
    if !can_use_loop_devices() {
        return;
    }
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("restart.toml");
    std::fs::write(
        &sc,
        r#"name = "restart-test"
[[volumes]]
name = "store"
lab = { size = "1G", fs = "ext4" }
[broker]
volumes = ["store"]
sync = "1s"
[[phases]]
kind = "load"
args = ["js-pub", "--size", "4k", "--msgs", "20000", "--stream", "R", "--subject", "r.x"]
[[phases]]
kind = "sleep"
duration = "2s"
[[phases]]
kind = "restart"
drop_caches = true
"#,
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--lab-root", &lab_root(d.path())])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = out.join("cells/base/r1");
    let meta = read_json(&run.join("meta.json"));
    let loopdev = meta["volumes"][0]["lab"]["loop_devices"][0]
        .as_str()
        .unwrap()
        .trim_start_matches("/dev/")
        .to_string();
    let s = read_json(&run.join("summary.json"));
    let r = &s["restarts"][0];
    assert_eq!(r["node"], "n1", "{r:#}");
    // The store's own device, not the disk under its loop file.
    assert_eq!(r["devices"], serde_json::json!([loopdev]), "{r:#}");
    // 20000 x 4 KiB = 78 MiB stored; the restart re-reads most of it from the device.
    let read = r["read_bytes"].as_f64().unwrap();
    assert!(read > 40.0 * 1048576.0, "read {read} bytes: {r:#}");
    assert!(r["read_peak_mib_s"].as_f64().unwrap() > 0.0);
    assert!(r["healthy_ms"].as_f64().is_some());
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(
        events.contains("\"broker_log\"") && events.contains("Restored"),
        "no recovery log lines as events"
    );
    // The study files.
    for f in [
        "study.json",
        "study.md",
        "study.csv",
        "report.html",
        "scenario.toml",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    // The restart's figures: in study.csv (study.md shows the few that answer).
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains("restart_read_mib"),
        "{csv}"
    );
    assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
    // The study page in Chromium: the run's timeline is in it, nothing fails or is fetched.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // Nothing fetched: no src/href at all (inline SVG's xmlns is a name, not a request).
    assert!(
        !html.contains(" src=") && !html.contains(" href=\"http"),
        "external reference in report.html"
    );
    if let Some(bin) = common::chromium::chromium() {
        let l = common::chromium::load(&bin, &out.join("report.html"), &["--dump-dom".into()]);
        assert!(l.console.is_empty(), "{:?}", l.console);
        assert!(l.page_requests.is_empty(), "{:?}", l.page_requests);
        // The page lists the run with the path of its own report.html (its timeline is
        // there, not inlined in the study page).
        assert!(l.stdout.contains("report.html"), "{}", l.stdout);
    }
    let cells = out.join("cells");
    let run_pages: Vec<std::path::PathBuf> = std::fs::read_dir(&cells)
        .unwrap()
        .flatten()
        .flat_map(|c| std::fs::read_dir(c.path()).unwrap().flatten())
        .map(|r| r.path().join("report.html"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(run_pages.len(), 1, "{run_pages:?}");
    let page = std::fs::read_to_string(&run_pages[0]).unwrap();
    assert!(
        page.contains("<svg"),
        "no timeline in the run's report.html"
    );
}

/// Issue 9, "failure is loud": a load phase whose publishes fail (a stream capped at
/// 64 KiB, discard new) fails its run, `run` exits 1 with the load's loud line last, and
/// the run's summary.json has the failure from the phase's kept result.
#[test]
fn a_load_phase_whose_publishes_fail_makes_run_exit_1_saying_what_when_and_how_many() {
    if !can_use_loop_devices() {
        return;
    }
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("full.toml");
    std::fs::write(
        &sc,
        r#"name = "full-test"
[[volumes]]
name = "store"
lab = { size = "256M", fs = "ext4" }
[broker]
volumes = ["store"]
[[phases]]
kind = "load"
args = ["js-pub", "--max-bytes", "64k", "--msgs", "5000", "--stream", "F", "--subject", "f.x"]
"#,
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--lab-root", &lab_root(d.path())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("base r1 failed: `diskpulse load js-pub")
            && last.contains("the stream reached its limits at ")
            && last.contains(" s into the load (stream full): ")
            && last.ends_with(" publishes failed"),
        "{stderr}"
    );
    let s = read_json(&out.join("cells/base/r1/summary.json"));
    let f = &s["failures"][0];
    assert_eq!(f["kind"], "stream_full", "{s:#}");
    let count = f["count"].as_u64().unwrap();
    assert!(count > 0 && count < 5000, "{f:#}");
    assert!(last.ends_with(f["line"].as_str().unwrap()), "{last}\n{f:#}");
    assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
}

#[test]
fn ctrl_c_mid_run_tears_the_lab_down() {
    if !can_use_loop_devices() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("long.toml");
    std::fs::write(
        &sc,
        r#"name = "long"
[matrix]
fs = ["ext4", "btrfs"]
[[volumes]]
name = "v"
lab = { size = "512M", fs = "${fs}" }
[[phases]]
kind = "sleep"
duration = "60s"
"#,
    )
    .unwrap();
    let out = d.path().join("study");
    let mut c = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--lab-root", &lab_root(d.path())])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first volume is mounted and the run is in its sleep.
    let t0 = Instant::now();
    while !std::fs::read_to_string(out.join("cells/fs-ext4/r1/events.jsonl"))
        .map(|e| e.contains("phase_start"))
        .unwrap_or(false)
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !leftovers(d.path()).is_empty(),
        "the volume should be up now"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t1 = Instant::now();
    let st = loop {
        if let Some(st) = c.try_wait().unwrap() {
            break st;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(st.code(), Some(130));
    assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
    let study = read_json(&out.join("study.json"));
    assert_eq!(study["status"], "interrupted");
    assert!(out.join("report.html").exists());
}
