//! Shared test helpers: real loop devices (root and losetup needed), throttling cgroups
//! ([`cgroup`]), and the binary under test.
//!
//! Every prerequisite a test needs (root, losetup, nats-server, fio, mkfs.btrfs,
//! mkfs.xfs, tracefs, a block I/O cgroup controller, chromium) is checked through
//! [`skip`]: without it the test says why and returns; under the strict variable that
//! `.ci/run` sets (`CI=true` or `DISKPULSE_STRICT=1`) it fails instead, so a CI run
//! that passes skipped nothing.
#![allow(dead_code)]

pub mod cgroup;
pub mod chromium;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a command from an argument vector; panics with its stderr on failure.
pub fn sh(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {prog}: {e}"));
    assert!(
        out.status.success(),
        "{prog} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether a missing prerequisite fails the test: `CI=true` or `DISKPULSE_STRICT=1`
/// (`.ci/run` sets both).
pub fn strict() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("DISKPULSE_STRICT").is_ok_and(|v| v == "1")
}

/// A missing prerequisite: says why the test skips (returns false, for
/// `if !x && !skip(..)`-style checks), and fails it instead under [`strict`] (CI
/// installs everything, so CI skips nothing by construction).
pub fn skip(why: &str) -> bool {
    if strict() {
        panic!(
            "a prerequisite is missing (CI=true or DISKPULSE_STRICT=1 makes that a failure): {why}"
        );
    }
    eprintln!("skipping: {why}");
    false
}

/// Whether this process is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether this process is root; skips (see [`skip`]) saying `what` needs it.
pub fn need_root(what: &str) -> bool {
    is_root() || skip(&format!("{what} needs root"))
}

/// Whether `tool` runs here (`--version` or `-V`); skips naming the Debian package.
pub fn have_tool(tool: &str, package: &str) -> bool {
    let runs = |flag: &str| Command::new(tool).arg(flag).output().is_ok();
    runs("--version")
        || runs("-V")
        || skip(&format!(
            "{tool} not found (apt-get install {package}; scripts/setup does)"
        ))
}

/// Whether loop-device tests can run here; prints why not.
pub fn can_use_loop_devices() -> bool {
    need_root("loop device tests") && have_tool("losetup", "util-linux")
}

/// A loop device over a sparse file in /var/tmp, optionally formatted and mounted.
/// Dropping it unmounts, detaches and removes the file.
pub struct LoopDev {
    pub image: PathBuf,
    pub dev: String,
    pub mount: Option<PathBuf>,
}

impl LoopDev {
    pub fn new(size: &str) -> LoopDev {
        let image = PathBuf::from(format!(
            "/var/tmp/diskpulse-test-{}-{}.img",
            std::process::id(),
            unique_suffix()
        ));
        // create_new: a name another test (or a leftover) holds fails here, loudly, instead
        // of two tests sharing one image, one mount point and each other's teardown.
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&image)
        {
            panic!("{}: {e} (test images must not be shared)", image.display());
        }
        sh("truncate", &["-s", size, image.to_str().unwrap()]);
        let dev = sh("losetup", &["-f", "--show", image.to_str().unwrap()]);
        LoopDev {
            image,
            dev,
            mount: None,
        }
    }

    /// `loop3` for `/dev/loop3`.
    pub fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    /// Formats ext4 (inode tables written now, not by a background thread later) and mounts.
    pub fn mount_ext4(&mut self) -> PathBuf {
        sh(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &self.dev,
            ],
        );
        let m = PathBuf::from(format!("{}.mnt", self.image.display()));
        std::fs::create_dir_all(&m).unwrap();
        sh("mount", &[&self.dev, m.to_str().unwrap()]);
        self.mount = Some(m.clone());
        m
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        if let Some(m) = &self.mount {
            let _ = Command::new("umount").arg(m).status();
            let _ = std::fs::remove_dir(m);
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A name part no other test of this process (a counter) nor an earlier process with the same
/// pid (the clock) uses. The clock alone is not enough: two tests that start together read the
/// same value where CLOCK_MONOTONIC ticks coarsely, and then share an image file, a mount point
/// and a cgroup (CI saw one test unmount and delete another's volume mid-check).
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        NEXT.fetch_add(1, Ordering::Relaxed),
        collectors::clock::monotonic_ns() % 1_000_000_007
    )
}

