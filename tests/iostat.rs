//! `rates.csv --window 1s` beside `iostat -x 1` (sysstat) on the same loop device under
//! the same fio load: iostat's columns, under iostat's names, must say what iostat says.
//!
//! Alignment: our 1 s windows lie on a grid from the run's zero (`meta.json`
//! `clock_zero_unix_ns`), iostat's intervals start when it starts. The test starts iostat
//! ON a grid second (it reads the zero from meta.json, which `record` writes when it
//! starts, and sleeps to the next whole second of the run), so iostat's report i covers
//! our window k + i, off only by iostat's start-up (a few ms of a 1 s interval). Then it
//! compares each column over the same N steady seconds (fio running the whole time):
//! totals within 1%, and each second within a looser bound (iostat's own interval is
//! /proc/uptime's, to 10 ms). Wrong units (MiB for kB, bytes for kB, in-flight gauge
//! for the weighted queue) are off by far more than 1%.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The columns compared, by their name in both files.
const COLUMNS: [&str; 4] = ["w/s", "wkB/s", "aqu-sz", "wareq-sz"];

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// `rates.csv` rows of `device`, as (t_ns, column name -> value), parsed by header name.
fn rates_rows(path: &std::path::Path, device: &str) -> Vec<(u64, Vec<(String, f64)>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for c in COLUMNS {
        assert!(
            header.contains(&c),
            "rates.csv has no column '{c}': {header:?}"
        );
    }
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[at("device")] == device)
        .map(|r| {
            let t: u64 = r[at("t_ns")].parse().unwrap();
            let vals = COLUMNS
                .iter()
                .map(|c| (c.to_string(), r[at(c)].parse::<f64>().unwrap()))
                .collect();
            (t, vals)
        })
        .collect()
}

