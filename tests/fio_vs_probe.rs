//! Our users' own job files run as fio runs them (issue 26): every file in tests/fio-jobs/
//! through `diskpulse probe --output-format=json JOB.fio` and `fio --output-format=json
//! JOB.fio`, on the same files of an ext4 loop volume this test makes, and what fio's JSON
//! says compared with what probe's says, job by job.
//!
//! The choices, and why:
//! - Runs alternate, two pairs (probe, fio, fio, probe), and each figure is the median
//!   (the mean) of its two: this VM is shared, and drift hits both tools alike that way
//!   (three pairs cost CI 75 s more; the failure band, 2x, does not need the third).
//!   Both tools use the same file names (from the environment), so the second finds the
//!   first's laid-out files, as a user's second run would.
//! - Jobs are matched by name in `jobs[]` (the n-th entry of a name with the n-th, for
//!   numjobs copies reported one by one). Per job: the same group id; every option of fio's
//!   `global options` and `job options` (fio lists the ones the file sets, by fio's own
//!   name: `ba` for blockalign, `rate_min` for ratemin, `runtime` for timeout) present in
//!   probe's `global options` + `job options` with the same value (sizes compared in bytes,
//!   runtime/ramp_time/startdelay in time, so `32m`, `32MiB`, `1` and `1s` agree; text as
//!   text); and for read, write and trim: IOPS and bandwidth within 15% (the bound)
//!   where fio or probe did any, or, for a file whose header says `check=counts` (rate,
//!   thinktime, number_ios, loops, strided and other jobs whose point is how many I/Os they
//!   do, not how fast), total I/Os within 10% (a Poisson rate of 800/s varies ~4% in 1 s).
//!   A job's `error` must be the same number. A figure outside those bounds but within
//!   2x of fio's is printed as `near` and fails only with FIO_VS_PROBE_STRICT=1 (this
//!   shared VM's noise on CPU-bound jobs; see NOISE_BAND); `known=WHY` in a file's header
//!   marks a difference we have and say (printed, not failed).
//! - A file's first lines may say, in a comment `; fio_vs_probe: ...`: `check=iops` (the
//!   default) or `check=counts`; `probe_args=A,B` (flags probe needs beside the file that
//!   fio has no word for: `--allow-destructive` for the trim jobs on the test's raw loop
//!   device; fio trims block devices only, regular files give ENOTTY); `logs` (the job
//!   writes logs into ${DP_FIO_LOGS}: the same log file names, the same number of columns,
//!   line counts within 25% or 2 lines); `skip=WHY` (listed as skipped with its reason).
//! - A file probe refuses (exit 2) fails the test with probe's one line: the table shows
//!   what is missing. It is not run again and fio is not run for it.
//! - Environment the files use: DP_FIO_DIR (a directory on a 2 GiB ext4 loop volume),
//!   DP_FIO_SMALL (a 64 MiB ext4 volume, emptied before each run: fill_device fills it),
//!   DP_FIO_DEV (a raw 64 MiB loop device, for trim), DP_FIO_LOGS (a fresh directory per
//!   run). FIO_JOB=name[,name] runs only those files (name without .fio).
//! - The corrupted-file case (tests/fio-jobs/corrupt/): each tool writes blocks with crc32c
//!   headers into a file of the test's (made before, so probe keeps it), verifies them clean
//!   (exit 0), then the test overwrites one 4 KiB block with random bytes and each tool
//!   verifies again: both must fail with the same job `error` (fio: 84, EILSEQ) and say
//!   "verify" on stderr.
//! - The two tests take one lock: a comparison is not run beside another run.
//!
//! Needs root, losetup, mkfs.ext4 and fio 3.33 (skips saying so; CI=true fails instead).
//! Run time on 2 cores: ~20 s today (most files refused at once); ~4.5 minutes when every
//! file runs (one fio pass over the 41 files takes 45 s here; a run is six passes).

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

#[path = "fio_vs_probe/coverage.rs"]
mod coverage;

