//! Issue 10, the `load`, `demo` and `lab` slice: bad input is refused before anything is
//! written or started (exit 2, one line naming the flag, the limit and the fix, no run
//! directory, no store directory, no lab state, no process left), and the limits the
//! operating system and the server set (RLIMIT_NOFILE, max_payload) are checked up front
//! instead of failing or measuring nothing 25 s into a run.
//!
//! Each case drives the real binary in a fresh working directory (the default run
//! directory `diskpulse-runs/` lands there) and asserts that directory is still empty.

mod common;
use common::*;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// What one invocation did.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    pid: u32,
}

/// Runs `diskpulse ARGS` in `cwd`, without $NATS_URL, optionally under an RLIMIT_NOFILE
/// of (soft, hard).
fn run_in(cwd: &Path, args: &[&str], nofile: Option<(u64, u64)>) -> Ran {
    let mut c = diskpulse();
    c.args(args)
        .current_dir(cwd)
        .env_remove("NATS_URL")
        .env_remove("DISKPULSE_RUN_DIR");
    if let Some((soft, hard)) = nofile {
        // SAFETY: setrlimit is async-signal-safe; lowering limits needs no privilege.
        unsafe {
            c.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: hard as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    Ran {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        pid,
    }
}

/// The store directories `load` and `demo` make for process `pid` by default.
fn default_stores(pid: u32) -> [PathBuf; 2] {
    [
        PathBuf::from(format!("/var/tmp/diskpulse-load-{pid}")),
        PathBuf::from(format!("/var/tmp/diskpulse-demo-{pid}")),
    ]
}

/// Processes whose command line mentions `needle` (a nats-server left on our store).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(needle) {
                v.push(pid);
            }
        }
    }
    v
}

/// Asserts the run was refused by the rule: exit 2, one stderr line holding every
/// `want`, nothing on stdout, nothing written in `cwd` or the default store, no process
/// left on that store.
fn assert_refused(cwd: &Path, r: &Ran, want: &[&str]) {
    assert_eq!(r.code, 2, "exit 2 expected; stderr: {}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {}", r.stderr);
    for w in want {
        assert!(lines[0].contains(w), "'{w}' missing in: {}", lines[0]);
    }
    assert!(r.stdout.trim().is_empty(), "stdout: {}", r.stdout);
    let left: Vec<_> = std::fs::read_dir(cwd).unwrap().flatten().collect();
    assert!(left.is_empty(), "written in {}: {left:?}", cwd.display());
    for s in default_stores(r.pid) {
        assert!(!s.exists(), "{} was created", s.display());
        let procs = processes_mentioning(&s.display().to_string());
        assert!(
            procs.is_empty(),
            "left running on {}: {procs:?}",
            s.display()
        );
    }
}

/// Runs and asserts the refusal.
fn refused(args: &[&str], want: &[&str]) {
    let cwd = tempfile::tempdir().unwrap();
    let r = run_in(cwd.path(), args, None);
    assert_refused(cwd.path(), &r, want);
}

#[test]
fn load_flags_out_of_bounds_are_refused_before_anything_starts() {
    // (argv after `load`, what the line names)
    let cases: &[(&[&str], &[&str])] = &[
        (&["pub", "--rate", "0"], &["--rate", "above 0"]),
        (&["pub", "--rate", "1e12"], &["--rate", "100000000"]),
        (&["pub", "--rate", "NaN"], &["--rate"]),
        (
            &["pub", "--duration", "0s"],
            &["--duration", "more than 0s"],
        ),
        (&["pub", "--duration", "200h"], &["--duration", "168h"]),
        (
            &["pub", "--duration", "1s", "--stats-window", "2s"],
            &["--stats-window 2s", "--duration 1s"],
        ),
        (&["pub", "--stats-window", "2h"], &["--stats-window", "1h"]),
        (&["js-pub", "--window", "0"], &["--window", "at least 1"]),
        (
            &["js-pub", "--window", "100000000000"],
            &["--window 100000000000", "1000000"],
        ),
        (
            &["request", "--timeout", "0s"],
            &["--timeout", "more than 0s"],
        ),
        (&["js-consume", "--batch", "0"], &["--batch"]),
        (
            &["js-consume", "--batch", "2000000000"],
            &["--batch", "1000000"],
        ),
        (&["pub", "--msgs", "0"], &["--msgs", "at least 1"]),
        (&["pub", "--threads", "100000"], &["--threads", "1024"]),
        (&["js-pub", "--max-bytes", "0"], &["--max-bytes"]),
        (&["pub", "--size", "100MiB"], &["--size 100 MiB", "64 MiB"]),
        (
            &["obj-put", "--object-size", "4MiB"],
            &["--object-size", "1k to 1024k"],
        ),
        (&["kv-put", "--keys", "0"], &["--keys"]),
        (&["pub", "--replicas", "7"], &["--replicas", "1 to 5"]),
    ];
    for (args, want) in cases {
        let mut argv = vec!["load"];
        argv.extend_from_slice(args);
        refused(&argv, want);
    }
}

