//! Recording for days (issue 13 item 1): `record --chunk` cuts diskstats.csv.gz into
//! whole, fsynced chunks that `report` reads as one recording; `--keep` deletes old
//! chunks but never the current one; `--trigger` and SIGUSR1 keep the window around an
//! event from retention; a SIGKILL loses at most the current chunk's last second; a run
//! whose rows are past 24 h reads. Real loop devices and real writes (O_DIRECT, dd).

mod common;
use common::*;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use diskpulse::format::diskstats;

const S: u64 = 1_000_000_000;

/// Rows of one file: (t_ns, device).
fn rows_of(p: &Path) -> Vec<(u64, String)> {
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{} is not a whole gzip file: {e}", p.display()));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(diskstats::header().as_str()),
        "{} starts with the header",
        p.display()
    );
    lines
        .map(|l| {
            let mut c = l.split(',');
            let t = c.next().unwrap().parse().unwrap();
            (t, c.next().unwrap().to_string())
        })
        .collect()
}

/// Writes to the device with O_DIRECT, `chunk` bytes every `pause`, until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    h: Option<JoinHandle<()>>,
}

impl Writer {
    fn start(dev: &str, chunk: usize, pause: Duration) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, dev) = (stop.clone(), PathBuf::from(dev));
        let h = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                write_direct(&dev, chunk, chunk);
                std::thread::sleep(pause);
            }
        });
        Writer { stop, h: Some(h) }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.h.take() {
            let _ = h.join();
        }
    }
}

fn record(run: &Path, dev: &str, extra: &[&str]) -> Child {
    diskpulse()
        .args(["record", "--no-progress", "--device", dev, "--out"])
        .arg(run)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(c: Child) -> String {
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "record failed: {err}");
    err
}

fn report_json(run: &Path) -> (serde_json::Value, String) {
    let o = diskpulse()
        .args(["report", "--json", "--no-charts", "--no-html"])
        .arg(run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "report failed: {err}");
    (serde_json::from_slice(&o.stdout).unwrap(), err)
}

fn chunks_meta(run: &Path) -> serde_json::Value {
    read_json(&run.join("meta.json"))["chunks"].clone()
}