#[test]
fn rates_csv_at_1s_matches_iostat_x_1() {
    if !can_use_loop_devices() || !have_tool("fio", "fio") || !have_tool("iostat", "sysstat") {
        return;
    }
    let lo = LoopDev::new("256M");
    let name = lo.name().to_string();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    const REPORTS: u64 = 6;
    let mut rec = diskpulse()
        .args(["record", "--device", &name, "--duration", "11s", "--out"])
        .arg(&run)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // meta.json is written when the recording starts: its zero places our grid.
    let t0 = Instant::now();
    let zero_unix_ns = loop {
        if let Some(z) = std::fs::read_to_string(run.join("meta.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|m| m["clock_zero_unix_ns"].as_u64())
        {
            break z;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "record wrote no meta.json"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut fio = Command::new("fio")
        .args([
            "--name=iostat",
            &format!("--filename={}", lo.dev),
            "--ioengine=libaio",
            "--direct=1",
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=8",
            "--time_based",
            "--runtime=9",
            "--output=/dev/null",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // iostat starts on the next whole second of the run, at least 0.5 s after fio.
    let since_zero = unix_ns().saturating_sub(zero_unix_ns) + 500_000_000;
    let k = since_zero.div_ceil(1_000_000_000).max(1);
    let start_at = zero_unix_ns + k * 1_000_000_000;
    std::thread::sleep(Duration::from_nanos(start_at.saturating_sub(unix_ns())));
    let ios = Command::new("iostat")
        .args([
            "-d",
            "-x",
            "-y",
            "-o",
            "JSON",
            "1",
            &REPORTS.to_string(),
            &name,
        ])
        .output()
        .unwrap();
    assert!(
        ios.status.success(),
        "iostat: {}",
        String::from_utf8_lossy(&ios.stderr)
    );
    assert!(
        k + REPORTS < 10,
        "the test started iostat too late (second {k} of the run): fio ends at ~9.5 s"
    );
    let _ = fio.wait();
    assert!(rec.wait().unwrap().success());
    let o = diskpulse()
        .args(["report", "--window", "1s", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let doc: serde_json::Value = serde_json::from_slice(&ios.stdout).unwrap();
    let stats = doc["sysstat"]["hosts"][0]["statistics"]
        .as_array()
        .expect("iostat -o JSON: sysstat.hosts[0].statistics");
    assert_eq!(stats.len() as u64, REPORTS, "iostat printed {stats:?}");
    let theirs: Vec<Vec<f64>> = stats
        .iter()
        .map(|s| {
            let d = &s["disk"][0];
            assert_eq!(d["disk_device"], name.as_str());
            COLUMNS.iter().map(|c| d[*c].as_f64().unwrap()).collect()
        })
        .collect();
    let rows = rates_rows(&run.join("rates.csv"), &name);
    let ours: Vec<Vec<f64>> = (0..REPORTS)
        .map(|i| {
            let t = (k + i) * 1_000_000_000;
            let (_, vals) = rows
                .iter()
                .find(|(rt, _)| *rt == t)
                .unwrap_or_else(|| panic!("rates.csv has no row at t_ns {t} for {name}"));
            vals.iter().map(|(_, v)| *v).collect()
        })
        .collect();

    eprintln!("second of the run | iostat -x 1: {COLUMNS:?} | rates.csv --window 1s");
    for i in 0..REPORTS as usize {
        eprintln!("{:>4} | {:?} | {:?}", k + i as u64, theirs[i], ours[i]);
    }
    // The steady seconds: all of iostat's reports lie inside fio's run (it started 0.5 s
    // before the first and ends after the last); the first is left out all the same
    // (fio's first second fills the queue).
    let steady = 1..REPORTS as usize;
    let n = steady.len() as f64;
    let mut problems = vec![];
    for (j, c) in COLUMNS.iter().enumerate() {
        // wareq-sz is per request: weigh each second by its requests (w/s, column 0).
        let total = |v: &[Vec<f64>]| -> f64 {
            if *c == "wareq-sz" {
                let kb: f64 = steady.clone().map(|i| v[i][j] * v[i][0]).sum();
                kb / steady.clone().map(|i| v[i][0]).sum::<f64>()
            } else {
                steady.clone().map(|i| v[i][j]).sum::<f64>() / n
            }
        };
        let (a, b) = (total(&theirs), total(&ours));
        let err = (b - a).abs() / a;
        eprintln!(
            "{c:>9}: iostat {a:.3}, diskpulse {b:.3}, ratio {:.4}",
            b / a
        );
        if err.is_nan() || err > 0.01 {
            problems.push(format!(
                "{c}: mean over the {n} steady seconds: iostat {a:.3}, rates.csv {b:.3} ({:.2}% apart)",
                100.0 * err
            ));
        }
        for i in steady.clone() {
            let (a, b) = (theirs[i][j], ours[i][j]);
            // One second: iostat's interval comes from /proc/uptime (10 ms steps) and its
            // start is a few ms off ours; 3% holds that, a wrong unit does not.
            if (b - a).abs() > 0.03 * a.abs().max(0.05) {
                problems.push(format!(
                    "{c}, second {}: iostat {a}, rates.csv {b}",
                    k + i as u64
                ));
            }
        }
    }
    assert!(
        theirs[1][0] > 100.0,
        "fio wrote too little to compare: {:?}",
        theirs[1]
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `record --progress`: a line a second per device with iostat's figures; on a pipe
/// without it, stdout is the run directory alone. Known bytes written with O_DIRECT in a
/// burst are in the lines' wkB/s, and the burst's 10 ms peak is above its second's mean.
#[test]
fn record_prints_a_line_a_second_like_iostat_plus_the_10ms_peak() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let name = lo.name().to_string();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let rec = diskpulse()
        .args([
            "record",
            "--progress",
            "--device",
            &name,
            "--duration",
            "3500ms",
            "--out",
        ])
        .arg(&run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    const TOTAL: usize = 64 << 20;
    write_direct(std::path::Path::new(&lo.dev), TOTAL, 1 << 20);
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("{text}");
    let last = text.lines().last().unwrap();
    assert_eq!(last, run.display().to_string(), "the run directory last");
    let header = text.lines().next().unwrap();
    for c in [
        "r/s", "w/s", "rkB/s", "wkB/s", "aqu-sz", "%util", "peak10ms",
    ] {
        assert!(header.split_whitespace().any(|h| h == c), "{c} in {header}");
    }
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(name.as_str()))
        .map(|l| {
            l.split_whitespace()
                .skip(2)
                .map(|v| v.parse().unwrap())
                .collect()
        })
        .collect();
    assert!(rows.len() >= 3, "a line a second for 3.5 s: {text}");
    // wkB/s (column 3) over the seconds: the 64 MiB, written within the printed seconds.
    let kb: f64 = rows.iter().map(|r| r[3]).sum();
    let want = (TOTAL / 1024) as f64;
    assert!(
        (kb - want).abs() / want < 0.03,
        "the lines' wkB/s add up to {kb} kB, {want} were written"
    );
    // The busiest second: its peak over 10 ms (column 6, MiB/s) is above its mean.
    let busiest = rows.iter().max_by(|a, b| a[3].total_cmp(&b[3])).unwrap();
    assert!(
        busiest[6] > busiest[3] / 1024.0,
        "peak10ms {} MiB/s, mean {} MiB/s",
        busiest[6],
        busiest[3] / 1024.0
    );

    // On a pipe without --progress: the run directory alone.
    let run2 = out.path().join("run2");
    let o = diskpulse()
        .args(["record", "--device", &name, "--duration", "1500ms", "--out"])
        .arg(&run2)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        run2.display().to_string()
    );
}
