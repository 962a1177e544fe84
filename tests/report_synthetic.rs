//! The report on a synthetic recording with known bursts finds exactly those, and reads a
//! recording whose gzip stream was cut off.

mod common;
use common::*;

use std::io::Write;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// Writes a recording: device `syn0` sampled every 1 ms for `secs` s, idle but for bursts
/// (start_ms, duration_ms, MiB/s); rows for every sample (as if nothing were suppressed).
fn synth(dir: &Path, secs: u64, bursts: &[(u64, u64, u64)]) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse", "duration_ns": secs * 1_000_000_000,
        "devices": [{"name": "syn0", "major": 250, "minor": 0, "why": "named"}],
        "samplers": {"diskstats": {"interval_us": 1000}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(dir.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let mut sectors = 0u64;
    let mut writes = 0u64;
    let mut total = 0u64;
    for ms in 0..=secs * 1000 {
        if ms > 0 {
            for &(s, d, rate) in bursts {
                if ms > s && ms <= s + d {
                    let bytes = rate * MIB / 1000;
                    sectors += bytes / 512;
                    writes += bytes / 4096;
                    total += bytes / 512 * 512;
                }
            }
        }
        writeln!(
            gz,
            "{},syn0,250,0,0,0,0,0,{writes},0,{sectors},0,0,0,0,0,0,0,0,0,0",
            ms * 1_000_000
        )
        .unwrap();
    }
    gz.finish().unwrap();
    total
}

#[test]
fn finds_exactly_the_synthetic_bursts() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // Seven bursts every 4 s, 50 ms at 800 MiB/s, over 30 s.
    let bursts: Vec<(u64, u64, u64)> = (0..7).map(|k| (1000 + k * 4000, 50, 800)).collect();
    let total = synth(&run, 30, &bursts);
    let o = diskpulse().args(["report"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let w = &device(&s, "syn0")["write"];
    let b = &w["bursts"];
    assert_eq!(b["count"], 7, "{b:#}");
    assert!((b["period_s"].as_f64().unwrap() - 4.0).abs() < 1e-6);
    assert_eq!(b["regular"], true);
    for (k, x) in b["list"].as_array().unwrap().iter().enumerate() {
        assert!((x["start_s"].as_f64().unwrap() - (1.0 + 4.0 * k as f64)).abs() < 0.0101);
        assert!((x["duration_ms"].as_f64().unwrap() - 50.0).abs() <= 10.0);
        let bytes = x["bytes"].as_f64().unwrap();
        assert!(
            (bytes - 40.0 * MIB as f64).abs() < 0.01 * 40.0 * MIB as f64,
            "{bytes}"
        );
    }
    assert!((w["bytes"].as_f64().unwrap() - total as f64).abs() < 1.0);
    let p10 = w["peak_mib_s"]["10ms"].as_f64().unwrap();
    assert!((p10 - 800.0).abs() < 8.0, "10 ms peak {p10}");
    // 30 s "UI" average: 7 x 40 MiB / 30 s.
    let ui = w["ui_average_mib_s"].as_f64().unwrap();
    assert!((ui - 280.0 / 30.0).abs() < 0.1, "ui {ui}");
    assert!((w["hidden_factor"].as_f64().unwrap() - p10 / ui).abs() < 1e-6);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("every 4.00 s"), "{stdout}");
    assert!(run.join("timeline.png").exists() && run.join("timeline.svg").exists());
}

#[test]
fn a_steady_writer_has_no_bursts() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // One "burst" that lasts the whole run is a steady writer.
    synth(&run, 10, &[(0, 10_000, 100)]);
    let b = bursts_of(&run);
    assert_eq!(b["count"], 0, "{b:#}");
    assert!(b["list"].as_array().unwrap().is_empty(), "{b:#}");
    assert_eq!(b["regular"], false);
    assert_eq!(b["share_of_bytes"], 0.0, "{b:#}");
}