/// Writes `total` bytes of zeros to `path` with O_DIRECT in `chunk`-byte writes.
pub fn write_direct(path: &Path, total: usize, chunk: usize) {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    let layout = std::alloc::Layout::from_size_align(chunk, 4096).unwrap();
    // SAFETY: layout has non-zero size; the buffer is freed below.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    let mut off = 0usize;
    while off < total {
        // SAFETY: buf is valid for chunk bytes and 4096-aligned as O_DIRECT needs.
        let n = unsafe {
            libc::pwrite(
                f.as_raw_fd(),
                buf as *const libc::c_void,
                chunk,
                off as libc::off_t,
            )
        };
        assert_eq!(n, chunk as isize, "O_DIRECT write to {}", path.display());
        off += chunk;
    }
    // SAFETY: allocated above with the same layout.
    unsafe { std::alloc::dealloc(buf, layout) };
}

pub fn diskpulse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_diskpulse"))
}

pub fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The summary.json entry of one device.
pub fn device<'a>(summary: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    summary["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in summary: {summary:#}"))
}

/// Whether nats-server is here; prints why not (CI installs it, so CI skips nothing).
pub fn have_nats_server() -> bool {
    match diskpulse::broker::find_nats_server(None) {
        Ok(_) => true,
        Err(e) => skip(&format!("{e:#}")),
    }
}

/// Whether Debian's rabbitmq-server is installed (scripts/setup installs it); skips (see
/// [`skip`]) saying how to install it.
pub fn have_rabbitmq() -> bool {
    match diskpulse::broker::rabbitmq::find_rabbitmq_server(None) {
        Ok(_) => true,
        Err(e) => skip(&format!("{e:#}")),
    }
}

/// Whether a process exists (signal 0).
pub fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// btrfs RAID 1 over two fresh loop devices, mounted; unmounted and detached on drop.
/// `None` (with the reason printed) without mkfs.btrfs.
pub struct BtrfsRaid1 {
    pub mount: String,
    // Dropped after the unmount in Drop::drop: the file system goes first.
    pub a: LoopDev,
    pub b: LoopDev,
}

impl BtrfsRaid1 {
    pub fn new() -> Option<BtrfsRaid1> {
        if !have_tool("mkfs.btrfs", "btrfs-progs") {
            return None;
        }
        let a = LoopDev::new("300M");
        let b = LoopDev::new("300M");
        sh(
            "mkfs.btrfs",
            &["-q", "-f", "-d", "raid1", "-m", "raid1", &a.dev, &b.dev],
        );
        let mount = format!("{}.btrfs", a.image.display());
        std::fs::create_dir_all(&mount).unwrap();
        sh("mount", &[&a.dev, &mount]);
        Some(BtrfsRaid1 { mount, a, b })
    }
}

impl Drop for BtrfsRaid1 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// A JetStream nats-server of our own on a free loopback port, its store in /var/tmp;
/// killed and reaped on drop (continued first, in case a test stopped it).
pub struct JsServer {
    pub child: std::process::Child,
    pub url: String,
    _store: tempfile::TempDir,
}

impl JsServer {
    /// Started and answering: the port it listens on greets with NATS's `INFO` line. A
    /// port picked free can be taken before the server binds it (then the server exits
    /// and something else answered the probe connect): such a start is tried again on
    /// another port.
    pub fn start() -> JsServer {
        for _ in 0..3 {
            if let Some(s) = Self::try_start() {
                return s;
            }
        }
        panic!("nats-server did not start on a free port in 3 tries");
    }

    fn try_start() -> Option<JsServer> {
        use std::io::Read;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = tempfile::tempdir_in("/var/tmp").unwrap();
        let bin = diskpulse::broker::find_nats_server(None).unwrap();
        let mut child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return None;
            }
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut hello = [0u8; 4];
                if c.read_exact(&mut hello).is_ok() && &hello == b"INFO" {
                    break;
                }
            }
            if t0.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Some(JsServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _store: store,
        })
    }
}

