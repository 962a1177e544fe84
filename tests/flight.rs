//! The flight recorder's missing parts (issue 13 item 1): `--trigger 'ack_p99_ms>V'`
//! fed by the load's load.csv windows, with a real nats-server stalled by SIGSTOP.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

type Nats = JsServer;

/// Sends `sig` to the test's nats-server.
fn signal(nats: &Nats, sig: i32) {
    // SAFETY: kill has no memory preconditions; the pid is our own child.
    assert_eq!(unsafe { libc::kill(nats.child.id() as i32, sig) }, 0);
}

/// The tests of this file one at a time: each runs a broker and a load on 2 shared
/// cores, and a neighbour's load made a 116 ms ack p99 of its own.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Now on the run's clock (meta.json's zero on CLOCK_MONOTONIC).
fn run_now_ns(run: &Path) -> u64 {
    let meta = read_json(&run.join("meta.json"));
    let zero = meta["clock_zero_monotonic_ns"].as_u64().unwrap();
    collectors::clock::monotonic_ns() - zero
}

fn events(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn triggers(run: &Path) -> Vec<serde_json::Value> {
    events(run)
        .into_iter()
        .filter(|e| e["kind"] == "trigger")
        .collect()
}

/// Rows of load.csv written so far (headers excluded), its `--chunk` chunks included,
/// those `--keep` dropped as meta.json counts them.
fn load_rows(run: &Path) -> usize {
    let kept: usize = diskpulse::format::csv::chunked_files(run, "load.csv")
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| t.lines().count().saturating_sub(1))
                .unwrap_or(0)
        })
        .sum();
    let dropped: u64 = std::fs::read_to_string(run.join("meta.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| {
            m["chunks"]["files"]["load.csv"]["dropped"]
                .as_array()
                .map(|d| d.iter().filter_map(|c| c["rows"].as_u64()).sum())
        })
        .unwrap_or(0);
    kept + dropped as usize
}

