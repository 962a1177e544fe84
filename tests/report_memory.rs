//! The report reads the diskstats rows as a stream (issue 13 item 3): its figures are the
//! ones the same arithmetic gives on every row held in memory (to the bit), and its peak
//! memory does not grow with the recording's length.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use diskpulse::report::{derive, procio, rates, stream, ReportOptions};

/// Counts the bytes allocated and not yet freed, and their highest mark since
/// [`heap_reset`]: the report's memory measured exactly, without RSS's noise. The tests
/// of this file take [`SERIAL`] so that no other test allocates during a measurement.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static HIGH: AtomicUsize = AtomicUsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

// SAFETY: every call is handed to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            HIGH.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                HIGH.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Starts a measurement: returns the bytes live now.
fn heap_reset() -> usize {
    let now = LIVE.load(Ordering::Relaxed);
    HIGH.store(now, Ordering::Relaxed);
    now
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A recording of `devices` devices sampled every 1 ms for `secs` s: steady writes with
/// jitter and a 60 ms burst every 5 s (device 0 and up), reads that jump after each
/// restart (device 1), a counter reset on device 0 at 7 s (an interval without value),
/// and one quiet device (the last, when `devices` > 2) written once a second without
/// the discard and flush fields. Events: a restart of `n1` (meta.json names its device)
/// at 4 s and of `n2` (not named: every device) at 11 s. `duration`: meta.json's.
fn synth(dir: &Path, secs: u64, devices: usize, duration: Option<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    let mut meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse",
        "devices": (0..devices).map(|k| serde_json::json!({"name": format!("syn{k}"), "major": 250, "minor": k, "why": "named"})).collect::<Vec<_>>(),
        "samplers": {"diskstats": {"interval_us": 1000}},
        "broker_nodes": [{"node": "n1", "devices": ["syn1"]}],
        "complete": duration.is_some(),
    });
    if let Some(d) = duration {
        meta["duration_ns"] = d.into();
    }
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let mut ev = String::new();
    for (t, kind, node) in [
        (4_000_000_000u64, "restart", "n1"),
        (4_300_000_000, "restart_ready", "n1"),
        (11_000_000_000, "restart", "n2"),
        (11_200_000_000, "restart_ready", "n2"),
    ] {
        ev.push_str(
            &serde_json::json!({"t_ns": t, "kind": kind, "detail": {"node": node}}).to_string(),
        );
        ev.push('\n');
    }
    std::fs::write(dir.join("events.jsonl"), ev).unwrap();
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
    let mut c = vec![[0u64; 17]; devices];
    let quiet = (devices > 2).then_some(devices - 1);
    let mut line = String::new();
    for ms in 0..=secs * 1000 {
        for (k, f) in c.iter_mut().enumerate() {
            if Some(k) == quiet {
                if ms % 1000 != 0 {
                    continue;
                }
                f[4] += 1;
                f[6] += 8;
            } else if ms > 0 {
                let burst = (ms + 1700 * k as u64) % 5000 < 60;
                let sectors = if burst { 1600 } else { 20 + rnd(40) };
                f[4] += sectors / 8;
                f[6] += sectors;
                f[7] += 1 + rnd(3);
                let after_restart = (4000..4800).contains(&ms) || (11_000..11_500).contains(&ms);
                let reads = if k == 1 && after_restart { 40 } else { rnd(2) };
                f[0] += reads;
                f[2] += 8 * reads;
                f[3] += rnd(2);
                f[1] += rnd(2);
                f[9] += 1;
                f[10] += rnd(5);
                f[15] += u64::from(ms % 200 == 0);
                f[16] += u64::from(ms % 200 == 0);
                f[8] = if burst { 30 + rnd(10) } else { rnd(4) };
                if k == 0 && ms == 7000 {
                    f[6] = 0; // a reset: no value for this interval
                }
            }
            line.clear();
            line.push_str(&format!("{},syn{k},250,{k}", ms * 1_000_000));
            for (i, v) in f.iter().enumerate() {
                line.push(',');
                if Some(k) != quiet || !(11..17).contains(&i) {
                    line.push_str(&v.to_string());
                }
            }
            writeln!(gz, "{line}").unwrap();
        }
    }
    gz.finish().unwrap();
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

