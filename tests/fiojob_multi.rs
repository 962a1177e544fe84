//! fio job files with several jobs, as fio runs them: stonewall orders groups, jobs
//! without it overlap, numjobs and group_reporting give fio's `jobs[]` (checked against
//! real fio on the same file), and a bad line is one line naming FILE:LINE, exit 2.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::Path;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn json(o: Output, who: &str) -> serde_json::Value {
    let out = text(&o.stdout);
    assert!(
        o.status.success(),
        "{who}: exit {:?}\nstdout: {out}\nstderr: {}",
        o.status.code(),
        text(&o.stderr)
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{who}: not JSON ({e}): {out}"))
}

fn write(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn probe_json(job: &Path) -> serde_json::Value {
    let o = diskpulse()
        .args(["probe", job.to_str().unwrap(), "--output-format=json"])
        .output()
        .unwrap();
    json(o, "diskpulse probe")
}

#[test]
fn stonewall_orders_the_groups_and_jobs_without_it_overlap() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let data = dir.path().join("multi.dat");
    let job = write(
        dir.path(),
        "two-groups.fio",
        &format!(
            "[global]\nfilename={}\nsize=8m   # small\nbs=4k\ntime_based\nruntime=0.6\t; seconds\n\n[a]\nrw=randread\n\n[b]\nrw=randwrite\n\n[c]\nstonewall\nrw=read\n",
            data.display()
        ),
    );
    let v = probe_json(&job);
    let ours = v["diskpulse"]["jobs"].as_array().unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3, "{v}");
    let t = |i: usize, k: &str| ours[i][k].as_u64().unwrap();
    let gid: Vec<u64> = jobs
        .iter()
        .map(|j| j["groupid"].as_u64().unwrap())
        .collect();
    assert_eq!(gid, [0, 0, 1]);
    // a and b side by side: each starts before the other ends.
    assert!(
        t(0, "start_t_ns") < t(1, "end_t_ns") && t(1, "start_t_ns") < t(0, "end_t_ns"),
        "{ours:?}"
    );
    // c waits for both.
    assert!(
        t(2, "start_t_ns") >= t(0, "end_t_ns").max(t(1, "end_t_ns")),
        "{ours:?}"
    );
    // Each did its own direction; a job file without direct= is buffered, as fio.
    assert!(jobs[0]["read"]["total_ios"].as_u64().unwrap() > 0);
    assert!(jobs[1]["write"]["total_ios"].as_u64().unwrap() > 0);
    assert_eq!(jobs[1]["read"]["total_ios"].as_u64().unwrap(), 0);
    assert!(ours.iter().all(|j| j["direct"] == 0), "{ours:?}");
    // Inline comments are not part of the values.
    assert_eq!(v["global options"]["size"], "8m");
    assert_eq!(v["global options"]["runtime"], "0.6");
    assert!(!data.exists(), "the created file is removed");
}

#[test]
fn startdelay_exitall_and_wait_for_shape_the_timeline() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let job = write(
        dir.path(),
        "timeline.fio",
        &format!(
            "[global]\nfilename={}\nsize=4m\ntime_based\n[a]\nrw=read\nruntime=20\n[c]\nrw=randread\nruntime=0.3\nstartdelay=0.3\nexitall\n[b]\nnew_group\nwait_for=c\nrw=write\nruntime=0.2\n",
            dir.path().join("t.dat").display()
        ),
    );
    let v = probe_json(&job);
    let ours = v["diskpulse"]["jobs"].as_array().unwrap();
    let names: Vec<&str> = ours
        .iter()
        .map(|j| j["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "c", "b"], "{v}");
    let gid: Vec<u64> = ours
        .iter()
        .map(|j| j["groupid"].as_u64().unwrap())
        .collect();
    assert_eq!(gid, [0, 0, 1]);
    let t = |i: usize, k: &str| ours[i][k].as_u64().unwrap();
    // c starts its startdelay (0.3 s) after the jobs begin; a's own set-up (open, buffers)
    // is inside that time, so count from a's start with some of it taken off.
    assert!(
        t(1, "start_t_ns") >= t(0, "start_t_ns") + 250_000_000,
        "{ours:?}"
    );
    // c's exitall ends a (runtime=20) long before its runtime.
    assert!(
        t(0, "end_t_ns") < t(0, "start_t_ns") + 10_000_000_000,
        "{ours:?}"
    );
    assert!(t(0, "end_t_ns") >= t(1, "start_t_ns"), "{ours:?}");
    // b starts when c has ended.
    assert!(t(2, "start_t_ns") >= t(1, "end_t_ns"), "{ours:?}");
    assert!(v["jobs"][2]["write"]["total_ios"].as_u64().unwrap() > 0);
}

#[test]
fn numjobs_and_group_reporting_give_fios_jobs_entries() {
    if !have_tool("fio", "fio") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let data = dir.path().join("same.dat");
    let body = format!(
        "[global]\nfilename={}\nsize=4m\nbs=4k\ndescription=two groups # of jobs\n\n[a]\nrw=read\nnumjobs=2\n\n[b]\nnew_group\nrw=randread\nrwmixread=60\nrwmixwrite=40\n\n[c]\nstonewall\nrw=write\nnumjobs=3\ngroup_reporting\n",
        data.display()
    );
    let job = write(dir.path(), "groups.fio", &body);
    let ours = probe_json(&job);
    let theirs = json(
        std::process::Command::new("timeout")
            .args(["120", "fio", "--output-format=json"])
            .arg(&job)
            .output()
            .unwrap(),
        "fio",
    );
    let _ = std::fs::remove_file(&data);
    let shape = |v: &serde_json::Value| -> Vec<(String, u64, serde_json::Value)> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["jobname"].as_str().unwrap().to_string(),
                    j["groupid"].as_u64().unwrap(),
                    j["job options"].clone(),
                )
            })
            .collect()
    };
    let (o, f) = (shape(&ours), shape(&theirs));
    eprintln!("ours {o:?}\nfio  {f:?}");
    // a, a (group 0), b (group 1), c summed (group 2): six jobs, four entries.
    assert_eq!(o.len(), 4);
    assert_eq!(o, f, "jobname, groupid and job options as fio's");
    assert_eq!(ours["global options"], theirs["global options"]);
    // The summed entry counts all three copies' writes: 3 x 4 MiB.
    let w = ours["jobs"][3]["write"]["io_bytes"].as_u64().unwrap();
    assert_eq!(w, 3 * (4 << 20), "{}", ours["jobs"][3]["write"]);
}

