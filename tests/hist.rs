//! The per-window HDR histograms of a recording (`probe.hlog`) against the probe's raw
//! per-I/O latencies (`--write-lat-log`, fio's shape), and two probes of two scenario
//! phases appending to one recording at the same time. Real parts: the real binary,
//! `diskpulse record`, files on the disk under /var/tmp.

mod common;
use common::*;

use std::path::Path;
use std::process::Output;

use diskpulse::format::hist::{self, Interval};
use hdrhistogram::Histogram;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// One line of a `_clat.N.log`: (time_ms since the probe's start, clat_ns, direction).
fn lat_log(p: &Path) -> Vec<(u64, u64, u8)> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(", ").collect();
            assert_eq!(f.len(), 5, "fio 3.33's five columns: {l:?}");
            assert_eq!(f[3], "4096", "bs: {l:?}");
            assert_eq!(f[4], "0", "prio: {l:?}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// The value at quantile `q` of raw values the way HdrHistogram ranks them.
fn raw_quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Within HDR's precision at 3 significant digits: 0.1% relative plus 1 µs.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.001 * a.max(b) + 1_000.0
}

fn assert_same_distribution(what: &str, raw: &mut [u64], h: &Histogram<u64>) {
    raw.sort_unstable();
    assert_eq!(h.len(), raw.len() as u64, "{what}: count");
    for q in [0.5, 0.99] {
        let (r, m) = (raw_quantile(raw, q), h.value_at_quantile(q));
        assert!(
            close(r as f64, m as f64),
            "{what}: p{} raw {r} ns, merged intervals {m} ns",
            q * 100.0
        );
    }
}

fn record_probe(dir: &Path, run: &Path, probe_args: &[&str]) -> Output {
    diskpulse()
        .args(["record", "--path"])
        .arg(dir)
        .arg("--out")
        .arg(run)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_diskpulse"))
        .arg("probe")
        .args(probe_args)
        .output()
        .unwrap()
}

#[test]
fn raw_latencies_and_the_merged_intervals_give_the_same_percentiles_for_the_run_and_a_span() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let prefix = d.path().join("lat");
    let o = record_probe(
        d.path(),
        &run,
        &[
            "--filename",
            d.path().join("f").to_str().unwrap(),
            "--size",
            "16M",
            "--rw",
            "randrw",
            "--bs",
            "4k",
            "--numjobs",
            "2",
            // io_uring at depth 4 (sync at depth 1 where the kernel refuses io_uring).
            "--iodepth",
            "4",
            "--rate-iops-total",
            "2000",
            "--runtime",
            "2s",
            "--time-based",
            "--write-lat-log",
            prefix.to_str().unwrap(),
            "--output-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary = read_json(&run.join("probe.json"));

    // One file per job; as many lines as the probe counted I/Os.
    let jobs: Vec<Vec<(u64, u64, u8)>> = (1..=2)
        .map(|n| lat_log(&d.path().join(format!("lat_clat.{n}.log"))))
        .collect();
    assert!(!d.path().join("lat_clat.3.log").exists());
    for (n, lines) in jobs.iter().enumerate() {
        let j = &summary["jobs"][n];
        let ios =
            j["read"]["total_ios"].as_u64().unwrap() + j["write"]["total_ios"].as_u64().unwrap();
        assert_eq!(lines.len() as u64, ios, "job {}: lines vs total_ios", n + 1);
        assert!(ios > 1_000, "job {}: {ios} I/Os at 1000/s for 2 s", n + 1);
        // The job's own summary p99 agrees with its raw latencies.
        let mut w: Vec<u64> = lines.iter().filter(|l| l.2 == 1).map(|l| l.1).collect();
        w.sort_unstable();
        let p99 = j["write"]["clat_ns"]["percentile"]["99.000000"]
            .as_f64()
            .unwrap();
        assert!(
            close(raw_quantile(&w, 0.99) as f64, p99),
            "job {}: raw write p99 {} ns, summary {p99} ns",
            n + 1,
            raw_quantile(&w, 0.99)
        );
    }
    let raw: Vec<(u64, u64, u8)> = jobs.concat();

    // The whole run: merge(probe.hlog) against every raw latency, per direction.
    let intervals = hist::read(&run.join(hist::PROBE_FILE)).unwrap();
    let by = |tag: &str| -> Vec<&Interval> { intervals.iter().filter(|i| i.tag == tag).collect() };
    for (tag, dir) in [("read", 0u8), ("write", 1u8)] {
        let mut v: Vec<u64> = raw.iter().filter(|l| l.2 == dir).map(|l| l.1).collect();
        assert_same_distribution(tag, &mut v, &hist::merge(by(tag)).unwrap());
    }
    assert!(!by("read.co").is_empty() && !by("write.co").is_empty());

    // A span: the middle 40% of the windows, against the raw latencies that completed
    // in them (their time on the run clock: the probe_start event + time_ms).
    let start_ns = std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "probe_start")
        .expect("a probe_start event")["t_ns"]
        .as_u64()
        .unwrap();
    let writes = by("write");
    let window_ns = writes[0].duration_ns;
    assert_eq!(start_ns % 1_000_000, 0, "the probe starts on the ms grid");
    let mut starts: Vec<u64> = writes.iter().map(|i| i.start_ns).collect();
    starts.sort_unstable();
    let (from, to) = (
        starts[starts.len() * 3 / 10],
        starts[starts.len() * 7 / 10] + window_ns,
    );
    let span = hist::merge(
        writes
            .iter()
            .copied()
            .filter(|i| i.start_ns >= from && i.end_ns() <= to),
    )
    .unwrap();
    let mut inside: Vec<u64> = raw
        .iter()
        .filter(|l| l.2 == 1)
        .filter(|l| (from..to).contains(&(start_ns + l.0 * 1_000_000)))
        .map(|l| l.1)
        .collect();
    assert!(inside.len() > 200, "{} writes in the span", inside.len());
    assert_same_distribution("write, middle 40% of the windows", &mut inside, &span);
}

