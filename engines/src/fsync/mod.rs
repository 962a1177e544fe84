//! `diskpulse fsync`: pg_test_fsync's questions with percentiles. Which way of making an
//! 8 KiB write durable is fastest on this directory's file system and devices, does one
//! sync for two writes cost more than for one, how do 16 KiB in small O_SYNC writes
//! compare, and is fsync honoured on a descriptor that did not write?
//!
//! The measuring is `collectors::fsync` (its module comment has the method, checked against
//! pg_test_fsync 15 with strace). This file validates input, prints the header (the devices
//! under --dir and their write cache), the table or JSON, and `fsync.csv` inside a recorded
//! run. Output formats are pure functions of the results (`table_row`, `csv_row`, `json_row`)
//! so they can be tested without a disk.
//!
//! Exit codes: 0; 1 when a test failed mid-run (EIO, ENOSPC: the others still ran and are
//! reported); 2 bad usage; 130 interrupted (what ran is reported, the file is removed).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use collectors::clock::{Clock, ENV_ZERO};
use collectors::directio::LatencyNs;
use collectors::fsync::{
    self as engine, FsyncError, Group, Measured, Offsets, Options, Outcome, TestFile, TestSpec,
};
use format::fsync::FsyncTest;

use format::cli::{fmt_duration, parse_duration};
use format::usage;

mod table;
use table::{after_row, footer, ours_heading, row_label, row_rest, section_line, Header};

/// Environment variable naming the run directory of an enclosing `diskpulse record`.
const ENV_RUN_DIR: &str = "DISKPULSE_RUN_DIR";

#[derive(Args, Debug)]
pub struct FsyncArgs {
    /// Directory to test in. A 16 MiB file `.diskpulse-fsync.<pid>` is created there and
    /// removed afterwards, also on Ctrl-C.
    #[arg(
        long,
        value_name = "D",
        default_value = ".",
        conflicts_with = "filename"
    )]
    pub dir: PathBuf,
    /// The test file, as pg_test_fsync's -f/--filename: created (it must not exist: it is
    /// never overwritten), written, and removed afterwards, also on Ctrl-C.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub filename: Option<PathBuf>,
    /// How long each of the 22 tests repeats its op (pg_test_fsync's -s; a bare number is
    /// seconds, as pg's: `-s 5`).
    #[arg(short = 's', long, value_name = "SECS", default_value = "2s", value_parser = parse_secs)]
    pub secs_per_test: Duration,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run only these tests: comma-separated ids (`one_8k.fdatasync`), test names in every
    /// group (`fdatasync`) or groups (`open_sync_16k`). Default: all 22.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Walk the writes through the 16 MiB file, as a WAL segment fills, instead of
    /// pg_test_fsync's fixed offsets (it rewrites the same 8 KiB block every op).
    #[arg(long)]
    pub cycle: bool,
}

/// pg_test_fsync's `-s 5` (a bare number is seconds) or a duration (`500ms`, `2s`).
fn parse_secs(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return parse_duration(&format!("{t}s"));
    }
    parse_duration(t)
}

/// Shortest --secs-per-test: shorter gives too few ops on a slow disk to say anything.
const MIN_PER_TEST: Duration = Duration::from_millis(10);

/// Longest --secs-per-test: 22 tests of 10 minutes are already 3 h 40 min.
const MAX_PER_TEST: Duration = Duration::from_secs(600);

/// The checks of the arguments alone (not of `--dir`): also for `diskpulse run --dry-run`,
/// which checks a scenario's fsync phases without running them.
pub fn check_args(a: &FsyncArgs) -> anyhow::Result<()> {
    if a.secs_per_test < MIN_PER_TEST {
        return Err(usage!(
            "--secs-per-test {} is too short: the shortest is {}",
            fmt_duration(a.secs_per_test),
            fmt_duration(MIN_PER_TEST)
        ));
    }
    if a.secs_per_test > MAX_PER_TEST {
        return Err(usage!(
            "--secs-per-test {} is too long: at most {} (the 22 tests would take {} x 22); pass 2s to 10m",
            fmt_duration(a.secs_per_test),
            fmt_duration(MAX_PER_TEST),
            fmt_duration(a.secs_per_test)
        ));
    }
    select(engine::all_tests(), &a.only).map(|_| ())
}

/// [`check_args`] and the directory under test as `run` checks it (a pseudo file
/// system, a missing directory, an existing `-f` file): for a scenario's fsync phase
/// whose `--dir`/`-f` is the user's own (issue 25 point 8). Writes nothing.
pub fn check_target(a: &FsyncArgs) -> anyhow::Result<()> {
    check_args(a)?;
    dir_under_test(a).map(|_| ())
}

