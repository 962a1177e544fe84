//! Issue 10, `probe`, `record`, `bench`, `fsync` and `--help`: the cases a careless user
//! found, each driven through the real binary. Bad input: exit 2, one line naming the
//! input and the fix, nothing written. A run that fails later keeps what it recorded.

mod common;
use common::*;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs diskpulse in `cwd`; asserts exit 2, one line on stderr containing every
/// `must_contain`, and that `cwd` is still empty (nothing written).
fn refused_in(cwd: &Path, args: &[&str], must_contain: &[&str]) -> String {
    let o = diskpulse().current_dir(cwd).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line expected: {err}");
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: '{m}' not in: {err}");
    }
    let left: Vec<_> = std::fs::read_dir(cwd).unwrap().collect();
    assert!(left.is_empty(), "{args:?} wrote {left:?}");
    err
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// The number after `prefix` in `s` (commas allowed), e.g. "write: " -> IOPS.
fn number_after(s: &str, prefix: &str) -> f64 {
    let i = s
        .find(prefix)
        .unwrap_or_else(|| panic!("'{prefix}' not in {s}"))
        + prefix.len();
    let num: String = s[i..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    num.parse()
        .unwrap_or_else(|_| panic!("no number after '{prefix}' in {s}"))
}

#[test]
fn a_one_io_probe_says_it_is_too_short_and_shows_no_impossible_rate() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let f = d.path().join("one.dat");
    let o = diskpulse()
        .args(["probe", "--size", "4k", "--bs", "4k", "--rw", "write"])
        .arg("--filename")
        .arg(&f)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("TOO SHORT TO MEASURE"), "{out}");
    // One I/O: its IOPS are one over its latency, which no device makes under 1 us
    // (the bug divided by a 1 ns runtime: 1,000,000,000 IOPS).
    let iops = number_after(&out, "write: ");
    assert!(iops > 0.0 && iops < 1_000_000.0, "{iops} IOPS: {out}");
    // One job thread cannot use more than one core (the bug: usr 6,000,000%).
    let usr = number_after(&out, "usr ");
    assert!(usr <= 100.5, "usr {usr}%: {out}");
}

#[test]
fn a_rated_time_based_probe_runs_its_whole_runtime() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let f = d.path().join("rate.dat");
    let t0 = Instant::now();
    let o = diskpulse()
        .args(["probe", "--size", "1m", "--bs", "4k", "--rw", "write"])
        .args(["--rate-iops-total", "2", "--time-based", "--runtime", "1s"])
        .arg("--filename")
        .arg(&f)
        .output()
        .unwrap();
    let took = t0.elapsed();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    // It stopped after 0.02 s: the second intended start (0.5 s) was "after the end".
    assert!(took >= Duration::from_secs(1), "ran {took:?}: {out}");
    let measured = number_after(&out, "measured ");
    assert!(
        (0.99..1.2).contains(&measured),
        "measured {measured}: {out}"
    );
    let iops = number_after(&out, "write: ");
    assert!(
        (1.5..=2.5).contains(&iops),
        "{iops} IOPS at --rate-iops-total 2: {out}"
    );
}

#[test]
fn a_ramp_longer_than_the_runtime_is_refused() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    refused_in(
        d.path(),
        &[
            "probe",
            "--filename",
            "p.dat",
            "--size",
            "1m",
            "--time-based",
            "--ramp",
            "1h",
            "--runtime",
            "300ms",
        ],
        &["--ramp 3600s", "--runtime 300ms", "longer"],
    );
    // Without --time-based the job ends after --size, possibly inside the ramp.
    refused_in(
        d.path(),
        &[
            "probe",
            "--filename",
            "p.dat",
            "--ramp",
            "100ms",
            "--runtime",
            "1s",
        ],
        &["--ramp", "--time-based"],
    );
}

