//! What the probe refuses or cannot do, each one clear line with the fix: a mounted or
//! formatted device, ENOSPC, a read-only file system, O_DIRECT on tmpfs, a misaligned
//! write, bad flags.

use super::*;

#[test]
fn a_mounted_or_formatted_block_device_is_refused() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("64M");
    let m = lo.mount_ext4();
    let args = [
        "--filename",
        lo.dev.as_str(),
        "--rw",
        "randwrite",
        "--runtime",
        "1s",
    ];
    // Without the flag: told to pass it.
    let o = probe_in(&m, &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        error_line(&o).contains("--allow-destructive"),
        "{}",
        error_line(&o)
    );
    // With it, but mounted: refused anyway.
    let mut a2 = args.to_vec();
    a2.push("--allow-destructive");
    let o = probe_in(&m, &a2);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(e.contains("mounted on") && e.contains(&lo.dev), "{e}");
    // Unmounted, still an ext4 signature: refused.
    sh("umount", &[m.to_str().unwrap()]);
    lo.mount = None;
    let _ = std::fs::remove_dir(&m);
    let o = probe_in(Path::new("/var/tmp"), &a2);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(e.contains("ext2/3/4") && e.contains("wipefs"), "{e}");
    // A read-only job needs none of this.
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &lo.dev,
            "--rw",
            "randread",
            "--runtime",
            "300ms",
            "--time-based",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// A file larger than its file system's free space is refused before anything is written
/// (issue 10: it was laid out until ENOSPC; `--size 16383G` wrote until the disk was full).
#[test]
fn a_size_beyond_the_free_space_is_refused_naming_the_file_and_the_fix() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("32M");
    let m = lo.mount_ext4();
    let f = m.join("big.dat");
    let o = probe_in(
        &m,
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "64MiB",
            "--rw",
            "randwrite",
            "--runtime",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("free") && e.contains(f.to_str().unwrap()) && e.contains("--size"),
        "{e}"
    );
    assert!(!f.exists(), "nothing is written");
}

#[test]
fn a_read_only_file_system_is_one_clear_line() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("32M");
    let m = lo.mount_ext4();
    sh("mount", &["-o", "remount,ro", m.to_str().unwrap()]);
    let f = m.join("p.dat");
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "1MiB",
            "--rw",
            "randwrite",
            "--runtime",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("EROFS") && e.contains(f.to_str().unwrap()),
        "{e}"
    );
}

#[test]
fn o_direct_on_tmpfs_is_refused_with_a_fix_or_warned_about() {
    let f = format!("/dev/shm/diskpulse-test-{}.dat", std::process::id());
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &f,
            "--size",
            "4MiB",
            "--rw",
            "randread",
            "--runtime",
            "200ms",
            "--time-based",
        ],
    );
    let err = text(&o.stderr);
    match o.status.code() {
        // Kernels before 6.6: tmpfs refuses O_DIRECT at open.
        Some(1) => {
            let e = error_line(&o);
            assert!(
                e.contains("tmpfs") && e.contains("O_DIRECT") && e.contains("--direct 0"),
                "{e}"
            );
        }
        // 6.6 and later accept it: the probe says no disk is measured.
        Some(0) => assert!(
            err.contains("tmpfs") && err.contains("no disk is measured"),
            "{err}"
        ),
        c => panic!("exit {c:?}: {err}"),
    }
    assert!(!Path::new(&f).exists());
}

#[test]
fn a_misaligned_direct_write_says_einval_and_keeps_what_was_measured() {
    let d = scratch();
    let f = d.path().join("p.dat");
    // 4 KiB reads work; 1000-byte direct writes do not (not a multiple of the sector).
    let o = probe_in(
        d.path(),
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "8MiB",
            "--rw",
            "randrw",
            "--rwmixread",
            "99",
            "--bs",
            "4k,1000",
            "--runtime",
            "2s",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("EINVAL")
            && e.contains("logical block size")
            && e.contains("--bs")
            && e.contains(f.to_str().unwrap()),
        "{e}"
    );
    let j = json_of(&o);
    assert_eq!(j["jobs"][0]["error"], 22);
    assert!(
        j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0,
        "reads before the failing write are kept"
    );
    assert!(j["diskpulse"]["error"].as_str().unwrap().contains("EINVAL"));
    assert!(!f.exists());
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["--iodepth", "8", "--ioengine", "sync"], "io_uring"),
        (vec!["--bs", "8q"], "'8q'"),
        (
            vec!["--rw", "randread", "--fdatasync", "1"],
            "does not write",
        ),
        // A bare number is seconds, as fio's --runtime=30; a wrong unit is refused.
        (vec!["--runtime", "10x"], "'10x'"),
        (vec!["--preset", "fast"], "array-check"),
        (vec!["--filename", "/var/tmp"], "directory"),
    ] {
        let o = probe_in(Path::new("/var/tmp"), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
    }
}
