//! `/proc/diskstats`: every field the kernel prints, read without allocating.
//!
//! Each line is `major minor name` followed by 11 (kernel < 4.18), 15 (4.18+, discards)
//! or 17 (5.5+, flushes) counters: 14, 18 or 20 columns in all. See the kernel's
//! Documentation/admin-guide/iostats.rst. Field indices into [`DiskCounters::f`] are the
//! `F_*` constants below, in the kernel's order.
//!
//! Units: I/Os and merges are counts, sectors are always 512 bytes whatever the
//! device's block size, `*_ms` fields are milliseconds. The time fields are printed from
//! 32-bit `unsigned int`s on every kernel, so they wrap after 2^32 ms (49.7 days); use
//! [`counter_delta`], which knows which fields wrap at 32 bits. A counter that goes
//! backwards for any other reason (device removed and re-added) yields `None`, never a
//! spike.

use std::fs::File;
use std::path::Path;

/// Reads completed successfully.
pub const F_READS: usize = 0;
/// Reads merged.
pub const F_READS_MERGED: usize = 1;
/// Sectors (512 B) read.
pub const F_SECTORS_READ: usize = 2;
/// Milliseconds spent reading (sum over all reads).
pub const F_READ_MS: usize = 3;
/// Writes completed.
pub const F_WRITES: usize = 4;
/// Writes merged.
pub const F_WRITES_MERGED: usize = 5;
/// Sectors (512 B) written.
pub const F_SECTORS_WRITTEN: usize = 6;
/// Milliseconds spent writing.
pub const F_WRITE_MS: usize = 7;
/// I/Os currently in flight (a gauge, not a counter).
pub const F_IN_FLIGHT: usize = 8;
/// Milliseconds the device had I/O in flight (busy time, %util).
pub const F_IO_MS: usize = 9;
/// Weighted milliseconds doing I/O (queue-depth integral).
pub const F_WEIGHTED_MS: usize = 10;
/// Discards completed (4.18+).
pub const F_DISCARDS: usize = 11;
/// Discards merged (4.18+).
pub const F_DISCARDS_MERGED: usize = 12;
/// Sectors discarded (4.18+).
pub const F_SECTORS_DISCARDED: usize = 13;
/// Milliseconds spent discarding (4.18+).
pub const F_DISCARD_MS: usize = 14;
/// Flush requests completed (5.5+).
pub const F_FLUSHES: usize = 15;
/// Milliseconds spent flushing (5.5+).
pub const F_FLUSH_MS: usize = 16;

/// Number of counters a 5.5+ kernel prints.
pub const MAX_FIELDS: usize = 17;

/// CSV column names of the counters, in kernel order (units in the names).
pub const FIELD_NAMES: [&str; MAX_FIELDS] = [
    "reads",
    "reads_merged",
    "sectors_read",
    "read_ms",
    "writes",
    "writes_merged",
    "sectors_written",
    "write_ms",
    "in_flight",
    "io_ms",
    "weighted_io_ms",
    "discards",
    "discards_merged",
    "sectors_discarded",
    "discard_ms",
    "flushes",
    "flush_ms",
];

/// True for the fields the kernel keeps as 32-bit milliseconds (they wrap after 49.7 days).
const fn is_ms_field(i: usize) -> bool {
    matches!(
        i,
        F_READ_MS | F_WRITE_MS | F_IO_MS | F_WEIGHTED_MS | F_DISCARD_MS | F_FLUSH_MS
    )
}

/// True for gauges (values, not counters): in-flight.
const fn is_gauge(i: usize) -> bool {
    i == F_IN_FLIGHT
}

/// The raw counters of one device in one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskCounters {
    /// Counters in kernel order; entries at and past `nfields` are 0 and mean "not printed".
    pub f: [u64; MAX_FIELDS],
    /// How many counters this kernel printed: 11, 15 or 17.
    pub nfields: u8,
}

impl DiskCounters {
    /// The field, or `None` when this kernel does not print it.
    pub fn get(&self, i: usize) -> Option<u64> {
        (i < self.nfields as usize).then(|| self.f[i])
    }
}

/// Wrap-safe difference `cur - prev` of counter `field`.
///
/// The `*_ms` fields are 32-bit on every kernel: a decrease by more than half the range is
/// a wrap and is unwrapped. Any other decrease means the counter was reset (device
/// removed and re-added) and yields `None`. For the in-flight gauge the current value is
/// returned.
pub fn counter_delta(field: usize, prev: u64, cur: u64) -> Option<u64> {
    if is_gauge(field) {
        return Some(cur);
    }
    if cur >= prev {
        return Some(cur - prev);
    }
    if is_ms_field(field) && prev <= u32::MAX as u64 && prev - cur > (1u64 << 31) {
        return Some(cur + (1u64 << 32) - prev);
    }
    None
}

