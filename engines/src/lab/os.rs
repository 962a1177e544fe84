//! What lab volumes ask of the OS: running tools from argument vectors (losetup,
//! mkfs.*, mount, umount, btrfs), who backs a loop device, what is mounted where,
//! cgroup v1 blkio files, and whether a process is still the one that wrote a state
//! entry.
//!
//! Every function here only reads, except [`run_tool`] (which runs what it is given)
//! and the small cgroup writers. Deciding whether something is ours happens in
//! `super`, from these facts.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::Interrupted;

/// Which package holds a tool, for the "not found" message.
fn package_of(tool: &str) -> &'static str {
    match tool {
        "losetup" | "mount" | "umount" | "wipefs" => "util-linux (and mount)",
        "mkfs.ext4" => "e2fsprogs",
        "mkfs.xfs" => "xfsprogs",
        "mkfs.btrfs" | "btrfs" => "btrfs-progs",
        _ => "the package that provides it",
    }
}

/// How long a lab tool may run before it is killed (a mount of a device that does not
/// answer, a losetup stuck on a busy loop driver): formatting a large volume takes
/// minutes, the rest seconds.
fn tool_timeout(tool: &str) -> Duration {
    if tool.starts_with("mkfs") {
        Duration::from_secs(600)
    } else {
        Duration::from_secs(120)
    }
}

/// Runs `argv` (never through a shell) in its own process group, so a Ctrl-C in the
/// terminal reaches diskpulse alone and diskpulse decides what happens to the tool
/// (a `kill -9` of diskpulse kills the tool too: PR_SET_PDEATHSIG), up to
/// [`tool_timeout`] (then it is killed and the error names it; see `collectors::exec`).
/// When `stop` is set while the tool runs and `killable` is true, the tool is killed and
/// the call returns [`Interrupted`]; tools that are not killable (umount, losetup -d:
/// short, and better finished) are waited for. Returns stdout on success; on failure an
/// error with the command line and its stderr.
pub(crate) fn run_tool(
    argv: &[&str],
    killable: bool,
    stop: Option<&Arc<AtomicBool>>,
) -> anyhow::Result<String> {
    use collectors::exec::{output_within, ExecError, Limit};
    let (prog, args) = argv.split_first().expect("argv has a program");
    let mut cmd = Command::new(prog);
    cmd.args(args);
    // SAFETY: prctl is async-signal-safe. If diskpulse is killed (-9), its tools die with
    // it instead of formatting or mounting after it is gone.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let what = format!("`{}`", argv.join(" "));
    let mut limit = Limit::new(
        tool_timeout(prog),
        &what,
        "is the device or file system answering? (`dmesg` may say why); then `diskpulse lab down` cleans up",
    );
    limit.stop = stop.filter(|_| killable).map(|s| s.as_ref());
    let done = match output_within(&mut cmd, &limit) {
        Ok(d) => d,
        Err(ExecError::NotFound { .. }) => {
            bail!(
                "{prog} not found: install {} (scripts/setup does)",
                package_of(prog)
            )
        }
        Err(ExecError::Interrupted { .. }) => return Err(anyhow!(Interrupted::default())),
        Err(e) => return Err(anyhow!(e)),
    };
    let out = String::from_utf8_lossy(&done.stdout).to_string();
    let err = String::from_utf8_lossy(&done.stderr).to_string();
    if !done.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            done.status,
            err.trim()
        );
    }
    Ok(out)
}

/// Makes `cmd`'s child get SIGKILL when diskpulse dies (`kill -9` included), so no broker
/// or phase child outlives the run that started it (issue 10 point 4: a `kill -9`ed demo
/// left its nats-server running). The kernel sends the signal when the *thread* that
/// spawned the child ends: spawn from a thread that outlives the child (the main thread,
/// a runtime worker, or the blocking thread that waits for it), never from a short-lived
/// one. A parent that died between fork and the prctl is caught by comparing getppid.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: prctl, getppid and _exit are async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            Ok(())
        });
    }
}

/// `/dev/loop12` -> `loop12`; `None` for anything that is not a loop device path.
/// State files are input: a name that is not exactly this shape is never acted on.
pub(crate) fn loop_name(dev: &str) -> Option<&str> {
    let n = dev.strip_prefix("/dev/")?;
    let digits = n.strip_prefix("loop")?;
    (!digits.is_empty() && digits.len() <= 7 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then_some(n)
}

/// `(major, minor)` of a block device from `/sys/block/<name>/dev`.
pub(crate) fn dev_numbers(name: &str) -> anyhow::Result<(u32, u32)> {
    let n = collectors::sysfs::BlockSysfs::default()
        .dev_num(name)
        .ok_or_else(|| anyhow!("/sys/class/block/{name}/dev: missing or not MAJ:MIN"))?;
    Ok((n.major, n.minor))
}

/// What backs a loop device now: `None` when it is not attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backing {
    /// `/sys/block/loopN/loop/backing_file`: the path at attach time; the kernel appends
    /// " (deleted)" once that file is unlinked.
    pub path: String,
    /// Inode and device of the backing file (LOOP_GET_STATUS64), when readable.
    pub inode: Option<(u64, u64)>,
    /// `/sys/block/loopN/loop/dio`: the loop device reads and writes its backing file
    /// with O_DIRECT.
    pub direct_io: bool,
}

