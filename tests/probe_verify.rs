//! fio's verify and fio's logs, checked against real fio 3.33 on the same files of an
//! ext4 loop volume: every verify mode passes what it wrote; a block corrupted with dd
//! between the write and a `verify_only` run fails in both tools, naming the same offset;
//! the logs have fio's names and columns, and averaged logs one row per window whose
//! values agree with the JSON totals.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn probe(args: &[String]) -> Output {
    diskpulse().arg("probe").args(args).output().unwrap()
}

fn fio(args: &[String]) -> Output {
    let mut c = Command::new("/usr/bin/fio");
    c.args(args);
    if args.iter().any(|a| a.starts_with("--verify")) {
        // A failed verify job leaves local-NAME-N-verify.state in the working directory.
        c.arg("--verify_state_save=0");
    }
    c.output().unwrap()
}

fn ready() -> bool {
    can_use_loop_devices()
        && have_tool("/usr/bin/fio", "fio")
        && have_tool("mkfs.ext4", "e2fsprogs")
}

/// Zeroes 8 bytes of `path` at `offset` (dd conv=notrunc, as a user would): the same
/// bytes in both tools' files, so both name the same values.
fn corrupt(path: &Path, offset: u64) {
    let out = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", path.display()),
            "bs=1",
            "count=8",
            &format!("seek={offset}"),
            "conv=notrunc",
            "status=none",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "dd: {}", text(&out.stderr));
}

/// The job's options in fio's spelling, for both tools.
fn job(file: &Path, mode: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "--name=v".to_string(),
        format!("--filename={}", file.display()),
        "--size=4m".into(),
        "--bs=4k".into(),
        "--rw=write".into(),
        "--direct=1".into(),
        format!("--verify={mode}"),
    ];
    if mode == "pattern" {
        v.push("--verify_pattern=0xdeadbeef".into());
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A sparse file that exists (the probe keeps an existing file).
fn file(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(4 << 20).unwrap();
    p
}

/// The first line of a verify failure, with fio's `, flags=N` taken off.
fn failure_line(stderr: &str) -> String {
    let l = stderr
        .lines()
        .find(|l| l.contains("verify failed at file") || l.starts_with("verify: bad"))
        .unwrap_or_else(|| panic!("no verify failure in: {stderr}"))
        .to_string();
    match l.find(", flags=") {
        Some(i) => format!("{})", &l[..i]),
        None => l,
    }
}

#[test]
fn every_verify_mode_passes_its_own_writes_and_a_corrupted_block_fails_as_in_fio() {
    if !ready() {
        return;
    }
    let mut vol = LoopDev::new("256M");
    let mnt = vol.mount_ext4();
    for (mode, engine) in [
        ("crc32c", "psync"),
        ("crc32c-intel", "io_uring"),
        ("crc64", "psync"),
        ("md5", "io_uring"),
        ("sha256", "psync"),
        ("meta", "psync"),
        ("pattern", "io_uring"),
        // The read-back goes through the job's engine at its iodepth (decision 0098).
        ("crc64", "libaio"),
    ] {
        let eng = format!("--ioengine={engine}");
        let depth = if engine != "psync" {
            "--iodepth=8"
        } else {
            "--iodepth=1"
        };
        let ours = file(&mnt, &format!("ours-{mode}.dat"));
        let theirs = file(&mnt, &format!("fio-{mode}.dat"));
        // The write phase and the read-back after it (do_verify=1, fio's default).
        let o = probe(&job(&ours, mode, &[&eng, depth]));
        assert!(o.status.success(), "{mode}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("verify: 4m read back and checked"),
            "{mode}: {}",
            text(&o.stdout)
        );
        let f = fio(&job(&theirs, mode, &[&eng, depth]));
        assert!(f.status.success(), "fio {mode}: {}", text(&f.stderr));

        // The same 8 bytes of the third block's data, in both files; for meta (no data
        // checksum) also the fourth block's header.
        for p in [&ours, &theirs] {
            corrupt(p, 8192 + 100);
            if mode == "meta" {
                corrupt(p, 12288 + 16);
            }
        }
        let only = [
            "--verify_only".to_string(),
            "--output-format=json".to_string(),
        ];
        let mut a = job(&ours, mode, &[&eng, depth]);
        a.extend(only.iter().cloned());
        let o = probe(&a);
        let mut b = job(&theirs, mode, &[&eng, depth]);
        b.extend(only.iter().cloned());
        let f = fio(&b);
        assert_eq!(o.status.code(), Some(1), "{mode}: {}", text(&o.stderr));
        assert_eq!(f.status.code(), Some(1), "fio {mode}: {}", text(&f.stderr));
        let bad = if mode == "meta" { 12288 } else { 8192 };
        let (ol, fl) = (
            failure_line(&text(&o.stderr)),
            failure_line(&text(&f.stderr)),
        );
        assert!(
            ol.contains(&format!("offset {bad}, length 4096")),
            "{mode}: {ol}"
        );
        // fio's verify_only of the meta header says "bad header offset"/"bad magic" as we
        // do; the checksum modes print the same line but for the file's name.
        let theirs_s = theirs.display().to_string();
        let ours_s = ours.display().to_string();
        // fio 3.33's header-less pattern failure prints a length read from the pattern
        // bytes ("length 4022250974"); up to the offset the lines are the same.
        let upto = |l: &str| l[..l.find(", length").unwrap()].to_string();
        if mode == "pattern" {
            assert_eq!(
                upto(&ol),
                upto(&fl.replace(&theirs_s, &ours_s)),
                "{mode}: as fio's"
            );
        } else {
            assert_eq!(
                ol,
                fl.replace(&theirs_s, &ours_s),
                "{mode}: the same line as fio's"
            );
        }
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            json["jobs"][0]["error"], 84,
            "{mode}: EILSEQ, as fio's JSON"
        );
        if mode == "crc32c" {
            // A read-only job with verify checks what it reads (fio: !td_rw).
            let mut r = job(&ours, mode, &[]);
            r.retain(|s| s != "--rw=write");
            r.push("--rw=read".into());
            let o = probe(&r);
            assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
            assert!(failure_line(&text(&o.stderr)).contains("offset 8192, length 4096"));
        }
        let _ = std::fs::remove_file(&ours);
        let _ = std::fs::remove_file(&theirs);
    }
}