#[test]
fn an_ack_p99_trigger_fires_in_the_load_window_of_a_broker_stall_and_not_before() {
    let _serial = serial();
    if !have_nats_server() {
        return;
    }
    let nats = Nats::start();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = tmp.path().join("run");
    let mut rec = diskpulse()
        .args([
            "record",
            "--no-progress",
            "--path",
            "/var/tmp",
            "--chunk",
            "1s",
            "--keep",
            "3s",
            "--trigger",
            "ack_p99_ms>200",
            "--trigger-window",
            "1s",
            "--out",
        ])
        .arg(&run)
        .args([
            "--",
            env!("CARGO_BIN_EXE_diskpulse"),
            "load",
            "js-pub",
            "--server",
            &nats.url,
            "--rate",
            "500",
            "--duration",
            "11s",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The load runs and writes windows below the threshold for a while first.
    let t0 = Instant::now();
    while load_rows(&run) < 30 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the load wrote {} load.csv rows in 20 s",
            load_rows(&run)
        );
        assert!(rec.try_wait().unwrap().is_none(), "record ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(2000));
    let before = triggers(&run);
    let stop_ns = run_now_ns(&run);
    signal(&nats, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(&nats, libc::SIGCONT);
    let cont_ns = run_now_ns(&run);
    let out = rec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {stderr}");
    assert!(
        before.is_empty(),
        "an ack trigger fired before the stall (at {} ns): {before:?}",
        stop_ns
    );

    let fired = triggers(&run);
    let first = fired
        .first()
        .unwrap_or_else(|| panic!("no trigger event; stall {stop_ns}..{cont_ns} ns; {stderr}"));
    let (t, window, seen) = (
        first["t_ns"].as_u64().unwrap(),
        first["detail"]["window_ns"].as_u64().unwrap(),
        first["detail"]["seen_t_ns"].as_u64().unwrap(),
    );
    eprintln!(
        "stall {:.3}..{:.3} s; trigger at the window {:.3} s (+{} ms), p99 {:.1} ms, seen {:.3} s",
        stop_ns as f64 / 1e9,
        cont_ns as f64 / 1e9,
        t as f64 / 1e9,
        window / 1_000_000,
        first["detail"]["value"].as_f64().unwrap(),
        seen as f64 / 1e9
    );
    assert_eq!(first["detail"]["trigger"], "ack_p99_ms>200");
    assert_eq!(first["detail"]["role"], "js-pub");
    assert!(first["detail"]["value"].as_f64().unwrap() > 200.0);
    // The window of the acks the stall held back: it holds a moment of the stall or its
    // end (the acks complete once the server runs again), within one load window.
    assert!(
        t + window > stop_ns && t <= cont_ns + window,
        "trigger window {t}+{window} ns is not at the stall {stop_ns}..{cont_ns} ns"
    );
    assert!(
        fired
            .iter()
            .all(|e| e["t_ns"].as_u64().unwrap() + window > stop_ns),
        "a trigger before the stall: {fired:?}"
    );
    // Read soon after the row was written (the collector's 300 ms grace and a 100 ms
    // tick after the window, then the recorder's 50 ms poll).
    assert!(
        seen >= t + window && seen < t + window + 2_000_000_000,
        "seen at {seen} ns for the window {t} ns"
    );

    // The kept window spans the stall, and the chunks under it survived --keep 3s
    // while older chunks were dropped.
    let meta = read_json(&run.join("meta.json"));
    let chunks = &meta["chunks"];
    let kept = chunks["kept_windows"].as_array().unwrap();
    let k = kept
        .iter()
        .find(|k| {
            k["what"]
                .as_str()
                .unwrap_or("")
                .contains("ack_p99_ms>200 on js-pub")
        })
        .unwrap_or_else(|| panic!("no kept window for the trigger: {chunks}"));
    let (from, to) = (
        k["from_t_ns"].as_u64().unwrap(),
        k["to_t_ns"].as_u64().unwrap(),
    );
    assert!(
        from <= t.saturating_sub(900_000_000) && to >= t + window + 900_000_000,
        "kept {from}..{to} ns around {t} ns"
    );
    let dropped = chunks["dropped"].as_array().unwrap();
    assert!(!dropped.is_empty(), "--keep 3s dropped nothing: {chunks}");
    for c in chunks["closed"].as_array().unwrap() {
        let (f, l) = (
            c["first_t_ns"].as_u64().unwrap(),
            c["last_t_ns"].as_u64().unwrap(),
        );
        let file = c["file"].as_str().unwrap();
        if f <= to && l >= from {
            assert!(
                run.join(file).exists(),
                "{file} ({f}..{l} ns) overlaps the kept window {from}..{to} ns but was deleted"
            );
            assert!(!dropped.iter().any(|d| d["file"] == file), "{file} dropped");
        }
    }
}

/// The rows of a plain CSV file: the `t_ns` of each (header checked).
fn plain_rows(p: &Path, header_starts: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    assert!(
        lines.next().unwrap_or("").starts_with(header_starts),
        "{} starts with its header",
        p.display()
    );
    lines
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn meminfo_and_cpu_are_chunked_and_dropped_by_the_same_rules_and_read_as_one() {
    let _serial = serial();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = tmp.path().join("run");
    let out = diskpulse()
        .args([
            "record",
            "--no-progress",
            "--path",
            "/var/tmp",
            "--duration",
            "6500ms",
            "--chunk",
            "1s",
            "--keep",
            "2s",
            "--trigger-window",
            "1s",
            "--out",
        ])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = read_json(&run.join("meta.json"));
    let s = 1_000_000_000u64;
    for (file, header, interval_ns) in [
        ("meminfo.csv", "t_ns,dirty_kib", 10_000_000u64),
        ("cpu.csv", "t_ns,user_ticks", 100_000_000),
    ] {
        let chunks = &meta["chunks"]["files"][file];
        let closed = chunks["closed"]
            .as_array()
            .unwrap_or_else(|| panic!("meta.json chunks.files has no {file}: {}", meta["chunks"]));
        let dropped = chunks["dropped"].as_array().unwrap();
        assert!(closed.len() >= 6, "{file}: {} chunks closed", closed.len());
        assert!(!dropped.is_empty(), "{file}: --keep 2s dropped none");
        let mut kept_rows = 0;
        for c in closed {
            let name = c["file"].as_str().unwrap();
            let p = run.join(name);
            if dropped.iter().any(|d| d["file"] == name) {
                assert!(!p.exists(), "{name} was dropped but is there");
                continue;
            }
            let rows = plain_rows(&p, header);
            assert_eq!(rows.len() as u64, c["rows"].as_u64().unwrap(), "{name}");
            // A chunk holds the rows of one aligned second (the last one, at the end,
            // is the file itself).
            if name.starts_with("chunks/") {
                let k = rows[0] / s;
                assert!(
                    rows.iter().all(|t| t / s == k),
                    "{name}: rows of more than one second: {rows:?}"
                );
                assert_eq!(rows.first(), c["first_t_ns"].as_u64().as_ref(), "{name}");
                assert_eq!(rows.last(), c["last_t_ns"].as_u64().as_ref(), "{name}");
            }
            kept_rows += rows.len();
        }
        // The run's readers read the chunks as one: every kept row once, in order, with
        // no hole at a chunk boundary, starting after the last dropped chunk.
        let (t, _) = diskpulse::format::procfs::read(&run, file)
            .unwrap()
            .unwrap_or_else(|| panic!("{file} reads as nothing"));
        assert_eq!(t.t_ns.len(), kept_rows, "{file}: rows read");
        let last_dropped = dropped
            .iter()
            .map(|d| d["last_t_ns"].as_u64().unwrap())
            .max()
            .unwrap();
        assert!(t.t_ns[0] > last_dropped, "{file} starts in a dropped chunk");
        for w in t.t_ns.windows(2) {
            assert!(w[1] > w[0], "{file}: rows out of order: {w:?}");
            assert!(
                w[1] - w[0] < 3 * interval_ns,
                "{file}: a hole of {} ms at {} ns",
                (w[1] - w[0]) / 1_000_000,
                w[0]
            );
        }
        eprintln!(
            "{file}: {} chunks closed, {} dropped, {} rows read from {:.3} s to {:.3} s",
            closed.len(),
            dropped.len(),
            t.t_ns.len(),
            t.t_ns[0] as f64 / 1e9,
            t.t_ns[t.t_ns.len() - 1] as f64 / 1e9
        );
    }
    // envelopes.csv.gz too (gzip): its reader reads the kept chunks, then the file, as
    // one stream: every row kept once.
    let env = &meta["chunks"]["files"]["envelopes.csv.gz"];
    let closed = env["closed"]
        .as_array()
        .unwrap_or_else(|| panic!("no envelopes chunks: {}", meta["chunks"]));
    let dropped = env["dropped"].as_array().unwrap();
    assert!(closed.len() >= 6 && !dropped.is_empty(), "{env}");
    let kept: u64 = closed
        .iter()
        .filter(|c| !dropped.iter().any(|d| d["file"] == c["file"]))
        .map(|c| c["rows"].as_u64().unwrap())
        .sum();
    let (rows, warnings) =
        diskpulse::format::envelopes::read(&run.join("envelopes.csv.gz")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(rows.len() as u64, kept, "envelope rows read");
    eprintln!(
        "envelopes.csv.gz: {} chunks closed, {} dropped, {} rows read",
        closed.len(),
        dropped.len(),
        rows.len()
    );
}

/// Pids of the nats-server processes whose command line mentions `needle` (the test's
/// own directory: other tests' and engineers' servers are not ours).
fn nats_servers_under(needle: &Path) -> Vec<u32> {
    let needle = needle.display().to_string();
    let mut pids = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("nats-server") && cmd.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn demo_takes_the_flight_flags_its_ack_trigger_sees_the_in_process_load_and_usr1_keeps() {
    let _serial = serial();
    if !have_nats_server() {
        return;
    }
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = tmp.path().join("run");
    // A bad flag is refused before anything is written.
    let bad = diskpulse()
        .args(["demo", "--keep", "2s", "--trigger-window", "5s", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{:?}", bad);
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("--trigger-window 5s is longer than --keep 2s"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(!run.exists(), "a refused demo wrote {}", run.display());

    let store = tmp.path().join("store");
    let demo = diskpulse()
        .args([
            "demo",
            "--duration",
            "9s",
            "--chunk",
            "1s",
            "--keep",
            "3s",
            "--trigger",
            "ack_p99_ms>200",
            "--trigger-window",
            "1s",
            "--store-dir",
        ])
        .arg(&store)
        .arg("--out")
        .arg(&run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let server = loop {
        if let Some(p) = nats_servers_under(&run).first() {
            if load_rows(&run) >= 20 {
                break *p;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "demo's load did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(1500));
    // SIGUSR1 keeps the window around now.
    let usr1_ns = run_now_ns(&run);
    // SAFETY: kill has no memory preconditions; the pids are the demo's and its server.
    unsafe { libc::kill(demo.id() as i32, libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(1500));
    let stop_ns = run_now_ns(&run);
    unsafe { libc::kill(server as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(server as i32, libc::SIGCONT) };
    let cont_ns = run_now_ns(&run);
    let out = demo.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {stderr}");

    let fired = triggers(&run);
    let usr1 = fired
        .iter()
        .find(|e| e["detail"]["trigger"] == "signal USR1")
        .unwrap_or_else(|| panic!("no USR1 trigger: {fired:?}"));
    let t = usr1["t_ns"].as_u64().unwrap();
    assert!(
        t >= usr1_ns && t < usr1_ns + 200_000_000,
        "USR1 kept at {t} ns, sent at {usr1_ns} ns"
    );
    let ack = fired
        .iter()
        .find(|e| {
            e["detail"]["trigger"] == "ack_p99_ms>200" && {
                let (t, w) = (
                    e["t_ns"].as_u64().unwrap(),
                    e["detail"]["window_ns"].as_u64().unwrap(),
                );
                t + w > stop_ns && t <= cont_ns + w
            }
        })
        .unwrap_or_else(|| panic!("no ack trigger at the stall {stop_ns}..{cont_ns}: {fired:?}"));
    assert_eq!(ack["detail"]["role"], "js-pub");
    eprintln!(
        "demo: USR1 at {:.3} s kept at {:.3} s; stall {:.3}..{:.3} s, ack trigger at {:.3} s ({:.1} ms)",
        usr1_ns as f64 / 1e9,
        t as f64 / 1e9,
        stop_ns as f64 / 1e9,
        cont_ns as f64 / 1e9,
        ack["t_ns"].as_u64().unwrap() as f64 / 1e9,
        ack["detail"]["value"].as_f64().unwrap()
    );
    // Chunked and dropped as `record` does: diskstats and the other per-sample files,
    // the embedded server's proc_io.csv among them.
    let meta = read_json(&run.join("meta.json"));
    let chunks = &meta["chunks"];
    assert!(
        !chunks["dropped"].as_array().unwrap().is_empty(),
        "{chunks}"
    );
    for f in [
        "meminfo.csv",
        "cpu.csv",
        "proc_io.csv",
        "varz.csv",
        "jsz.csv",
    ] {
        let c = &chunks["files"][f];
        assert!(
            c["closed"].as_array().is_some_and(|v| v.len() >= 5),
            "{f}: {c}"
        );
        assert!(
            c["dropped"].as_array().is_some_and(|v| !v.is_empty()),
            "{f}: {c}"
        );
    }
    // The broker monitor's varz.csv reads as one across its kept chunks: every kept row
    // once, in order, from after the last dropped chunk, no hole at a seam (a poll
    // every 250 ms; a 300 ms SIGSTOP of the server delays one).
    let varz = &chunks["files"]["varz.csv"];
    let kept_rows: u64 = varz["closed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            !varz["dropped"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["file"] == c["file"])
        })
        .map(|c| c["rows"].as_u64().unwrap())
        .sum();
    let by_server = diskpulse::format::monitor::read(&run, "varz.csv").unwrap();
    assert_eq!(by_server.len(), 1, "one server: {:?}", by_server.keys());
    let t = &by_server.values().next().unwrap().t_ns;
    assert_eq!(t.len() as u64, kept_rows, "varz rows read");
    let dropped_to = varz["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["last_t_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(t[0] > dropped_to, "varz starts in a dropped chunk");
    for w in t.windows(2) {
        assert!(w[1] > w[0] && w[1] - w[0] < 1_000_000_000, "varz: {w:?}");
    }
    let kept = chunks["kept_windows"].as_array().unwrap();
    assert!(
        kept.iter()
            .any(|k| k["what"].as_str().unwrap_or("").contains("signal USR1")),
        "{chunks}"
    );
    assert!(run.join("report.html").exists(), "demo's report");
}

#[test]
fn run_takes_the_flight_flags_and_its_ack_trigger_reads_the_load_phases_rows() {
    let _serial = serial();
    if !can_use_loop_devices() || !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("flight.toml");
    std::fs::write(
        &sc,
        r#"name = "flight-test"
[[volumes]]
name = "store"
lab = { size = "256M", fs = "ext4" }
[broker]
volumes = ["store"]
[[phases]]
kind = "load"
args = ["js-pub", "--rate", "500", "--duration", "9s", "--stream", "F", "--subject", "f.x"]
"#,
    )
    .unwrap();
    let lab = d.path().join("lab").display().to_string();
    let out = d.path().join("study");
    // Checked before anything runs, also with --dry-run.
    let bad = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&sc)
        .args(["--trigger", "sdz:ack_p99_ms>5"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("'sdz' is none"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let child = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--lab-root", &lab])
        .args([
            "--chunk",
            "1s",
            "--keep",
            "3s",
            "--trigger",
            "ack_p99_ms>200",
            "--trigger-window",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = out.join("cells/base/r1");
    let t0 = Instant::now();
    let server = loop {
        if let Some(p) = nats_servers_under(d.path()).first() {
            if load_rows(&run) >= 20 {
                break *p;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the load phase did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(2000));
    let stop_ns = run_now_ns(&run);
    // SAFETY: kill has no memory preconditions; the pid is the run's nats-server.
    unsafe { libc::kill(server as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(server as i32, libc::SIGCONT) };
    let cont_ns = run_now_ns(&run);
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "run failed: {stderr}");
    let fired = triggers(&run);
    let ack = fired
        .iter()
        .find(|e| {
            let (t, w) = (
                e["t_ns"].as_u64().unwrap(),
                e["detail"]["window_ns"].as_u64().unwrap_or(0),
            );
            e["detail"]["trigger"] == "ack_p99_ms>200" && t + w > stop_ns && t <= cont_ns + w
        })
        .unwrap_or_else(|| panic!("no ack trigger at the stall {stop_ns}..{cont_ns}: {fired:?}"));
    eprintln!(
        "run: stall {:.3}..{:.3} s, ack trigger at {:.3} s ({:.1} ms)",
        stop_ns as f64 / 1e9,
        cont_ns as f64 / 1e9,
        ack["t_ns"].as_u64().unwrap() as f64 / 1e9,
        ack["detail"]["value"].as_f64().unwrap()
    );
    let chunks = &read_json(&run.join("meta.json"))["chunks"];
    assert_eq!(chunks["keep_ns"], 3_000_000_000u64, "{chunks}");
    assert!(
        !chunks["dropped"].as_array().unwrap().is_empty(),
        "{chunks}"
    );
    assert!(
        chunks["kept_windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["what"]
                .as_str()
                .unwrap_or("")
                .contains("ack_p99_ms>200 on js-pub")),
        "{chunks}"
    );
}
