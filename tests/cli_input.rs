//! Bad input gets one clear line and exit code 2, with nothing written; Ctrl-C ends a run
//! cleanly with its recording complete and its children stopped.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

fn fails_with_usage(args: &[&str], must_contain: &[&str]) -> String {
    let o = diskpulse().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    // clap adds a blank line and "For more information, try '--help'." to its own errors.
    let lines = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .count();
    assert_eq!(lines, 1, "one line expected: {err}");
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: '{m}' not in: {err}");
    }
    err
}

#[test]
fn unknown_device_lists_the_ones_that_exist() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let any = &collectors::devices::Resolver::default().all()[0].0;
    fails_with_usage(
        &[
            "record",
            "--device",
            "nosuchdisk",
            "--out",
            out.to_str().unwrap(),
        ],
        &["nosuchdisk", any],
    );
    assert!(!out.exists(), "nothing may be written");
}

#[test]
fn a_path_on_tmpfs_has_no_block_device() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    fails_with_usage(
        &[
            "record",
            "--path",
            "/dev/shm",
            "--out",
            out.to_str().unwrap(),
        ],
        &["/dev/shm", "tmpfs"],
    );
    assert!(!out.exists());
}

#[test]
fn an_interval_under_100us_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    fails_with_usage(
        &[
            "record",
            "--interval",
            "50us",
            "--out",
            out.to_str().unwrap(),
        ],
        &["--interval", "50us", "100us"],
    );
    assert!(!out.exists());
    fails_with_usage(&["record", "--interval", "1 ms"], &["'1 ms'"]);
}

#[test]
fn a_run_that_is_not_a_recording_is_refused() {
    let d = tempfile::tempdir().unwrap();
    fails_with_usage(
        &["report", d.path().to_str().unwrap()],
        &["not a diskpulse recording", "no meta.json"],
    );
    assert!(!d.path().join("summary.json").exists());
    fails_with_usage(&["report", "/nonexistent/run"], &["/nonexistent/run"]);
}

#[test]
fn an_unwritable_out_is_refused() {
    fails_with_usage(
        &[
            "record",
            "--duration",
            "100ms",
            "--out",
            "/proc/diskpulse-run",
        ],
        &["/proc/diskpulse-run", "--out"],
    );
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("x"), "keep").unwrap();
    fails_with_usage(
        &[
            "record",
            "--duration",
            "100ms",
            "--out",
            d.path().to_str().unwrap(),
        ],
        &["not an empty directory"],
    );
    assert_eq!(std::fs::read_to_string(d.path().join("x")).unwrap(), "keep");
}

#[test]
fn a_missing_nats_server_says_how_to_install_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    fails_with_usage(
        &[
            "demo",
            "--nats-server",
            "/nonexistent/nats-server",
            "--out",
            out.to_str().unwrap(),
        ],
        &["/nonexistent/nats-server"],
    );
    assert!(!out.exists());
}

fn sigint(pid: u32) {
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn wait_timeout(c: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            panic!("did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_closes_the_recording_and_stops_the_command() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let pidfile = d.path().join("child.pid");
    let mut c = diskpulse()
        .args(["record", "--out", run.to_str().unwrap(), "--", "sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 60", pidfile.display()))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    sigint(c.id());
    let st = wait_timeout(&mut c, Duration::from_secs(8));
    assert_eq!(st.code(), Some(130));
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["complete"], true);
    assert!(meta["samplers"]["diskstats"]["samples"].as_u64().unwrap() > 100);
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !alive(child),
        "the recorded command {child} is still running"
    );
    let ev = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(ev.contains("\"interrupted\""), "{ev}");
    // The cut-short recording reports.
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success());
}

#[test]
fn ctrl_c_during_demo_stops_the_broker_and_still_reports() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let mut c = diskpulse()
        .args([
            "demo",
            "--duration",
            "60s",
            "--sync-interval",
            "1s",
            "--out",
        ])
        .arg(&run)
        .arg("--store-dir")
        .arg(d.path().join("js"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the publisher runs (load.csv has rows), then interrupt.
    let t0 = Instant::now();
    while std::fs::read_to_string(run.join("load.csv"))
        .map(|s| s.lines().count() < 5)
        .unwrap_or(true)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "publisher never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sigint(c.id());
    let st = wait_timeout(&mut c, Duration::from_secs(20));
    assert_eq!(st.code(), Some(130));
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["complete"], true);
    let pid = meta["broker"]["pid"].as_u64().unwrap() as i32;
    assert!(!alive(pid), "nats-server {pid} still running");
    assert!(Path::new(&run.join("summary.json")).exists());
    assert!(run.join("timeline.png").exists());
}
