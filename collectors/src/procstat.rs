//! `/proc/meminfo` (dirty and writeback pages) and `/proc/stat` (CPU time incl. iowait).
//!
//! Dirty pages piling up before a flush are half of the burst story: the broker's
//! writes sit in the page cache as `Dirty` until a sync or the flusher turns them into
//! `Writeback` and then into device writes. Both files are re-read with `pread` into a
//! reused buffer and parsed without allocating.
//!
//! Units: meminfo values are KiB as the kernel prints them; CPU times are `USER_HZ`
//! ticks (see [`clock_ticks_per_s`]), cumulative since boot.

use std::fs::File;
use std::os::unix::fs::FileExt;
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
        let mut off = 0;
        loop {
            if off == self.buf.len() {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
            let n = self.file.read_at(&mut self.buf[off..], off as u64)?;
            if n == 0 {
                break;
            }
            off += n;
        }
        Ok(&self.buf[..off])
    }
}

use crate::diskstats::parse_u64;

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

/// Parses `/proc/meminfo` text (`Key:   123 kB` lines).
pub fn parse_meminfo(buf: &[u8]) -> MemSample {
    let mut m = MemSample::default();
    for line in buf.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let key = &line[..colon];
        let slot = match key {
            b"Dirty" => &mut m.dirty_kib,
            b"Writeback" => &mut m.writeback_kib,
            b"Cached" => &mut m.cached_kib,
            b"MemAvailable" => &mut m.mem_available_kib,
            _ => continue,
        };
        if let Some(v) = line[colon + 1..]
            .split(|&b| b == b' ')
            .find(|t| !t.is_empty())
            .and_then(parse_u64)
        {
            *slot = v;
        }
    }
    m
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

/// Parses `/proc/stat` text.
pub fn parse_stat(buf: &[u8]) -> CpuSample {
    let mut c = CpuSample::default();
    for line in buf.split(|&b| b == b'\n') {
        let mut toks = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
        match toks.next() {
            Some(b"cpu") => {
                for (i, t) in toks.take(8).enumerate() {
                    c.ticks[i] = parse_u64(t).unwrap_or(0);
                }
            }
            Some(b"procs_running") => {
                c.procs_running = toks.next().and_then(parse_u64).unwrap_or(0)
            }
            Some(b"procs_blocked") => {
                c.procs_blocked = toks.next().and_then(parse_u64).unwrap_or(0)
            }
            _ => {}
        }
    }
    c
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

    #[test]
    fn meminfo_fixture() {
        let t = b"MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\nCached:          1234 kB\nDirty:             5678 kB\nWriteback:           12 kB\nWritebackTmp:        99 kB\n";
        let m = parse_meminfo(t);
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
        let t = b"cpu  10 1 20 300 40 5 6 7 0 0\ncpu0 5 0 10 150 20 2 3 3 0 0\nintr 1 2\nprocs_running 3\nprocs_blocked 2\n";
        let c = parse_stat(t);
        assert_eq!(c.ticks, [10, 1, 20, 300, 40, 5, 6, 7]);
        assert_eq!((c.procs_running, c.procs_blocked), (3, 2));
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