/// What `diskpulse run --dry-run` plans from an fsync phase's arguments: how many tests
/// run (each for `--secs-per-test`).
pub fn planned_tests(a: &FsyncArgs) -> anyhow::Result<usize> {
    Ok(select(engine::all_tests(), &a.only)?.len())
}

/// The test file each fsync run creates (and removes), bytes.
pub const TEST_FILE_BYTES: u64 = engine::FILE_BYTES as u64;

/// The directory under test (`--dir`, or `-f FILE`'s directory), canonical; a usage
/// error naming the flag when it is not an existing directory on storage or `-f` names
/// a file that exists.
fn dir_under_test(a: &FsyncArgs) -> anyhow::Result<PathBuf> {
    // -f FILE: the file's directory is the one under test.
    let (flag, in_dir) = match &a.filename {
        Some(f) => {
            if f.as_os_str().is_empty() || f.to_string_lossy().ends_with('/') {
                return Err(usage!(
                    "-f/--filename takes a file name, like /var/lib/pgsql/pg_test_fsync.out; got '{}'",
                    f.display()
                ));
            }
            if std::fs::symlink_metadata(f).is_ok() {
                return Err(usage!(
                    "-f {}: the file exists; diskpulse fsync creates its test file and removes it afterwards, so it never takes an existing one: remove it or name a new file",
                    f.display()
                ));
            }
            let parent = match f.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            ("-f", parent)
        }
        None => ("--dir", a.dir.clone()),
    };
    let md = std::fs::metadata(&in_dir).map_err(|e| {
        usage!(
            "{flag} takes a path in an existing directory; '{}': {e}",
            in_dir.display()
        )
    })?;
    if let Some(fs) = collectors::probe::target::pseudo_fs_name(&in_dir) {
        return Err(usage!(
            "{flag} {}: is on {fs}, a kernel pseudo file system, not storage; name a directory on a disk-backed file system",
            in_dir.display()
        ));
    }
    if !md.is_dir() {
        return Err(usage!(
            "{flag} takes a directory; '{}' is not one",
            in_dir.display()
        ));
    }
    Ok(std::fs::canonicalize(&in_dir).unwrap_or_else(|_| in_dir.clone()))
}