/// The opposite of the steady writer: the same steady stream with K bursts of different
/// sizes at irregular times on top gives exactly K, each starting at its time (to the
/// sample), lasting its length and holding its bytes.
#[test]
fn a_steady_writer_with_k_bursts_on_top_gives_exactly_k_at_their_times() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // (start_ms, duration_ms, MiB/s): starts on the 10 ms bins of the finder.
    let bursts = [
        (1_000, 30, 800),
        (2_370, 50, 300),
        (4_120, 20, 500),
        (5_500, 60, 400),
        (7_910, 40, 600),
    ];
    let mut all = vec![(0, 10_000, 50)];
    all.extend(bursts);
    synth(&run, 10, &all);
    let b = bursts_of(&run);
    assert_eq!(b["count"], bursts.len(), "{b:#}");
    let list = b["list"].as_array().unwrap();
    assert_eq!(list.len(), bursts.len(), "{b:#}");
    for (x, &(start_ms, dur_ms, rate)) in list.iter().zip(&bursts) {
        let start_s = x["start_s"].as_f64().unwrap();
        assert!(
            (start_s - start_ms as f64 / 1e3).abs() < 0.001,
            "burst at {start_ms} ms found at {start_s} s: {b:#}"
        );
        let dur = x["duration_ms"].as_f64().unwrap();
        assert!((dur - dur_ms as f64).abs() < 0.5, "{start_ms}: {dur} ms");
        // The burst's bytes and the steady stream's under it.
        let per_ms = |r: u64| r * MIB / 1000 / 512 * 512;
        let want = ((per_ms(rate) + per_ms(50)) * dur_ms) as f64;
        let got = x["bytes"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1.0,
            "{start_ms}: {got} bytes, not {want}"
        );
    }
}

/// The write bursts of `syn0` after `report --no-charts` of `run`.
fn bursts_of(run: &Path) -> serde_json::Value {
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    device(&s, "syn0")["write"]["bursts"].clone()
}

/// The whole lines (header included) a gzip reader gets out of a stream cut short, read
/// independently of diskpulse's reader.
fn whole_lines_of_cut_gzip(bytes: &[u8]) -> Vec<String> {
    use std::io::Read;
    let mut out = vec![];
    let mut r = flate2::read::GzDecoder::new(bytes);
    let mut buf = [0u8; 4096];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8(out).unwrap();
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    whole.lines().map(str::to_string).collect()
}

#[test]
fn reads_a_cut_off_recording() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let bursts = [(2000, 50, 500), (6000, 50, 500), (9000, 50, 500)];
    synth(&run, 10, &bursts);
    // As a kill -9 leaves it: meta.json still says complete: false (written at the start).
    let mp = run.join("meta.json");
    let mut meta = read_json(&mp);
    meta["complete"] = serde_json::json!(false);
    std::fs::write(&mp, meta.to_string()).unwrap();
    // Cut the gzip stream as a kill -9 would.
    let p = run.join("diskstats.csv.gz");
    let bytes = std::fs::read(&p).unwrap();
    let cut = &bytes[..bytes.len() * 2 / 3];
    std::fs::write(&p, cut).unwrap();
    let lines = whole_lines_of_cut_gzip(cut);
    let rows = lines.len() - 1;
    let last_t_ns: u64 = lines
        .last()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Rows are 1 ms apart from 0: the cut fell inside the run, after the first burst.
    assert_eq!(last_t_ns, (rows as u64 - 1) * 1_000_000);
    assert!(
        (2_100..9_000).contains(&(rows as u64)),
        "cut at row {rows}: move the cut"
    );
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Every whole row read, nothing after: the last t_ns is the run's end.
    let s = read_json(&run.join("summary.json"));
    let dev = device(&s, "syn0");
    assert_eq!(dev["rows"], rows, "{err}");
    assert_eq!(s["duration_s"], last_t_ns as f64 / 1e9, "{err}");
    // Both warnings: the cut end, named by file and line, and the incomplete flag.
    assert!(
        err.lines().any(|l| l.starts_with("warning: ")
            && l.contains("diskstats.csv.gz")
            && l.contains(&format!("read up to line {}", rows + 1))),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning: ")
                && l.contains("meta.json: the recording is incomplete")),
        "{err}"
    );
    // The bursts that ended before the cut, and only those.
    let ended = bursts
        .iter()
        .filter(|&&(s, d, _)| (s + d) * 1_000_000 <= last_t_ns)
        .count();
    let b = &dev["write"]["bursts"];
    assert_eq!(b["count"], ended, "{b:#}");
}

#[test]
fn a_recording_of_another_format_version_is_refused_with_both_versions_named() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 2, &[(500, 50, 500)]);
    let p = run.join("meta.json");
    let mut meta = read_json(&p);
    meta["format_version"] = serde_json::json!(1);
    std::fs::write(&p, meta.to_string()).unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("format_version 1")
            && err.contains(&format!("version {}", diskpulse::format::FORMAT_VERSION)),
        "{err}"
    );
    assert!(!run.join("summary.json").exists());
}

