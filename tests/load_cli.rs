//! `diskpulse load`, the binary: natscli's CSV, and failures that end a run with one
//! clear line and a non-zero exit, keeping what was measured. Each run starts its own
//! embedded nats-server unless it names one; without `nats-server` on PATH each test says
//! why and returns.

mod common;
use common::*;

use std::path::Path;
use std::time::Duration;

use collectors::clock::Clock;
use diskpulse::broker::find_nats_server;

/// Runs `diskpulse load ARGS` (embedded server unless --server) with `run_dir` as the
/// parent recording, so load.csv is written there. (exit code, stdout, stderr)
fn cli(args: &[&str], run_dir: &Path) -> (i32, String, String) {
    let zero = Clock::start().zero_monotonic_ns();
    let o = diskpulse()
        .arg("load")
        .args(args)
        .env_remove("NATS_URL")
        .env("DISKPULSE_RUN_DIR", run_dir)
        .env("DISKPULSE_CLOCK_ZERO_NS", zero.to_string())
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The one non-empty stderr line.
fn one_line(err: &str) -> &str {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    lines[0]
}

fn csv_rows(p: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

/// load.csv's ops column summed for a role.
fn load_csv_ops(run_dir: &Path, role: &str) -> u64 {
    std::fs::read_to_string(run_dir.join("load.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[2] == role)
        .map(|f| f[3].parse::<u64>().unwrap())
        .sum()
}

#[test]
fn csv_is_what_natscli_writes_and_the_extras_go_beside_it() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("bench.csv");
    let (code, out, err) = cli(
        &[
            "pub",
            "--sub",
            "2",
            "--msgs",
            "1000",
            "--csv",
            csv.to_str().unwrap(),
        ],
        d.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    // natscli's 7 columns, one row per client (subscribers first), nothing else.
    assert!(
        text.starts_with("#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs\n"),
        "{text}"
    );
    let rows = csv_rows(&csv);
    let ids: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(ids, ["S0", "S1", "P0"], "{text}");
    let run_id = &rows[0][0];
    assert_eq!(run_id.len(), 22);
    for r in &rows {
        assert_eq!(r.len(), 7, "{r:?}");
        assert_eq!(&r[0], run_id);
        let (count, bytes): (u64, u64) = (r[2].parse().unwrap(), r[3].parse().unwrap());
        assert_eq!(bytes, count * 128, "{r:?}");
        let rate: u64 = r[4].parse().unwrap();
        let bps: f64 = r[5].parse().unwrap();
        let secs: f64 = r[6].parse().unwrap();
        assert!(rate > 0 && bps > 0.0 && secs > 0.0, "{r:?}");
    }
    let count = |rows: &[Vec<String>], id: &str, col: usize| {
        rows.iter().find(|r| r[1] == id).unwrap()[col]
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(
        (
            count(&rows, "P0", 2),
            count(&rows, "S0", 2),
            count(&rows, "S1", 2)
        ),
        (1000, 1000, 1000)
    );
    // The extras: the same clients with their role, errors and latencies, then one
    // aggregate row per role.
    let extras = d.path().join("bench.diskpulse.csv");
    let x = csv_rows(&extras);
    let ids: Vec<&str> = x.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(ids, ["S0", "S1", "P0", "S", "P"]);
    assert!(x.iter().all(|r| r.len() == 17 && &r[0] == run_id), "{x:?}");
    assert_eq!((count(&x, "P", 3), count(&x, "S", 3)), (1000, 2000));
    assert_eq!(&x[0][2], "sub");
    assert!(
        out.contains("pub stats:") && out.contains("sub stats:"),
        "{out}"
    );

    // JetStream: MsgCount counts messages, not messages plus acks.
    let (code, _, err) = cli(
        &["js-pub", "--msgs", "500", "--csv", csv.to_str().unwrap()],
        d.path(),
    );
    assert_eq!(code, 0, "{err}");
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], "P0");
    assert_eq!(rows[0][2], "500");
}

#[test]
fn unreachable_server_is_one_line_and_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let csv = d.path().join("x.csv");
    let (code, _, err) = cli(
        &[
            "js-pub",
            "--server",
            &url,
            "--msgs",
            "10",
            "--csv",
            csv.to_str().unwrap(),
        ],
        d.path(),
    );
    assert_eq!(code, 1, "{err}");
    let line = one_line(&err);
    assert!(
        line.contains("cannot connect") && line.contains(&url),
        "{line}"
    );
    // Nothing was measured; the CSVs still say what their columns are.
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs\n"
    );
    assert!(std::fs::read_to_string(d.path().join("x.diskpulse.csv"))
        .unwrap()
        .starts_with("#RunID,ClientID,Role,"));
}

#[test]
fn wrong_password_is_one_line_without_the_password() {
    if !have_nats_server() {
        return;
    }
    let bin = find_nats_server(None).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(bin)
        .args([
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--user",
            "a",
            "--pass",
            "b",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = tempfile::tempdir().unwrap();
    let url = format!("nats://127.0.0.1:{port}");
    let (code, out, err) = cli(
        &[
            "pub",
            "--server",
            &url,
            "--user",
            "a",
            "--password",
            "s3cr3t-pw",
            "--msgs",
            "10",
        ],
        d.path(),
    );
    // The right password works against the same server.
    let (ok, _, ok_err) = cli(
        &[
            "pub",
            "--server",
            &url,
            "--user",
            "a",
            "--password",
            "b",
            "--msgs",
            "10",
        ],
        d.path(),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 1, "{err}");
    let line = one_line(&err);
    assert!(line.contains("authorization"), "{line}");
    assert!(
        !err.contains("s3cr3t-pw") && !out.contains("s3cr3t-pw"),
        "{err}"
    );
    assert_eq!(ok, 0, "{ok_err}");
}

#[test]
fn missing_stream_is_one_line_naming_how_to_create_it() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (code, _, err) = cli(&["js-consume", "--stream", "NOPE"], d.path());
    assert_eq!(code, 1, "{err}");
    let line = one_line(&err);
    assert!(
        line.contains("stream 'NOPE' not found at nats://127.0.0.1:")
            && line.contains("`diskpulse load js-pub --stream NOPE`"),
        "{line}"
    );
}

#[test]
fn full_stream_ends_with_what_failed_when_and_how_many_and_keeps_what_was_measured() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("full.csv");
    let (code, out, err) = cli(
        &[
            "js-pub",
            "--max-bytes",
            "64k",
            "--msgs",
            "10000",
            "--csv",
            csv.to_str().unwrap(),
        ],
        d.path(),
    );
    assert_eq!(code, 1, "{out}{err}");
    // One error line with the hint, then the loud line last: what, when, how many.
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "{err}");
    let line = lines[0];
    assert!(
        line.contains("of 10000 js-pub operations failed (stream_full") && line.contains("--purge"),
        "{line}"
    );
    // The summary, the CSV and load.csv hold what was stored before the stream filled.
    assert!(out.contains("js-pub stats:"), "{out}");
    let rows = csv_rows(&csv);
    let stored: u64 = rows[0][2].parse().unwrap();
    assert!(stored > 0 && stored < 10000, "{rows:?}");
    let last = lines[1];
    let (at, count) = last
        .strip_prefix("the stream reached its limits at ")
        .and_then(|r| r.strip_suffix(" publishes failed"))
        .and_then(|r| r.split_once(" s into the load (stream full): "))
        .unwrap_or_else(|| panic!("last line: {last}"));
    assert!(at.parse::<f64>().unwrap() >= 0.0, "{last}");
    assert_eq!(
        count.replace(',', ""),
        (10000 - stored).to_string(),
        "{last}"
    );
    let extras = csv_rows(&d.path().join("full.diskpulse.csv"));
    assert_eq!(extras[0][8], (10000 - stored).to_string(), "Errors column");
    assert_eq!(load_csv_ops(d.path(), "js-pub"), stored);
}

#[test]
fn discard_old_keeps_a_full_stream_taking_publishes() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("ring.csv");
    // The same 64 KiB stream that refuses most of 10,000 publishes with discard new
    // (the test above) takes them all when the oldest make room.
    let (code, out, err) = cli(
        &[
            "js-pub",
            "--max-bytes",
            "64k",
            "--discard",
            "old",
            "--msgs",
            "10000",
            "--csv",
            csv.to_str().unwrap(),
        ],
        d.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("stream_full"), "{err}");
    assert_eq!(load_csv_ops(d.path(), "js-pub"), 10000);
    // --discard means nothing without a limit: a usage error naming both.
    let (code, _, err) = cli(&["js-pub", "--discard", "old", "--msgs", "10"], d.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-bytes"), "{err}");
}