fn closed(m: &serde_json::Value) -> Vec<serde_json::Value> {
    m["closed"].as_array().cloned().unwrap_or_default()
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn chunks_rotate_at_the_time_asked_and_read_as_one_recording() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let w = Writer::start(&lo.dev, 64 << 10, Duration::from_millis(1));
    let rec = record(&run, lo.name(), &["--chunk", "2s", "--duration", "7s"]);
    finish(rec);
    drop(w);

    // Three closed chunks (0-2, 2-4, 4-6 s), then the last in diskstats.csv.gz.
    let files = diskstats::files(&run);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&run).unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "chunks/diskstats.000001.csv.gz",
            "chunks/diskstats.000002.csv.gz",
            "chunks/diskstats.000003.csv.gz",
            "diskstats.csv.gz"
        ]
    );
    let m = chunks_meta(&run);
    assert_eq!(u(&m, "chunk_ns"), 2 * S);
    let listed = closed(&m);
    assert_eq!(listed.len(), 4, "{m:#}");
    let mut all: Vec<(u64, String)> = vec![];
    let mut total_rows = 0;
    let mut ends = vec![];
    for (k, (p, c)) in files.iter().zip(&listed).enumerate() {
        let rows = rows_of(p);
        assert_eq!(c["file"].as_str().unwrap(), names[k]);
        assert_eq!(rows.len() as u64, u(c, "rows"), "{}", names[k]);
        assert_eq!(std::fs::metadata(p).unwrap().len(), u(c, "bytes"));
        assert_eq!(rows[0].0, u(c, "first_t_ns"));
        assert_eq!(rows.last().unwrap().0, u(c, "last_t_ns"));
        total_rows += rows.len();
        // Every row of chunk k lies in [2k s, 2(k+1) s) (the last: from 6 s on). (The
        // loop device's backing disk is recorded too; rows of two devices interleave.)
        let rows: Vec<(u64, String)> = rows.into_iter().filter(|r| r.1 == lo.name()).collect();
        let (lo_t, hi_t) = (2 * S * k as u64, 2 * S * (k as u64 + 1));
        for (t, _) in &rows {
            assert!(*t >= lo_t, "{}: row at {t} before {lo_t}", names[k]);
            if k < 3 {
                assert!(*t < hi_t, "{}: row at {t} past {hi_t}", names[k]);
            }
        }
        // Under a write every ms, a chunk holds about a row a ms.
        if k < 3 {
            assert!(rows.len() > 1000, "{}: {} rows", names[k], rows.len());
        }
        all.extend(rows);
        ends.push(all.len());
    }
    // Across the seams: t strictly increasing (no duplicate, no row out of order), and no
    // gap at a seam wider than the widest inside a chunk.
    let mut widest_inside = 0;
    let mut seam_gaps = vec![];
    ends.pop();
    for i in 1..all.len() {
        assert!(
            all[i].0 > all[i - 1].0,
            "row {i}: t {} after {}",
            all[i].0,
            all[i - 1].0
        );
        let gap = all[i].0 - all[i - 1].0;
        if ends.contains(&i) {
            seam_gaps.push(gap);
        } else {
            widest_inside = widest_inside.max(gap);
        }
    }
    assert_eq!(seam_gaps.len(), 3);
    assert!(
        seam_gaps.iter().all(|&g| g <= widest_inside.max(5_000_000)),
        "seam gaps {seam_gaps:?} vs widest inside {widest_inside}"
    );

    // `report` reads the chunks as one recording: the same figures as one file with
    // every row (the run as it would be unchunked).
    let (chunked, _) = report_json(&run);
    let flat = d.path().join("flat");
    std::fs::create_dir_all(&flat).unwrap();
    std::fs::copy(run.join("meta.json"), flat.join("meta.json")).unwrap();
    std::fs::copy(run.join("events.jsonl"), flat.join("events.jsonl")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(flat.join("diskstats.csv.gz")).unwrap(),
        flate2::Compression::fast(),
    );
    writeln!(gz, "{}", diskstats::header()).unwrap();
    for p in &files {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        for l in text.lines().skip(1) {
            writeln!(gz, "{l}").unwrap();
        }
    }
    gz.finish().unwrap();
    let (one, _) = report_json(&flat);
    let (a, b) = (device(&chunked, lo.name()), device(&one, lo.name()));
    assert_eq!(a["rows"].as_u64().unwrap(), all.len() as u64);
    let every: u64 = chunked["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(every, total_rows as u64);
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(a["write"]["bytes"], b["write"]["bytes"]);
    assert_eq!(a["write"]["peak_mib_s"], b["write"]["peak_mib_s"]);
    assert!(
        a["write"]["bytes"].as_f64().unwrap() > 100.0 * 1048576.0,
        "{a:#}"
    );
}

#[test]
fn a_sigkill_loses_at_most_the_current_chunks_last_second() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let w = Writer::start(&lo.dev, 16 << 10, Duration::from_millis(2));
    let mut rec = record(&run, lo.name(), &["--chunk", "2s", "--duration", "60s"]);
    let t0 = Instant::now();
    let second = run.join("chunks").join(diskstats::chunk_name(2));
    while !second.exists() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(second.exists(), "two chunks closed within 30 s");
    std::thread::sleep(Duration::from_millis(1500));
    let zero = u(&read_json(&run.join("meta.json")), "clock_zero_unix_ns");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    rec.kill().unwrap(); // SIGKILL: nothing closes
    rec.wait().unwrap();
    drop(w);
    let killed_at = now - zero;

    let (rows, _) = diskstats::read_run(&run).unwrap();
    let dev = rows.iter().find(|r| r.name == lo.name()).unwrap();
    let last = *dev.t_ns.last().unwrap();
    assert!(
        last + S >= killed_at,
        "last row at {:.3} s, killed at {:.3} s: more than a second lost",
        last as f64 / 1e9,
        killed_at as f64 / 1e9
    );
    // Every closed chunk and the current one are read, each to its last whole row.
    let on_disk: usize = diskstats::files(&run)
        .iter()
        .map(|p| rows_of(p).iter().filter(|r| r.1 == lo.name()).count())
        .sum();
    assert_eq!(dev.t_ns.len(), on_disk);
    assert!(diskstats::files(&run).len() >= 3);
    let (s, err) = report_json(&run);
    assert_eq!(
        device(&s, lo.name())["rows"].as_u64().unwrap() as usize,
        on_disk
    );
    assert!(err.contains("incomplete"), "{err}");
    // meta.json (rewritten as chunks closed) lists the closed ones.
    let listed = closed(&chunks_meta(&run));
    assert!(listed.len() >= 2, "{listed:?}");
}