#[test]
fn write_time_that_wraps_at_32_bits_gives_the_true_await() {
    // 49.7 days of uptime: write_ms passes 2^32 mid-run. 1000 writes of 2 ms each.
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let meta = serde_json::json!({"format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse", "duration_ns": 1_000_000_000u64});
    std::fs::write(run.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(run.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let start_ms: u64 = (1u64 << 32) - 1000;
    for ms in 0..=1000u64 {
        let write_ms = (start_ms + 2 * ms) % (1u64 << 32);
        writeln!(
            gz,
            "{},old0,8,0,0,0,0,0,{ms},0,{},{write_ms},0,{},{},,,,,,",
            ms * 1_000_000,
            ms * 8,
            ms,
            2 * ms
        )
        .unwrap();
    }
    gz.finish().unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let w = &device(&s, "old0")["write"];
    assert_eq!(w["ios"].as_f64().unwrap(), 1000.0);
    assert!(
        (w["await_ms"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{w:#}"
    );
    // A 14-column kernel: no flush counters, so no flush figures rather than zeros.
    assert!(device(&s, "old0")["flushes"].is_null());
}

/// meta.json `clock` says the recording's timestamps moved by timer ticks: the report
/// warns that its 1 ms rates cannot be trusted; a fine clock gets no such warning.
#[test]
fn a_recording_on_a_ticking_clock_is_reported_with_a_warning() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 2, &[(500, 50, 500)]);
    let mp = run.join("meta.json");
    let report = |clock: serde_json::Value| {
        let mut meta = read_json(&mp);
        meta["clock"] = clock;
        std::fs::write(&mp, meta.to_string()).unwrap();
        let o = diskpulse()
            .args(["report", "--no-charts", "--no-html"])
            .arg(&run)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err =
        report(serde_json::json!({"source": "jiffies", "step_ns": 4_000_000, "read_ns": 60.0}));
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning: meta.json clock:")
                && l.contains("clocksource jiffies")
                && l.contains("steps of 4000 us")),
        "{err}"
    );
    let err = report(serde_json::json!({"source": "tsc", "step_ns": 30, "read_ns": 22.5}));
    assert!(!err.contains("meta.json clock"), "{err}");
}

/// A meminfo.csv longer than the report keeps row by row (`report::fold`): 300 s at 1 ms
/// (300,000 rows) with one row's spike of Dirty and one of Writeback. summary.json's
/// maxima are the raw ones and counts every row; report.html's page-cache panel holds the
/// folded windows (each one's lowest and highest row, the spikes among them), not every
/// row.
#[test]
fn a_long_meminfo_is_folded_without_losing_its_spikes() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let secs = 300u64;
    synth(&run, secs, &[(5000, 50, 500)]);
    let rows = secs * 1000;
    let (spike_ms, wb_ms) = (123_457u64, 222_222u64);
    let mut m = std::io::BufWriter::new(std::fs::File::create(run.join("meminfo.csv")).unwrap());
    writeln!(
        m,
        "t_ns,dirty_kib,writeback_kib,cached_kib,mem_available_kib"
    )
    .unwrap();
    for ms in 0..rows {
        let dirty = if ms == spike_ms {
            9_000_000
        } else {
            1000 + ms % 5000
        };
        let wb = if ms == wb_ms { 777_777 } else { ms % 7 };
        writeln!(m, "{},{dirty},{wb},5000000,9000000", ms * 1_000_000).unwrap();
    }
    m.into_inner().unwrap().sync_all().unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    let mem = &s["memory"];
    assert_eq!(mem["samples"], rows, "{mem}");
    assert_eq!(mem["dirty_max_mib"], 9_000_000.0 / 1024.0, "{mem}");
    assert_eq!(mem["writeback_max_mib"], 777_777.0 / 1024.0, "{mem}");
    // The page's data: the page-cache panel's series, folded.
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let a = html.find("id=\"dp-zoom-data\">").expect("zoom data") + "id=\"dp-zoom-data\">".len();
    let b = a + html[a..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[a..b]).unwrap();
    let panel = data["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"].as_str().unwrap().starts_with("page cache"))
        .expect("page cache panel");
    for (label, at_ms, kib) in [
        ("Dirty", spike_ms, 9_000_000.0),
        ("Writeback", wb_ms, 777_777.0),
    ] {
        let x = panel["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["label"] == label)
            .unwrap();
        let t = x["t"].as_array().unwrap();
        let v = x["v"].as_array().unwrap();
        assert_eq!(t.len(), v.len());
        // At most two points (lowest, highest) a window, at most 50,000 windows.
        assert!(
            t.len() <= 100_000 && t.len() < rows as usize / 2,
            "{label}: {} points",
            t.len()
        );
        let i = v
            .iter()
            .position(|y| (y.as_f64().unwrap() - kib / 1024.0).abs() < 1e-3)
            .unwrap_or_else(|| panic!("{label}: the spike is not in the page"));
        assert!(
            (t[i].as_f64().unwrap() - at_ms as f64 / 1e3).abs() < 1e-6,
            "{label}: spike drawn at {} s",
            t[i]
        );
    }
}
