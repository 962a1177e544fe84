//! Issue 12 item 6: `record --listen` scraped over HTTP while a real loop device takes
//! bursts of direct writes (the 10 ms peak stands above the 1 s mean; promtool accepts
//! the page; scrapes cost the sampler no samples); `export` of a real run to OpenMetrics
//! and Influx read back (counts, monotone counters, timestamps = meta zero + t_ns,
//! promtool's backfill accepts it); the Grafana dashboard queries only served metrics.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One HTTP GET: (status line, body).
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Samples of a page: (name, labels text, value).
fn samples(page: &str) -> Vec<(String, String, f64)> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, v) = l.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n.to_string(), rest.trim_end_matches('}').to_string()),
                None => (series.to_string(), String::new()),
            };
            (name, labels, v.parse::<f64>().unwrap())
        })
        .collect()
}

fn one(page: &str, name: &str, labels: &str) -> Option<f64> {
    samples(page)
        .into_iter()
        .find(|(n, l, _)| n == name && l == labels)
        .map(|x| x.2)
}

/// The scrape-cost test measures what scraping costs the 1 ms sampler: alone on the
/// machine's 2 cores, not beside a broker run and promtool (a CI run that shared them lost
/// 4% of samples in busy and 1% in quiet cycles alike). Every test here takes it.
static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn quiet() -> std::sync::MutexGuard<'static, ()> {
    QUIET.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_live_scrape_sees_a_10ms_peak_above_the_1s_mean_and_costs_no_samples() {
    let _quiet = quiet();
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let mut rec = diskpulse()
        .args(["record", "--device", lo.name(), "--duration", "14s"])
        .args(["--listen", "127.0.0.1:0", "--out"])
        .arg(&run)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("serving live metrics at http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no address line: {line}"))
        .to_string();
    let t0 = Instant::now();
    // Bursts: 8 MiB of 1 MiB O_DIRECT writes every 300 ms, for 4 s.
    let dev = lo.dev.clone();
    let writer = std::thread::spawn(move || {
        let mut k = 0;
        while k < 13 {
            write_direct(Path::new(&dev), 8 << 20, 1 << 20);
            k += 1;
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    // Scrapes a second apart: the mean over the second from the counters, the peaks
    // since the previous scrape from diskpulse.
    let dev_l = format!("device=\"{}\"", lo.name());
    let mut pages = vec![];
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(1000));
        pages.push(get(&addr, "/metrics").1);
    }
    writer.join().unwrap();
    let mut best = (0.0f64, 0.0f64);
    for w in pages.windows(2) {
        let bytes = |p: &str| one(p, "node_disk_written_bytes_total", &dev_l).unwrap();
        let secs = |p: &str| one(p, "diskpulse_recording_seconds", "").unwrap();
        let mean = (bytes(&w[1]) - bytes(&w[0])) / (secs(&w[1]) - secs(&w[0]));
        let peak = one(
            &w[1],
            "diskpulse_disk_peak_bytes_per_second",
            &format!("{dev_l},direction=\"write\",window=\"10ms\""),
        )
        .unwrap();
        eprintln!(
            "1 s mean {:.1} MiB/s, 10 ms peak {:.1} MiB/s",
            mean / 1048576.0,
            peak / 1048576.0
        );
        if mean > 0.0 && peak / mean > best.0 / best.1.max(1.0) {
            best = (peak, mean);
        }
    }
    assert!(
        best.1 > 1048576.0,
        "no writes seen over any second: {best:?}"
    );
    assert!(
        best.0 > 2.0 * best.1,
        "the 10 ms peak {:.1} MiB/s is not above the 1 s mean {:.1} MiB/s",
        best.0 / 1048576.0,
        best.1 / 1048576.0
    );
    let last = pages.last().unwrap();
    // Every family the endpoint names is on the page of a bursty device.
    let names: BTreeSet<String> = samples(last).into_iter().map(|s| s.0).collect();
    for f in diskpulse::live::render::family_names() {
        assert!(names.contains(f), "{f} is not served:\n{last}");
    }
    let hidden = one(
        last,
        "diskpulse_disk_hidden_factor",
        &format!("{dev_l},direction=\"write\""),
    )
    .unwrap();
    assert!(hidden > 2.0, "hidden factor {hidden}");
    let period = one(
        last,
        "diskpulse_disk_burst_period_seconds",
        &format!("{dev_l},direction=\"write\""),
    )
    .unwrap();
    assert!((0.2..1.5).contains(&period), "burst period {period} s");
    // Not found and the index.
    assert!(get(&addr, "/nope").0.contains("404"), "404 expected");
    if have_tool("promtool", "prometheus") {
        let (ok, said) = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .output_with(last);
        assert!(
            ok && said.trim().is_empty(),
            "promtool check metrics: {said}"
        );
    }
    // What scraping every 5 ms costs the 1 ms sampler, measured in the same run from the
    // endpoint's own sample counter and run clock: alternate 500 ms of scrapes every 5 ms
    // ("busy") with 500 ms of none ("quiet", bracketed by one scrape at each end), up to 5
    // times. Interleaved, the two see the same machine (other tests of this binary run at
    // once on 2 cores). The medians of the cycles' shares of missing samples are compared:
    // one stall of a loaded machine (a CI run once lost 22 samples in one go) hits one
    // cycle, a cost of the scrapes hits every busy one. Made to wait 2 ms a scrape, the
    // sampler lost 2.9% while busy against 0.16% quiet: the 1% bound fails it.
    let at = |p: &str| {
        (
            one(p, "diskpulse_samples_total", "").unwrap(),
            one(p, "diskpulse_recording_seconds", "").unwrap(),
        )
    };
    // [busy, quiet]: each cycle's (samples taken, samples due at 1 ms).
    let mut phases: [Vec<(f64, f64)>; 2] = [vec![], vec![]];
    let mut scrapes = 0;
    while phases[1].len() < 5 && t0.elapsed() < Duration::from_millis(12_500) {
        for (k, phase) in phases.iter_mut().enumerate() {
            let start = Instant::now();
            let (n0, s0) = at(&get(&addr, "/metrics").1);
            let mut last = (n0, s0);
            while start.elapsed() < Duration::from_millis(500) {
                std::thread::sleep(Duration::from_millis(if k == 0 { 5 } else { 50 }));
                if k == 0 {
                    last = at(&get(&addr, "/metrics").1);
                    scrapes += 1;
                }
            }
            if k == 1 {
                last = at(&get(&addr, "/metrics").1);
            }
            phase.push((last.0 - n0, (last.1 - s0) / 1e-3));
        }
    }
    let st = rec.wait().unwrap();
    assert!(st.success());
    let meta = read_json(&run.join("meta.json"));
    let s = &meta["samplers"]["diskstats"];
    let (got, want) = (
        s["samples"].as_u64().unwrap(),
        s["expected"].as_u64().unwrap(),
    );
    let median_lost = |cycles: &[(f64, f64)]| {
        let mut l: Vec<f64> = cycles
            .iter()
            .map(|(n, due)| (1.0 - n / due).max(0.0))
            .collect();
        l.sort_by(f64::total_cmp);
        l[l.len() / 2]
    };
    let (lost_busy, lost_quiet) = (median_lost(&phases[0]), median_lost(&phases[1]));
    let show = |cycles: &[(f64, f64)]| {
        let l: Vec<String> = cycles
            .iter()
            .map(|(n, due)| format!("{n}/{due:.0}"))
            .collect();
        l.join(" ")
    };
    eprintln!(
        "{scrapes} fast scrapes; {got} samples of {want} expected; median share lost \
         {:.2}% while scraping every 5 ms ({}), {:.2}% between ({})",
        lost_busy * 100.0,
        show(&phases[0]),
        lost_quiet * 100.0,
        show(&phases[1]),
    );
    assert!(
        scrapes > 50 && phases[1].len() >= 2,
        "{scrapes} scrapes, {phases:?}"
    );
    assert!(
        got as f64 >= 0.95 * want as f64,
        "{got} of {want} samples: the sampler stalled"
    );
    assert!(
        lost_busy <= 2.0 * lost_quiet + 0.01,
        "the scrapes cost samples: {:.2}% lost while scraping every 5 ms, {:.2}% between",
        lost_busy * 100.0,
        lost_quiet * 100.0
    );
    let (disks, _) = diskpulse::format::diskstats::read(&run.join("diskstats.csv.gz")).unwrap();
    let d = disks.iter().find(|d| d.name == lo.name()).unwrap();
    // The page's counters are the recording's own rows: the last 1 s scrape's written
    // bytes are those of the diskstats row at its run clock.
    for p in &pages {
        let t = (one(p, "diskpulse_recording_seconds", "").unwrap() * 1e9).round() as u64;
        let k = d.t_ns.iter().rposition(|&x| x <= t + 1).unwrap();
        let row = d.f[k].get(6).unwrap() as f64 * 512.0;
        assert_eq!(
            one(p, "node_disk_written_bytes_total", &dev_l).unwrap(),
            row,
            "at {t} ns"
        );
    }
    // And the highest 10 ms peak the scrapes saw is report's 10 ms peak of the run
    // (the same aligned windows over the same samples).
    let live_peak = pages
        .iter()
        .filter_map(|p| {
            one(
                p,
                "diskpulse_disk_peak_bytes_per_second",
                &format!("{dev_l},direction=\"write\",window=\"10ms\""),
            )
        })
        .fold(0.0, f64::max)
        / 1048576.0;
    let o = diskpulse()
        .args(["report", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = read_json(&run.join("summary.json"));
    let report_peak = device(&summary, lo.name())["write"]["peak_mib_s"]["10ms"]
        .as_f64()
        .unwrap();
    eprintln!("10 ms write peak: live {live_peak:.3} MiB/s, report {report_peak:.3} MiB/s");
    assert!(
        (live_peak - report_peak).abs() <= 1e-6 * report_peak.max(1.0),
        "live {live_peak} vs report {report_peak}"
    );
}

/// Feeds `input` to a command's stdin: (success, stdout + stderr).
trait OutputWith {
    fn output_with(&mut self, input: &str) -> (bool, String);
}

impl OutputWith for std::process::Command {
    fn output_with(&mut self, input: &str) -> (bool, String) {
        let mut c = self
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    }
}

/// A real 3 s recording of the disk under /var/tmp while 32 MiB are written to it.
fn recording(dir: &Path) -> std::path::PathBuf {
    let run = dir.join("run");
    let mut rec = diskpulse()
        .args(["record", "--path", "/var/tmp", "--duration", "3s", "--out"])
        .arg(&run)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let f = std::path::PathBuf::from(format!("/var/tmp/export-test-{}.dat", std::process::id()));
    write_direct(&f, 32 << 20, 1 << 20);
    let _ = std::fs::remove_file(&f);
    assert!(rec.wait().unwrap().success());
    run
}

fn export(run: &Path, format: &str, out: &Path, step: &str) -> u64 {
    let o = diskpulse()
        .args(["export", "--format", format, "--step", step, "--out"])
        .arg(out)
        .arg(run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // "exported N samples|lines of RUN to FILE"
    err.lines()
        .find_map(|l| l.strip_prefix("exported "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {err}"))
}

#[test]
fn export_to_openmetrics_and_influx_reads_back_and_promtool_backfills_it() {
    let _quiet = quiet();
    let tmp = tempfile::tempdir().unwrap();
    let run = recording(tmp.path());
    let meta = read_json(&run.join("meta.json"));
    let zero = meta["clock_zero_unix_ns"].as_u64().unwrap();
    let (disks, _) = diskpulse::format::diskstats::read(&run.join("diskstats.csv.gz")).unwrap();
    let d = &disks[0];
    let first_t = d.t_ns[0];
    let last_t = *d.t_ns.last().unwrap();
    let last_written = d.f.last().unwrap().get(6).unwrap() * 512;
    let dev_l = format!("device=\"{}\"", d.name);

    // OpenMetrics.
    let om = tmp.path().join("run.om");
    let n = export(&run, "openmetrics", &om, "500ms");
    let text = std::fs::read_to_string(&om).unwrap();
    assert!(text.ends_with("# EOF\n"));
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut count = 0u64;
    let mut fam_done: BTreeSet<String> = BTreeSet::new();
    let mut cur_fam = String::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap();
            assert!(
                types.insert(name.into(), kind.into()).is_none(),
                "two TYPE lines for {name}"
            );
            assert!(fam_done.insert(name.into()), "{name} split");
            cur_fam = name.into();
            continue;
        }
        if l.starts_with('#') {
            continue;
        }
        let mut parts = l.rsplitn(3, ' ');
        let ts: f64 = parts.next().unwrap().parse().unwrap();
        let v: f64 = parts.next().unwrap().parse().unwrap();
        let key = parts.next().unwrap().to_string();
        let name = key.split('{').next().unwrap();
        // Every sample belongs to the family above it; a counter's ends in _total.
        if types[&cur_fam] == "counter" {
            assert_eq!(name, format!("{cur_fam}_total"), "{l}");
        } else {
            assert_eq!(name, cur_fam, "{l}");
        }
        // Milliseconds: three decimals.
        assert_eq!(l.rsplit_once('.').unwrap().1.len(), 3, "{l}");
        series.entry(key).or_default().push((ts, v));
        count += 1;
    }
    assert_eq!(count, n, "samples written vs said");
    for (k, pts) in &series {
        assert!(
            pts.windows(2).all(|w| w[0].0 < w[1].0),
            "{k}: time goes back"
        );
        let fam = k.split('{').next().unwrap().trim_end_matches("_total");
        if types[fam] == "counter" {
            assert!(
                pts.windows(2).all(|w| w[0].1 <= w[1].1),
                "{k}: counter falls"
            );
        }
    }
    let wb = &series[&format!("node_disk_written_bytes_total{{{dev_l}}}")];
    let ms = |t: u64| ((zero + t) / 1_000_000) as f64 / 1000.0;
    assert!(
        (wb[0].0 - ms(first_t)).abs() < 1e-6,
        "{} vs {}",
        wb[0].0,
        ms(first_t)
    );
    assert!((wb.last().unwrap().0 - ms(last_t)).abs() < 1e-6);
    assert_eq!(wb.last().unwrap().1, last_written as f64);
    // 3 s at 500 ms: the first row, about 6 grid points, the last row.
    assert!((6..=9).contains(&wb.len()), "{} points", wb.len());
    let peak = &series[&format!(
        "diskpulse_disk_peak_bytes_per_second{{{dev_l},direction=\"write\",window=\"10ms\"}}"
    )];
    assert!(peak.iter().any(|p| p.1 > 0.0));

    // Influx.
    let lp = tmp.path().join("run.lp");
    let lines = export(&run, "influx", &lp, "500ms");
    let text = std::fs::read_to_string(&lp).unwrap();
    assert_eq!(text.lines().count() as u64, lines);
    let disk_lines: Vec<(u64, BTreeMap<String, String>)> = text
        .lines()
        .filter(|l| l.starts_with(&format!("diskstats,device={},", d.name)))
        .map(|l| {
            let mut p = l.rsplitn(2, ' ');
            let ts: u64 = p.next().unwrap().parse().unwrap();
            let rest = p.next().unwrap();
            let fields = rest.split_once(' ').unwrap().1;
            let f = fields
                .split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            (ts, f)
        })
        .collect();
    assert_eq!(disk_lines.len(), wb.len(), "one line per exported time");
    assert_eq!(
        disk_lines[0].0,
        zero + first_t,
        "ns timestamps: zero + t_ns"
    );
    assert_eq!(disk_lines.last().unwrap().0, zero + last_t);
    let written: Vec<u64> = disk_lines
        .iter()
        .map(|(_, f)| f["written_bytes"].trim_end_matches('i').parse().unwrap())
        .collect();
    assert!(written.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*written.last().unwrap(), last_written);
    assert!(
        disk_lines[0].1["reads_completed"].ends_with('i'),
        "integers as 123i"
    );

    // promtool's backfill takes the OpenMetrics file and counts the same samples.
    if have_tool("promtool", "prometheus") {
        let db = tmp.path().join("prom");
        let o = std::process::Command::new("promtool")
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om)
            .arg(&db)
            .output()
            .unwrap();
        let said =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "promtool: {said}");
        // BLOCK ULID  MIN TIME  MAX TIME  DURATION  NUM SAMPLES ...
        let total: u64 = said
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(4)?.parse::<u64>().ok())
            .sum();
        assert_eq!(total, n, "promtool stored {total} of {n} samples: {said}");
    }
}