impl Drop for JsServer {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the pid is our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// meta.json `chunks.files[file]` of the run in `run`, checked as a `--chunk 1s --keep`
/// run must have it: at least `min_closed` chunks closed and some dropped, a dropped
/// chunk gone from the disk and a kept one there, a closed chunk in `chunks/` holding
/// rows of one aligned second (and, with `first_after_zero`, a first row after 0: its
/// `t_ns` was found in the row). What was kept and where the dropped ones end.
#[allow(dead_code)]
pub struct ChunkList {
    pub closed: usize,
    pub dropped: usize,
    pub kept_rows: u64,
    pub kept_bytes: u64,
    /// The last row of the newest dropped chunk.
    pub dropped_to: u64,
}

#[allow(dead_code)]
pub fn check_chunk_list(
    run: &Path,
    meta: &serde_json::Value,
    file: &str,
    min_closed: usize,
    first_after_zero: bool,
) -> ChunkList {
    let s = 1_000_000_000u64;
    let c = &meta["chunks"]["files"][file];
    let closed = c["closed"]
        .as_array()
        .unwrap_or_else(|| panic!("meta.json chunks.files has no {file}: {}", meta["chunks"]));
    let dropped = c["dropped"].as_array().unwrap();
    assert!(
        closed.len() >= min_closed,
        "{file}: {} chunks closed: {c}",
        closed.len()
    );
    assert!(!dropped.is_empty(), "{file}: --keep dropped none: {c}");
    let (mut kept_rows, mut kept_bytes) = (0, 0);
    for c in closed {
        let name = c["file"].as_str().unwrap();
        if dropped.iter().any(|d| d["file"] == name) {
            assert!(!run.join(name).exists(), "{name} was dropped but is there");
            continue;
        }
        assert!(run.join(name).exists(), "{name} is listed but missing");
        if name.starts_with("chunks/") {
            let (a, b) = (
                c["first_t_ns"].as_u64().unwrap(),
                c["last_t_ns"].as_u64().unwrap(),
            );
            if first_after_zero {
                assert!(
                    a > 0,
                    "{name}: a chunk's first t_ns is 0 (read from the node cell?)"
                );
            }
            assert_eq!(a / s, b / s, "{name}: rows of more than one second: {c}");
        }
        kept_rows += c["rows"].as_u64().unwrap();
        kept_bytes += c["bytes"].as_u64().unwrap();
    }
    let dropped_to = dropped
        .iter()
        .map(|d| d["last_t_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    eprintln!(
        "{file}: {} chunks closed, {} dropped, {kept_rows} rows kept in {kept_bytes} bytes ({:.1} a row)",
        closed.len(),
        dropped.len(),
        kept_bytes as f64 / kept_rows.max(1) as f64
    );
    ChunkList {
        closed: closed.len(),
        dropped: dropped.len(),
        kept_rows,
        kept_bytes,
        dropped_to,
    }
}

/// Every file under `dir` (recursively; `.gz` read through) whose bytes contain `needle`,
/// and with `names` every path whose name does. Fails when `dir` holds fewer than
/// `min_files` files (a run that made nothing finds no secret either).
pub fn files_containing(dir: &Path, needle: &str, names: bool, min_files: usize) -> Vec<PathBuf> {
    use std::io::Read;
    let mut hits = vec![];
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if names && p.to_string_lossy().contains(needle) {
                hits.push(p.clone());
            }
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            seen += 1;
            let mut bytes = std::fs::read(&p).unwrap();
            if p.extension().is_some_and(|x| x == "gz") {
                let mut out = vec![];
                flate2::read::MultiGzDecoder::new(&bytes[..])
                    .read_to_end(&mut out)
                    .unwrap();
                bytes = out;
            }
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                hits.push(p);
            }
        }
    }
    assert!(
        seen >= min_files,
        "{} holds {seen} files: did the run write anything?",
        dir.display()
    );
    hits
}
