//! The machinery of tests/hardening3_sweep.rs: running the binary with a deadline in a
//! process group of its own, what every case must show, the fixtures (a finished
//! recording, a FIFO), the tally, and small tmpfs mounts.
#![allow(dead_code)]

use super::common::*;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one run of the binary did.
pub struct Out {
    pub code: Option<i32>,
    pub out: String,
    pub err: String,
    pub hung: bool,
    pub left: bool,
}

/// Runs `c` (made by [`dp`]) in a process group of its own, killed (the whole group)
/// after `secs`.
pub fn go(c: &mut Command, secs: u64) -> Out {
    let mut child = c.process_group(0).spawn().unwrap();
    let pgid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut hung = false;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            hung = true;
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = child.wait_with_output().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // SAFETY: signal 0 only asks whether the group still has a process.
    let left = unsafe { libc::kill(-pgid, 0) } == 0;
    if left {
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    Out {
        code: o.status.code(),
        out: String::from_utf8_lossy(&o.stdout).into(),
        err: String::from_utf8_lossy(&o.stderr).into(),
        hung,
        left,
    }
}

/// The binary with `args` (OsStrings, so a case can pass bytes that are not UTF-8), no
/// broker in its environment, stdin /dev/null, stdout and stderr piped.
pub fn dp<I: IntoIterator<Item = S>, S: Into<OsString>>(cwd: &Path, args: I) -> Command {
    let mut c = diskpulse();
    c.args(args.into_iter().map(Into::into))
        .current_dir(cwd)
        .env("RUST_BACKTRACE", "1")
        .env_remove("NATS_URL")
        .env_remove("DISKPULSE_RUN_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// What must hold of every case, then its exit code and the pieces of its stderr.
pub fn expect(o: &Out, code: i32, needles: &[&str]) -> Result<(), String> {
    let first: String = o
        .err
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(300)
        .collect();
    let mut wrong = vec![];
    if o.hung {
        wrong.push("hung (killed at its deadline)".to_string());
    } else if o.code != Some(code) {
        wrong.push(format!("exit {:?}, expected {code}", o.code));
    }
    if o.err.contains("panicked at") {
        wrong.push("panicked".into());
    }
    if o.left {
        wrong.push("left a process behind".into());
    }
    for n in needles {
        if !o.err.contains(n) {
            wrong.push(format!("stderr lacks {n:?}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{} | stderr: {first}", wrong.join("; ")))
    }
}

/// The fixtures every case may use (all under one temporary directory).
pub struct Fx {
    pub root: tempfile::TempDir,
    /// A finished recording (never changed: cases copy it).
    pub run: PathBuf,
    /// A FIFO nobody writes to.
    pub fifo: PathBuf,
}

impl Fx {
    pub fn new() -> Fx {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run");
        let o = go(
            dp(
                root.path(),
                ["record", "--duration", "300ms", "--no-progress"],
            )
            .arg("--out")
            .arg(&run),
            30,
        );
        assert_eq!(o.code, Some(0), "the fixture recording: {}", o.err);
        let fifo = root.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        Fx { root, run, fifo }
    }

    /// A fresh, empty directory of the case's own.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.root.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A copy of the finished recording at `to`, without what `report` writes.
    pub fn copy_run(&self, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(&self.run).unwrap().flatten() {
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
}

/// The cases run so far and what misbehaved, by class.
#[derive(Default)]
pub struct Sweep {
    pub cases: Vec<(&'static str, String, Option<String>)>,
}

impl Sweep {
    pub fn case(&mut self, class: &'static str, name: impl Into<String>, r: Result<(), String>) {
        self.cases.push((class, name.into(), r.err()));
    }
}

/// Substitutes `{R}` (the recording), `{P}` (the FIFO), `{T}` (the case's directory) and
/// `{X}` (two bytes that are not UTF-8) in an argument.
pub fn arg(a: &str, fx: &Fx, t: &Path) -> OsString {
    let s = a
        .replace("{R}", fx.run.to_str().unwrap())
        .replace("{P}", fx.fifo.to_str().unwrap())
        .replace("{T}", t.to_str().unwrap());
    let mut bytes = vec![];
    for (i, part) in s.split("{X}").enumerate() {
        if i > 0 {
            bytes.extend_from_slice(b"\xff\xfe");
        }
        bytes.extend_from_slice(part.as_bytes());
    }
    OsString::from_vec(bytes)
}

/// A tmpfs of `kib` KiB mounted (read-only with `ro`) on a fresh directory; unmounted on
/// drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn new(at: PathBuf, kib: u32, ro: bool) -> Tmpfs {
        std::fs::create_dir_all(&at).unwrap();
        let opts = format!("size={kib}k{}", if ro { ",ro" } else { "" });
        sh(
            "mount",
            &["-t", "tmpfs", "-o", &opts, "tmpfs", at.to_str().unwrap()],
        );
        Tmpfs(at)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Files `report` or `export` leave half-written: their temporary names.
pub fn temporaries(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.contains("diskpulse-tmp") || n.starts_with(".diskpulse"))
                .collect()
        })
        .unwrap_or_default()
}