/// `struct loop_info64` from `<linux/loop.h>`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// Reads what backs `/dev/loopN` (sysfs, then the read-only LOOP_GET_STATUS64 ioctl
/// for the inode). `dev` must pass [`loop_name`].
pub(crate) fn loop_backing(dev: &str) -> Option<Backing> {
    let name = loop_name(dev)?;
    let path = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let path = path.trim_end_matches('\n').to_string();
    let direct_io = fs::read_to_string(format!("/sys/block/{name}/loop/dio"))
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    let inode = fs::File::open(dev).ok().and_then(|f| {
        use std::os::unix::io::AsRawFd;
        // SAFETY: all-zero is a valid loop_info64; the kernel fills it.
        let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
        // SAFETY: LOOP_GET_STATUS64 reads into a loop_info64 the size of ours.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) };
        (r == 0).then_some((info.lo_device, info.lo_inode))
    });
    Some(Backing {
        path,
        inode,
        direct_io,
    })
}

/// Whether `b` is the file `image`: the same path (or that path, deleted) and, when both
/// are known, the same inode.
pub(crate) fn backed_by(b: &Backing, image: &Path) -> bool {
    let img = image.as_os_str().as_bytes();
    let p = b.path.as_bytes();
    let deleted = p.strip_suffix(b" (deleted)") == Some(img);
    if p != img && !deleted {
        return false;
    }
    match (fs::metadata(image), b.inode) {
        (Ok(m), Some((_dev, ino))) => m.ino() == ino,
        // The path matched and the file is gone (or the ioctl was refused): the path
        // alone is ours, as only diskpulse creates files under its images directory.
        _ => true,
    }
}

use collectors::mounts::Mount;

/// The mounts now, in mount order (the last one at a point is the one on top).
pub fn mounts() -> anyhow::Result<Vec<Mount>> {
    collectors::mounts::read(Path::new("/proc")).context("reading /proc/self/mountinfo")
}

/// The mount on top at `point`, if any.
pub(crate) fn top_mount_at(point: &Path) -> anyhow::Result<Option<Mount>> {
    Ok(collectors::mounts::top_at(&mounts()?, point).cloned())
}

/// What the one block-device write gate ([`collectors::gate`], shared with probe and
/// check) says against writing to `/dev/loopN`: empty for a device fit for mkfs.
pub fn write_refusals(dev: &str) -> anyhow::Result<Vec<collectors::gate::Refusal>> {
    let name = loop_name(dev).ok_or_else(|| anyhow!("{dev} is not a loop device"))?;
    let num = collectors::gate::rdev_of(Path::new(dev))
        .ok_or_else(|| anyhow!("{dev} is not a block device node"))?;
    let d = collectors::gate::BlockDev {
        path: Path::new(dev),
        name,
        num,
    };
    Ok(collectors::gate::refusals(
        &d,
        Path::new("/sys"),
        Path::new("/proc"),
    ))
}

/// A process's start time in clock ticks since boot (`/proc/PID/stat` field 22): with
/// the pid it names one process, even after the pid is reused.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    collectors::procstat::process_start_ticks(Path::new("/proc"), pid)
}

/// Whether the process that recorded `(pid, start_ticks)` is still running.
pub fn process_alive(pid: u32, start_ticks: u64) -> bool {
    process_start_ticks(pid) == Some(start_ticks)
}

/// Waits until `dev` is no longer attached (a detach of a device someone still holds
/// open completes when they close it); true when it is gone within `timeout`.
pub(crate) fn wait_detached(dev: &str, timeout: Duration) -> bool {
    let t0 = Instant::now();
    loop {
        if loop_backing(dev).is_none() {
            return true;
        }
        if t0.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids in a cgroup v1 directory.
fn cgroup_pids(cg: &Path) -> Vec<u32> {
    fs::read_to_string(cg.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Moves every process of `cg` into `parent` (the blkio root), then removes `cg`.
/// Processes that exit meanwhile are fine; retries for up to a second.
pub fn remove_cgroup(cg: &Path, parent: &Path) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        for pid in cgroup_pids(cg) {
            // ESRCH: it exited. Anything else shows up as rmdir's EBUSY below.
            let _ = fs::write(parent.join("cgroup.procs"), pid.to_string());
        }
        match fs::remove_dir(cg) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if t0.elapsed() < Duration::from_secs(1) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(anyhow!(e).context(format!(
                    "removing cgroup {} (pids still in it: {:?})",
                    cg.display(),
                    cgroup_pids(cg)
                )))
            }
        }
    }
}

/// Bytes free for unprivileged users on the file system holding `p`.
pub fn free_bytes(p: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    (r == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

/// The name of the kernel pseudo file system holding `p` (proc, sysfs, cgroup, ...),
/// where no image can be kept; `None` for file systems that hold files.
pub(crate) fn pseudo_fs(p: &Path) -> Option<&'static str> {
    collectors::fstype::pseudo_name(p)
}

/// Whether `p` is on a file system mounted read-only.
pub fn read_only(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs writes into the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    r == 0 && s.f_flag & libc::ST_RDONLY != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_names_are_exact() {
        assert_eq!(loop_name("/dev/loop0"), Some("loop0"));
        assert_eq!(loop_name("/dev/loop123"), Some("loop123"));
        for bad in [
            "/dev/loop",
            "loop0",
            "/dev/loop0p1",
            "/dev/vda",
            "/dev/loop1/../vda",
            "/dev/loop-1",
            "/dev/loop 1",
        ] {
            assert_eq!(loop_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn start_ticks_of_this_process_and_of_none() {
        let me = std::process::id();
        let t = process_start_ticks(me).expect("own stat");
        assert!(process_alive(me, t));
        assert!(
            !process_alive(me, t + 1),
            "same pid, other start: not alive"
        );
        assert!(!process_alive(u32::MAX - 1, t));
    }
}
