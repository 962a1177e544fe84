//! `/proc/meminfo` (dirty and writeback pages) and `/proc/stat` (CPU time incl. iowait).
//!
//! Dirty pages piling up before a flush are half of the burst story: the broker's
//! writes sit in the page cache as `Dirty` until a sync or the flusher turns them into
//! `Writeback` and then into device writes. Both files are re-read with `pread` into a
//! reused buffer ([`ProcFile`]) and parsed in place for the few fields recorded, with no
//! allocation: procfs-core's `Meminfo` and `KernelStats` (kept as the tests' reference)
//! allocated a `String` per line, 113 times a meminfo read, which at 10 ms was most of
//! the recorder's cost beyond its 1 ms loop (issue 27). /proc/vmstat's nr_dirty and
//! nr_writeback are not cheaper here: the kernel takes 65-70 us to print vmstat against
//! 19 us for meminfo (a pread loop, 20,000 reads each, this VM).
//!
//! Units: meminfo values are KiB as the kernel prints them; CPU times are `USER_HZ`
//! ticks (see [`clock_ticks_per_s`]), cumulative since boot.

use std::fs::File;
use std::path::Path;

/// A file held open and re-read from offset 0 into a reused buffer.
pub struct ProcFile {
    file: File,
    path: String,
    buf: Vec<u8>,
}

impl ProcFile {
    pub fn open(path: &Path) -> std::io::Result<ProcFile> {
        Ok(ProcFile {
            file: File::open(path)?,
            path: path.display().to_string(),
            buf: vec![0u8; 8192],
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Reads the whole file; grows the buffer only when it is too small.
    pub fn read(&mut self) -> std::io::Result<&[u8]> {
        let off = crate::reread::pread_whole(&self.file, &mut self.buf)?;
        Ok(&self.buf[..off])
    }
}

/// The meminfo values diskpulse records, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemSample {
    pub dirty_kib: u64,
    pub writeback_kib: u64,
    pub cached_kib: u64,
    pub mem_available_kib: u64,
}

/// CSV columns of [`MemSample`], after `t_ns`.
pub const MEM_COLUMNS: [&str; 4] = [
    "dirty_kib",
    "writeback_kib",
    "cached_kib",
    "mem_available_kib",
];

impl MemSample {
    pub fn values(&self) -> [u64; 4] {
        [
            self.dirty_kib,
            self.writeback_kib,
            self.cached_kib,
            self.mem_available_kib,
        ]
    }
}

/// Parses `/proc/meminfo` text (`Key:   123 kB` lines) for the four keys it needs, in
/// place: no allocation (procfs-core's `Meminfo` made a `String` and a map entry per line,
/// 113 allocations a read: at 10 ms that was most of the meminfo sampler's cost; its
/// verdict is the test's reference). A text without Dirty, Writeback and Cached gives
/// zeros, not a partial sample; MemAvailable (3.14+) is 0 where the kernel has none.
pub fn parse_meminfo(buf: &[u8]) -> MemSample {
    let mut v: [Option<u64>; 4] = [None; 4];
    for line in buf.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let i = match &line[..colon] {
            b"Dirty" => 0,
            b"Writeback" => 1,
            b"Cached" => 2,
            b"MemAvailable" => 3,
            _ => continue,
        };
        v[i] = first_number(&line[colon + 1..]);
    }
    match v {
        [Some(d), Some(w), Some(c), a] => MemSample {
            dirty_kib: d,
            writeback_kib: w,
            cached_kib: c,
            mem_available_kib: a.unwrap_or(0),
        },
        _ => MemSample::default(),
    }
}

/// The first whitespace-separated decimal number of `b`; None if there is none or it
/// overflows.
fn first_number(b: &[u8]) -> Option<u64> {
    let mut it = b
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    parse_u64(it.next()?)
}

fn parse_u64(w: &[u8]) -> Option<u64> {
    if w.is_empty() {
        return None;
    }
    w.iter().try_fold(0u64, |n, &c| {
        if c.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        } else {
            None
        }
    })
}

