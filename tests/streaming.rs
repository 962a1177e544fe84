//! The report's memory does not grow with what its charts draw (issue 13 item 3): the
//! timeline folds every long series into the plot's pixel columns as it builds it, and
//! draws exactly the picture the points give.

mod common;

use std::io::Write;
use std::path::Path;

use diskpulse::report::{charts_build, ReportOptions};

/// Writes a recording of two devices sampled every 1 ms for `secs` s: a steady writer
/// with jitter, reads, a flush every 200 ms, in-flight that moves, and a 60 ms burst
/// every 5 s (a deterministic xorshift for the jitter).
fn synth(dir: &Path, secs: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse",
        "duration_ns": secs * 1_000_000_000,
        "devices": [{"name": "syn0", "major": 250, "minor": 0, "why": "named"},
                    {"name": "syn1", "major": 250, "minor": 1, "why": "named"}],
        "samplers": {"diskstats": {"interval_us": 1000}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(dir.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut c = [[0u64; 17]; 2];
    for ms in 0..=secs * 1000 {
        for (k, f) in c.iter_mut().enumerate() {
            if ms > 0 {
                let burst = (ms + 1700 * k as u64) % 5000 < 60;
                let sectors = if burst { 1600 } else { 20 + rnd(40) };
                f[4] += sectors / 8; // writes
                f[6] += sectors; // sectors written
                f[7] += 1 + rnd(3); // write ms
                f[0] += rnd(2); // reads
                f[2] += 8 * rnd(2); // sectors read
                f[9] += 1; // io ms
                f[10] += rnd(5); // weighted ms
                f[15] += u64::from(ms % 200 == 0); // flushes
                f[8] = if burst { 30 + rnd(10) } else { rnd(4) }; // in flight
            }
            let cells: Vec<String> = f.iter().map(|v| v.to_string()).collect();
            writeln!(gz, "{},syn{k},250,{k},{}", ms * 1_000_000, cells.join(",")).unwrap();
        }
    }
    gz.finish().unwrap();
}

/// (numbers the device series hold, series folded)
fn held(t: &charts::Timeline) -> (usize, usize) {
    let mut n = 0;
    let mut folded = 0;
    for s in t.panels.iter().flat_map(|p| &p.series) {
        n += s.t_s.len() + s.v.len();
        if let Some(f) = &s.folded {
            n += 4 * f.cols.len();
            folded += 1;
        }
    }
    (n, folded)
}

#[test]
fn the_folded_timeline_draws_what_the_points_draw() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 20);
    let o = ReportOptions::default();
    let (run, analyses, summary) = diskpulse::report::analyse(&run, &o).unwrap();
    let folded = charts_build::timeline(&run, &analyses, &o);
    let points = charts_build::timeline_points(&run, &analyses, &o);
    let (_, n_folded) = held(&folded);
    // Per device: write and read MiB/s, write and read IOPS, in flight, flushes/s.
    assert_eq!(n_folded, 12, "every device series is long enough to fold");
    assert_eq!(held(&points).1, 0);
    assert_eq!(
        charts::render_svg(&folded),
        charts::render_svg(&points),
        "the folded timeline draws another picture"
    );
    // The page, its zoomable timeline included (it reads the timeline's panels too).
    let uplot = diskpulse::report::html::zoom::find_uplot();
    assert_eq!(
        diskpulse::report::html::run_page(&run, &summary, &folded, &uplot),
        diskpulse::report::html::run_page(&run, &summary, &points, &uplot)
    );
}

#[test]
fn what_the_timeline_holds_does_not_grow_with_the_recording() {
    let d = tempfile::tempdir().unwrap();
    let mut sizes = vec![];
    for secs in [10, 40] {
        let run = d.path().join(format!("run{secs}"));
        synth(&run, secs);
        let o = ReportOptions::default();
        let (run, analyses, _) = diskpulse::report::analyse(&run, &o).unwrap();
        let folded = held(&charts_build::timeline(&run, &analyses, &o)).0;
        let points = held(&charts_build::timeline_points(&run, &analyses, &o)).0;
        eprintln!("{secs} s: folded timeline holds {folded} numbers, the points {points}");
        sizes.push((folded, points));
    }
    let (f10, p10) = sizes[0];
    let (f40, p40) = sizes[1];
    // The points grow with the samples (4x the rows); the folded series are one
    // column per pixel whatever the length (the UI-average overlay adds a point a 30 s).
    assert!(p40 as f64 > 3.5 * p10 as f64, "{p10} -> {p40}");
    assert!((f40 as f64) < 1.01 * f10 as f64, "{f10} -> {f40}");
    assert!(f40 * 10 < p40, "folded {f40} vs points {p40}");
}
