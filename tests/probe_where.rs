//! Where the probe's I/Os go, against fio 3.33 itself: the same options on the same
//! file, fio's `write_iolog` beside our `--write_lat_log --log_offset` (one line per I/O,
//! in completion order, which is issue order at psync's depth 1). Sequential, strided,
//! zoned, offset and pass options must give fio's offsets exactly; random ones (whose
//! generators differ) the same shape: every block once per pass with the random map,
//! repeats without it, runs of N with `randread:N`, bssplit's shares, zipf's few blocks.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::Path;

/// (offset, length) of each I/O in fio's iolog (version 3: `time file action off len`).
fn fio_ios(dir: &Path, file: &Path, args: &[&str]) -> Vec<(u64, u64)> {
    let log = dir.join("fio.iolog");
    let _ = std::fs::remove_file(&log);
    let o = std::process::Command::new("fio")
        .args(["--name=t", "--ioengine=psync", "--direct=1", "--bs=4k"])
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--write_iolog={}", log.display()))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "fio {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 5 && (f[2] == "read" || f[2] == "write"))
                .then(|| (f[3].parse().unwrap(), f[4].parse().unwrap()))
        })
        .collect()
}

/// (offset, length) of each I/O in our latency log (`time, clat, dir, bs, offset, prio`).
fn our_ios(dir: &Path, file: &Path, args: &[&str]) -> Vec<(u64, u64)> {
    let prefix = dir.join("ours");
    let log = dir.join("ours_clat.1.log");
    let _ = std::fs::remove_file(&log);
    let o = diskpulse()
        .args([
            "probe",
            "--name=t",
            "--ioengine=psync",
            "--direct=1",
            "--bs=4k",
        ])
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--write_lat_log={}", prefix.display()))
        .arg("--log_offset")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "probe {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|x| x.trim().parse().unwrap()).collect();
            (f[4], f[3])
        })
        .collect()
}

fn blocks(ios: &[(u64, u64)]) -> Vec<u64> {
    ios.iter().map(|(o, _)| o / 4096).collect()
}

/// A 256 KiB file both tools use as it is (each keeps an existing file), in /var/tmp
/// (O_DIRECT works there; /tmp may be tmpfs).
fn setup(size: usize) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !have_tool("fio", "fio") {
        return None;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = dir.path().join("where.dat");
    write_direct(&file, size, 64 << 10);
    Some((dir, file))
}