/// Every figure the streamed report gives against the in-memory arithmetic on the rows.
fn check_equal(dir: &Path) {
    let o = ReportOptions::default();
    let (run, analyses, summary) = diskpulse::report::analyse(dir, &o).unwrap();
    let rows = run.disk_rows().unwrap();
    assert_eq!(rows.len(), analyses.len());
    let dur = run.duration_ns;
    for (d, a) in rows.iter().zip(&analyses) {
        let m = derive::analyse_device_in_memory(d, run.device_why(&d.name), dur, &o);
        assert_eq!(json(&a.summary), json(&m.summary), "device {}", d.name);
        assert_eq!(json(&a.ui_write), json(&m.ui_write), "device {}", d.name);
        assert_eq!(json(&a.ui_read), json(&m.ui_read), "device {}", d.name);
        // rates.csv, line for line.
        let (windows, has) = a.rates.as_ref().unwrap();
        let streamed: Vec<String> =
            rates::device_rows(&run, &d.name, windows, has, o.rates_window_ns)
                .map(|r| r.to_line())
                .collect();
        let held: Vec<String> =
            rates::rows_in_memory(&run, std::slice::from_ref(d), o.rates_window_ns)
                .iter()
                .map(|r| r.to_line())
                .collect();
        assert_eq!(streamed.len(), held.len());
        assert!(streamed == held, "rates.csv of {}", d.name);
    }
    // The restart windows.
    assert_eq!(summary.restarts.len(), 2);
    assert!(summary.restarts.iter().all(|r| r.read_bytes > 0.0));
    assert_eq!(
        json(&summary.restarts),
        json(&derive::restarts_in_memory(&run, &rows))
    );
    // What the broker's share is taken of (no proc_io.csv here: nothing either way).
    assert!(procio::device_bytes_in_memory(&run, &rows).is_empty());
}

#[test]
fn streamed_figures_equal_the_in_memory_ones() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 20, 3, Some(20_000_000_000));
    check_equal(&run);
}

#[test]
fn a_cut_off_recording_is_read_twice_and_still_equal() {
    let _g = serial();
    // No duration in meta.json (kill -9): the end is the last row, known after a pass.
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    synth(&run, 13, 2, None);
    check_equal(&run);
    // meta.json claiming more than a second past the rows: the rows' end.
    let run2 = d.path().join("run2");
    synth(&run2, 13, 2, Some(60_000_000_000));
    let (r, _, _) = diskpulse::report::analyse(&run2, &ReportOptions::default()).unwrap();
    assert_eq!(r.duration_ns, 13_000_000_000);
    check_equal(&run2);
}

/// Peak RSS (bytes) and exit code of `diskpulse report RUN --no-html` (the page's
/// zoomable timeline holds up to its budget of 2 M values, at 1 ms for runs this short:
/// that grows with the run by design, up to the budget, and is not what is measured).
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn report_rss(run: &Path) -> (u64, i32) {
    let child = common::diskpulse()
        .arg("report")
        .arg(run)
        .arg("--no-html")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 on our own child; the kernel writes rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    (ru.ru_maxrss as u64 * 1024, code)
}

#[test]
fn report_memory_does_not_grow_with_the_recording() {
    let _g = serial();
    // 4 devices at 1 ms: 30 s (120 k rows) and 4x that. Rows held in memory (as before
    // issue 13 item 3) took 144 bytes each: 17 MB and 69 MB on top of the rest.
    let d = tempfile::tempdir().unwrap();
    let mut rss = vec![];
    for secs in [30u64, 120] {
        let run = d.path().join(format!("run{secs}"));
        synth(&run, secs, 4, Some(secs * 1_000_000_000));
        let (bytes, code) = report_rss(&run);
        assert_eq!(code, 0, "report of {secs} s failed");
        let rows = diskpulse::report::Run::read(&run)
            .unwrap()
            .disks
            .iter()
            .map(|d| d.rows)
            .sum::<usize>();
        eprintln!(
            "{secs} s, {rows} rows: report peak RSS {:.1} MB",
            bytes as f64 / 1e6
        );
        rss.push((bytes, rows));
    }
    let (a, ra) = rss[0];
    let (b, rb) = rss[1];
    assert!(rb > 3 * ra, "{ra} -> {rb} rows");
    // The rows alone would add (rb - ra) * 144 bytes.
    let held_growth = (rb - ra) as f64 * 144.0;
    assert!(
        (b as f64) < 1.3 * a as f64,
        "peak RSS {a} -> {b} bytes for 4x the rows (holding them would add {held_growth:.0})"
    );
}