/// `(name suffix, lines)` of every file starting with `prefix`'s name in its directory.
fn logs(prefix: &Path) -> Vec<(String, Vec<Vec<u64>>)> {
    let dir = prefix.parent().unwrap();
    let stem = prefix.file_name().unwrap().to_string_lossy().to_string();
    let mut v: Vec<(String, Vec<Vec<u64>>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            let rest = n.strip_prefix(&format!("{stem}_"))?.to_string();
            let rows = std::fs::read_to_string(dir.join(&n))
                .unwrap()
                .lines()
                .map(|l| l.split(", ").map(|x| x.trim().parse().unwrap()).collect())
                .collect();
            Some((rest, rows))
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn log_job(file: &Path, prefix: &Path, extra: &[&str]) -> Vec<String> {
    let p = prefix.display();
    let mut v: Vec<String> = [
        "--name=l".to_string(),
        format!("--filename={}", file.display()),
        "--size=64m".into(),
        "--bs=4k".into(),
        "--rw=randrw".into(),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--runtime=2".into(),
        "--time_based".into(),
        format!("--write_lat_log={p}"),
        format!("--write_bw_log={p}"),
        format!("--write_iops_log={p}"),
        "--log_offset=1".into(),
        "--output-format=json".into(),
    ]
    .to_vec();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[test]
fn logs_have_fios_names_columns_and_averaged_rows() {
    if !ready() {
        return;
    }
    let mut vol = LoopDev::new("256M");
    let mnt = vol.mount_ext4();
    let data = mnt.join("l.dat");
    common::write_direct(&data, 64 << 20, 1 << 20);
    let logdir = tempfile::tempdir().unwrap();

    // Per I/O: the same files, the same columns, one line per I/O (the JSON's count).
    let (ours, theirs) = (logdir.path().join("ours"), logdir.path().join("fio"));
    let o = probe(&log_job(&data, &ours, &[]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = fio(&log_job(&data, &theirs, &[]));
    assert!(f.status.success(), "{}", text(&f.stderr));
    let (lo, lf) = (logs(&ours), logs(&theirs));
    let names = |l: &[(String, Vec<Vec<u64>>)]| l.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&lo), names(&lf), "fio's file names");
    assert_eq!(
        names(&lo),
        [
            "bw.1.log",
            "clat.1.log",
            "iops.1.log",
            "lat.1.log",
            "slat.1.log"
        ]
    );
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ios = |d: &str| json["jobs"][0][d]["total_ios"].as_u64().unwrap();
    for ((name, rows), (_, frows)) in lo.iter().zip(&lf) {
        if name.starts_with("slat") {
            assert!(
                rows.is_empty() && frows.is_empty(),
                "psync has no slat, in fio either"
            );
            continue;
        }
        assert_eq!(
            rows.len() as u64,
            ios("read") + ios("write"),
            "{name}: a line per I/O"
        );
        assert!(
            rows.iter().all(|r| r.len() == 6),
            "{name}: time, value, dir, bs, offset, prio"
        );
        assert!(
            frows.iter().all(|r| r.len() == 6),
            "fio's {name} has 6 columns too"
        );
        assert!(rows
            .iter()
            .all(|r| r[2] <= 1 && r[3] == 4096 && r[4] % 4096 == 0 && r[5] == 0));
        assert!(rows.iter().any(|r| r[2] == 0) && rows.iter().any(|r| r[2] == 1));
        assert!(
            rows.last().unwrap()[0] <= 2100,
            "{name}: ms since the start"
        );
        if name.starts_with("iops") {
            assert!(rows.iter().all(|r| r[1] == 1), "iops: 1 per I/O, as fio");
        }
    }

    // Averaged every 250 ms: one row per window and direction, values that agree with the
    // JSON's totals; fio writes the same shape.
    let (ours, theirs) = (logdir.path().join("oavg"), logdir.path().join("favg"));
    let o = probe(&log_job(&data, &ours, &["--log_avg_msec=250"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = fio(&log_job(&data, &theirs, &["--log_avg_msec=250"]));
    assert!(f.status.success(), "{}", text(&f.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (lo, lf) = (logs(&ours), logs(&theirs));
    assert_eq!(names(&lo), names(&lf));
    for ((name, rows), (_, frows)) in lo.iter().zip(&lf) {
        if name.starts_with("slat") {
            continue;
        }
        // 2 s / 250 ms = 8 windows, 2 directions; fio's windows are its own (one more or
        // less at the ends).
        assert!(
            (14..=18).contains(&rows.len()),
            "{name}: {} rows",
            rows.len()
        );
        assert!(
            (14..=18).contains(&frows.len()),
            "fio's {name}: {} rows",
            frows.len()
        );
        assert!(
            rows.iter().all(|r| r[3] == 0 && r[4] == 0),
            "{name}: bs and offset 0, as fio"
        );
        for (d, dir) in [(0, "read"), (1, "write")] {
            let j = &json["jobs"][0][dir];
            let rows_d: Vec<&Vec<u64>> = rows.iter().filter(|r| r[2] == d).collect();
            // Each window's I/Os, from the iops log: iops * span (250 ms, the last one
            // shorter: it ends at the last completion).
            let iops_rows: Vec<&Vec<u64>> = lo
                .iter()
                .find(|x| x.0.starts_with("iops"))
                .unwrap()
                .1
                .iter()
                .filter(|r| r[2] == d)
                .collect();
            assert_eq!(
                rows_d.len(),
                iops_rows.len(),
                "{name}: the same windows as iops"
            );
            let mut prev = 0;
            let spans: Vec<f64> = iops_rows
                .iter()
                .map(|r| {
                    let s = (r[0] - prev).max(1) as f64;
                    prev = r[0];
                    s
                })
                .collect();
            let n: Vec<f64> = iops_rows
                .iter()
                .zip(&spans)
                .map(|(r, s)| r[1] as f64 * s / 1000.0)
                .collect();
            let sum = |v: &[f64]| v.iter().sum::<f64>();
            let (got, want) = match &name[..name.find('.').unwrap()] {
                "iops" => (sum(&n), j["total_ios"].as_f64().unwrap()),
                "bw" => (
                    sum(&rows_d
                        .iter()
                        .zip(&spans)
                        .map(|(r, s)| r[1] as f64 * 1024.0 * s / 1000.0)
                        .collect::<Vec<_>>()),
                    j["io_bytes"].as_f64().unwrap(),
                ),
                k => {
                    let w: Vec<f64> = rows_d
                        .iter()
                        .zip(&n)
                        .map(|(r, n)| r[1] as f64 * n)
                        .collect();
                    (
                        sum(&w) / sum(&n),
                        j[format!("{k}_ns")]["mean"].as_f64().unwrap(),
                    )
                }
            };
            assert!(
                (got / want - 1.0).abs() < 0.03,
                "{name} {dir}: the rows give {got:.0}, the JSON {want:.0}"
            );
        }
    }

    // per_job_logs=0: one file for all jobs, without the job number.
    let shared = logdir.path().join("shared");
    let o = probe(&log_job(
        &data,
        &shared,
        &["--numjobs=2", "--per_job_logs=0"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        names(&logs(&shared)),
        ["bw.log", "clat.log", "iops.log", "lat.log", "slat.log"]
    );
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let all: u64 = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            j["read"]["total_ios"].as_u64().unwrap() + j["write"]["total_ios"].as_u64().unwrap()
        })
        .sum();
    let clat = logs(&shared)
        .into_iter()
        .find(|x| x.0 == "clat.log")
        .unwrap()
        .1;
    assert_eq!(clat.len() as u64, all, "both jobs' lines, whole");
}

#[test]
fn log_offset_without_a_log_runs_as_in_fio() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("x.dat");
    let job = d.path().join("j.fio");
    std::fs::write(
        &job,
        format!(
            "[j]\nfilename={}\nsize=1m\nrw=read\ndirect=0\nlog_offset=1\n",
            f.display()
        ),
    )
    .unwrap();
    for args in [
        vec![
            format!("--filename={}", f.display()),
            "--size=1m".into(),
            "--direct=0".into(),
            "--log_offset=1".into(),
        ],
        vec![job.display().to_string()],
    ] {
        let o = probe(&args);
        let e = text(&o.stderr);
        assert!(o.status.success(), "{e}");
        assert!(!e.contains("required arguments"), "{e}");
        assert!(
            e.contains("log_offset changes nothing without write_lat_log"),
            "{e}"
        );
    }
}