const JOBS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fio-jobs");
const PAIRS: usize = 2;
const RATE_BOUND: f64 = 0.15;
const COUNT_BOUND: f64 = 0.10;
const DIRS: [&str; 3] = ["read", "write", "trim"];
/// A run longer than this is stopped (the longest file takes ~3 s).
/// A rate outside the 15% but within this factor of fio's is printed and not
/// failed (unless FIO_VS_PROBE_STRICT=1): on this shared 2-core VM a CPU-bound page-cache
/// job swings 0.7-1.3x between runs of the same build (seen for numjobs-separate: 0.67x,
/// then same); an engine that measures the wrong thing was 8.3x (buffered-randread before
/// fio's per-pass invalidate) or 0x, far outside.
const NOISE_BAND: f64 = 2.0;

const WALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The volumes the job files name through the environment. Dropping it detaches them.
struct Volumes {
    main: LoopDev,
    small: LoopDev,
    raw: LoopDev,
    logs: tempfile::TempDir,
}

impl Volumes {
    fn new() -> Volumes {
        let mut main = LoopDev::new("2G");
        main.mount_ext4();
        let mut small = LoopDev::new("64M");
        small.mount_ext4();
        let raw = LoopDev::new("64M");
        let logs = tempfile::tempdir_in("/var/tmp").unwrap();
        let v = Volumes {
            main,
            small,
            raw,
            logs,
        };
        std::fs::create_dir_all(v.dir()).unwrap();
        v
    }

    fn dir(&self) -> PathBuf {
        self.main.mount.as_ref().unwrap().join("jobs")
    }

    fn small_dir(&self) -> &Path {
        self.small.mount.as_ref().unwrap()
    }

    /// A command with the job files' variables set; the small volume emptied, a fresh
    /// log directory (returned).
    fn command(&self, prog: &str, run: usize) -> (Command, PathBuf) {
        for e in std::fs::read_dir(self.small_dir()).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::remove_file(p).unwrap();
            }
        }
        let logs = self.logs.path().join(format!("run{run}"));
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs).unwrap();
        let mut c = if prog == "probe" {
            let mut c = diskpulse();
            c.arg("probe");
            c
        } else {
            Command::new(prog)
        };
        c.env("DP_FIO_DIR", self.dir())
            .env("DP_FIO_SMALL", self.small_dir())
            .env("DP_FIO_DEV", &self.raw.dev)
            .env("DP_FIO_LOGS", &logs)
            .current_dir(self.dir());
        (c, logs)
    }
}

fn prerequisites() -> bool {
    can_use_loop_devices() && have_tool("mkfs.ext4", "e2fsprogs") && have_tool("fio", "fio")
}

/// What a file's `; fio_vs_probe:` comment asks.
#[derive(Default)]
struct Header {
    counts: bool,
    logs: bool,
    probe_args: Vec<String>,
    skip: Option<String>,
    /// A difference from fio that is known and said (issue 26's note): reported, not failed.
    known: Option<String>,
}

fn header(text: &str) -> Header {
    let mut h = Header::default();
    for line in text
        .lines()
        .take_while(|l| l.starts_with(';') || l.starts_with('#'))
    {
        let Some(rest) = line
            .trim_start_matches([';', '#'])
            .trim()
            .strip_prefix("fio_vs_probe:")
        else {
            continue;
        };
        if let Some(why) = rest.split_once("skip=") {
            h.skip = Some(why.1.trim().to_string());
        }
        if let Some(why) = rest.split_once("known=") {
            h.known = Some(why.1.trim().to_string());
            continue;
        }
        for w in rest.split_whitespace() {
            match w.split_once('=') {
                Some(("check", "counts")) => h.counts = true,
                Some(("check", "iops")) => h.counts = false,
                Some(("probe_args", a)) => h.probe_args = a.split(',').map(String::from).collect(),
                Some(("skip", _)) => {}
                None if w == "logs" => h.logs = true,
                _ if h.skip.is_some() => {}
                _ => panic!("fio_vs_probe header: '{w}' is not check=, probe_args=, logs or skip="),
            }
        }
    }
    h
}

/// One tool's run of one file.
struct Run {
    code: Option<i32>,
    /// The first line of stderr (fio prints its error lines on stdout, before the JSON).
    said: String,
    stderr: String,
    doc: Option<Value>,
    /// Log files written: (name, lines, columns of the first line).
    logs: Vec<(String, usize, usize)>,
}

