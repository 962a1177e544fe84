//! `/proc/PID/io` of a few named processes (the broker's), re-read every sample from a
//! descriptor held open (a `pread` at offset 0 regenerates the file) and parsed without
//! allocating.
//!
//! What the seven counters mean (Documentation/filesystems/proc.rst, "/proc/<pid>/io"):
//! `rchar`/`wchar` bytes passed to read(2)/write(2) and friends (page cache or not),
//! `syscr`/`syscw` those calls, `read_bytes` bytes the process made the storage layer
//! fetch, `write_bytes` bytes it caused to be sent to the storage layer (dirtied pages,
//! O_DIRECT writes: charged when dirtied, not when the flusher writes them back),
//! `cancelled_write_bytes` dirtied bytes that were never written (a file truncated or
//! deleted before writeback). All are cumulative since the process started, for all its
//! threads.
//!
//! What must stay true: the hot path ([`ProcIoFile::read`]) allocates nothing once its
//! buffer has grown; a process that is gone gives an error (its pid may be reused later,
//! so the descriptor is never reopened by number); the parser takes the kernel's text
//! as it is (fixed names, one `name: value` a line) and a file without all seven
//! counters is `None`, never zeros.

use std::fs::File;
use std::path::Path;

/// The counters of `/proc/PID/io`, in the kernel's order (and the order of
/// `proc_io.csv`'s columns).
pub const FIELDS: [&str; 7] = [
    "rchar",
    "wchar",
    "syscr",
    "syscw",
    "read_bytes",
    "write_bytes",
    "cancelled_write_bytes",
];

/// Index of `write_bytes` in [`FIELDS`].
pub const WRITE_BYTES: usize = 5;
/// Index of `read_bytes` in [`FIELDS`].
pub const READ_BYTES: usize = 4;

/// Parses `/proc/PID/io` text into the counters of [`FIELDS`]; `None` when one is
/// missing or not a number.
pub fn parse(buf: &[u8]) -> Option<[u64; 7]> {
    let mut out = [0u64; 7];
    let mut seen = 0u8;
    for line in buf.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, rest) = (&line[..colon], &line[colon + 1..]);
        let Some(i) = FIELDS.iter().position(|f| f.as_bytes() == name) else {
            continue;
        };
        let digits = rest.trim_ascii();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut v: u64 = 0;
        for &d in digits {
            v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
        }
        out[i] = v;
        seen |= 1 << i;
    }
    (seen == 0x7f).then_some(out)
}

/// One process's `io` file, held open.
pub struct ProcIoFile {
    pub pid: u32,
    /// `/proc/PID/comm` when opened.
    pub comm: String,
    file: File,
    buf: Vec<u8>,
}

impl ProcIoFile {
    /// Opens `procfs/PID/io` (and reads `comm`). Another user's process needs root (or
    /// ptrace access): the error says which file.
    pub fn open(procfs: &Path, pid: u32) -> std::io::Result<ProcIoFile> {
        let dir = procfs.join(pid.to_string());
        let io = dir.join("io");
        let file = File::open(&io)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", io.display())))?;
        let comm = std::fs::read_to_string(dir.join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let mut f = ProcIoFile {
            pid,
            comm,
            file,
            buf: vec![0; 512],
        };
        // A file that does not parse now (not /proc/PID/io) is refused at once.
        f.read()?;
        Ok(f)
    }

    /// The counters now. An error when the process is gone (ESRCH) or the text does not
    /// parse (`InvalidData`).
    pub fn read(&mut self) -> std::io::Result<[u64; 7]> {
        let off = crate::reread::pread_whole(&self.file, &mut self.buf)?;
        parse(&self.buf[..off]).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("/proc/{}/io lacks one of {}", self.pid, FIELDS.join(",")),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: &[u8] = b"rchar: 2012\nwchar: 77\nsyscr: 7\nsyscw: 3\nread_bytes: 4096\n\
                        write_bytes: 1048576\ncancelled_write_bytes: 512\n";

    #[test]
    fn parses_every_counter_in_kernel_order() {
        assert_eq!(parse(IO), Some([2012, 77, 7, 3, 4096, 1_048_576, 512]));
    }

    #[test]
    fn a_missing_or_damaged_counter_is_none_not_zero() {
        assert_eq!(parse(b"rchar: 1\nwchar: 2\n"), None);
        let bad = String::from_utf8_lossy(IO).replace("syscw: 3", "syscw: x");
        assert_eq!(parse(bad.as_bytes()), None);
        let huge = String::from_utf8_lossy(IO).replace("syscw: 3", "syscw: 99999999999999999999");
        assert_eq!(parse(huge.as_bytes()), None);
    }

    #[test]
    fn this_process_counts_its_own_write() {
        let me = std::process::id();
        let mut f = ProcIoFile::open(Path::new("/proc"), me).unwrap();
        let before = f.read().unwrap();
        let mut t = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut t, &[7u8; 10_000]).unwrap();
        let after = f.read().unwrap();
        assert!(after[1] >= before[1] + 10_000, "{before:?} -> {after:?}");
        assert!(after[3] > before[3]);
        assert!(!f.comm.is_empty());
    }

    #[test]
    fn a_fixture_file_and_a_missing_pid() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        std::fs::write(d.path().join("42/io"), IO).unwrap();
        std::fs::write(d.path().join("42/comm"), "nats-server\n").unwrap();
        let mut f = ProcIoFile::open(d.path(), 42).unwrap();
        assert_eq!(f.comm, "nats-server");
        assert_eq!(f.read().unwrap()[WRITE_BYTES], 1_048_576);
        let e = ProcIoFile::open(d.path(), 43).err().unwrap();
        assert!(e.to_string().contains("43/io"), "{e}");
    }
}