#[test]
fn sequential_strided_zoned_and_offset_jobs_go_where_fios_go() {
    let Some((dir, file)) = setup(256 << 10) else {
        return;
    };
    let cases: &[&[&str]] = &[
        &["--rw=read", "--size=256k"],
        &["--rw=read:4k", "--size=256k"],
        &["--rw=read:-8k", "--size=256k"],
        &["--rw=write:112k", "--size=256k"],
        &[
            "--rw=read",
            "--size=256k",
            "--zonemode=strided",
            "--zonesize=16k",
            "--zoneskip=32k",
        ],
        &[
            "--rw=read",
            "--size=256k",
            "--zonemode=strided",
            "--zonesize=16k",
            "--zonerange=64k",
        ],
        &["--rw=read", "--offset=64k", "--size=128k"],
        &["--rw=read:-8k", "--offset=64k", "--size=64k"],
        &["--rw=read", "--size=256k", "--io_size=512k"],
        &["--rw=read", "--size=256k", "--number_ios=5"],
        &["--rw=read", "--size=32k", "--loops=2"],
        &["--rw=read", "--size=25%"],
    ];
    // The JSON's job options name them as fio's does.
    let o = diskpulse()
        .args([
            "probe",
            "--output-format=json",
            "--ioengine=psync",
            "--bs=4k",
        ])
        .arg(format!("--filename={}", file.display()))
        .args([
            "--rw=read:-8k",
            "--offset=64k",
            "--size=64k",
            "--zonesize=16k",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let opts = &j["jobs"][0]["job options"];
    for (k, v) in [
        ("rw", "read:-8k"),
        ("offset", "64k"),
        ("zonemode", "strided"),
        ("zonesize", "16k"),
    ] {
        assert_eq!(opts[k], v, "{k} in {opts}");
    }
    for args in cases {
        let theirs = blocks(&fio_ios(dir.path(), &file, args));
        let ours = blocks(&our_ios(dir.path(), &file, args));
        eprintln!("{args:?}: fio {} I/Os, ours {}", theirs.len(), ours.len());
        assert!(!theirs.is_empty(), "{args:?}: fio did no I/O");
        assert_eq!(ours, theirs, "{args:?}: offsets (4 KiB blocks)");
    }
}

#[test]
fn random_jobs_have_fios_shape() {
    let Some((dir, file)) = setup(1 << 20) else {
        return;
    };
    // The random map: each of the 256 blocks once (a mixed job: by one direction or the
    // other, one map for both, as fio's per-file map).
    for (who, rw) in [
        ("fio", "--rw=randread"),
        ("ours", "--rw=randread"),
        ("fio", "--rw=randrw"),
        ("ours", "--rw=randrw"),
    ] {
        let args = [rw, "--size=1m"];
        let ios = if who == "fio" {
            fio_ios(dir.path(), &file, &args)
        } else {
            our_ios(dir.path(), &file, &args)
        };
        let mut b = blocks(&ios);
        assert_eq!(b.len(), 256, "{who}");
        let in_order = b.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(in_order < 64, "{who}: {in_order} of 255 steps in order");
        b.sort_unstable();
        assert_eq!(b, (0..256).collect::<Vec<_>>(), "{who}: every block once");
        // norandommap: repeats (1 - 1/e of the blocks touched, about 162).
        let args = ["--rw=randread", "--size=1m", "--norandommap"];
        let ios = if who == "fio" {
            fio_ios(dir.path(), &file, &args)
        } else {
            our_ios(dir.path(), &file, &args)
        };
        let mut b = blocks(&ios);
        b.sort_unstable();
        b.dedup();
        assert!((130..200).contains(&b.len()), "{who}: {} distinct", b.len());
        // randread:8: runs of 8 blocks in a row (one reaching the end goes on from a new
        // random offset).
        let args = ["--rw=randread:8", "--size=1m"];
        let ios = if who == "fio" {
            fio_ios(dir.path(), &file, &args)
        } else {
            our_ios(dir.path(), &file, &args)
        };
        for run in blocks(&ios).chunks(8) {
            assert!(
                run.windows(2).all(|w| w[1] == w[0] + 1 || w[0] == 255),
                "{who}: {run:?}"
            );
        }
    }
}

#[test]
fn bssplit_shares_and_zipfs_hot_blocks_are_fios() {
    let Some((dir, file)) = setup(64 << 20) else {
        return;
    };
    let split = [
        "--rw=randread",
        "--size=64m",
        "--norandommap",
        "--bssplit=4k/25:16k/75",
        "--number_ios=4000",
    ];
    let share = |ios: &[(u64, u64)]| {
        assert!(ios
            .iter()
            .all(|(o, l)| o % 4096 == 0 && (*l == 4096 || *l == 16384)));
        ios.iter().filter(|(_, l)| *l == 4096).count() as f64 / ios.len() as f64
    };
    let theirs = share(&fio_ios(dir.path(), &file, &split));
    let ours = share(&our_ios(dir.path(), &file, &split));
    eprintln!("bssplit 4k share: fio {theirs:.3}, ours {ours:.3}");
    assert!((ours - 0.25).abs() < 0.04 && (theirs - 0.25).abs() < 0.04);
    // zipf:1.2 over 16384 blocks: far fewer distinct blocks than uniform (~3,600 of 4,000).
    let zipf = [
        "--rw=randread",
        "--size=64m",
        "--random_distribution=zipf:1.2",
        "--number_ios=4000",
    ];
    let distinct = |ios: Vec<(u64, u64)>| {
        let mut b = blocks(&ios);
        b.sort_unstable();
        b.dedup();
        b.len()
    };
    let theirs = distinct(fio_ios(dir.path(), &file, &zipf));
    let ours = distinct(our_ios(dir.path(), &file, &zipf));
    eprintln!("zipf:1.2 distinct blocks of 4000 I/Os: fio {theirs}, ours {ours}");
    assert!(theirs < 2_400 && ours < 2_400);
    let (lo, hi) = (theirs.min(ours) as f64, theirs.max(ours) as f64);
    assert!(hi / lo < 1.5, "fio {theirs}, ours {ours}");
    // fio's examples/rand-zones.fio: half the I/Os in the first 5%, 30% in the next 15%.
    let zoned = [
        "--rw=randread",
        "--size=64m",
        "--norandommap",
        "--random_distribution=zoned:50/5:30/15:20/",
        "--number_ios=4000",
    ];
    let shares = |ios: Vec<(u64, u64)>| {
        let n = ios.len() as f64;
        let below = |pct: u64| {
            ios.iter()
                .filter(|(o, _)| *o < (64 << 20) * pct / 100)
                .count()
        };
        (below(5) as f64 / n, (below(20) - below(5)) as f64 / n)
    };
    let theirs = shares(fio_ios(dir.path(), &file, &zoned));
    let ours = shares(our_ios(dir.path(), &file, &zoned));
    eprintln!("zoned 50/5:30/15: first 5% and next 15%: fio {theirs:.3?}, ours {ours:.3?}");
    for (a, b) in [(theirs.0, ours.0), (theirs.1, ours.1)] {
        assert!((a - b).abs() < 0.05, "fio {theirs:?}, ours {ours:?}");
    }
    assert!((ours.0 - 0.5).abs() < 0.04 && (ours.1 - 0.3).abs() < 0.04);
}

#[test]
fn bad_placement_options_are_one_line_naming_them() {
    let cases: &[(&[&str], &str)] = &[
        (&["--rw=read:x"], "--rw read:x"),
        (&["--bssplit=4k/60:8k/60"], "--bssplit"),
        (&["--random_distribution=zipf:1"], "zipf"),
        (&["--zonemode=zbd"], "--zonemode zbd"),
        (&["--zonemode=none", "--zonesize=16k"], "--zonemode none"),
        (&["--loops=0"], "--loops"),
    ];
    for (args, needle) in cases {
        let o = diskpulse()
            .args([
                "probe",
                "--filename=/var/tmp/probe-where-never.dat",
                "--show-job",
            ])
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    // A share of a file that does not exist.
    let o = diskpulse()
        .args([
            "probe",
            "--filename=/var/tmp/probe-where-never.dat",
            "--size=50%",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
    assert!(!Path::new("/var/tmp/probe-where-never.dat").exists());
}

#[test]
fn a_file_named_by_directory_is_fios_name_and_ours_is_removed_afterwards() {
    if !have_tool("fio", "fio") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = format!("--directory={}", dir.path().display());
    let args = [
        "--name=job",
        "--rw=write",
        "--bs=4k",
        "--size=256k",
        "--ioengine=psync",
        "--direct=1",
        &d,
    ];
    let shown = diskpulse()
        .args(["probe", "--show-job"])
        .args(args)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    let want = dir.path().join("job.0.0");
    assert!(
        shown
            .lines()
            .any(|l| l == format!("filename={}", want.display())),
        "{shown}"
    );
    // Ours creates it, lays it out, runs and removes it: nothing is left in the directory.
    let o = diskpulse().arg("probe").args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // fio names its file the same (and keeps it).
    let o = std::process::Command::new("fio")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&want).unwrap().len(), 256 << 10);
    // Several files per job (issue 26): fio's names, --size shared out, and the job
    // written back as one file list that reads the same.
    for (extra, names, line) in [
        ("--nrfiles=2", vec!["job.0.0", "job.0.1"], "filesize=128k"),
        ("--filename=a:b", vec!["a", "b"], "filesize=128k"),
        ("--filesize=64k", vec!["job.0.0"], "size=64k"),
    ] {
        let o = diskpulse()
            .args(["probe", "--show-job"])
            .args(args)
            .arg(extra)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{extra}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let want: Vec<String> = names
            .iter()
            .map(|n| dir.path().join(n).display().to_string())
            .collect();
        assert!(
            out.lines()
                .any(|l| l == format!("filename={}", want.join(":"))),
            "{extra}: {out}"
        );
        assert!(out.lines().any(|l| l == line), "{extra}: {out}");
    }
}

#[test]
fn show_job_writes_the_placement_back_as_a_job_file_that_reads_the_same() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let show = |args: &[&str]| {
        let o = diskpulse()
            .args([
                "probe",
                "--show-job",
                "--filename=/var/tmp/probe-where-never.dat",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let cases: &[&[&str]] = &[
        &[
            "--rw=read:-8k",
            "--offset=64k",
            "--offset_increment=1m",
            "--numjobs=2",
        ],
        &[
            "--rw=randread:8",
            "--rw_sequencer=identical",
            "--bssplit=4k/10:64k/50:32k/40",
        ],
        &[
            "--rw=randwrite",
            "--bsrange=1k-4k,8k-16k",
            "--blockalign=4k",
            "--norandommap",
        ],
        &[
            "--rw=randread",
            "--random_distribution=zipf:1.2:0.5",
            "--io_size=1g",
        ],
        &[
            "--rw=randread",
            "--random_distribution=zoned:60/10:40/90,100/100",
        ],
        &[
            "--rw=randread",
            "--random_distribution=zoned_abs:50/40k:50/4m",
        ],
        &[
            "--rw=read",
            "--zonemode=strided",
            "--zonesize=16k",
            "--zoneskip=32k",
            "--loops=3",
        ],
        &["--rw=read", "--size=50%", "--number_ios=100"],
    ];
    for args in cases {
        let first = show(args);
        let file = dir.path().join("again.fio");
        std::fs::write(&file, &first).unwrap();
        let again = show(&[file.to_str().unwrap()]);
        assert_eq!(again, first, "{args:?}");
        let flag = args[1].trim_start_matches("--").split('=').next().unwrap();
        assert!(first.contains(flag), "{flag} in:\n{first}");
    }
}