#[test]
fn bad_input_is_refused_with_nothing_written() {
    let _quiet = quiet();
    let tmp = tempfile::tempdir().unwrap();
    // Not a recording.
    let o = diskpulse()
        .args(["export", "--format", "influx"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a diskpulse recording"));
    // A step that is not whole milliseconds.
    let o = diskpulse()
        .args(["export", "--format", "influx", "--step", "1500us"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--step"));
    // --listen that is not an address, and one in use: nothing recorded.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    for (addr, says) in [
        ("localhost", "not an IP address"),
        (busy.as_str(), "cannot listen"),
    ] {
        let run = tmp.path().join("run");
        let o = diskpulse()
            .args(["record", "--duration", "1s", "--listen", addr, "--out"])
            .arg(&run)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!run.exists(), "a run directory was made");
    }
}

/// Metric names in a PromQL expression (labels, ranges and functions left out).
fn metric_names(expr: &str) -> Vec<String> {
    let mut s = String::new();
    let mut depth = 0;
    for c in expr.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            c if depth == 0 => s.push(c),
            _ => {}
        }
    }
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("node_") || t.starts_with("diskpulse_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_dashboard_parses_and_queries_only_what_the_endpoint_serves() {
    let _quiet = quiet();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/dashboards/diskpulse.json"
    ))
    .unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    let vars = d["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter()
            .any(|v| v["type"] == "datasource" && v["query"] == "prometheus"),
        "a Prometheus datasource variable"
    );
    let served: BTreeSet<&str> = diskpulse::live::render::family_names()
        .into_iter()
        .collect();
    let mut used = BTreeSet::new();
    let mut exprs: Vec<String> = vec![];
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in vars {
        if let Some(q) = v["definition"].as_str() {
            exprs.push(q.to_string());
        }
    }
    for e in &exprs {
        for m in metric_names(e) {
            assert!(
                served.contains(m.as_str()),
                "the dashboard queries {m}, not served"
            );
            used.insert(m);
        }
    }
    for want in [
        "node_disk_written_bytes_total",
        "diskpulse_disk_peak_bytes_per_second",
        "diskpulse_disk_hidden_factor",
        "diskpulse_disk_burst_period_seconds",
    ] {
        assert!(used.contains(want), "no panel shows {want}");
    }
}