pub fn run(a: FsyncArgs) -> anyhow::Result<i32> {
    check_args(&a)?;
    let dir = dir_under_test(&a)?;
    let tests = select(engine::all_tests(), &a.only)?;

    // Inside a recorded run: stamp on its clock and create fsync.csv before measuring, so
    // a bad run directory fails at once and rows land as each test ends.
    let (clock, mut csv) = match std::env::var_os(ENV_RUN_DIR) {
        Some(run_dir) => {
            let clock = Clock::from_env().with_context(|| {
                format!(
                    "{ENV_RUN_DIR} is set but {ENV_ZERO} is not a number: run under `diskpulse record -- diskpulse fsync ...`, or unset {ENV_RUN_DIR}"
                )
            })?;
            (clock, Some(CsvOut::open(&PathBuf::from(run_dir))?))
        }
        None => (Clock::start(), None),
    };

    let stop = Arc::new(AtomicBool::new(false));
    crate::signals::stop_on_signals(&stop)?;

    let mut out = Stdout {
        stop: &stop,
        error: None,
    };
    let header = Header::gather(&dir, a.secs_per_test, a.cycle);
    if !a.json {
        out.put(&header.text());
    }
    let opts = Options {
        per_test: a.secs_per_test,
        offsets: if a.cycle {
            Offsets::Cycle
        } else {
            Offsets::Fixed
        },
    };
    let created = match &a.filename {
        Some(f) => TestFile::create_at(&dir.join(f.file_name().unwrap_or_default()), &stop),
        None => TestFile::create(&dir, &stop),
    };
    let file = match created {
        Ok(f) => Some(f),
        Err(FsyncError::Interrupted { .. }) => None,
        Err(e) => return Err(e).context("diskpulse fsync: preparing the test file"),
    };
    let file_name = file.as_ref().map(|f| f.path().display().to_string());

    let mut results: Vec<Row> = vec![];
    let mut last_group: Option<Group> = None;
    for spec in tests {
        if !a.json && last_group != Some(spec.group) {
            out.put(&section_line(spec.group));
            last_group = Some(spec.group);
        }
        if !a.json {
            out.put(&ours_heading(&results, &spec));
            out.put(&row_label(&spec));
        }
        let t_ns = clock.now_ns();
        let outcome = match &file {
            Some(f) => engine::run_test(f, &spec, &opts, &stop, &clock),
            None => Outcome::NotRun,
        };
        let row = Row {
            t_ns,
            t_end_ns: clock.now_ns(),
            spec,
            outcome,
        };
        if !a.json {
            out.put(&row_rest(&row));
            out.put(&after_row(&row.spec));
        }
        if let Some(c) = csv.as_mut() {
            c.write(&csv_row(&row))?;
        }
        results.push(row);
    }
    drop(file);

    let interrupted = stop.load(Ordering::Relaxed) && out.error.is_none();
    if a.json {
        let doc = header.json(
            file_name,
            interrupted,
            results.iter().map(json_row).collect(),
        );
        // Through a Value: every object's keys print sorted, as they always have.
        let doc = serde_json::to_value(doc)?;
        out.put(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    } else {
        out.put(&footer(&results));
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .map(|r| r.spec.full_id())
        .collect();
    if let Some(e) = out.error {
        return Err(anyhow::anyhow!(
            "diskpulse fsync: cannot write to stdout ({e}); stopped early, the test file is removed"
        ));
    }
    if interrupted {
        eprintln!("diskpulse fsync: interrupted; the tests that ran are reported, the rest are not run; the test file is removed");
        return Ok(130);
    }
    if !failed.is_empty() {
        eprintln!(
            "Error: {} test(s) failed mid-run: {} (see their rows)",
            failed.len(),
            failed.join(", ")
        );
        return Ok(1);
    }
    Ok(0)
}

/// The tests `--only` names, in run order; all of them without `--only`.
fn select(all: Vec<TestSpec>, only: &[String]) -> anyhow::Result<Vec<TestSpec>> {
    if only.is_empty() {
        return Ok(all);
    }
    let renamed = |w: &str| -> String {
        let (g, id) = w.rsplit_once('.').map_or(("", w), |(g, i)| (g, i));
        match engine::RENAMED_IDS.iter().find(|(old, _)| *old == id) {
            Some((_, new)) if g.is_empty() => new.to_string(),
            Some((_, new)) => format!("{g}.{new}"),
            None => w.to_string(),
        }
    };
    let hit = |s: &TestSpec, w: &str| {
        let w = renamed(w);
        w == s.full_id() || w == s.id || w == s.group.id()
    };
    for w in only {
        if !all.iter().any(|s| hit(s, w.trim())) {
            let ids: Vec<String> = all.iter().map(|s| s.full_id()).collect();
            return Err(usage!(
                "--only: no test '{w}'; tests are {} (or a group: one_8k, two_8k, open_sync_16k, other_fd, no_sync)",
                ids.join(",")
            ));
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| only.iter().any(|w| hit(s, w.trim())))
        .collect())
}

/// stdout, written and flushed piece by piece (a row appears as its test ends). If stdout
/// goes away (`| head`), the run stops early instead of panicking, and the file is removed.
struct Stdout<'a> {
    stop: &'a AtomicBool,
    error: Option<std::io::Error>,
}

impl Stdout<'_> {
    fn put(&mut self, s: &str) {
        if self.error.is_some() {
            return;
        }
        let mut o = std::io::stdout().lock();
        if let Err(e) = o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
            self.error = Some(e);
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// One test's result with its place on the run clock.
pub struct Row {
    /// Run-clock time the test was started (for a test that ran, `Measured::start_t_ns` is
    /// the first op's start, a few µs later, after opening the file).
    pub t_ns: u64,
    pub t_end_ns: u64,
    pub spec: TestSpec,
    pub outcome: Outcome,
}

/// The latency fields in CSV order: min, mean, p50, p99, p999, max (µs), as in
/// `lat_min_us`, ... and `sync_lat_min_us`, ...
fn lat_values(l: &LatencyNs) -> [f64; 6] {
    let p = |q| l.at(q).unwrap_or(0) as f64 / 1000.0;
    [
        l.min as f64 / 1000.0,
        l.mean / 1000.0,
        p(50.0),
        p(99.0),
        p(99.9),
        l.max as f64 / 1000.0,
    ]
}

/// The header of `fsync.csv` (with newline; the columns: [`format::fsync`]).
pub fn csv_header() -> String {
    format!("{}\n", format::fsync::HEADER)
}

fn status(o: &Outcome) -> &'static str {
    match o {
        Outcome::Ran(_) => "ok",
        Outcome::NotAvailable { .. } => "n/a",
        Outcome::Failed { .. } => "failed",
        Outcome::NotRun => "not_run",
    }
}

fn measured(o: &Outcome) -> Option<&Measured> {
    match o {
        Outcome::Ran(m) => Some(m),
        Outcome::Failed { partial, .. } => partial.as_ref(),
        _ => None,
    }
}

fn reason(r: &Row) -> String {
    match &r.outcome {
        Outcome::NotAvailable { reason } | Outcome::Failed { reason, .. } => reason.clone(),
        Outcome::NotRun => "interrupted before it started".into(),
        Outcome::Ran(m) if m.cut_short => "cut short by Ctrl-C".into(),
        Outcome::Ran(_) => String::new(),
    }
}

/// One row of `fsync.csv`: a test's start and end on the run clock, its ops and latencies
/// (µs; empty where the test did not run or has no separate sync call).
pub fn csv_row(r: &Row) -> String {
    use format::fsync::{FsyncRow, LatUs, Measured as Cols};
    let lat = |l: &LatencyNs| {
        let [min, mean, p50, p99, p999, max] = lat_values(l);
        LatUs {
            min,
            mean,
            p50,
            p99,
            p999,
            max,
        }
    };
    let m = measured(&r.outcome);
    let (t0, t1) = m
        .map(|m| (m.start_t_ns, m.end_t_ns))
        .unwrap_or((r.t_ns, r.t_end_ns));
    FsyncRow {
        t_ns: t0,
        t_end_ns: t1,
        test: r.spec.full_id(),
        status: status(&r.outcome).to_string(),
        measured: m.map(|m| Cols {
            ops: m.ops,
            secs: m.secs(),
            ops_per_s: m.ops_per_s(),
            lat: lat(&m.lat),
            sync_lat: m.sync_lat.as_ref().map(lat),
        }),
        reason: reason(r),
    }
    .to_line()
}

/// Rounded to 3 decimals: µs to the ns, ops/s to a thousandth.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// One entry of the JSON `tests` array (the same field names as fsync.csv, plus what the
/// test does).
fn json_row(r: &Row) -> FsyncTest {
    let m = measured(&r.outcome);
    let reason = reason(r);
    // `lat_*` and `sync_lat_*` in [`lat_values`] order.
    let lat = |l: Option<&LatencyNs>| {
        let v = l.map(lat_values);
        std::array::from_fn::<_, 6, _>(|i| v.map(|x| r3(x[i])))
    };
    let [lat_min_us, lat_mean_us, lat_p50_us, lat_p99_us, lat_p999_us, lat_max_us] =
        lat(m.map(|m| &m.lat));
    let [sync_lat_min_us, sync_lat_mean_us, sync_lat_p50_us, sync_lat_p99_us, sync_lat_p999_us, sync_lat_max_us] =
        lat(m.and_then(|m| m.sync_lat.as_ref()));
    FsyncTest {
        id: r.spec.full_id(),
        group: r.spec.group.id().to_string(),
        name: r.spec.name.to_string(),
        how: r.spec.how.to_string(),
        pg_test_fsync: r.spec.pg_label.map(|l| l.trim().to_string()),
        pg_section: r.spec.group.pg_title().to_string(),
        writes_per_op: r.spec.writes_per_op,
        write_bytes: r.spec.write_bytes,
        status: status(&r.outcome).to_string(),
        reason: (!reason.is_empty()).then_some(reason),
        cut_short: m.is_some_and(|m| m.cut_short),
        t_ns: m.map(|m| m.start_t_ns).unwrap_or(r.t_ns),
        t_end_ns: m.map(|m| m.end_t_ns).unwrap_or(r.t_end_ns),
        ops: m.map(|m| m.ops),
        secs: m.map(|m| m.secs()),
        ops_per_s: m.map(|m| r3(m.ops_per_s())),
        lat_min_us,
        lat_mean_us,
        lat_p50_us,
        lat_p99_us,
        lat_p999_us,
        lat_max_us,
        sync_lat_min_us,
        sync_lat_mean_us,
        sync_lat_p50_us,
        sync_lat_p99_us,
        sync_lat_p999_us,
        sync_lat_max_us,
    }
}

/// `fsync.csv` in the run directory, appended one row per test as the test ends.
struct CsvOut {
    f: std::fs::File,
    path: PathBuf,
}

impl CsvOut {
    fn open(run_dir: &Path) -> anyhow::Result<CsvOut> {
        let path = run_dir.join("fsync.csv");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| {
                format!(
                    "cannot open {} ({ENV_RUN_DIR} names the run directory)",
                    path.display()
                )
            })?;
        // A second `diskpulse fsync` in the same run appends its rows under the one header.
        if f.metadata()?.len() == 0 {
            f.write_all(csv_header().as_bytes())?;
        }
        Ok(CsvOut { f, path })
    }

    fn write(&mut self, row: &str) -> anyhow::Result<()> {
        self.f
            .write_all(row.as_bytes())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collectors::directio::{latency_histogram, record_ns};

    pub(super) fn spec(id: &str) -> TestSpec {
        engine::all_tests()
            .into_iter()
            .find(|s| s.full_id() == id)
            .unwrap()
    }

    pub(super) fn sample(with_sync: bool) -> Measured {
        let mut h = latency_histogram();
        for v in 1..=1000u64 {
            record_ns(&mut h, v * 1000);
        }
        let l = LatencyNs::from_histogram(&h);
        Measured {
            start_t_ns: 1_000,
            end_t_ns: 2_000_001_000,
            ops: 1000,
            lat: l.clone(),
            sync_lat: with_sync.then_some(l),
            cut_short: false,
        }
    }

    #[test]
    fn csv_rows_have_the_headers_columns() {
        let n = csv_header().trim_end().split(',').count();
        let rows = [
            Row {
                t_ns: 5,
                t_end_ns: 6,
                spec: spec("one_8k.fdatasync"),
                outcome: Outcome::Ran(sample(true)),
            },
            Row {
                t_ns: 5,
                t_end_ns: 6,
                spec: spec("one_8k.open_datasync"),
                outcome: Outcome::NotAvailable {
                    reason: "EINVAL (Invalid argument): this file system refuses O_DIRECT, really"
                        .into(),
                },
            },
            Row {
                t_ns: 5,
                t_end_ns: 6,
                spec: spec("no_sync.write"),
                outcome: Outcome::Ran(sample(false)),
            },
        ];
        for r in &rows {
            let line = csv_row(r);
            // The reason with a comma is quoted: count fields outside quotes.
            let mut fields = 1;
            let mut q = false;
            for c in line.trim_end().chars() {
                match c {
                    '"' => q = !q,
                    ',' if !q => fields += 1,
                    _ => {}
                }
            }
            assert_eq!(fields, n, "{line}");
        }
        let ok = csv_row(&rows[0]);
        assert!(ok.starts_with("1000,2000001000,one_8k.fdatasync,ok,1000,2.000000,500.000,"));
        assert!(csv_row(&rows[1]).contains(",n/a,,"));
    }

    #[test]
    fn json_rows_carry_the_documented_fields() {
        let r = Row {
            t_ns: 5,
            t_end_ns: 6,
            spec: spec("two_8k.fsync"),
            outcome: Outcome::Ran(sample(true)),
        };
        let v = serde_json::to_value(json_row(&r)).unwrap();
        assert_eq!(v["id"], "two_8k.fsync");
        assert_eq!(v["pg_test_fsync"], "fsync");
        assert_eq!(v["writes_per_op"], 2);
        assert_eq!(v["ops_per_s"], 500.0);
        let p99 = v["lat_p99_us"].as_f64().unwrap();
        assert!((989.0..=991.0).contains(&p99), "{p99}");
        assert!(v["sync_lat_max_us"].as_f64().unwrap() > 0.0);
        let na = serde_json::to_value(json_row(&Row {
            t_ns: 5,
            t_end_ns: 6,
            spec: spec("no_sync.write"),
            outcome: Outcome::NotRun,
        }))
        .unwrap();
        assert_eq!(na["status"], "not_run");
        assert!(na["ops"].is_null() && na["lat_p50_us"].is_null());
    }

    #[test]
    fn only_selects_by_id_name_or_group_and_refuses_unknown() {
        let ids = |w: &[&str]| -> Vec<String> {
            let w: Vec<String> = w.iter().map(|s| s.to_string()).collect();
            select(engine::all_tests(), &w)
                .unwrap()
                .iter()
                .map(|s| s.full_id())
                .collect()
        };
        assert_eq!(ids(&[]).len(), 22);
        assert_eq!(
            ids(&["fdatasync"]),
            ["one_8k.fdatasync", "two_8k.fdatasync"]
        );
        assert_eq!(ids(&["other_fd", "one_8k.fsync"]).len(), 3);
        // Earlier ids of pg's O_DIRECT rows still select them.
        assert_eq!(
            ids(&["one_8k.open_datasync_direct", "open_sync_direct"]),
            [
                "one_8k.open_datasync",
                "one_8k.open_sync",
                "two_8k.open_sync"
            ]
        );
        assert_eq!(parse_secs("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_secs("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_secs("250ms"), Ok(Duration::from_millis(250)));
        let e = select(engine::all_tests(), &["fdatasnyc".to_string()]).unwrap_err();
        assert!(e.to_string().contains("'fdatasnyc'"), "{e}");
    }
}
