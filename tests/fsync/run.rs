//! A run's life: Ctrl-C mid-run, ENOSPC for the test file, fsync.csv inside a recorded
//! run, bad input.

use super::*;

#[test]
fn ctrl_c_mid_run_reports_what_ran_and_removes_the_file() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let c = diskpulse()
        .args(["fsync", "--secs-per-test", "1s", "--json", "--dir"])
        .arg(d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the file exists (filled), the first test starts; interrupt during the second.
    let t0 = Instant::now();
    while leftovers(d.path()).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no test file appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(1600));
    assert!(!leftovers(d.path()).is_empty(), "file exists mid-run");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t_sig = Instant::now();
    let o = c.wait_with_output().unwrap();
    assert!(
        t_sig.elapsed() < Duration::from_secs(3),
        "took {:?} to stop",
        t_sig.elapsed()
    );
    assert_eq!(o.status.code(), Some(130));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    let tests = tests_of(&v);
    assert_eq!(tests.len(), 22, "every row is reported, run or not");
    // Rows before the one running at Ctrl-C ran whole; that one was cut short; the rest
    // did not run.
    let cut = tests
        .iter()
        .position(|t| t["cut_short"] == true)
        .unwrap_or_else(|| panic!("no row cut short: {v:#}"));
    assert!(
        cut >= 1,
        "Ctrl-C came during the second test or later: {v:#}"
    );
    for t in &tests[..cut] {
        assert_ran(t);
        assert_eq!(t["cut_short"], false);
    }
    assert_ran(&tests[cut]);
    assert!(tests[cut]["secs"].as_f64().unwrap() < 0.95);
    for t in &tests[cut + 1..] {
        assert_eq!(t["status"], "not_run", "{t:#}");
        assert!(t["ops"].is_null());
    }
    assert!(cut <= 3, "the run was still early: {cut}");
    assert!(leftovers(d.path()).is_empty(), "file left after Ctrl-C");
}

#[test]
fn no_space_for_the_file_is_one_clear_error_and_nothing_is_left() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("12M");
    let m = lo.mount_ext4();
    let o = diskpulse()
        .args(["fsync", "--secs-per-test", "20ms", "--dir"])
        .arg(&m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no space left for the 16 MiB test file"),
        "{err}"
    );
    assert!(leftovers(&m).is_empty(), "partial file left behind");
}

#[test]
fn inside_a_recorded_run_rows_go_to_fsync_csv_on_the_run_clock() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let o = diskpulse()
        .args(["record", "--path", "/var/tmp", "--out"])
        .arg(&run)
        .args(["--", bin, "fsync", "--secs-per-test", "100ms", "--only"])
        .args(["one_8k,no_sync", "--dir"])
        .arg(&work)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(run.join("fsync.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "t_ns",
            "t_end_ns",
            "test",
            "status",
            "ops",
            "secs",
            "ops_per_s",
            "lat_min_us",
            "lat_mean_us",
            "lat_p50_us",
            "lat_p99_us",
            "lat_p999_us",
            "lat_max_us",
            "sync_lat_min_us",
            "sync_lat_mean_us",
            "sync_lat_p50_us",
            "sync_lat_p99_us",
            "sync_lat_p999_us",
            "sync_lat_max_us",
            "reason"
        ]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 8, "{csv}");
    // The command ran between command_start and command_exit on the run's clock.
    let ev = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let t_of = |kind: &str| -> u64 {
        ev.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {ev}"))["t_ns"]
            .as_u64()
            .unwrap()
    };
    let (start, exit) = (t_of("command_start"), t_of("command_exit"));
    let mut prev_end = start;
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?}");
        assert_eq!(r[3], "ok", "{r:?}");
        let (t0, t1): (u64, u64) = (r[0].parse().unwrap(), r[1].parse().unwrap());
        assert!(
            prev_end <= t0 && t0 < t1 && t1 <= exit,
            "{r:?} outside {start}..{exit}"
        );
        // A test repeats its op for at least --secs-per-test (one slow op can add to it).
        assert!(t1 - t0 >= 100_000_000, "{r:?}");
        assert!(r[4].parse::<u64>().unwrap() > 0);
        prev_end = t1;
    }
    assert!(leftovers(&work).is_empty());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = d.path().to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--dir", "/nonexistent/dir"], "/nonexistent/dir"),
        (&["--dir", "/etc/hostname"], "not one"),
        (&["--dir", dir, "--secs-per-test", "1 s"], "'1 s'"),
        (&["--dir", dir, "--secs-per-test", "1ms"], "too short"),
        (&["--dir", dir, "--only", "fdatasnyc"], "'fdatasnyc'"),
    ];
    for (args, must) in cases {
        let o = diskpulse().arg("fsync").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let lines = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .count();
        assert_eq!(lines, 1, "{args:?}: {err}");
        assert!(err.contains(must), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "nothing measured: {args:?}");
    }
    assert!(leftovers(d.path()).is_empty());
}
