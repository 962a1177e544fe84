//! Issue 25, classes 1 (writes outside what was named), 5 (signals that cut a recording)
//! and 11 (unclear messages), each case driven through the real binary: an output is
//! written beside its target and renamed over it, never through a symlink nor into a
//! user's file; a closed stdout, stderr or terminal does not cut a recording; a message
//! names the input and the fix once, in a line a terminal shows.

mod common;
use common::*;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A small real recording (1 s), made once for every test.
fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let d = tempfile::tempdir_in("/var/tmp").unwrap().keep();
        let run = d.join("run");
        let o = diskpulse()
            .args(["record", "--duration", "1s", "--no-progress", "--out"])
            .arg(&run)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        run
    })
}

/// A copy of the base recording in a new temporary directory.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for e in std::fs::read_dir(base()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), run.join(e.file_name())).unwrap();
    }
    (d, run)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// Exit 2, one line on stderr holding every `says`.
fn refused(args: &[&str], says: &[&str]) -> String {
    let o = diskpulse().args(args).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: '{s}' not in {err}");
    }
    err
}

/// Names in `dir` that a writer left behind (its temporary files).
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("diskpulse-tmp"))
        .collect()
}

fn complete(run: &Path) -> bool {
    read_json(&run.join("meta.json"))["complete"] == serde_json::Value::Bool(true)
}

// ---- class 1: writes outside what was named ----

#[test]
fn report_replaces_symlinks_in_the_run_directory_and_never_writes_through_them() {
    let (_d, run) = copy();
    let outside = tempfile::tempdir().unwrap();
    let outputs = [
        "summary.json",
        "rates.csv",
        "timeline.svg",
        "timeline.png",
        "report.html",
    ];
    for name in outputs {
        let victim = outside.path().join(name);
        std::fs::write(&victim, "the user's file").unwrap();
        std::os::unix::fs::symlink(&victim, run.join(name)).unwrap();
    }
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    for name in outputs {
        let victim = outside.path().join(name);
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the user's file",
            "report wrote through the symlink {name}"
        );
        let m = std::fs::symlink_metadata(run.join(name)).unwrap();
        assert!(
            m.is_file() && m.len() > 0,
            "{name} is not the report's own file"
        );
    }
    assert!(temporaries(&run).is_empty(), "{:?}", temporaries(&run));
}

#[test]
fn export_keeps_a_users_tmp_named_file_and_two_exports_share_no_temporary() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let mine = d.path().join("x.diskpulse-tmp");
    std::fs::write(&mine, "mine").unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "victim").unwrap();
    std::os::unix::fs::symlink(&victim, d.path().join("y.diskpulse-tmp")).unwrap();
    // Side by side: x.om and x.lp had one temporary file (x.diskpulse-tmp) between them.
    let start = |fmt: &str, out: &str| {
        diskpulse()
            .args(["export", "--format", fmt, "--out"])
            .arg(d.path().join(out))
            .arg(base())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let kids = [
        start("openmetrics", "x.om"),
        start("influx", "x.lp"),
        start("openmetrics", "y.om"),
    ];
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o).1);
    }
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
    let om = std::fs::read_to_string(d.path().join("x.om")).unwrap();
    let lp = std::fs::read_to_string(d.path().join("x.lp")).unwrap();
    assert!(
        om.trim_end().ends_with("# EOF"),
        "x.om is not one OpenMetrics text"
    );
    assert_eq!(om.matches("# EOF").count(), 1);
    assert!(
        !lp.contains("# EOF") && !lp.contains("# TYPE"),
        "x.lp mixes formats"
    );
    assert!(std::fs::read_to_string(d.path().join("y.om"))
        .unwrap()
        .ends_with("# EOF\n"));
    assert_eq!(
        temporaries(d.path()).len(),
        2,
        "{:?}",
        temporaries(d.path())
    );
}

#[test]
fn load_csv_at_a_symlink_replaces_the_link_and_keeps_its_target() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "victim").unwrap();
    let csv = d.path().join("r.csv");
    std::os::unix::fs::symlink(&victim, &csv).unwrap();
    // No server: nothing is measured and the CSVs get their headers, beside the link.
    let o = diskpulse()
        .args([
            "load",
            "pub",
            "--server",
            "nats://127.0.0.1:1",
            "--msgs",
            "5",
        ])
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).1);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
    assert!(!std::fs::symlink_metadata(&csv).unwrap().is_symlink());
    assert!(std::fs::read_to_string(&csv).unwrap().contains(','));
}

#[test]
fn load_csv_in_a_missing_directory_is_refused_before_the_run() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("no/such/r.csv");
    refused(
        &[
            "load",
            "pub",
            "--server",
            "nats://127.0.0.1:1",
            "--msgs",
            "5",
            "--csv",
            csv.to_str().unwrap(),
        ],
        &["--csv", "no/such", "writable directory"],
    );
}

