//! load.csv and load.hlog cut into chunks and dropped like every other file (issue 13
//! item 1) while another process (`record -- diskpulse load`) appends to them: a real
//! nats-server, a real load, the recorder rotating under the appenders' lock.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

type Nats = JsServer;

/// `(t_ns, ops)` of each js-pub row of a load.csv file (its header checked).
fn csv_rows(p: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_else(|| panic!("{} is empty", p.display()))
        .split(',')
        .collect();
    assert_eq!(header[0], "t_ns", "{} starts with its header", p.display());
    let col = |n: &str| header.iter().position(|c| *c == n).unwrap();
    let (role, ops) = (col("role"), col("ops"));
    lines
        .filter_map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            assert!(!l.starts_with("t_ns"), "a second header in {}", p.display());
            (c[role] == "js-pub").then(|| (c[0].parse().unwrap(), c[ops].parse().unwrap()))
        })
        .collect()
}

/// The listed chunks of `file` in meta.json: (closed, dropped) file names.
fn listed(meta: &serde_json::Value, file: &str) -> (Vec<serde_json::Value>, Vec<String>) {
    let f = &meta["chunks"]["files"][file];
    let closed = f["closed"]
        .as_array()
        .unwrap_or_else(|| panic!("meta.json chunks.files has no {file}: {}", meta["chunks"]))
        .clone();
    let dropped = f["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["file"].as_str().unwrap().to_string())
        .collect();
    (closed, dropped)
}

/// Sorted, each once, one window apart: the kept windows have no gap and no duplicate.
fn assert_continuous(what: &str, mut t: Vec<u64>, window_ns: u64) {
    let n = t.len();
    t.sort_unstable();
    t.dedup();
    assert_eq!(t.len(), n, "{what}: a window written twice");
    for w in t.windows(2) {
        assert_eq!(
            w[1] - w[0],
            window_ns,
            "{what}: a gap or a broken grid between {} and {} ns",
            w[0],
            w[1]
        );
    }
}

#[test]
fn load_csv_and_load_hlog_are_chunked_dropped_and_read_whole_while_the_load_appends() {
    if !have_nats_server() {
        return;
    }
    let nats = Nats::start();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = tmp.path().join("run");
    let out = diskpulse()
        .args([
            "record",
            "--no-progress",
            "--path",
            "/var/tmp",
            "--chunk",
            "2s",
            "--keep",
            "4s",
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
            "10s",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = read_json(&run.join("meta.json"));
    let window_ns = 100_000_000u64;

    // load.csv: chunks listed, the dropped ones gone, the kept ones there with the rows
    // meta.json says; the kept rows (chunks then the file) continuous, each window once.
    let (closed, dropped) = listed(&meta, "load.csv");
    assert!(
        closed.len() >= 4,
        "load.csv: {} chunks closed",
        closed.len()
    );
    assert!(!dropped.is_empty(), "load.csv: --keep 4s dropped none");
    let mut kept: Vec<(u64, u64)> = vec![];
    for c in &closed {
        let name = c["file"].as_str().unwrap();
        let p = run.join(name);
        if dropped.iter().any(|d| d == name) {
            assert!(!p.exists(), "{name} was dropped but is there");
            continue;
        }
        let rows = csv_rows(&p);
        assert_eq!(rows.len() as u64, c["rows"].as_u64().unwrap(), "{name}");
        kept.extend(rows);
    }
    // Every chunk listed, dropped ones included: their rows add up to every window of
    // the run's grid from the first to the last once (none lost or doubled at a cut).
    let all_rows: u64 = closed.iter().map(|c| c["rows"].as_u64().unwrap()).sum();
    let t0 = closed
        .iter()
        .map(|c| c["first_t_ns"].as_u64().unwrap())
        .min()
        .unwrap();
    let t1 = closed
        .iter()
        .map(|c| c["last_t_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(
        all_rows,
        (t1 - t0) / window_ns + 1,
        "load.csv: rows listed over {t0}..{t1} ns"
    );
    let files = diskpulse::format::csv::chunked_files(&run, "load.csv");
    assert_eq!(
        files.len(),
        closed.len() - dropped.len() + (!closed.iter().any(|c| c["file"] == "load.csv")) as usize,
        "{files:?}"
    );
    let t: Vec<u64> = kept.iter().map(|r| r.0).collect();
    assert_continuous("load.csv", t.clone(), window_ns);
    let last = *t.iter().max().unwrap();
    let first = *t.iter().min().unwrap();
    assert!(
        last - first >= 3_000_000_000,
        "only {first}..{last} ns kept: --keep 4s keeps more"
    );

    // The run's reader reads them as one: the same windows, in time order.
    let by_role = diskpulse::format::load::read(&run).unwrap();
    let read: Vec<u64> = by_role["js-pub"].iter().map(|r| r.t_ns).collect();
    let mut want = t.clone();
    want.sort_unstable();
    assert_eq!(read, want, "format::load::read over chunks + file");

    // load.hlog: chunked and dropped too; its js-pub intervals continuous and once each,
    // the same windows as load.csv's (a rotation between a window's csv and hlog writes
    // may put them in neighbouring chunks: at most the edge windows differ).
    let (hclosed, hdropped) = listed(&meta, "load.hlog");
    assert!(hclosed.len() >= 4 && !hdropped.is_empty(), "{hclosed:?}");
    for d in &hdropped {
        assert!(!run.join(d).exists(), "{d} was dropped but is there");
    }
    let hist = diskpulse::format::hist::read_run(&run, "load.hlog").unwrap();
    let ht: Vec<u64> = hist
        .iter()
        .filter(|i| i.tag == "js-pub")
        .map(|i| i.start_ns)
        .collect();
    assert_continuous("load.hlog", ht.clone(), window_ns);
    // A window without an ack (load.csv has a row for it, 0 ops) has no interval.
    let a: std::collections::BTreeSet<u64> = kept.iter().filter(|r| r.1 > 0).map(|r| r.0).collect();
    let b: std::collections::BTreeSet<u64> = ht.iter().copied().collect();
    let differ = a.symmetric_difference(&b).count();
    assert!(
        differ <= 2,
        "load.csv and load.hlog kept different windows: {differ}"
    );

    // report reads the whole kept run: its js-pub ops are the kept rows' ops.
    let rep = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(
        rep.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let summary = read_json(&run.join("summary.json"));
    let ops: u64 = kept.iter().map(|r| r.1).sum();
    assert_eq!(
        summary["load"]["js-pub"]["ops"].as_u64(),
        Some(ops),
        "{}",
        summary["load"]
    );
    let per_chunk: BTreeMap<String, u64> = closed
        .iter()
        .map(|c| {
            (
                c["file"].as_str().unwrap().to_string(),
                c["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    eprintln!(
        "load.csv: {} chunks closed ({per_chunk:?}), {} dropped, {} windows kept from {:.1} s to {:.1} s; load.hlog: {} closed, {} dropped; report ops {ops}",
        closed.len(),
        dropped.len(),
        t.len(),
        first as f64 / 1e9,
        last as f64 / 1e9,
        hclosed.len(),
        hdropped.len()
    );
}