/// One parsed line of `/proc/diskstats`, borrowing the device name from the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub major: u32,
    pub minor: u32,
    pub name: &'a [u8],
    pub counters: DiskCounters,
}

/// Parses an unsigned decimal token without allocating (`None` for anything else).
#[inline]
pub(crate) fn parse_u64(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() || tok.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in tok {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Splits on ASCII whitespace (a sysfs `stat` file ends with a newline) without allocating.
#[inline]
fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b' ' || b == b'\t' || b == b'\n')
        .filter(|t| !t.is_empty())
}

/// Splits a line into `major`, `minor`, `name` and the rest, without parsing counters:
/// lets a sampler skip devices it does not record cheaply.
#[inline]
pub fn parse_head(line: &[u8]) -> Option<(u32, u32, &[u8], &[u8])> {
    let mut rest = line;
    let mut next = || -> Option<&[u8]> {
        let start = rest.iter().position(|&b| b != b' ' && b != b'\t')?;
        let r = &rest[start..];
        let end = r
            .iter()
            .position(|&b| b == b' ' || b == b'\t')
            .unwrap_or(r.len());
        let tok = &r[..end];
        rest = &r[end..];
        Some(tok)
    };
    let major = parse_u64(next()?)? as u32;
    let minor = parse_u64(next()?)? as u32;
    let name = next()?;
    Some((major, minor, name, rest))
}

/// Parses the counters after the name. Fewer than 11 counters (pre-2.6.25 partition
/// lines) or a non-numeric field give `None`; counters past the 17th are ignored.
#[inline]
pub fn parse_counters(rest: &[u8]) -> Option<DiskCounters> {
    let mut counters = DiskCounters::default();
    let mut n = 0usize;
    for tok in tokens(rest) {
        if n == MAX_FIELDS {
            break;
        }
        counters.f[n] = parse_u64(tok)?;
        n += 1;
    }
    if n < 11 {
        return None;
    }
    counters.nfields = n as u8;
    Some(counters)
}

/// Parses one whole line.
fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let (major, minor, name, rest) = parse_head(line)?;
    Some(Line {
        major,
        minor,
        name,
        counters: parse_counters(rest)?,
    })
}

/// Calls `f` for every parseable line of a diskstats buffer.
pub fn for_each_line<'a>(buf: &'a [u8], mut f: impl FnMut(Line<'a>)) {
    for raw in buf.split(|&b| b == b'\n') {
        if let Some(l) = parse_line(raw) {
            f(l);
        }
    }
}

/// Errors reading diskstats.
#[derive(Debug, thiserror::Error)]
pub enum DiskstatsError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// Holds `/proc/diskstats` open and re-reads it with `pread` into a reused buffer.
///
/// After the first few reads have grown the buffer to fit, a read allocates nothing.
pub struct DiskstatsReader {
    file: File,
    path: String,
    buf: Vec<u8>,
    len: usize,
}

