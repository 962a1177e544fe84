//! A stall at a known moment is a run of rows, not a gap: load.csv and probe.csv have a
//! row for every window (0 completions in the stalled ones), and `oldest_wait_us` grows
//! through the stall by one window per row, to about the stall's length.
//!
//! The load test stops its own nats-server (SIGSTOP) for 300 ms under `load js-pub
//! --rate`; the probe test freezes (`fsfreeze`) an ext4 loop volume for 400 ms under
//! `probe --rate-iops-total`. Needs nats-server, and root with losetup and fsfreeze for
//! the probe; without them each test says why and returns (fails under `CI=true`).

mod common;
use common::*;

use std::path::Path;
use std::time::Duration;

/// A CSV file as its header and rows of cells.
fn table(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

/// A stalled window: its `t_ns` and `oldest_wait_us`.
type Stalled = (u64, f64);
/// A row: `t_ns`, completions, `oldest_wait_us`.
type Row = (u64, u64, f64);

/// The stalled windows: the longest run of consecutive rows with 0 completions in
/// `count`, and each row's `oldest_wait_us`. Checks on the way that the rows tile time
/// (each `window_ns` after the one before) and have every column.
fn stalled(header: &[String], rows: &[Vec<String>], count: &str) -> (Vec<Stalled>, Vec<Row>) {
    let col = |n: &str| {
        header
            .iter()
            .position(|h| h == n)
            .unwrap_or_else(|| panic!("no column {n} in {header:?}"))
    };
    let (t, w, c, wait) = (
        col("t_ns"),
        col("window_ns"),
        col(count),
        col("oldest_wait_us"),
    );
    let all: Vec<Row> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), header.len(), "{r:?}");
            (
                r[t].parse().unwrap(),
                r[c].parse().unwrap(),
                r[wait].parse().unwrap(),
            )
        })
        .collect();
    let window_ns: u64 = rows[0][w].parse().unwrap();
    for p in all.windows(2) {
        assert_eq!(
            p[1].0,
            p[0].0 + window_ns,
            "every window is a row: {:?} then {:?}",
            p[0],
            p[1]
        );
    }
    let (mut best, mut cur): (Vec<Stalled>, Vec<Stalled>) = (vec![], vec![]);
    for &(t, n, wait) in &all {
        if n == 0 {
            cur.push((t, wait));
            if cur.len() > best.len() {
                best = cur.clone();
            }
        } else {
            cur.clear();
        }
    }
    (best, all)
}

/// Each stalled row waited one window longer than the one before (within 20 ms: the
/// sampling is at the first tick after the window's end), and the last one about as
/// long as the stall (`min_us..=max_us`).
fn assert_grows(stall: &[Stalled], window_us: f64, min_us: f64, max_us: f64) {
    for p in stall.windows(2) {
        let step = p[1].1 - p[0].1;
        assert!(
            (step - window_us).abs() < 20_000.0,
            "oldest_wait_us grows by a window per stalled row: {stall:?}"
        );
    }
    let last = stall.last().unwrap().1;
    assert!(
        (min_us..=max_us).contains(&last),
        "the last stalled row waited {last} us, want {min_us}..={max_us}: {stall:?}"
    );
}

#[test]
fn a_stopped_broker_is_rows_of_zero_acks_whose_oldest_wait_grows() {
    if !have_nats_server() {
        return;
    }
    let server = JsServer::start();
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let child = diskpulse()
        .args(["record", "--out", run.to_str().unwrap(), "--"])
        .args([env!("CARGO_BIN_EXE_diskpulse"), "load", "js-pub"])
        .args([
            "--server",
            &server.url,
            "--rate",
            "1000",
            "--duration",
            "3s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Well inside the 3 s of load (the recorder and the load start in under a second).
    std::thread::sleep(Duration::from_millis(1500));
    let pid = server.child.id() as i32;
    // SAFETY: kill has no memory preconditions; the pid is our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (header, rows) = table(&run.join("load.csv"));
    let (stall, all) = stalled(&header, &rows, "ops");
    eprintln!("stalled windows (t_ns, oldest_wait_us): {stall:?}");
    // 300 ms stopped: at least two whole 100 ms windows without an ack.
    assert!((2..=4).contains(&stall.len()), "{stall:?}");
    assert_grows(&stall, 100_000.0, 150_000.0, 330_000.0);
    // Outside the stall nothing waited a window long; every publish was acked once.
    let (first, last) = (stall[0].0, stall.last().unwrap().0);
    let away: Vec<&Row> = all
        .iter()
        .filter(|r| r.0 + 100_000_000 < first || r.0 > last + 100_000_000)
        .filter(|r| r.2 >= 100_000.0)
        .collect();
    assert!(away.is_empty(), "{away:?} (stalled: {stall:?})");
    let ops: u64 = all.iter().map(|r| r.1).sum();
    assert_eq!(ops, 3000, "acks of 3 s at 1000/s");
}

#[test]
fn a_frozen_file_system_is_rows_of_zero_ios_whose_oldest_wait_grows() {
    if !can_use_loop_devices() || !have_tool("fsfreeze", "util-linux") {
        return;
    }
    let mut vol = LoopDev::new("256M");
    let mnt = vol.mount_ext4();
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let file = mnt.join("probe.dat");
    let child = diskpulse()
        .args([
            "record",
            "--device",
            vol.name(),
            "--out",
            run.to_str().unwrap(),
        ])
        .args(["--", env!("CARGO_BIN_EXE_diskpulse"), "probe"])
        .args(["--filename", file.to_str().unwrap(), "--size", "32M"])
        .args(["--rw", "randwrite", "--bs", "4k", "--ioengine", "io_uring"])
        .args([
            "--iodepth",
            "8",
            "--direct",
            "1",
            "--rate-iops-total",
            "2000",
        ])
        .args(["--runtime", "3s", "--time-based"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Inside the 3 s measured (laying out 32 MiB and starting take well under a second).
    std::thread::sleep(Duration::from_millis(1500));
    let m = mnt.to_str().unwrap();
    sh("fsfreeze", &["--freeze", m]);
    std::thread::sleep(Duration::from_millis(400));
    sh("fsfreeze", &["--unfreeze", m]);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (header, rows) = table(&run.join("probe.csv"));
    let (stall, all) = stalled(&header, &rows, "ios");
    eprintln!("frozen windows (t_ns, oldest_wait_us): {stall:?}");
    // 400 ms frozen (fsfreeze waits for writes to drain first, so on a busy machine the
    // file system stays frozen longer: seen 400-600 ms): at least three whole 100 ms
    // windows without a completion.
    assert!((3..=10).contains(&stall.len()), "{stall:?}");
    assert_grows(&stall, 100_000.0, 250_000.0, 1_000_000.0);
    // Away from the freeze (and the catch-up after it, behind the schedule) nothing
    // waited as long as a frozen window did.
    let (first, last) = (stall[0].0, stall.last().unwrap().0);
    let away: Vec<&Row> = all
        .iter()
        .filter(|r| r.0 + 100_000_000 < first || r.0 > last + 300_000_000)
        .filter(|r| r.2 >= 150_000.0)
        .collect();
    assert!(away.is_empty(), "{away:?} (frozen: {stall:?})");
}