#[test]
fn the_human_summary_has_fios_run_status_lines_per_group() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let job = write(
        dir.path(),
        "h.fio",
        &format!(
            "[global]\nfilename={}\nsize=2m\n[r]\nrw=read\n[w]\nstonewall\nrw=write\n[s]\nnew_group\nrw=randread\nnumjobs=3\ngroup_reporting\n",
            dir.path().join("h.dat").display()
        ),
    );
    let o = diskpulse()
        .args(["probe", job.to_str().unwrap()])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(out.contains("r: (groupid=0, jobs=1)"), "{out}");
    assert!(out.contains("w: (groupid=1, jobs=1)"), "{out}");
    assert!(
        out.contains("s: (groupid=2, jobs=3)"),
        "group_reporting: {out}"
    );
    let g0 = out.find("Run status group 0 (all jobs):").expect(&out);
    let g1 = out.find("Run status group 1 (all jobs):").expect(&out);
    let g2 = out.find("Run status group 2 (all jobs):").expect(&out);
    assert!(g0 < g1 && g1 < g2);
    assert!(
        out[g0..g1].contains("READ: bw=") && !out[g0..g1].contains("WRITE:"),
        "{out}"
    );
    assert!(
        out[g1..].contains("WRITE: bw=") && out[g1..].contains("io=2048KiB"),
        "{out}"
    );
}

#[test]
fn a_bad_line_is_refused_in_one_line_naming_file_and_line() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let data = dir.path().join("never.dat");
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "[global]\nsize=4m\n[a]\nioengine=net\n",
            ":4:",
            &["ioengine=net", "network"],
        ),
        ("[a]\nzonemode=zbd\n", ":2:", &["zonemode=zbd", "zoned"]),
        (
            "[a]\nrw=read\n[b]\nwait_for=nobody\n",
            ":4:",
            &["wait_for=nobody", "earlier job"],
        ),
        (
            "[a]\nrw=write\nfsync=1\nfdatasync=1\n",
            ":4:",
            &["--fdatasync"],
        ),
        (
            "[a]\nrw=read\n[b]\nrw=sideways  # not a mode\n",
            ":4:",
            &["'sideways'"],
        ),
        (
            "[a]\nrw=read\n[b]\nfrobnicate=1\n",
            ":4:",
            &["'frobnicate'"],
        ),
    ];
    for (i, (body, line, words)) in cases.iter().enumerate() {
        let job = write(
            dir.path(),
            &format!("bad{i}.fio"),
            &format!("{body}\n[zz]\nfilename={}\n", data.display()),
        );
        let o = diskpulse()
            .args(["probe", job.to_str().unwrap()])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{body}: {err}");
        let first = err.lines().find(|l| l.contains(".fio")).unwrap_or("");
        assert!(
            first.contains(&format!("bad{i}.fio{line}")),
            "{body}: {err}"
        );
        for w in *words {
            assert!(first.contains(w), "{body}: '{w}' in {err}");
        }
        assert_eq!(
            err.lines().filter(|l| l.starts_with("Error")).count(),
            1,
            "{err}"
        );
        assert!(!data.exists(), "{body}: nothing written");
    }
}
