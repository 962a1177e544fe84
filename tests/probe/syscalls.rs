//! What the probe asks of the kernel: the syncs it issues, counted by tracefs, and
//! what it does when io_uring is refused (seccomp).

use super::*;

/// A tracefs instance that records some events of one process tree only.
struct Tracer {
    dir: PathBuf,
    events: Vec<String>,
}

impl Tracer {
    fn new(events: &[&str]) -> Option<Tracer> {
        // tracefs is scripts/setup's to mount: a test changes no host mount (issue 25).
        // Without it the callers skip, naming the mount command.
        let root = Path::new("/sys/kernel/tracing");
        let dir = root.join(format!(
            "instances/diskpulse-test-{}-{}",
            std::process::id(),
            events.len()
        ));
        std::fs::create_dir(&dir).ok()?;
        let t = Tracer {
            dir,
            events: events.iter().map(|s| s.to_string()).collect(),
        };
        std::fs::write(t.dir.join("options/event-fork"), "1").ok()?;
        // The pid filter alone has let other processes' events through here (busy
        // machines): each line also carries its thread group id, and we count ours.
        std::fs::write(t.dir.join("options/record-tgid"), "1").ok()?;
        std::fs::write(t.dir.join("buffer_size_kb"), "8192").ok()?;
        for e in events {
            std::fs::write(t.dir.join(format!("events/{e}/enable")), "1").ok()?;
        }
        Some(t)
    }

    /// Runs `argv` in this instance's pid filter (a shell that adds itself, then execs);
    /// returns its output and its pid (the pid of `argv` after the exec).
    fn run(&self, argv: &[&str], dir: &Path) -> (Output, u32) {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {}/set_event_pid && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .args(argv)
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        (child.wait_with_output().unwrap(), pid)
    }

    /// Lines with `needle` from threads of process `tgid`.
    fn count(&self, needle: &str, tgid: u32) -> usize {
        let ours = format!("({tgid:>7})");
        std::fs::read_to_string(self.dir.join("trace"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(needle) && l.contains(&ours))
            .count()
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        for e in &self.events {
            let _ = std::fs::write(self.dir.join(format!("events/{e}/enable")), "0");
        }
        if std::env::var_os("DISKPULSE_KEEP_TRACE").is_none() {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

#[test]
fn fdatasync_1_issues_one_fdatasync_per_write_counted_by_tracefs() {
    if !need_root("tracefs") {
        return;
    }
    let Some(t) = Tracer::new(&[
        "syscalls/sys_enter_fdatasync",
        "syscalls/sys_enter_pwrite64",
    ]) else {
        skip("no tracefs syscall events here (mount -t tracefs nodev /sys/kernel/tracing; a kernel with CONFIG_FTRACE_SYSCALLS)");
        return;
    };
    let d = scratch();
    let f = d.path().join("wal.dat");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let (o, pid) = t.run(
        &[
            bin,
            "probe",
            "--filename",
            f.to_str().unwrap(),
            "--preset",
            "wal",
            "--runtime",
            "1s",
            "--output-format",
            "json",
        ],
        d.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap() as usize;
    let syncs = j["jobs"][0]["sync"]["total_ios"].as_u64().unwrap() as usize;
    assert!(writes > 10, "{writes} writes in 1 s");
    let traced_syncs = t.count("sys_fdatasync(", pid);
    let traced_writes = t.count("sys_pwrite64(", pid);
    eprintln!("{writes} writes; tracefs: {traced_syncs} fdatasync, {traced_writes} pwrite64");
    // The layout uses 1 MiB pwrites and one fsync (not fdatasync): 64 MiB = 64 of them.
    assert_eq!(
        traced_syncs, writes,
        "fdatasync calls seen by the kernel vs writes we report"
    );
    assert_eq!(syncs, writes);
    assert_eq!(
        traced_writes,
        writes + 64,
        "pwrite64 calls: the measured ones + 64 of layout"
    );
}

#[test]
fn io_uring_fdatasync_is_one_fsync_op_per_write_counted_by_tracefs() {
    if !need_root("tracefs") {
        return;
    }
    let Some(t) = Tracer::new(&["io_uring/io_uring_submit_req"]) else {
        skip("no io_uring tracepoints here (mount -t tracefs nodev /sys/kernel/tracing; a kernel with io_uring)");
        return;
    };
    let d = scratch();
    let f = d.path().join("wal.dat");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let (o, pid) = t.run(
        &[
            bin,
            "probe",
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "16MiB",
            "--rw",
            "write",
            "--bs",
            "8k",
            "--iodepth",
            "4",
            "--fdatasync",
            "1",
            "--runtime",
            "1s",
            "--time-based",
            "--output-format",
            "json",
        ],
        d.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap() as usize;
    assert!(writes > 10, "{writes}");
    assert_eq!(
        t.count("opcode FSYNC", pid),
        writes,
        "IORING_OP_FSYNC submissions"
    );
    assert_eq!(
        t.count("opcode WRITE_FIXED", pid),
        writes,
        "IORING_OP_WRITE_FIXED submissions"
    );
}

/// Makes io_uring_setup fail with EPERM in the child, as a container's seccomp profile or
/// kernel.io_uring_disabled=2 would (without changing the machine-wide setting).
fn deny_io_uring(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let nr = libc::SYS_io_uring_setup as u32;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // SAFETY: pre_exec runs in the child between fork and exec; prctl is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            let prog = [
                f(LD_W_ABS, 0, 0, 4),
                f(JEQ_K, 0, 3, ARCH),
                f(LD_W_ABS, 0, 0, 0),
                f(JEQ_K, 0, 1, nr),
                f(RET_K, 0, 0, 0x0005_0000 | libc::EPERM as u32),
                f(RET_K, 0, 0, 0x7fff_0000),
            ];
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
}

#[test]
fn without_io_uring_the_probe_falls_back_to_sync_or_stops_if_asked_for_it() {
    let d = scratch();
    let f = d.path().join("p.dat");
    let base = [
        "probe",
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "4MiB",
        "--rw",
        "randread",
        "--iodepth",
        "8",
        "--runtime",
        "300ms",
        "--time-based",
        "--output-format",
        "json",
    ];
    let mut c = diskpulse();
    c.args(base);
    deny_io_uring(&mut c);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("io_uring is not available") && err.contains("--ioengine sync"),
        "{err}"
    );
    let j = json_of(&o);
    assert_eq!(j["jobs"][0]["job options"]["ioengine"], "psync");
    assert_eq!(j["jobs"][0]["job options"]["iodepth"], "1");
    assert!(j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0);

    let mut c = diskpulse();
    c.args(base).args(["--ioengine", "io_uring"]);
    deny_io_uring(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("io_uring is not available") && e.contains("Operation not permitted"),
        "{e}"
    );
    assert!(!f.exists());
}