impl DiskstatsReader {
    /// Opens `<procfs>/diskstats` (procfs is `/proc` outside tests).
    pub fn open(procfs: &Path) -> Result<DiskstatsReader, DiskstatsError> {
        let p = procfs.join("diskstats");
        let path = p.display().to_string();
        let file = File::open(&p).map_err(|source| DiskstatsError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(DiskstatsReader {
            file,
            path,
            buf: vec![0u8; 16 * 1024],
            len: 0,
        })
    }

    /// Reads the whole file again; returns its bytes.
    pub fn read(&mut self) -> Result<&[u8], DiskstatsError> {
        // The buffer grows only when the device list outgrows it (rare, not per sample).
        self.len = crate::reread::pread_whole(&self.file, &mut self.buf).map_err(|source| {
            DiskstatsError::Read {
                path: self.path.clone(),
                source,
            }
        })?;
        Ok(&self.buf[..self.len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K20: &str = "   7       0 loop0 11 0 2200 3 5 0 80 7 0 12 10 0 0 0 0 0 0\n \
                       254       0 vda 4423 2395 680434 1770 282 1183 12168 251 0 1572 2159 2995 44 37472 136 6 9\n";
    const K18: &str = "   8       0 sda 100 1 800 50 200 2 1600 90 1 120 140 3 0 24 1\n";
    const K14: &str = "   8      16 sdb 9 0 72 4 8 0 64 3 0 6 7\n   8      17 sdb1 4 2 8 1\n";

    #[test]
    fn parses_20_columns_with_flushes() {
        let mut got = vec![];
        for_each_line(K20.as_bytes(), |l| got.push(l));
        assert_eq!(got.len(), 2);
        let vda = got[1];
        assert_eq!((vda.major, vda.minor, vda.name), (254, 0, &b"vda"[..]));
        assert_eq!(vda.counters.nfields, 17);
        assert_eq!(vda.counters.f[F_SECTORS_WRITTEN], 12168);
        assert_eq!(vda.counters.get(F_FLUSHES), Some(6));
        assert_eq!(vda.counters.get(F_FLUSH_MS), Some(9));
        assert_eq!(vda.counters.get(F_SECTORS_DISCARDED), Some(37472));
    }

    #[test]
    fn parses_18_columns_without_flushes() {
        let l = parse_line(K18.trim_end().as_bytes()).unwrap();
        assert_eq!(l.counters.nfields, 15);
        assert_eq!(l.counters.get(F_DISCARD_MS), Some(1));
        assert_eq!(l.counters.get(F_FLUSHES), None);
        assert_eq!(l.counters.get(F_IN_FLIGHT), Some(1));
    }

    #[test]
    fn parses_14_columns_and_skips_old_partition_lines() {
        let mut got = vec![];
        for_each_line(K14.as_bytes(), |l| got.push(l));
        assert_eq!(
            got.len(),
            1,
            "the 4-counter sdb1 line is not a valid sample"
        );
        assert_eq!(got[0].counters.nfields, 11);
        assert_eq!(got[0].counters.get(F_WEIGHTED_MS), Some(7));
        assert_eq!(got[0].counters.get(F_DISCARDS), None);
    }

    #[test]
    fn parses_a_sysfs_stat_file_with_its_newline() {
        let c = parse_counters(b"     196        0     6686        8   308088     1189  5366200    15818        0     4752    16140        6        0 12582936        0      231      313\n").unwrap();
        assert_eq!(c.nfields, 17);
        assert_eq!(c.get(F_FLUSH_MS), Some(313));
        assert_eq!(c.get(F_SECTORS_WRITTEN), Some(5366200));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_line(b"").is_none());
        assert!(parse_line(b"7 0 loop0 1 2 x 4 5 6 7 8 9 10 11").is_none());
        assert!(parse_line(b"7 0 loop0 1 2 3").is_none());
    }

    #[test]
    fn ms_fields_unwrap_at_32_bits() {
        let prev = u32::MAX as u64 - 5;
        assert_eq!(counter_delta(F_WRITE_MS, prev, 10), Some(16));
        assert_eq!(counter_delta(F_IO_MS, prev, 3), Some(9));
    }

    #[test]
    fn other_decreases_are_no_value() {
        assert_eq!(counter_delta(F_SECTORS_WRITTEN, 1000, 10), None);
        // A small decrease of a ms field is a reset, not a wrap.
        assert_eq!(counter_delta(F_WRITE_MS, 5000, 10), None);
        assert_eq!(counter_delta(F_SECTORS_WRITTEN, 10, 1000), Some(990));
        assert_eq!(counter_delta(F_IN_FLIGHT, 10, 3), Some(3));
    }

    #[test]
    fn reader_reads_real_diskstats_twice_without_growth() {
        let mut r = DiskstatsReader::open(Path::new("/proc")).unwrap();
        let n1 = r.read().unwrap().len();
        assert!(n1 > 0);
        let cap = r.buf.capacity();
        let mut lines = 0;
        for_each_line(r.read().unwrap(), |_| lines += 1);
        assert!(lines > 0);
        assert_eq!(r.buf.capacity(), cap);
    }

    #[test]
    fn reader_reads_a_fixture_larger_than_its_buffer() {
        let d = tempfile::tempdir().unwrap();
        let mut s = String::new();
        for i in 0..2000 {
            s.push_str(&format!(
                "7 {i} loop{i} 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
            ));
        }
        std::fs::write(d.path().join("diskstats"), &s).unwrap();
        let mut r = DiskstatsReader::open(d.path()).unwrap();
        let mut n = 0;
        for_each_line(r.read().unwrap(), |_| n += 1);
        assert_eq!(n, 2000);
    }
}