#[test]
fn keep_drops_old_chunks_but_never_the_current_one() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("256M");
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let w = Writer::start(&lo.dev, 4096, Duration::from_millis(5));
    let rec = record(
        &run,
        lo.name(),
        &[
            "--chunk",
            "1s",
            "--keep",
            "2s",
            "--trigger-window",
            "1s",
            "--duration",
            "8s",
        ],
    );
    finish(rec);
    drop(w);
    let m = chunks_meta(&run);
    let listed = closed(&m);
    let dropped = m["dropped"].as_array().unwrap();
    assert!(dropped.len() >= 3, "{m:#}");
    // Retention runs as each chunk closes, the last time when the run ends (the newest
    // row then is the last chunk's).
    let newest = listed[listed.len() - 1]["last_t_ns"].as_u64().unwrap();
    for c in dropped {
        assert!(!run.join(c["file"].as_str().unwrap()).exists(), "{c}");
        assert!(c["why"].as_str().unwrap().contains("--keep 2s"), "{c}");
        assert!(u(c, "last_t_ns") + 2 * S < newest, "{c} dropped too early");
    }
    for c in &listed {
        let f = c["file"].as_str().unwrap();
        let gone = dropped.iter().any(|x| x["file"] == c["file"]);
        assert_eq!(run.join(f).exists(), !gone, "{f}");
    }
    // The current chunk is never dropped (nor here the one before it: it ends within
    // --keep of the end).
    assert!(run.join("diskstats.csv.gz").exists());
    assert!(run
        .join(listed[listed.len() - 2]["file"].as_str().unwrap())
        .exists());
    // The report reads what is kept and says where it starts.
    let (s, err) = report_json(&run);
    assert!(err.contains("deleted by --keep"), "{err}");
    let kept: usize = diskstats::files(&run)
        .iter()
        .map(|p| rows_of(p).iter().filter(|r| r.1 == lo.name()).count())
        .sum();
    assert_eq!(
        device(&s, lo.name())["rows"].as_u64().unwrap() as usize,
        kept
    );
    // The mean is over what was kept (from the first kept row), not over zeros that were
    // never recorded.
    let (rows, _) = diskstats::read_run(&run).unwrap();
    let start = rows
        .iter()
        .filter_map(|d| d.t_ns.first().copied())
        .min()
        .unwrap();
    assert!(start > 2 * S, "first kept row at {start}");
    let w = &device(&s, lo.name())["write"];
    let kept_s = s["duration_s"].as_f64().unwrap() - start as f64 / 1e9;
    let want = w["bytes"].as_f64().unwrap() / 1048576.0 / kept_s;
    let mean = w["mean_mib_s"].as_f64().unwrap();
    assert!(
        (mean - want).abs() <= 1e-6 * want,
        "mean {mean} vs {want} over {kept_s} s"
    );
    // One chunk_dropped event per dropped chunk: diskstats' and (meta.json
    // chunks.files) meminfo.csv's and cpu.csv's, cut by the same rules.
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let dropped_events = |prefix: &str| {
        events
            .lines()
            .filter(|l| l.contains("\"chunk_dropped\"") && l.contains(prefix))
            .count()
    };
    assert_eq!(
        dropped_events("\"chunks/diskstats."),
        dropped.len(),
        "{events}"
    );
    for (f, prefix) in [
        ("meminfo.csv", "\"chunks/meminfo."),
        ("cpu.csv", "\"chunks/cpu."),
    ] {
        let d = m["files"][f]["dropped"].as_array().unwrap();
        assert!(!d.is_empty(), "{f}: {m:#}");
        assert_eq!(dropped_events(prefix), d.len(), "{f}: {events}");
    }
    assert_eq!(
        events.matches("\"chunk_dropped\"").count(),
        dropped_events("\"chunks/"),
        "{events}"
    );
}

