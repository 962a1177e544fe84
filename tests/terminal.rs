//! What `run` and `demo` tell a user at a terminal (issue 23, item 9): `run --dry-run`'s
//! time, space, root and "creates" lines, each figure worked out here from the scenario
//! file; the progress line (a test's stderr is a pipe, so `--progress` forces it on, and
//! without it nothing changes); the answers `run` ends with, exactly study.md's; SIGHUP
//! ending a run as Ctrl-C does.

mod common;
use common::*;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// `diskpulse run FILE --dry-run EXTRA...`: stdout (the run must say OK).
fn dry_run(file: &Path, extra: &[&str]) -> String {
    let o = diskpulse()
        .arg("run")
        .arg(file)
        .arg("--dry-run")
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

fn line_with<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
}

#[test]
fn the_raid_dry_run_names_its_loop_images_their_size_root_and_at_least_its_phases_time() {
    let lab = tempfile::tempdir().unwrap();
    let root = lab.path().display().to_string();
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/raid0-vs-raid1.toml");
    let out = dry_run(&f, &["--lab-root", &root]);
    // raid = ["0", "1"] x repeat 3 = 6 runs; each a `check --quick` (its 1 s --sample) and
    // then the probe's --runtime 8s: 9 s of phases a run, 54 s in all; the probe file's
    // layout is not known before the run, so it is "at least".
    let time = line_with(&out, "time: ");
    assert!(
        time.starts_with("time: at least 54 s of phases over 6 run(s), plus about "),
        "{time}"
    );
    assert!(
        out.contains(
            "time: not counted (not known before the run): #1 probe: laying out its 256 MiB file"
        ),
        "{out}"
    );
    // lab = { size = "1G", devices = 2 }: two 1 GiB images under --lab-root.
    let space = line_with(&out, "space: ");
    assert!(
        space.starts_with(&format!(
            "space: 2 GiB for lab images at once, {root}/images/lun-0.img 1 GiB, {root}/images/lun-1.img 1 GiB (sparse"
        )),
        "{space}"
    );
    assert!(
        out.contains(&format!(
            "space: phase #1 probe file (its --size) inside its lab volume: {root}/mnt/lun/diskpulse-probe-1.dat 256 MiB"
        )),
        "{out}"
    );
    let r = line_with(&out, "root: ");
    assert!(
        r.starts_with("root: needed for lab volume lun (loop devices, mkfs, mount)"),
        "{r}"
    );
    for raid in ["raid0", "raid1"] {
        assert!(
            out.contains(&format!(
                "creates: lab volume lun (btrfs {raid}, 2 x 1 GiB, write cache write back) for each run, torn down after it: images {root}/images/lun-0.img, {root}/images/lun-1.img, 2 loop device(s)"
            )),
            "{raid}: {out}"
        );
    }
    assert!(out.contains(&format!("mounted at {root}/mnt/lun")), "{out}");
    assert!(
        out.contains("creates: the study directory diskpulse-runs/<time>-raid0-vs-raid1 (under the current directory)"),
        "{out}"
    );
    assert!(out.contains("(first: cells/raid-0/r1)"), "{out}");
    // --out names the directory itself.
    let given = dry_run(&f, &["--lab-root", &root, "--out", "/tmp/my-study"]);
    assert!(
        given.contains("creates: the study directory /tmp/my-study: study.json"),
        "{given}"
    );
    // Nothing was made.
    assert_eq!(std::fs::read_dir(lab.path()).unwrap().count(), 0);
}

#[test]
fn the_demo_scenario_s_dry_run_needs_no_root_no_image_and_takes_its_load_s_duration() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo.toml");
    let out = dry_run(&f, &[]);
    // One run of one load phase with --duration 30s: exact, no "at least".
    assert!(
        line_with(&out, "time: ").starts_with("time: 30 s of phases over 1 run(s), plus about "),
        "{out}"
    );
    assert!(!out.contains("not counted"), "{out}");
    assert!(
        out.contains("space: no lab volume, no image files\n"),
        "{out}"
    );
    assert!(out.contains("root: not needed\n"), "{out}");
    assert!(
        out.contains("creates: 1 embedded nats-server node(s) on loopback ports, stores /var/tmp/diskpulse-demo-scenario/js/n1"),
        "{out}"
    );
}

