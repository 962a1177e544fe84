//! fio's trims and several files per job, on real loop devices (issue 26, point 1 of
//! decision 0097): `rw=trim`/`randtrim`/`trimwrite` discard a raw device's blocks (the
//! backing image loses them, the kernel counts the discards), a regular file fails with
//! ENOTTY as fio 3.33 fails; `nrfiles`/`filename=a:b` do every file's bytes.
//! Needs root and losetup (loop devices); each test says why it skips without them.

mod common;
use common::*;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn probe_json(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let o = diskpulse()
        .arg("probe")
        .arg("--output-format=json")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let v = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{err}", String::from_utf8_lossy(&o.stdout)));
    (o.status.code(), v, err)
}

fn ios(v: &serde_json::Value, dir: &str) -> u64 {
    v["jobs"][0][dir]["total_ios"].as_u64().unwrap()
}

/// Bytes the loop device's backing image holds on disk.
fn allocated(image: &Path) -> u64 {
    std::fs::metadata(image).unwrap().blocks() * 512
}

/// Discards the device has completed (/sys/block/X/stat field 12).
fn discards(name: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    s.split_whitespace()
        .nth(11)
        .map_or(0, |v| v.parse().unwrap())
}

#[test]
fn trim_discards_the_raw_devices_blocks_and_fios_trim_block_has_them() {
    if !can_use_loop_devices() {
        return;
    }
    let d = LoopDev::new("64M");
    write_direct(Path::new(&d.dev), 32 << 20, 1 << 20);
    let before = allocated(&d.image);
    assert!(before >= 32 << 20, "the first 32 MiB are written");
    let n0 = discards(d.name());
    let (code, v, err) = probe_json(&[
        &format!("--filename={}", d.dev),
        "--rw=trim",
        "--bs=64k",
        "--size=16m",
        "--ioengine=psync",
        "--allow-destructive",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(ios(&v, "trim"), 256, "16 MiB in 64 KiB discards");
    assert_eq!(v["jobs"][0]["trim"]["io_bytes"], 16 << 20);
    assert!(v["jobs"][0]["trim"]["iops"].as_f64().unwrap() > 0.0);
    assert!(v["jobs"][0]["trim"]["clat_ns"]["N"].as_u64().unwrap() == 256);
    assert_eq!((ios(&v, "read"), ios(&v, "write")), (0, 0));
    // The loop driver punches the discarded range out of its image.
    let after = allocated(&d.image);
    assert!(
        before - after >= 15 << 20,
        "the image lost the trimmed 16 MiB: {before} -> {after}"
    );
    assert!(discards(d.name()) > n0, "the kernel counted discards");
    // The human summary: a trim line, and the device's discards beside its reads/writes.
    let o = diskpulse()
        .args(["probe", &format!("--filename={}", d.dev), "--rw=randtrim"])
        .args(["--bs=64k", "--size=16m", "--allow-destructive"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("  trim : ") && out.contains("256 I/Os"),
        "{out}"
    );
    assert!(
        out.contains(&format!("{} 0 reads, 0 writes, ", d.name())) && out.contains(" discards"),
        "{out}"
    );
}

#[test]
fn randtrim_and_trimwrite_count_as_fio_counts_them_and_need_allow_destructive() {
    if !can_use_loop_devices() {
        return;
    }
    let d = LoopDev::new("64M");
    let dev = format!("--filename={}", d.dev);
    let (code, v, err) = probe_json(&[
        &dev,
        "--rw=randtrim",
        "--bs=4k",
        "--size=1m",
        "--allow-destructive",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(ios(&v, "trim"), 256, "every 4 KiB block of 1 MiB once");
    // trimwrite: each block discarded then written, so as many of each.
    let (code, v, err) = probe_json(&[
        &dev,
        "--rw=trimwrite",
        "--bs=64k",
        "--size=1m",
        "--allow-destructive",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!((ios(&v, "trim"), ios(&v, "write")), (16, 16));
    // A discard destroys data: a block device needs --allow-destructive.
    let o = diskpulse()
        .args(["probe", &dev, "--rw=trim", "--size=1m"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-destructive"));
    // The async engines discard synchronously, as fio's libaio and io_uring engines do.
    for engine in ["libaio", "io_uring"] {
        let (code, v, err) = probe_json(&[
            &dev,
            "--rw=trimwrite",
            "--bs=64k",
            "--size=1m",
            "--iodepth=4",
            &format!("--ioengine={engine}"),
            "--allow-destructive",
        ]);
        assert_eq!(code, Some(0), "{engine}: {err}");
        assert_eq!((ios(&v, "trim"), ios(&v, "write")), (16, 16), "{engine}");
    }
}

#[test]
fn trim_on_a_regular_file_fails_with_enotty_as_fio_does() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let f = dir.path().join("t.dat");
    let (code, v, err) = probe_json(&[
        &format!("--filename={}", f.display()),
        "--rw=trim",
        "--bs=64k",
        "--size=1m",
    ]);
    assert_ne!(code, Some(0));
    assert_eq!(v["jobs"][0]["error"], 25, "fio 3.33: err=25 (ENOTTY)");
    assert!(err.contains("Inappropriate ioctl"), "{err}");
}

#[test]
fn several_files_per_job_each_do_their_own_bytes() {
    if !can_use_loop_devices() {
        return;
    }
    let mut d = LoopDev::new("256M");
    let m = d.mount_ext4();
    // filename=a:b of existing files of their own sizes: a sequential read of each, once.
    write_direct(&m.join("a"), 1 << 20, 1 << 20);
    write_direct(&m.join("b"), 2 << 20, 1 << 20);
    let (code, v, err) = probe_json(&[
        &format!("--directory={}", m.display()),
        "--filename=a:b",
        "--rw=read",
        "--bs=4k",
        "--direct=1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["jobs"][0]["read"]["io_bytes"], 3 << 20, "1 MiB + 2 MiB");
    // nrfiles with filesize: four new files, each laid out, written once and removed.
    for service in ["roundrobin", "sequential", "random"] {
        let (code, v, err) = probe_json(&[
            &format!("--directory={}", m.display()),
            "--name=nf",
            "--nrfiles=4",
            "--filesize=512k",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            &format!("--file_service_type={service}"),
        ]);
        assert_eq!(code, Some(0), "{service}: {err}");
        assert_eq!(
            ios(&v, "write"),
            4 * 128,
            "{service}: every block of 4 files"
        );
        assert!(
            err.contains("nf.0.3"),
            "{service}: fio's fourth name: {err}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&m)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("nf."))
        .collect();
    assert!(
        left.is_empty(),
        "files the probe made are removed: {left:?}"
    );
}