/// The highest heap the report's analysis and its rates.csv rows take for a run of
/// `secs` s (4 devices at 1 ms), above what was live before.
fn analysis_heap(dir: &Path, secs: u64, o: &ReportOptions) -> (usize, usize) {
    let run = dir.join(format!("heap{secs}"));
    synth(&run, secs, 4, Some(secs * 1_000_000_000));
    let before = heap_reset();
    let (run, analyses, _summary) = diskpulse::report::analyse(&run, o).unwrap();
    // rates.csv's rows, one at a time, as `report` writes them.
    let mut lines = 0usize;
    for a in &analyses {
        let (windows, has) = a.rates.as_ref().unwrap();
        for r in rates::device_rows(&run, &a.summary.name, windows, has, o.rates_window_ns) {
            assert!(!r.to_line().is_empty());
            lines += 1;
        }
    }
    let rows: usize = analyses.iter().map(|a| a.summary.rows).sum();
    assert_eq!(
        lines,
        4 * (secs * 1_000_000_000).div_ceil(o.rates_window_ns) as usize
    );
    drop((run, analyses));
    (HIGH.load(Ordering::Relaxed) - before, rows)
}

#[test]
fn the_analysis_heap_does_not_grow_with_the_run() {
    // Exact heap bytes (a counting allocator), not RSS. What grew with the run before
    // (issue 13): the burst finder's 10 ms bins and their two copies in find_bursts,
    // rates.csv's sums per 100 ms window (18 x 8 bytes a window a device). At 40 s -> 160 s
    // of 4 devices those added ~1.6 MB to ~2 MB; with rates.csv at 1 ms (`--window 1ms`)
    // 18 x 8 bytes per ms a device, as much as holding the rows.
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    for (what, o) in [
        ("defaults", ReportOptions::default()),
        (
            "rates.csv at 1 ms",
            ReportOptions {
                rates_window_ns: 1_000_000,
                ..Default::default()
            },
        ),
    ] {
        let (a, ra) = analysis_heap(d.path(), 40, &o);
        let (b, rb) = analysis_heap(d.path(), 160, &o);
        eprintln!(
            "{what}: {ra} rows: peak heap {:.2} MB; {rb} rows: {:.2} MB",
            a as f64 / 1e6,
            b as f64 / 1e6
        );
        assert!(rb > 3 * ra, "{ra} -> {rb} rows");
        assert!(
            (b as f64) < 1.15 * a as f64,
            "{what}: peak heap {a} -> {b} bytes for 4x the rows"
        );
    }
    // The control: the same pass with its windows held in memory (the layout before) grows
    // with the run, and this measure sees it.
    let held = |secs: u64| {
        let run = d.path().join(format!("heap{secs}"));
        let files = diskpulse::format::diskstats::files(&run);
        let dur = secs * 1_000_000_000;
        let plan = stream::Plan {
            duration_ns: dur,
            ui_window_ns: 30_000_000_000,
            bin_ns: 10_000_000,
            rates_window_ns: Some(1_000_000),
            charts: stream::ChartMode::Off,
            restarts: vec![],
            broker_span: None,
            spill: None,
            row_limit_ns: None,
        };
        let before = heap_reset();
        let pass = stream::pass(&files, &plan).unwrap();
        let o = ReportOptions::default();
        for (dev, a) in pass.devices.iter().zip(pass.accs) {
            derive::analyse_device(&dev.name, a, None, dur, &o);
        }
        HIGH.load(Ordering::Relaxed) - before
    };
    let (a, b) = (held(40), held(160));
    eprintln!(
        "windows held in memory: peak heap {:.2} MB -> {:.2} MB",
        a as f64 / 1e6,
        b as f64 / 1e6
    );
    assert!(b as f64 > 2.0 * a as f64, "held windows: {a} -> {b} bytes");
}