#[test]
fn two_probes_of_two_phases_append_to_one_recording_without_a_second_header() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let probe = |phase: u32, rw: &str| {
        format!(
            "DISKPULSE_PHASE={phase} {bin} probe --filename {f} --size 8M --rw {rw} --bs 4k \
             --rate-iops-total 1000 --runtime 1s --time-based --window 10ms >/dev/null",
            f = d.path().join(format!("f{phase}")).display()
        )
    };
    // Both start together: the header race is real.
    let script = format!(
        "{} & {} & wait",
        probe(1, "randwrite"),
        probe(2, "randread")
    );
    let o = diskpulse()
        .args(["record", "--path"])
        .arg(d.path())
        .arg("--out")
        .arg(&run)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));

    let csv = std::fs::read_to_string(run.join("probe.csv")).unwrap();
    let header = diskpulse::format::probe::HEADER;
    assert_eq!(csv.lines().filter(|l| *l == header).count(), 1, "{csv}");
    assert_eq!(csv.lines().next(), Some(header));
    let n_cols = diskpulse::format::probe::columns().len();
    let phase_col = diskpulse::format::probe::columns()
        .iter()
        .position(|c| *c == "phase")
        .unwrap();
    let mut phases = std::collections::BTreeMap::<String, usize>::new();
    for l in csv.lines().skip(1) {
        let cells: Vec<&str> = l.split(',').collect();
        assert_eq!(cells.len(), n_cols, "a torn or mixed row: {l:?}");
        let dir = cells[2];
        let phase = cells[phase_col];
        *phases.entry(format!("{phase}:{dir}")).or_default() += 1;
    }
    // About 100 windows of 10 ms each, each phase with its direction only.
    assert!(
        phases.get("1:write").is_some_and(|n| *n >= 90),
        "{phases:?}"
    );
    assert!(phases.get("2:read").is_some_and(|n| *n >= 90), "{phases:?}");
    assert_eq!(phases.len(), 2, "{phases:?}");
    let rows = diskpulse::format::probe::read(&run).unwrap().unwrap();
    assert!(rows["write"].iter().all(|r| r.phase == Some(1)));
    assert!(rows["read"].iter().all(|r| r.phase == Some(2)));
    assert!(rows["read"].windows(2).all(|w| w[0].t_ns <= w[1].t_ns));

    let hlog = std::fs::read_to_string(run.join(hist::PROBE_FILE)).unwrap();
    assert_eq!(hlog.matches("#[StartTime:").count(), 1, "one header");
    let tags: std::collections::BTreeSet<String> = hist::read(&run.join(hist::PROBE_FILE))
        .unwrap()
        .into_iter()
        .map(|i| i.tag)
        .collect();
    for t in ["p1:write", "p1:write.co", "p2:read", "p2:read.co"] {
        assert!(tags.contains(t), "{t} in {tags:?}");
    }
}

