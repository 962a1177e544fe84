//! A recording cut by `kill -9` stays readable by the tools our users have: diskstats.csv.gz
//! is a series of whole gzip members, so flate2, `zcat` and Python's `gzip` (what pandas
//! uses) all read it without an error, up to the last flush before the kill.

mod common;
use common::*;

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_recording_killed_with_sigkill_reads_with_flate2_zcat_and_python_up_to_the_last_second() {
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let mut rec = diskpulse()
        .args(["record", "--duration", "60s", "--out"])
        .arg(&run)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Give the samplers time to write a few seconds, then SIGKILL (no chance to close).
    let gz = run.join("diskstats.csv.gz");
    while !gz.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(2600));
    rec.kill().unwrap(); // SIGKILL
    rec.wait().unwrap();
    let killed_after = started.elapsed();

    let mut by_flate2 = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_string(&mut by_flate2)
        .expect("flate2 reads the cut recording to its end without an error");

    let z = Command::new("zcat").arg(&gz).output().unwrap();
    assert!(
        z.status.success(),
        "zcat failed on the cut recording: {}",
        String::from_utf8_lossy(&z.stderr)
    );
    assert_eq!(String::from_utf8(z.stdout).unwrap(), by_flate2);

    let py = Command::new("python3")
        .args([
            "-c",
            "import gzip,sys; sys.stdout.write(gzip.open(sys.argv[1],'rt').read())",
        ])
        .arg(&gz)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "python's gzip failed on the cut recording: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(String::from_utf8(py.stdout).unwrap(), by_flate2);

    // Up to the last second: whole rows, and the last one less than a second before the kill.
    assert!(by_flate2.ends_with('\n'), "the text ends inside a row");
    let last_t_ns: u64 = by_flate2
        .lines()
        .last()
        .and_then(|l| l.split(',').next())
        .and_then(|t| t.parse().ok())
        .expect("at least one data row");
    let killed_ns = killed_after.as_nanos() as u64;
    assert!(
        last_t_ns + 1_000_000_000 >= killed_ns.saturating_sub(500_000_000),
        "last row at {last_t_ns} ns, killed {killed_ns} ns after spawn"
    );

    // And the report reads it too.
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