#[test]
fn a_study_of_overlapping_sleeps_takes_its_longest_phase_times_its_runs_and_needs_no_root() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("sleeps.toml");
    // Per run: 'long' 10 s, 'short' 4 s with it (inside it): 10 s; 2 cells x 3 repeats.
    std::fs::write(
        &f,
        "name = \"sleeps\"\n[matrix]\nx = [\"a\", \"b\"]\nrepeat = 3\n[[phases]]\nkind = \"sleep\"\nname = \"long\"\nduration = \"10s\"\n[[phases]]\nkind = \"sleep\"\nname = \"short ${x}\"\nwith = \"long\"\nduration = \"4s\"\n",
    )
    .unwrap();
    let out = dry_run(&f, &[]);
    assert!(
        line_with(&out, "time: ")
            .starts_with("time: 60 s (1:00) of phases over 6 run(s), plus about 12 s of setup"),
        "{out}"
    );
    assert!(out.contains("root: not needed\n"), "{out}");
    assert!(
        out.contains("space: no lab volume, no image files\n"),
        "{out}"
    );
    // --trace needs tracefs, so root (and the run goes on without it).
    let traced = dry_run(&f, &["--trace"]);
    assert!(
        traced
            .contains("root: needed for the trace (tracefs; without root the runs go on untraced)"),
        "{traced}"
    );
}

/// A 2-value study (bs 4k vs 64k random reads, 1 s each, 2 repeats) on a directory.
fn probe_study(d: &Path) -> std::path::PathBuf {
    let vol = d.join("vol");
    std::fs::create_dir(&vol).unwrap();
    let sc = d.join("bs.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "bs"
[matrix]
bs = ["4k", "64k"]
repeat = 2
[[volumes]]
name = "v"
path = "{}"
[[phases]]
kind = "probe"
volume = "v"
args = ["--rw", "randread", "--bs", "${{bs}}", "--size", "8m", "--time-based", "--runtime", "1s"]
"#,
            vol.display()
        ),
    )
    .unwrap();
    sc
}

