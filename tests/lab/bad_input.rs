//! Bad input to `lab`: one line, exit 2, nothing created.

use super::*;

fn fails_with_usage(args: &[&str], must_contain: &[&str]) {
    let o = diskpulse().arg("lab").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let lines = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .count();
    assert_eq!(lines, 1, "one line expected: {err}");
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: '{m}' not in: {err}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_nothing_created() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("lab");
    let r = root.to_str().unwrap();
    fails_with_usage(
        &["up", "v", "--size", "1G", "--fs", "zfs", "--root", r],
        &["'zfs'", "ext4"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "btrfs",
            "--raid",
            "1",
            "--devices",
            "1",
            "--root",
            r,
        ],
        &["raid1", "at least 2"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "btrfs",
            "--raid",
            "10",
            "--devices",
            "3",
            "--root",
            r,
        ],
        &["at least 4"],
    );
    fails_with_usage(
        &[
            "up", "v", "--size", "1G", "--fs", "btrfs", "--raid", "5", "--root", r,
        ],
        &["'5'"],
    );
    fails_with_usage(
        &["up", "v", "--size", "100M", "--fs", "btrfs", "--root", r],
        &["125 MiB", "100 MiB"],
    );
    fails_with_usage(
        &["up", "v", "--size", "200M", "--fs", "xfs", "--root", r],
        &["300 MiB"],
    );
    fails_with_usage(
        &["up", "a/b", "--size", "1G", "--fs", "ext4", "--root", r],
        &["'a/b'"],
    );
    fails_with_usage(
        &[
            "up", "v", "--size", "1G", "--fs", "ext4", "--raid", "0", "--root", r,
        ],
        &["--fs btrfs"],
    );
    fails_with_usage(
        &["up", "v", "--size", "1 G", "--fs", "ext4", "--root", r],
        &["'1 G'"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "ext4",
            "--write-cache",
            "maybe",
            "--root",
            r,
        ],
        &["'maybe'"],
    );
    fails_with_usage(
        &[
            "up",
            "v",
            "--size",
            "1G",
            "--fs",
            "ext4",
            "--write-iops",
            "0",
            "--root",
            r,
        ],
        &["0"],
    );
    fails_with_usage(&["down", "../x", "--root", r], &["'../x'"]);
    fails_with_usage(&["down", "nosuch", "--root", r], &["nosuch"]);
    assert!(!root.exists(), "bad input creates nothing");
}