fn run(v: &Volumes, tool: &str, job: &Path, extra: &[String], n: usize) -> Run {
    let (mut c, logs) = v.command(tool, n);
    c.arg("--output-format=json").args(extra).arg(job);
    let (code, stdout, stderr) = output_within(c, tool, &logs);
    let doc = stdout
        .find('{')
        .and_then(|i| serde_json::from_str(&stdout[i..]).ok());
    let first = |s: &str| {
        s.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let said = if stderr.trim().is_empty() {
        first(&stdout[..stdout.find('{').unwrap_or(stdout.len())])
    } else {
        first(&stderr)
    };
    let mut files: Vec<(String, usize, usize)> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let cols = text.lines().next().map_or(0, |l| l.split(',').count());
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                text.lines().count(),
                cols,
            )
        })
        .collect();
    files.sort();
    Run {
        code,
        said,
        stderr,
        doc,
        logs: files,
    }
}

/// Runs `c` in a process group of its own, its output in files beside `logs` (not in it);
/// after [`WALL_LIMIT`] it and every process under it are killed (fio's job processes
/// outlive a killed fio) and the run says so on stderr, with no exit code.
fn output_within(mut c: Command, tool: &str, logs: &Path) -> (Option<i32>, String, String) {
    use std::os::unix::process::CommandExt;
    let (o, e) = (logs.with_extension("stdout"), logs.with_extension("stderr"));
    c.stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .process_group(0);
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let t0 = std::time::Instant::now();
    let (code, timed_out) = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break (st.code(), false);
        }
        if t0.elapsed() > WALL_LIMIT {
            for pid in descendants(child.id()) {
                // SAFETY: kill has no memory preconditions; these are the child's own.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
            // SAFETY: as above; the group is the child's own.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).to_string();
    let mut stderr = read(&e);
    if timed_out {
        stderr = format!(
            "{tool} timed out after {} s\n{stderr}",
            WALL_LIMIT.as_secs()
        );
    }
    (code, read(&o), stderr)
}

/// Every process under `pid` (fio's job processes call setsid: the group misses them).
fn descendants(pid: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(pp) = ppid {
            children.entry(pp).or_default().push(p);
        }
    }
    let (mut out, mut todo) = (vec![], vec![pid]);
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// One entry of `jobs[]`, as compared.
struct Entry {
    group: u64,
    error: i64,
    options: BTreeMap<String, String>,
    /// [read, write, trim] x [iops, bw_bytes, total_ios]
    figures: [[f64; 3]; 3],
}

fn options(o: Option<&Value>) -> BTreeMap<String, String> {
    o.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or(v.to_string(), String::from);
                    (k.clone(), same_run_dir(&v))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A value naming the run's own log directory (`.../run3/x`) as `.../runN/x`: each run
/// has its own, and the options are the same.
fn same_run_dir(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("/run") {
        out.push_str(&rest[..i + 4]);
        let after = &rest[i + 4..];
        let n = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        if n > 0 && after[n..].starts_with('/') {
            out.push('N');
        } else {
            out.push_str(&after[..n]);
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}

/// `jobs[]` by name (`name`, `name#2` for a second entry of that name), in order.
fn entries(doc: &Value) -> Vec<(String, Entry)> {
    let global = options(doc.get("global options"));
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let jobs = doc["jobs"].as_array().cloned().unwrap_or_default();
    jobs.iter()
        .map(|j| {
            let name = j["jobname"].as_str().unwrap_or("?").to_string();
            let n = seen.entry(name.clone()).or_default();
            *n += 1;
            let key = if *n == 1 { name } else { format!("{name}#{n}") };
            let mut opts = global.clone();
            opts.extend(options(j.get("job options")));
            let fig = |d: &str, f: &str| j[d][f].as_f64().unwrap_or(0.0);
            let figures = DIRS.map(|d| [fig(d, "iops"), fig(d, "bw_bytes"), fig(d, "total_ios")]);
            let e = Entry {
                group: j["groupid"].as_u64().unwrap_or(u64::MAX),
                error: j["error"].as_i64().unwrap_or(-1),
                options: opts,
                figures,
            };
            (key, e)
        })
        .collect()
}

/// A size in bytes (`32m`, `32MiB`, `8k`, `4096`), fio's base 2.
fn size_bytes(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits].parse().ok()?;
    let unit = v[digits..].trim_end_matches("ib").trim_end_matches('b');
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    Some(n << shift)
}

/// A time in ns; a bare number is seconds (fio's runtime, ramp_time, startdelay).
fn time_ns(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let n: f64 = v[..end].parse().ok()?;
    let mult = match &v[end..] {
        "" | "s" | "sec" => 1e9,
        "ms" | "msec" => 1e6,
        "us" | "usec" => 1e3,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

/// An option's value as compared: sizes in bytes, times in ns, text lowercased.
fn norm(key: &str, v: &str) -> String {
    if ["runtime", "ramp_time", "startdelay"].contains(&key) {
        if let Some(ns) = time_ns(v) {
            return format!("{ns}ns");
        }
    }
    size_bytes(v).map_or_else(|| v.trim().to_ascii_lowercase(), |b| format!("{b}B"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

/// What differs between fio's runs and probe's, as short phrases ("" items are none).
fn compare(h: &Header, fio: &[Run], probe: &[Run]) -> Vec<String> {
    let mut d = vec![];
    let docs = |runs: &[Run]| -> Vec<Vec<(String, Entry)>> {
        runs.iter()
            .filter_map(|r| r.doc.as_ref())
            .map(entries)
            .collect()
    };
    let (f, p) = (docs(fio), docs(probe));
    if f.len() < fio.len() {
        d.push(format!("fio gave no JSON: {}", fio[0].said));
        return d;
    }
    if p.len() < probe.len() {
        d.push(format!(
            "probe gave no JSON (exit {:?}): {}",
            probe[0].code, probe[0].said
        ));
        return d;
    }
    let names = |e: &[(String, Entry)]| e.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    if names(&f[0]) != names(&p[0]) {
        d.push(format!(
            "jobs[]: fio {:?}, probe {:?}",
            names(&f[0]),
            names(&p[0])
        ));
        return d;
    }
    let codes = |r: &[Run]| r.iter().map(|r| r.code).collect::<Vec<_>>();
    if codes(fio) != codes(probe) {
        d.push(format!(
            "exit codes fio {:?}, probe {:?} ({})",
            codes(fio),
            codes(probe),
            probe[0].said
        ));
    }
    for (i, (name, fe)) in f[0].iter().enumerate() {
        let pe = &p[0][i].1;
        if fe.group != pe.group {
            d.push(format!(
                "{name}: groupid fio {}, probe {}",
                fe.group, pe.group
            ));
        }
        if fe.error != pe.error {
            d.push(format!(
                "{name}: error fio {}, probe {}",
                fe.error, pe.error
            ));
        }
        let mut opt = vec![];
        for (k, fv) in &fe.options {
            match pe.options.get(k) {
                None => opt.push(format!("{k} missing")),
                Some(pv) if norm(k, pv) != norm(k, fv) => opt.push(format!("{k}={pv} (fio {fv})")),
                Some(_) => {}
            }
        }
        if !opt.is_empty() {
            d.push(format!("{name}: options {}", opt.join(", ")));
        }
        d.extend(figures(h, name, i, &f, &p));
    }
    if h.logs {
        d.extend(compare_logs(&fio[0].logs, &probe[0].logs));
    }
    d
}

/// Medians of IOPS and bandwidth (or of I/O counts, `check=counts`) per direction.
fn figures(
    h: &Header,
    name: &str,
    i: usize,
    f: &[Vec<(String, Entry)>],
    p: &[Vec<(String, Entry)>],
) -> Vec<String> {
    let mut d = vec![];
    let med = |docs: &[Vec<(String, Entry)>], dir: usize, fig: usize| {
        median(docs.iter().map(|e| e[i].1.figures[dir][fig]).collect())
    };
    let (what, bound): (&[(usize, &str)], f64) = if h.counts {
        (&[(2, "ios")], COUNT_BOUND)
    } else {
        (&[(0, "IOPS"), (1, "bw")], RATE_BOUND)
    };
    for (dir, dname) in DIRS.iter().enumerate() {
        for &(fig, fname) in what {
            let (fm, pm) = (med(f, dir, fig), med(p, dir, fig));
            if fm == 0.0 && pm == 0.0 {
                continue;
            }
            let ratio = if fm > 0.0 { pm / fm } else { f64::INFINITY };
            if (ratio - 1.0).abs() > bound {
                // Outside the bound but inside NOISE_BAND: printed, failed only
                // with FIO_VS_PROBE_STRICT=1 (see NOISE_BAND).
                let soft = (1.0 / NOISE_BAND..=NOISE_BAND).contains(&ratio)
                    && std::env::var_os("FIO_VS_PROBE_STRICT").is_none();
                d.push(format!(
                    "{}{name}: {dname} {fname} probe {pm:.0} fio {fm:.0} ({ratio:.2}x)",
                    if soft { "~" } else { "" }
                ));
            }
        }
    }
    d
}

fn compare_logs(f: &[(String, usize, usize)], p: &[(String, usize, usize)]) -> Vec<String> {
    let names = |l: &[(String, usize, usize)]| l.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    if names(f) != names(p) {
        return vec![format!("logs: fio {:?}, probe {:?}", names(f), names(p))];
    }
    let mut d = vec![];
    for ((name, fl, fc), (_, pl, pc)) in f.iter().zip(p) {
        let near = pl.abs_diff(*fl) <= 2 || (*pl as f64 - *fl as f64).abs() <= 0.25 * *fl as f64;
        if fc != pc || !near {
            d.push(format!(
                "{name}: probe {pl} lines of {pc} columns, fio {fl} of {fc}"
            ));
        }
    }
    d
}

/// tests/fio-jobs/*.fio, sorted.
fn all_job_files() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(JOBS_DIR)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "fio"))
        .collect();
    all.sort();
    all
}

/// The files this run compares (FIO_JOB=name,name picks some), and a line on those left.
fn job_files() -> (Vec<PathBuf>, Vec<String>) {
    let only: Vec<String> = std::env::var("FIO_JOB")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches(".fio").to_string())
        .collect();
    let all = all_job_files();
    let stem = |p: &Path| p.file_stem().unwrap().to_string_lossy().to_string();
    for o in &only {
        assert!(
            all.iter().any(|p| stem(p) == *o),
            "FIO_JOB: no tests/fio-jobs/{o}.fio"
        );
    }
    let mut not_run = vec![];
    let files = all
        .into_iter()
        .filter(|p| {
            let keep = only.is_empty() || only.contains(&stem(p));
            if !keep {
                not_run.push(stem(p));
            }
            keep
        })
        .collect();
    let not_run = if not_run.is_empty() {
        vec![]
    } else {
        vec![format!("{} files not named by FIO_JOB", not_run.len())]
    };
    (files, not_run)
}

/// probe's line without what every refusal repeats (the directory of the job files, the
/// pointer to --help).
fn short(said: &str) -> String {
    said.trim_start_matches("Error: ")
        .replace(&format!("{JOBS_DIR}/"), "")
        .replace(" (see diskpulse probe --help for the options it runs)", "")
}

/// One file: PAIRS alternating pairs (or one probe run, if probe refuses it).
fn one_file(v: &Volumes, job: &Path, h: &Header) -> Vec<String> {
    let (mut fio, mut probe) = (vec![], vec![]);
    for pair in 0..PAIRS {
        for first in [pair % 2 == 0, pair % 2 != 0] {
            let n = fio.len() + probe.len();
            if first {
                let r = run(v, "probe", job, &h.probe_args, n);
                if r.code == Some(2) {
                    return vec![format!("refused: {}", short(&r.said))];
                }
                probe.push(r);
            } else {
                fio.push(run(v, "fio", job, &[], n));
            }
        }
    }
    compare(h, &fio, &probe)
}

#[test]
fn every_job_file_runs_in_probe_as_in_fio() {
    if !prerequisites() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (files, not_run) = job_files();
    let v = Volumes::new();
    let t0 = std::time::Instant::now();
    let mut rows: Vec<(String, String)> = vec![];
    let mut skipped: Vec<String> = not_run;
    for job in &files {
        let name = job.file_stem().unwrap().to_string_lossy().to_string();
        let h = header(&std::fs::read_to_string(job).unwrap());
        if let Some(why) = &h.skip {
            skipped.push(format!("{name}: {why}"));
            continue;
        }
        let d = one_file(&v, job, &h);
        let line = if d.is_empty() {
            "same".to_string()
        } else if d.iter().all(|x| x.starts_with('~')) {
            format!("near (outside 15%, inside {NOISE_BAND}x): {}", d.join("; "))
        } else if let Some(why) = &h.known {
            format!("known ({why}): {}", d.join("; "))
        } else {
            d.join("; ")
        };
        eprintln!("{name:<28} {line}");
        rows.push((name, line));
    }
    let failed: Vec<&(String, String)> = rows
        .iter()
        .filter(|r| r.1 != "same" && !r.1.starts_with("known (") && !r.1.starts_with("near ("))
        .collect();
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(4);
    let mut table = format!(
        "{} of {} job files differ from fio ({} s; skipped: {}):\n",
        failed.len(),
        rows.len(),
        t0.elapsed().as_secs(),
        if skipped.is_empty() {
            "none".to_string()
        } else {
            skipped.join(", ")
        }
    );
    for (name, line) in &rows {
        table.push_str(&format!("  {name:<w$}  {line}\n"));
    }
    eprintln!("{table}");
    assert!(failed.is_empty(), "{table}");
}

/// Overwrites 4 KiB at 400 KiB with bytes that are not a verify header, and syncs.
fn corrupt(path: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(400 << 10)).unwrap();
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    f.write_all(&junk).unwrap();
    f.sync_all().unwrap();
}

fn job_error(r: &Run) -> Option<i64> {
    r.doc.as_ref()?["jobs"][0]["error"].as_i64()
}

#[test]
fn a_corrupted_file_fails_verify_in_probe_as_in_fio() {
    if !prerequisites() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let v = Volumes::new();
    let dir = Path::new(JOBS_DIR).join("corrupt");
    let (write, verify) = (dir.join("write.fio"), dir.join("verify.fio"));
    let data = v.dir().join("corrupt.dat");
    let mut rows = vec![];
    let mut found: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    for tool in ["fio", "probe"] {
        // A file of the test's own: probe keeps a file it did not create.
        write_direct(&data, 8 << 20, 1 << 20);
        let w = run(&v, tool, &write, &[], 0);
        let clean = run(&v, tool, &verify, &[], 1);
        corrupt(&data);
        let bad = run(&v, tool, &verify, &[], 2);
        let mut d = vec![];
        if w.code != Some(0) {
            d.push(format!("write.fio exit {:?}: {}", w.code, short(&w.said)));
        } else if clean.code != Some(0) || job_error(&clean) != Some(0) {
            d.push(format!(
                "clean verify exit {:?}: {}",
                clean.code,
                short(&clean.said)
            ));
        } else if bad.code == Some(0) || bad.code == Some(2) {
            d.push(format!(
                "corrupted verify exit {:?}: {}",
                bad.code,
                short(&bad.said)
            ));
        } else if !bad.stderr.contains("verify") && !bad.said.contains("verify") {
            d.push(format!(
                "corrupted verify did not say 'verify': {}",
                bad.said
            ));
        }
        found.insert(tool, job_error(&bad));
        rows.push(format!(
            "  {tool:<5} {} (job error {:?})",
            if d.is_empty() {
                "reported the failure".to_string()
            } else {
                d.join("; ")
            },
            job_error(&bad)
        ));
        std::fs::remove_file(&data).unwrap();
    }
    let same = found["fio"] == found["probe"] && found["fio"].is_some_and(|e| e != 0);
    let table = rows.join("\n");
    eprintln!("{table}");
    assert!(
        same && rows.iter().all(|r| r.contains("reported the failure")),
        "verify of a corrupted file, fio against probe:\n{table}"
    );
}