#[test]
fn load_csv_is_not_created_when_another_flag_is_refused() {
    let cwd = tempfile::tempdir().unwrap();
    // --csv was created by the first check, before --sync-interval and --cluster were read.
    let r = run_in(
        cwd.path(),
        &["load", "pub", "--csv", "out.csv", "--cluster", "2"],
        None,
    );
    assert_refused(cwd.path(), &r, &["--cluster"]);
}

#[test]
fn more_clients_than_file_descriptors_are_refused_naming_the_limit() {
    let cwd = tempfile::tempdir().unwrap();
    // Used to connect for 25 s and then fail with "Too many open files".
    let r = run_in(
        cwd.path(),
        &["load", "pub", "--clients", "100000", "--duration", "1s"],
        Some((1024, 1024)),
    );
    assert_refused(
        cwd.path(),
        &r,
        &["--clients 100000", "RLIMIT_NOFILE", "1024", "ulimit -n"],
    );
}

#[test]
fn a_low_soft_fd_limit_is_raised_to_the_hard_one() {
    if !have_nats_server() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    // 200 core publishers are 400 sockets (the raw writer beside each client): more
    // than a soft limit of 256, less than the hard 4096.
    let r = run_in(
        cwd.path(),
        &[
            "load",
            "pub",
            "--clients",
            "200",
            "--msgs",
            "2000",
            "--quiet",
            "--json",
        ],
        Some((256, 4096)),
    );
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pubs = j["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["role"] == "pub")
        .expect("a pub role");
    assert_eq!(pubs["ops"], 2000, "{pubs}");
}

#[test]
fn demo_flags_out_of_bounds_are_refused_before_anything_is_written() {
    if !have_nats_server() {
        return;
    }
    let cases: &[(&[&str], &[&str])] = &[
        // Used to exit 0 with "0.0 ops" and the cause only in events.jsonl.
        (
            &["--size", "100MiB"],
            &["--size 100 MiB", "1 MiB", "max_payload"],
        ),
        (
            &["--size", "2MiB"],
            &["--size 2 MiB", "1 MiB", "1MiB or less"],
        ),
        (&["--duration", "0s"], &["--duration"]),
        (&["--window", "0"], &["--window"]),
        (&["--window", "100000000000"], &["--window", "1000000"]),
        (&["--interval", "0s"], &["--interval 0s"]),
        (
            &["--duration", "1s", "--interval", "2s"],
            &["--interval 2s", "--duration 1s"],
        ),
        (&["--ui-average", "0s"], &["--ui-average"]),
        (&["--duration", "200h"], &["--duration", "168h"]),
    ];
    for (args, want) in cases {
        let mut argv = vec!["demo", "--out", "run"];
        argv.extend_from_slice(args);
        refused(&argv, want);
    }
}

#[test]
fn load_size_above_the_embedded_servers_max_payload_is_refused() {
    if !have_nats_server() {
        return;
    }
    // Used to count the publishes the server rejected as operations.
    for mode in ["pub", "js-pub", "request", "kv-put"] {
        refused(
            &["load", mode, "--size", "2MiB", "--msgs", "10", "--record"],
            &[
                "--size 2 MiB",
                "embedded nats-server",
                "1 MiB",
                "max_payload",
            ],
        );
    }
}

/// A nats-server of our own on a free loopback port, with `max_payload` set; stopped
/// (killed and reaped) on drop.
struct Server {
    child: Child,
    url: String,
    _conf: tempfile::TempDir,
}

impl Server {
    fn start(max_payload: u64) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = tempfile::tempdir().unwrap();
        let file = conf.path().join("s.conf");
        std::fs::write(
            &file,
            format!("listen: 127.0.0.1:{port}\nmax_payload: {max_payload}\n"),
        )
        .unwrap();
        let bin = diskpulse::broker::find_nats_server(None).unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "nats-server did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Server {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _conf: conf,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn load_size_above_the_max_payload_in_the_servers_info_is_refused() {
    if !have_nats_server() {
        return;
    }
    // 256 KiB, not the default: the limit comes from the server's INFO.
    let s = Server::start(256 << 10);
    let cwd = tempfile::tempdir().unwrap();
    let r = run_in(
        cwd.path(),
        &[
            "load", "pub", "--server", &s.url, "--size", "512k", "--msgs", "100", "--quiet",
        ],
        None,
    );
    assert_refused(
        cwd.path(),
        &r,
        &["--size 512 KiB", &s.url, "256 KiB", "max_payload"],
    );
    // At the limit the same run passes and counts every publish.
    let r = run_in(
        cwd.path(),
        &[
            "load", "pub", "--server", &s.url, "--size", "256k", "--msgs", "100", "--quiet",
            "--json",
        ],
        None,
    );
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(j["roles"][0]["ops"], 100, "{}", j["roles"]);
}

/// Loop devices whose backing file is under `root`.
fn loops_under(root: &Path) -> String {
    let o = Command::new("losetup").arg("-a").output();
    o.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&root.display().to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn lab_up_refuses_roots_and_sizes_it_cannot_use_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("lab");
    let fresh_s = fresh.display().to_string();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file_s = file.display().to_string();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        // Used to exit 1 after creating directories (or a cgroup) there.
        (
            vec![
                "v",
                "--size",
                "1G",
                "--fs",
                "ext4",
                "--root",
                "/proc/diskpulse-lab",
            ],
            vec!["--root /proc/diskpulse-lab", "/var/tmp/diskpulse-lab"],
        ),
        (
            vec![
                "v",
                "--size",
                "1G",
                "--fs",
                "ext4",
                "--root",
                "/sys/fs/cgroup/dp-lab",
            ],
            vec!["--root /sys/fs/cgroup/dp-lab", "kernel"],
        ),
        (
            vec!["v", "--size", "1G", "--fs", "ext4", "--root", &file_s],
            vec!["not a directory"],
        ),
        // 16 x 16 TiB: more than the free space of any disk here.
        (
            vec![
                "v",
                "--size",
                "16384G",
                "--fs",
                "btrfs",
                "--raid",
                "0",
                "--devices",
                "16",
                "--root",
                &fresh_s,
            ],
            vec!["262144 GiB", "free", "smaller --size"],
        ),
        (
            vec!["../x", "--size", "1G", "--fs", "ext4", "--root", &fresh_s],
            vec!["'../x'", "volume name"],
        ),
    ];
    for (args, want) in &cases {
        let cwd = tempfile::tempdir().unwrap();
        let mut argv = vec!["lab", "up"];
        argv.extend_from_slice(args);
        let r = run_in(cwd.path(), &argv, None);
        assert_refused(cwd.path(), &r, want);
        assert!(!fresh.exists(), "{argv:?} created {}", fresh.display());
    }
    assert!(!Path::new("/proc/diskpulse-lab").exists());
    assert!(!Path::new("/sys/fs/cgroup/dp-lab").exists());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert_eq!(loops_under(tmp.path()), "");
    assert_eq!(loops_under(Path::new("/sys")), "");
}

#[test]
fn lab_down_of_a_bad_name_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("lab");
    let root_s = root.display().to_string();
    for (name, want) in [("../x", "'../x'"), ("a/b", "'a/b'"), ("nosuch", "'nosuch'")] {
        let cwd = tempfile::tempdir().unwrap();
        let r = run_in(cwd.path(), &["lab", "down", name, "--root", &root_s], None);
        assert_refused(cwd.path(), &r, &[want]);
        assert!(!root.exists());
    }
}