#[test]
fn a_load_in_a_phase_writes_its_windows_histograms_beside_load_csv() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let zero = collectors::clock::Clock::start().zero_monotonic_ns();
    let o = diskpulse()
        .args(["load", "js-pub", "--duration", "2s", "--rate", "1000"])
        .env_remove("NATS_URL")
        .env("DISKPULSE_RUN_DIR", d.path())
        .env("DISKPULSE_CLOCK_ZERO_NS", zero.to_string())
        .env(diskpulse::format::ENV_PHASE, "4")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows = diskpulse::format::load::read(d.path()).unwrap();
    let rows = &rows["js-pub"];
    assert!(rows.len() >= 15, "{} windows", rows.len());
    assert!(rows.iter().all(|r| r.phase == Some(4)));
    let intervals = hist::read(&d.path().join(hist::LOAD_FILE)).unwrap();
    let lat: Vec<&Interval> = intervals.iter().filter(|i| i.tag == "p4:js-pub").collect();
    let co: Vec<&Interval> = intervals
        .iter()
        .filter(|i| i.tag == "p4:js-pub.co")
        .collect();
    assert_eq!(lat.len() + co.len(), intervals.len(), "no other tags");
    // Every acked publish once; each window's histogram is its row's percentiles.
    let ops: u64 = rows.iter().map(|r| r.ops).sum();
    assert_eq!(hist::merge(lat.iter().copied()).unwrap().len(), ops);
    assert_eq!(hist::merge(co.iter().copied()).unwrap().len(), ops);
    for r in rows.iter().filter(|r| r.ops > 0) {
        let i = lat
            .iter()
            .find(|i| i.start_ns == r.t_ns)
            .unwrap_or_else(|| panic!("no interval for the window at {} ns", r.t_ns));
        assert_eq!(i.duration_ns, r.window_ns);
        let p99_us = i.hist.to_histogram().value_at_quantile(0.99) as f64 / 1e3;
        assert!(
            (p99_us - r.lat_p99_us.unwrap()).abs() <= 0.051,
            "window {}: interval p99 {p99_us} us, row {:?}",
            r.t_ns,
            r.lat_p99_us
        );
    }
}

#[test]
fn a_lat_log_prefix_in_a_missing_directory_or_a_bad_phase_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f");
    let o = diskpulse()
        .args([
            "probe",
            "--size",
            "1M",
            "--write-lat-log",
            "/nonexistent-dir/lat",
            "--filename",
        ])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "--write-lat-log /nonexistent-dir/lat: the directory /nonexistent-dir does not exist"
        ),
        "{err}"
    );
    assert!(!f.exists(), "nothing is written on bad input");

    let o = diskpulse()
        .args(["probe", "--size", "1M", "--runtime", "100ms", "--filename"])
        .arg(&f)
        .env("DISKPULSE_RUN_DIR", d.path())
        .env("DISKPULSE_CLOCK_ZERO_NS", "1")
        .env(diskpulse::format::ENV_PHASE, "third")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("DISKPULSE_PHASE takes a phase index like 3; got 'third'"),
        "{err}"
    );
}