#[test]
fn run_with_progress_says_run_n_of_m_with_an_eta_and_ends_with_study_md_s_answers() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = probe_study(d.path());
    let out = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .arg("--progress")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    // One plain line a second while a run is on: run N of 4, its cell and repeat.
    for (n, label) in [
        (1, "bs-4k r1"),
        (2, "bs-4k r2"),
        (3, "bs-64k r1"),
        (4, "bs-64k r2"),
    ] {
        assert!(
            stderr.contains(&format!("run {n} of 4 {label} · ")),
            "run {n}: {stderr}"
        );
    }
    // Before a run has ended the ETA is the plan's; after, it is from the runs done.
    let progress: Vec<&str> = stderr.lines().filter(|l| l.starts_with("run ")).collect();
    assert!(
        progress
            .iter()
            .filter(|l| l.starts_with("run 1 of 4"))
            .all(|l| l.contains(" ETA ") && l.contains("(planned)")),
        "{stderr}"
    );
    assert!(
        progress
            .iter()
            .filter(|l| l.starts_with("run 3 of 4"))
            .all(|l| l.contains(" ETA ") && !l.contains("(planned)")),
        "{stderr}"
    );
    // The probe's reads per second, from its probe.csv, while it runs.
    assert!(stderr.contains("probe read "), "{stderr}");
    // The progress stops before the last lines: the report's path comes after all of it.
    let last_progress = stderr.rfind("\nrun ").unwrap();
    assert!(
        stderr.rfind("report.html").unwrap() > last_progress,
        "{stderr}"
    );
    // stdout: the answers, exactly study.md's "## Answers" (each question's heading and
    // lines), then the directory.
    let md = std::fs::read_to_string(out.join("study.md")).unwrap();
    let section: Vec<&str> = md
        .split("## Answers\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no answers in study.md:\n{md}"))
        .lines()
        .take_while(|l| !l.starts_with("## ") && !l.starts_with("Each answer"))
        .filter(|l| !l.is_empty())
        .collect();
    let said: Vec<String> = section
        .iter()
        .map(|l| match l.strip_prefix("### ") {
            Some(h) => format!("{h}:"),
            None => l.to_string(),
        })
        .collect();
    let answers: Vec<&str> = section
        .iter()
        .copied()
        .filter(|l| l.starts_with("- "))
        .collect();
    assert!(!answers.is_empty(), "{md}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "Answers:", "{stdout}");
    assert_eq!(&lines[1..=said.len()], &said[..], "{stdout}");
    assert_eq!(
        *lines.last().unwrap(),
        out.display().to_string(),
        "{stdout}"
    );
    // And the verdicts of study.json, in order.
    let sj = read_json(&out.join("study.json"));
    let v: Vec<String> = sj["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("- {}", v["line"].as_str().unwrap()))
        .collect();
    assert_eq!(v, answers);
}

/// Starts `diskpulse run` of a study of two 6 s sleeps, waits `after`, sends `sig` and
/// returns (exit code, stdout, stderr).
fn interrupted(d: &Path, sig: libc::c_int, extra: &[&str]) -> (Option<i32>, String, String) {
    let sc = d.join("sleep.toml");
    std::fs::write(
        &sc,
        "name = \"sleep\"\n[matrix]\nx = [\"a\", \"b\"]\n[[phases]]\nkind = \"sleep\"\nname = \"sleep ${x}\"\nduration = \"6s\"\n",
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_diskpulse"))
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(d.join("study"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Into the first run's sleep (the recording starts within a second).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let s = std::fs::read_to_string(d.join("study/cells/x-a/r1/events.jsonl"));
        if s.is_ok_and(|s| s.contains("phase_start")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let o = child.wait_with_output().unwrap();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn sighup_ends_a_run_cleanly_with_its_study_written_and_a_pipe_gets_no_progress_line() {
    let d = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = interrupted(d.path(), libc::SIGHUP, &[]);
    assert_eq!(code, Some(130), "{stderr}");
    let sj = read_json(&d.path().join("study/study.json"));
    assert_eq!(sj["status"], "interrupted", "{sj:#}");
    assert_eq!(sj["runs"][0]["status"], "interrupted", "{sj:#}");
    assert_eq!(sj["runs"].as_array().unwrap().len(), 1, "{sj:#}");
    assert!(d.path().join("study/report.html").exists());
    assert!(
        d.path().join("study/cells/x-a/r1/summary.json").exists(),
        "the interrupted run was reported"
    );
    // Nothing changed for a pipe: no progress line.
    assert!(!stderr.contains("run 1 of 2"), "{stderr}");
    assert!(
        stdout
            .trim_end()
            .ends_with(&d.path().join("study").display().to_string()),
        "{stdout}"
    );
    // One cell, no matrix parameter with two values done: no verdict, and it says why.
    assert!(stdout.starts_with("Answers: none: "), "{stdout}");
}

#[test]
fn sigterm_under_progress_lines_ends_the_run_and_the_progress_before_the_last_lines() {
    let d = tempfile::tempdir().unwrap();
    let (code, _stdout, stderr) = interrupted(d.path(), libc::SIGTERM, &["--progress"]);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("run 1 of 2 x-a r1 · 0:0"), "{stderr}");
    assert!(!stderr.contains("run 2 of 2"), "{stderr}");
    let last_progress = stderr.rfind("run 1 of 2").unwrap();
    assert!(
        stderr.rfind("report.html").unwrap() > last_progress,
        "{stderr}"
    );
}

#[test]
fn demo_with_progress_shows_elapsed_of_total_and_ops_and_ends_with_where_the_report_is() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let o = diskpulse()
        .args(["demo", "--duration", "3s", "--progress", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(" of 0:03")).collect();
    assert!(!lines.is_empty(), "{stderr}");
    assert!(lines.iter().all(|l| !l.starts_with("run ")), "{stderr}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("js-pub ") && l.contains(" ops/s")),
        "{stderr}"
    );
    // The report's sentences (summary.json's headline), then where the report is, then
    // the run directory.
    let s = read_json(&run.join("summary.json"));
    let out: Vec<&str> = stdout.lines().collect();
    let n = out.len();
    assert_eq!(out[n - 1], run.display().to_string(), "{stdout}");
    assert_eq!(
        out[n - 2],
        format!("report: {}", run.join("report.html").display()),
        "{stdout}"
    );
    for h in s["headline"].as_array().unwrap() {
        assert!(out.contains(&h.as_str().unwrap()), "{h} in {stdout}");
    }
}