#[test]
fn a_trigger_and_usr1_keep_their_windows_while_retention_drops_the_rest() {
    if !can_use_loop_devices() || !have_tool("dd", "coreutils") {
        return;
    }
    let lo = LoopDev::new("256M");
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // A trickle (well under the threshold) all along.
    let w = Writer::start(&lo.dev, 4096, Duration::from_millis(5));
    // Scoped to the loop device: the run directory's device (vda here) is recorded too and
    // may take bursts of its own (builds beside the test).
    let cond = format!("{}:write_mibps>100", lo.name());
    let rec = record(
        &run,
        lo.name(),
        &[
            "--chunk",
            "1s",
            "--keep",
            "2s",
            "--trigger",
            &cond,
            "--trigger-window",
            "1s",
            "--duration",
            "12s",
        ],
    );
    let pid = rec.id();
    std::thread::sleep(Duration::from_millis(3000));
    let dd = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", lo.dev),
            "bs=1M",
            "count=128",
            "oflag=direct",
        ])
        .output()
        .unwrap();
    assert!(dd.status.success());
    std::thread::sleep(Duration::from_millis(4000));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    finish(rec);
    drop(w);

    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let triggers: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "trigger")
        .collect();
    let burst = triggers
        .iter()
        .find(|e| e["detail"]["trigger"] == cond.as_str())
        .unwrap_or_else(|| panic!("no write trigger: {events}"));
    assert_eq!(burst["detail"]["device"], lo.name());
    assert!(
        burst["detail"]["value"].as_f64().unwrap() > 100.0,
        "{burst}"
    );
    let tb = u(burst, "t_ns");
    assert!((2 * S..7 * S).contains(&tb), "burst trigger at {tb}");
    let sig = triggers
        .iter()
        .find(|e| e["detail"]["trigger"] == "signal USR1")
        .unwrap_or_else(|| panic!("no USR1 trigger: {events}"));
    let ts = u(sig, "t_ns");
    assert!(ts > tb + 2 * S && ts < 11 * S, "USR1 at {ts}");

    let m = chunks_meta(&run);
    let windows = m["kept_windows"].as_array().unwrap();
    let overlaps = |c: &serde_json::Value| {
        windows.iter().any(|k| {
            u(k, "from_t_ns") <= u(c, "last_t_ns") && u(c, "first_t_ns") <= u(k, "to_t_ns")
        })
    };
    for t in [tb, ts] {
        assert!(
            windows
                .iter()
                .any(|k| u(k, "from_t_ns") <= t.saturating_sub(S) && t + S <= u(k, "to_t_ns")),
            "no kept window around {t}: {m:#}"
        );
    }
    let dropped = m["dropped"].as_array().unwrap();
    assert!(!dropped.is_empty(), "retention dropped nothing: {m:#}");
    let mut kept_by_window = 0;
    for c in closed(&m) {
        let f = c["file"].as_str().unwrap();
        if overlaps(&c) {
            assert!(run.join(f).exists(), "{f} in a kept window was deleted");
            kept_by_window += 1;
        }
    }
    assert!(kept_by_window >= 4, "{m:#}");
    for c in dropped {
        assert!(!overlaps(c), "{c} dropped inside a kept window");
    }
    // The kept burst reads back: the report finds its bytes, and marks the trigger.
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&run.join("summary.json"));
    assert!(device(&s, lo.name())["write"]["bytes"].as_f64().unwrap() >= 128.0 * 1048576.0);
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("trigger {}", cond.replace('>', "&gt;")))
            || html.contains(&format!("trigger {cond}")),
        "the trigger {cond} is not marked in report.html"
    );
    assert!(html.contains("trigger signal USR1"));
}