#[test]
fn a_probe_on_a_pseudo_file_system_is_refused_before_anything_is_written() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    refused_in(
        d.path(),
        &["probe", "--filename", "/proc/version"],
        &["/proc/version", "proc", "disk-backed"],
    );
    refused_in(
        d.path(),
        &[
            "probe",
            "--filename",
            "/proc/diskpulse-new.dat",
            "--rw",
            "read",
        ],
        &["/proc/diskpulse-new.dat", "pseudo file system"],
    );
    assert!(!Path::new("/proc/diskpulse-new.dat").exists());
}

#[test]
fn fsync_in_a_pseudo_file_system_is_refused() {
    let d = tempfile::tempdir().unwrap();
    // It printed the table's header, then failed creating its file (exit 1).
    refused_in(
        d.path(),
        &["fsync", "--dir", "/proc"],
        &["--dir /proc", "pseudo file system"],
    );
}

#[test]
fn a_sampler_interval_longer_than_the_recording_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    refused_in(
        d.path(),
        &[
            "record",
            "--duration",
            "300ms",
            "--cpu-interval",
            "12s",
            "--out",
            "run",
        ],
        &["--cpu-interval 12s", "--duration 300ms"],
    );
    // It recorded 12 s; now it is refused at once.
    assert!(t0.elapsed() < Duration::from_secs(5));
    refused_in(
        d.path(),
        &["record", "--interval", "1h", "--out", "run"],
        &["--interval 3600s", "--duration 30s"],
    );
}

#[test]
fn a_command_that_cannot_start_is_refused_before_the_recording() {
    let d = tempfile::tempdir().unwrap();
    refused_in(
        d.path(),
        &["record", "--out", "run", "--", "/nonexistent/cmd"],
        &["/nonexistent/cmd", "executable"],
    );
    refused_in(
        d.path(),
        &["record", "--out", "run", "--", "diskpulse-no-such-command"],
        &["diskpulse-no-such-command", "PATH"],
    );
    let other = tempfile::tempdir().unwrap();
    let plain = other.path().join("notes.txt");
    std::fs::write(&plain, "not a program\n").unwrap();
    let plain = plain.to_str().unwrap();
    refused_in(
        d.path(),
        &["record", "--out", "run", "--", plain],
        &[plain, "not executable"],
    );
}

#[test]
fn the_recorded_commands_exit_code_is_passed_on() {
    let d = tempfile::tempdir().unwrap();
    for (script, code) in [
        ("exit 7", 7),
        ("exit 0", 0),
        ("kill -TERM $$", 128 + libc::SIGTERM),
    ] {
        let out = d.path().join(format!("run-{code}"));
        let o = diskpulse()
            .args(["record", "--interval", "10ms", "--out"])
            .arg(&out)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{script}: {err}");
        // The recording is kept either way.
        let meta = read_json(&out.join("meta.json"));
        assert_eq!(meta["complete"], true, "{script}");
    }
}

/// The command's pid from events.jsonl's `command_start`.
fn command_pid(run: &Path) -> Option<u32> {
    let ev = std::fs::read_to_string(run.join("events.jsonl")).ok()?;
    ev.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "command_start")
        .and_then(|v| v["detail"]["pid"].as_u64())
        .map(|p| p as u32)
}

#[test]
fn ctrl_c_ends_a_recording_with_an_hour_long_interval_at_once() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let mut child = diskpulse()
        .args(["record", "--interval", "1h", "--mem-interval", "1h"])
        .args(["--cpu-interval", "1h", "--out"])
        .arg(&out)
        .args(["--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut pid = None;
    while pid.is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        pid = command_pid(&out);
    }
    let Some(sleeper) = pid else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("no command_start in {}/events.jsonl", out.display());
    };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t_int = Instant::now();
    let mut status = None;
    while t_int.elapsed() < Duration::from_secs(5) {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        // SAFETY: the test's own grandchild.
        unsafe { libc::kill(sleeper as i32, libc::SIGKILL) };
        panic!("record --interval 1h ignored SIGINT for 5 s");
    }
    assert_eq!(status.unwrap().code(), Some(130));
    // It slept the hour before: it must end within a stop-poll or two of the signal.
    assert!(
        t_int.elapsed() < Duration::from_secs(2),
        "{:?}",
        t_int.elapsed()
    );
    assert!(!process_exists(sleeper), "the command was left running");
    assert_eq!(read_json(&out.join("meta.json"))["complete"], true);
}