// ---- class 5: signals and closed outputs ----

/// A block device this host has (diskstats needs no root): the progress line prints only
/// for recorded devices.
fn some_device() -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::fs::read_to_string(format!("/sys/block/{n}/size")).is_ok_and(|s| s.trim() != "0")
        })
        .collect();
    names.sort();
    names.into_iter().next()
}

#[test]
fn record_whose_progress_reader_goes_away_records_to_its_end_and_closes() {
    let Some(dev) = some_device() else {
        skip("no block device with a size in /sys/block");
        return;
    };
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let t0 = Instant::now();
    let mut c = diskpulse()
        .args([
            "record",
            "--device",
            &dev,
            "--duration",
            "2500ms",
            "--progress",
        ])
        .arg("--out")
        .arg(&run)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // `| head -c 1`: one byte read, then the pipe's reader is gone.
    let mut one = [0u8; 1];
    c.stdout.take().unwrap().read_exact(&mut one).unwrap();
    let st = c.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(
        t0.elapsed() >= Duration::from_millis(2400),
        "it ended early"
    );
    assert!(complete(&run));
}

/// A pseudo terminal: (controller, the terminal's side for the child).
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut m, mut s) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers given; null for the rest.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
}

/// `cmd` on a terminal that hangs up after `after` (an ssh session closed): the
/// terminal goes away (every write to it fails) and the command gets SIGHUP.
fn hung_up(mut cmd: Command, after: Duration) -> std::process::ExitStatus {
    let (controller, term) = pty();
    let mut c = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(term.try_clone().unwrap()))
        .stderr(Stdio::from(term))
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    drop(controller);
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGHUP) };
    c.wait().unwrap()
}

#[test]
fn record_on_a_terminal_that_hangs_up_closes_its_recording_and_exits_130() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let mut cmd = diskpulse();
    cmd.args(["record", "--duration", "20s", "--out"]).arg(&run);
    if let Some(dev) = some_device() {
        cmd.args(["--device", &dev]); // its progress line on the terminal
    }
    let t0 = Instant::now();
    let st = hung_up(cmd, Duration::from_millis(1200));
    // Before: 101, a panic printing to the gone terminal.
    assert_eq!(st.code(), Some(130), "{st}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(complete(&run));
}

#[test]
fn demo_on_a_terminal_that_hangs_up_closes_and_reports() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let mut cmd = diskpulse();
    cmd.args(["demo", "--duration", "20s", "--progress", "--out"])
        .arg(&run);
    let st = hung_up(cmd, Duration::from_millis(2500));
    assert_eq!(st.code(), Some(130), "{st}");
    assert!(complete(&run));
    assert!(run.join("summary.json").is_file());
}

#[test]
fn demo_whose_output_pipe_closes_goes_on_to_its_end() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let (mut r, w) = std::io::pipe().unwrap();
    let mut c = diskpulse()
        .args(["demo", "--duration", "2s", "--progress", "--out"])
        .arg(&run)
        .stdout(Stdio::from(w.try_clone().unwrap()))
        .stderr(Stdio::from(w))
        .spawn()
        .unwrap();
    let mut one = [0u8; 1];
    r.read_exact(&mut one).unwrap();
    drop(r);
    let st = c.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(complete(&run));
    assert!(run.join("summary.json").is_file());
}

// ---- class 11: messages ----

#[test]
fn bench_with_an_unusable_tmpdir_names_it_and_the_fix() {
    let f = tempfile::NamedTempFile::new().unwrap();
    for tmp in [Path::new("/proc"), f.path()] {
        let o = diskpulse()
            .arg("bench")
            .env("TMPDIR", tmp)
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&tmp.display().to_string()) && err.contains("TMPDIR="),
            "{err}"
        );
        assert_eq!(err.matches("os error").count(), 1, "{err}");
    }
}

#[test]
fn an_os_error_is_said_once() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let target = f.path().join("x.dat");
    let o = diskpulse()
        .args(["probe", "--size", "4k", "--rw", "write", "--filename"])
        .arg(&target)
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("Not a directory"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}

#[test]
fn a_2mb_filename_in_a_job_file_is_refused_in_one_short_line() {
    let d = tempfile::tempdir().unwrap();
    let job = d.path().join("big.fio");
    let name = format!("/var/tmp/{}", "a".repeat(2 << 20));
    std::fs::write(&job, format!("[j]\nrw=write\nsize=4k\nfilename={name}\n")).unwrap();
    let err = refused(&["probe", job.to_str().unwrap()], &["--filename", "4095"]);
    assert!(err.len() < 1000, "{} bytes echoed", err.len());
    // A name too long for a directory entry, given as a flag.
    let long = format!("/var/tmp/{}.dat", "b".repeat(300));
    refused(
        &[
            "probe",
            "--size",
            "4k",
            "--rw",
            "write",
            "--filename",
            &long,
        ],
        &["--filename", "255"],
    );
}