/// A synthetic chunk of device `syn0`: a row every ms from `from_ns` for `ms` ms.
fn synth_chunk(p: &Path, from_ns: u64, ms: u64, sectors0: u64) -> u64 {
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(p).unwrap(),
        flate2::Compression::fast(),
    );
    writeln!(gz, "{}", diskstats::header()).unwrap();
    let mut sectors = sectors0;
    for k in 0..ms {
        sectors += 8;
        writeln!(
            gz,
            "{},syn0,250,0,0,0,0,0,{k},0,{sectors},0,0,0,0,0,0,0,0,0,0",
            from_ns + k * 1_000_000
        )
        .unwrap();
    }
    gz.finish().unwrap();
    sectors
}

#[test]
fn a_run_past_24_hours_reads_across_its_chunks_and_holes() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path();
    std::fs::create_dir_all(run.join("chunks")).unwrap();
    let h = 3600 * S;
    // Chunks of an hour; 1-24 and 26 gone: 25 (24 h), 27 (26 h), current (27 h). No
    // meta.json here, so nothing says --keep deleted them (issue 25: a hole is not
    // blamed on --keep unless chunks.dropped lists it).
    let s = synth_chunk(&run.join("chunks/diskstats.000025.csv.gz"), 24 * h, 500, 0);
    let s = synth_chunk(&run.join("chunks/diskstats.000027.csv.gz"), 26 * h, 500, s);
    synth_chunk(&run.join("diskstats.csv.gz"), 27 * h, 500, s);
    let (rows, warnings) = diskstats::read_run(run).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    // 1500 rows and one row without values where chunk 26 was.
    assert_eq!(r.t_ns.len(), 1501, "{warnings:?}");
    assert_eq!(r.t_ns[0], 24 * h);
    assert_eq!(*r.t_ns.last().unwrap(), 27 * h + 499 * 1_000_000);
    assert!(r.t_ns.windows(2).all(|w| w[0] < w[1]));
    let hole = r
        .t_ns
        .iter()
        .position(|&t| t == 24 * h + 499 * 1_000_000 + 1)
        .unwrap();
    assert!((0..21).all(|i| r.f[hole].get(i).is_none()));
    assert_eq!(r.t_ns[hole + 1], 26 * h);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("chunks 1 to 24 are missing"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("chunks 26 to 26 are missing"),
        "{warnings:?}"
    );
    // An absurd t_ns (31 years) is still refused, naming file:line.
    synth_chunk(
        &run.join("diskstats.csv.gz"),
        999_999_999_999_999_999 - 10_000_000,
        2,
        0,
    );
    let (_, warnings) = diskstats::read_run(run).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("diskstats.csv.gz:2") && w.contains("past the 400 days")),
        "{warnings:?}"
    );
}

#[test]
fn bad_chunk_keep_and_trigger_values_are_usage_errors_with_nothing_written() {
    let d = tempfile::tempdir().unwrap();
    for (args, says) in [
        (vec!["--chunk", "10ms"], "--chunk 10ms"),
        (vec!["--chunk", "10KiB"], "64KiB"),
        (vec!["--chunk", "often"], "neither a duration"),
        (
            vec!["--trigger", "iops>3"],
            "write_mibps, read_mibps, await_ms",
        ),
        (
            vec!["--keep", "1m", "--trigger-window", "5m"],
            "--trigger-window 300s is longer than --keep 60s",
        ),
        (vec!["--keep", "0s"], "--keep 0s"),
        (
            ["--trigger", "await_ms>1"].repeat(9),
            "--trigger given 9 times: at most 8",
        ),
    ] {
        let run = d.path().join("run");
        let o = diskpulse()
            .args(["record", "--duration", "1s", "--out"])
            .arg(&run)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!run.exists(), "{args:?} wrote {}", run.display());
    }
}