/// Aggregate CPU times from the first `cpu` line of `/proc/stat`, plus run-queue gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSample {
    /// user, nice, system, idle, iowait, irq, softirq, steal (USER_HZ ticks).
    pub ticks: [u64; 8],
    pub procs_running: u64,
    pub procs_blocked: u64,
}

/// The CPU-time columns of [`CPU_COLUMNS`] (the rest are gauges).
pub const CPU_TICK_COLUMNS: usize = 8;

/// CSV columns of [`CpuSample`], after `t_ns`.
pub const CPU_COLUMNS: [&str; 10] = [
    "user_ticks",
    "nice_ticks",
    "system_ticks",
    "idle_ticks",
    "iowait_ticks",
    "irq_ticks",
    "softirq_ticks",
    "steal_ticks",
    "procs_running",
    "procs_blocked",
];

impl CpuSample {
    pub fn values(&self) -> [u64; 10] {
        let t = &self.ticks;
        [
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[5],
            t[6],
            t[7],
            self.procs_running,
            self.procs_blocked,
        ]
    }
}

/// Parses `/proc/stat` text in place (no allocation; procfs-core's `KernelStats` parsed
/// every per-CPU line and the interrupt counts too, and is the test's reference): the
/// first `cpu ` line's eight times and the `procs_running`/`procs_blocked` gauges. A text
/// whose `cpu ` line has fewer than eight numbers gives zeros.
pub fn parse_stat(buf: &[u8]) -> CpuSample {
    let mut out = CpuSample::default();
    let mut cpu_seen = false;
    for line in buf.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"cpu ") {
            if cpu_seen {
                continue;
            }
            cpu_seen = true;
            let mut n = 0;
            for w in rest
                .split(|c| c.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
            {
                if n == 8 {
                    break;
                }
                match parse_u64(w) {
                    Some(v) => out.ticks[n] = v,
                    None => return CpuSample::default(),
                }
                n += 1;
            }
            if n < 8 {
                return CpuSample::default();
            }
        } else if let Some(rest) = line.strip_prefix(b"procs_running ") {
            out.procs_running = first_number(rest).unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix(b"procs_blocked ") {
            out.procs_blocked = first_number(rest).unwrap_or(0);
        }
    }
    if !cpu_seen {
        return CpuSample::default();
    }
    out
}

/// A process's start time in clock ticks since boot (`<procfs>/PID/stat` field 22,
/// procfs-core's `Stat::starttime`; it finds comm, which may hold spaces and
/// parentheses, by its last ')'). With the pid it names one process even after the pid
/// is reused.
pub fn process_start_ticks(procfs: &Path, pid: u32) -> Option<u64> {
    use procfs_core::FromRead;
    let f = File::open(procfs.join(pid.to_string()).join("stat")).ok()?;
    procfs_core::process::Stat::from_read(f)
        .ok()
        .map(|s| s.starttime)
}