/// A tmpfs of `size` mounted on a fresh directory; unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn new(size: &str) -> Tmpfs {
        let d = tempfile::tempdir().unwrap();
        sh(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                d.path().to_str().unwrap(),
            ],
        );
        Tmpfs(d)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_out_keeps_a_whole_meta_json_that_says_incomplete() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 && !skip("mounting a tmpfs needs root") {
        return;
    }
    let fs = Tmpfs::new("2m");
    let out = fs.0.path().join("run");
    // The command fills the file system under the run directory, then lets the
    // samplers run into it.
    let o = diskpulse()
        .args(["record", "--interval", "1ms", "--mem-interval", "1ms"])
        .args(["--duration", "3s", "--out"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "dd if=/dev/zero of=\"$DISKPULSE_RUN_DIR/../fill\" bs=64k 2>/dev/null; sleep 1",
        ])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("reserve")), "{names:?}");
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["complete"], false, "{meta:#}");
    // The final write happened: it has the end and the samplers' statistics.
    assert!(meta["duration_ns"].as_u64().unwrap_or(0) > 0, "{meta:#}");
    assert!(meta["end_wall"].is_string(), "{meta:#}");
    // The error names a file of the run and says the file system is full.
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(err.contains("is full"), "{err}");
    assert!(err.contains(".csv"), "{err}");
}

#[test]
fn bench_removes_its_scratch_directory_when_signalled() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = diskpulse()
            .args(["bench", "--duration", "10s"])
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // A name of bench's own (diskpulse-bench-XXXXXX, unique: issue 25) in its TMPDIR.
        let scratch_of = |dir: &Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.to_string_lossy().contains("diskpulse-bench-"))
        };
        let t0 = Instant::now();
        while scratch_of(tmp.path()).is_none() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let scratch = scratch_of(tmp.path()).unwrap_or_else(|| {
            panic!(
                "bench made no diskpulse-bench-* in {}",
                tmp.path().display()
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let t_sig = Instant::now();
        let st = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t_sig.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("bench ignored signal {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(st.code(), Some(130), "signal {sig}");
        assert!(!scratch.exists(), "signal {sig} left {}", scratch.display());
    }
}

/// Subcommand names from a help page's "Commands:" section (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n != "help")
        .collect()
}

fn help_of(path: &[String]) -> String {
    let o = diskpulse().args(path).arg("--help").output().unwrap();
    assert!(o.status.success(), "{path:?} --help");
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn every_help_page_shows_an_example() {
    let top = help_of(&[]);
    let mut todo: Vec<Vec<String>> = subcommands(&top).into_iter().map(|s| vec![s]).collect();
    assert!(todo.len() >= 10, "{top}");
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let h = help_of(&path);
        for sub in subcommands(&h) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        // "Usage: diskpulse SUB" is on every page: an example is a line of its own under
        // "Examples:" that runs this very subcommand.
        let cmd = format!("diskpulse {}", path.join(" "));
        let examples: Vec<&str> = h
            .lines()
            .skip_while(|l| !l.starts_with("Examples:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(
            examples
                .iter()
                .any(|l| l.trim_start().starts_with(&cmd) && !l.contains("Usage")),
            "`{cmd} --help` shows no example:\n{h}"
        );
        seen += 1;
    }
    // 10 subcommands and lab's 3.
    assert!(seen >= 13, "{seen} help pages");
}