#[test]
fn a_garbage_nkey_file_is_refused_naming_the_flag_and_the_file() {
    let d = tempfile::tempdir().unwrap();
    let nk = d.path().join("user.nk");
    std::fs::write(&nk, "this is not a seed\n").unwrap();
    let nks = nk.to_str().unwrap();
    for args in [
        vec![
            "load",
            "pub",
            "--msgs",
            "5",
            "--server",
            "nats://127.0.0.1:1",
        ],
        vec!["agent", "--name", "n1", "--server", "nats://127.0.0.1:1"],
    ] {
        let mut a = args.clone();
        a.extend(["--nkey", nks]);
        refused(&a, &["--nkey", nks, "NKey seed"]);
    }
}

#[test]
fn proxy_refuses_an_upstream_no_server_listens_on() {
    for up in ["127.0.0.1:0", "127.0.0.1:", "127.0.0.1:70000", "[::1]:0"] {
        refused(
            &["proxy", "--delay", "1ms", "--upstream", up],
            &["--upstream", up],
        );
    }
}

/// A read-only view of `dir` (a bind mount) for the life of the value.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn of(dir: &Path, at: &Path) -> ReadOnly {
        std::fs::create_dir(at).unwrap();
        sh(
            "mount",
            &["--bind", dir.to_str().unwrap(), at.to_str().unwrap()],
        );
        let ro = ReadOnly(at.to_path_buf());
        sh("mount", &["-o", "remount,bind,ro", at.to_str().unwrap()]);
        ro
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn report_json_on_a_read_only_run_prints_the_json_and_says_what_it_could_not_write() {
    if !need_root("a read-only bind mount") {
        return;
    }
    let (d, run) = copy();
    let ro = ReadOnly::of(&run, &d.path().join("ro"));
    let o = diskpulse()
        .args(["report", "--json", "--no-charts", "--no-html"])
        .arg(&ro.0)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    drop(ro);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["duration_s"].as_f64().unwrap() > 0.5, "{v}");
    assert!(
        err.contains("summary.json") && err.contains("Read-only file system"),
        "{err}"
    );
    assert!(err.contains("report the copy"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    assert!(!run.join("summary.json").exists());
}

#[test]
fn help_and_version_to_a_full_stdout_fail_saying_so() {
    for args in [
        vec!["--help"],
        vec!["--version"],
        vec!["load", "--help"],
        vec!["help", "report"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = diskpulse().args(&args).stdout(full).output().unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    // And to a stdout that takes it, still 0.
    assert!(diskpulse()
        .arg("--version")
        .output()
        .unwrap()
        .status
        .success());
}

#[test]
fn a_report_to_a_full_stdout_is_one_line_and_exit_1_not_a_panic() {
    let (_d, run) = copy();
    for extra in [&["--json"][..], &[][..]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = diskpulse()
            .args(["report", "--no-charts", "--no-html"])
            .args(extra)
            .arg(&run)
            .stdout(full)
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("cannot write to stdout"), "{err}");
    }
}

#[test]
fn an_export_to_a_full_stdout_names_stdout() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = diskpulse()
        .args(["export", "--format", "openmetrics"])
        .arg(base())
        .stdout(full)
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write to stdout") && err.contains("--out"),
        "{err}"
    );
}

#[test]
fn a_load_whose_stdout_reader_is_gone_runs_to_its_end_and_exits_0() {
    if !have_nats_server() {
        return;
    }
    let s = JsServer::start();
    let (r, w) = std::io::pipe().unwrap();
    drop(r); // `| true`: the reader is gone before the first line
    let o = diskpulse()
        .args(["load", "pub", "--msgs", "2000", "--server", &s.url])
        .stdout(Stdio::from(w))
        .output()
        .unwrap();
    let (_, err) = text(&o);
    // Before: 101, println! panicking on EPIPE (SIGPIPE is ignored for the broker's sake).
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn rabbitmq_only_flags_are_refused_in_a_nats_mode() {
    for (mode, flag) in [
        ("pub", &["--queue-type", "quorum"][..]),
        ("js-pub", &["--queue-type", "classic"][..]),
        ("sub", &["--prefetch", "5"][..]),
        ("js-pub", &["--transient"][..]),
        ("request", &["--queue", "q1"][..]),
    ] {
        let mut a = vec![
            "load",
            mode,
            "--msgs",
            "5",
            "--server",
            "nats://127.0.0.1:1",
        ];
        a.extend(flag);
        refused(&a, &[flag[0], "RabbitMQ", mode]);
    }
}