/// `USER_HZ`: ticks per second of the `/proc/stat` CPU times.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields procfs-core requires, as a 6.x kernel prints them (values made up).
    const MEMINFO: &str = "\
MemTotal:       24000000 kB
MemFree:         1000000 kB
MemAvailable:   20000000 kB
Buffers:            2000 kB
Cached:             1234 kB
SwapCached:            0 kB
Active:           300000 kB
Inactive:         400000 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Dirty:              5678 kB
Writeback:            12 kB
Mapped:            50000 kB
Slab:              60000 kB
Committed_AS:     700000 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       30000 kB
VmallocChunk:          0 kB
WritebackTmp:         99 kB
";

    #[test]
    fn a_text_missing_required_fields_gives_zeros_not_garbage() {
        assert_eq!(parse_meminfo(b"Dirty: 5 kB\n"), MemSample::default());
        assert_eq!(parse_stat(b"cpu 1 2 3 4\n"), CpuSample::default());
    }

    #[test]
    fn meminfo_fixture() {
        let m = parse_meminfo(MEMINFO.as_bytes());
        assert_eq!(
            m,
            MemSample {
                dirty_kib: 5678,
                writeback_kib: 12,
                cached_kib: 1234,
                mem_available_kib: 20000000
            }
        );
    }

    #[test]
    fn stat_fixture() {
        let t = b"cpu  10 1 20 300 40 5 6 7 0 0\ncpu0 5 0 10 150 20 2 3 3 0 0\nintr 1 2\nctxt 99\nbtime 1700000000\nprocesses 42\nprocs_running 3\nprocs_blocked 2\n";
        let c = parse_stat(t);
        assert_eq!(c.ticks, [10, 1, 20, 300, 40, 5, 6, 7]);
        assert_eq!((c.procs_running, c.procs_blocked), (3, 2));
    }

    #[test]
    fn start_ticks_from_a_fixture_stat_with_a_comm_holding_parentheses() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("77")).unwrap();
        let mut f: Vec<String> = (4..=52).map(|i| i.to_string()).collect();
        f[22 - 4] = "123456".into();
        let line = format!("77 (a) (b c) S {}\n", f.join(" "));
        std::fs::write(d.path().join("77/stat"), line).unwrap();
        assert_eq!(process_start_ticks(d.path(), 77), Some(123456));
        assert_eq!(process_start_ticks(d.path(), 78), None);
    }

    /// Our parsers and procfs-core's on the same bytes of this machine's files.
    #[test]
    fn real_files_parse_as_procfs_core_parses_them() {
        use procfs_core::{ExplicitSystemInfo, FromBufRead, FromBufReadSI, KernelStats, Meminfo};
        let mut f = ProcFile::open(Path::new("/proc/meminfo")).unwrap();
        let b = f.read().unwrap().to_vec();
        let ours = parse_meminfo(&b);
        let theirs = Meminfo::from_buf_read(&b[..]).unwrap();
        assert_eq!(ours.dirty_kib, theirs.dirty / 1024);
        assert_eq!(ours.writeback_kib, theirs.writeback / 1024);
        assert_eq!(ours.cached_kib, theirs.cached / 1024);
        assert_eq!(
            ours.mem_available_kib,
            theirs.mem_available.unwrap_or(0) / 1024
        );
        let mut s = ProcFile::open(Path::new("/proc/stat")).unwrap();
        let b = s.read().unwrap().to_vec();
        let ours = parse_stat(&b);
        let si = ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: clock_ticks_per_s(),
            page_size: 4096,
            is_little_endian: cfg!(target_endian = "little"),
        };
        let k = KernelStats::from_buf_read(&b[..], &si).unwrap();
        let t = &k.total;
        let o = |v: Option<u64>| v.unwrap_or(0);
        assert_eq!(
            ours.ticks,
            [
                t.user,
                t.nice,
                t.system,
                t.idle,
                o(t.iowait),
                o(t.irq),
                o(t.softirq),
                o(t.steal)
            ]
        );
        assert_eq!(ours.procs_running, k.procs_running.unwrap_or(0) as u64);
        assert_eq!(ours.procs_blocked, k.procs_blocked.unwrap_or(0) as u64);
    }

    #[test]
    fn keys_are_whole_words_and_numbers_are_checked() {
        // WritebackTmp and SwapCached are other keys; a value past u64 is no value.
        let t =
            "Cached: 1 kB\nSwapCached: 7 kB\nDirty: 2 kB\nWritebackTmp: 9 kB\nWriteback: 3 kB\n";
        assert_eq!(
            parse_meminfo(t.as_bytes()),
            MemSample {
                dirty_kib: 2,
                writeback_kib: 3,
                cached_kib: 1,
                mem_available_kib: 0
            }
        );
        let t = "Cached: 1 kB\nDirty: 99999999999999999999999 kB\nWriteback: 3 kB\n";
        assert_eq!(parse_meminfo(t.as_bytes()), MemSample::default());
        assert_eq!(parse_stat(b"cpu  1 2 3 4 5 6 7 x\n"), CpuSample::default());
    }

    #[test]
    fn real_files_parse() {
        let mut f = ProcFile::open(Path::new("/proc/meminfo")).unwrap();
        let m = parse_meminfo(f.read().unwrap());
        assert!(m.mem_available_kib > 0);
        let mut s = ProcFile::open(Path::new("/proc/stat")).unwrap();
        let c = parse_stat(s.read().unwrap());
        assert!(c.ticks[3] > 0, "idle ticks");
    }
}