#[test]
fn a_broker_run_exports_its_load_and_varz_too() {
    let _quiet = quiet();
    if !have_nats_server() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("demo");
    let o = diskpulse()
        .args(["demo", "--duration", "3s", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let om = tmp.path().join("demo.om");
    let n = export(&run, "openmetrics", &om, "1s");
    let text = std::fs::read_to_string(&om).unwrap();
    let load = diskpulse::format::load::read(&run).unwrap();
    let (role, rows) = load.iter().next().expect("a load role");
    let ops: u64 = rows.iter().map(|r| r.ops).sum();
    let last = |name: &str| {
        // "name{labels} value timestamp": the value of the last sample.
        let l = text
            .lines()
            .rfind(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in the export"));
        let mut cells = l.rsplit(' ');
        cells.next();
        cells.next().unwrap().parse::<f64>().unwrap()
    };
    assert_eq!(
        last(&format!("diskpulse_load_ops_total{{role=\"{role}\"}}")),
        ops as f64,
        "the last point holds the load's total"
    );
    assert!(last("diskpulse_nats_in_msgs_total{server=") > 0.0);
    let lp = tmp.path().join("demo.lp");
    export(&run, "influx", &lp, "1s");
    let lp = std::fs::read_to_string(&lp).unwrap();
    assert!(lp.lines().any(|l| l.starts_with("nats_varz,")));
    assert!(lp.lines().any(|l| l.starts_with("load,host=")));
    if have_tool("promtool", "prometheus") {
        let o = std::process::Command::new("promtool")
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om)
            .arg(tmp.path().join("prom"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let said = String::from_utf8_lossy(&o.stdout);
        let total: u64 = said
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(4)?.parse::<u64>().ok())
            .sum();
        assert_eq!(total, n, "{said}");
    }
}
