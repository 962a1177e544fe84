//! Pieces every direct-I/O measurement needs: an aligned buffer, files opened with the
//! flags fio uses, and latency summaries from HdrHistograms.
//!
//! Units: latencies in the histograms are nanoseconds; summaries say their unit in
//! their field names.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hdrhistogram::Histogram;

/// Alignment that satisfies O_DIRECT on every device we meet (4 KiB logical blocks).
pub const ALIGN: usize = 4096;

/// A heap buffer aligned to [`ALIGN`], as O_DIRECT needs, filled with a non-repeating
/// pattern (not zeros: some devices and file systems treat zero blocks specially).
pub(crate) struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is a plain owned allocation; no interior sharing.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `len` is rounded up to a multiple of [`ALIGN`].
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = std::alloc::Layout::from_size_align(len, ALIGN).expect("valid layout");
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut b = AlignedBuf { ptr, len };
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for chunk in b.as_mut_slice().chunks_mut(8) {
            // xorshift: cheap, not compressible, not zero
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = x.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        b
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    #[cfg(test)]
    fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, ALIGN).expect("valid layout");
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

/// Synchronous-write flags, fio's `--sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncFlag {
    #[default]
    None,
    /// O_DSYNC: each write returns once data (not all metadata) is stable.
    Dsync,
    /// O_SYNC: each write returns once data and metadata are stable.
    Sync,
}

/// How to open a file for a measurement.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub direct: bool,
    pub sync: SyncFlag,
}

/// Opens `path` with O_DIRECT / O_DSYNC / O_SYNC as asked. Errors keep the path.
pub fn open(path: &Path, f: OpenFlags) -> std::io::Result<File> {
    let mut custom = 0;
    if f.direct {
        custom |= libc::O_DIRECT;
    }
    match f.sync {
        SyncFlag::None => {}
        SyncFlag::Dsync => custom |= libc::O_DSYNC,
        SyncFlag::Sync => custom |= libc::O_SYNC,
    }
    OpenOptions::new()
        .read(f.read)
        .write(f.write)
        .create(f.create)
        .custom_flags(custom)
        .open(path)
}

/// A latency histogram in ns: 1 ns .. 1 h, 3 significant digits, never resizes (recording
/// into it does not allocate).
pub fn latency_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds");
    h.auto(false);
    h
}

/// Records `ns` (clamped into the histogram's range).
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    let _ = h.record(ns.clamp(1, 3_600_000_000_000));
}

/// Percentiles fio prints (its default `percentile_list`) plus 99.99 and 99.999.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// A latency summary in ns (fio's `clat_ns`/`lat_ns` shape).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyNs {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stddev: f64,
    /// (percentile, value): for [`FIO_PERCENTILES`].
    pub percentiles: Vec<(f64, u64)>,
}

impl LatencyNs {
    pub fn from_histogram(h: &Histogram<u64>) -> LatencyNs {
        if h.is_empty() {
            return LatencyNs::default();
        }
        LatencyNs {
            count: h.len(),
            min: h.min(),
            max: h.max(),
            mean: h.mean(),
            stddev: h.stdev(),
            percentiles: FIO_PERCENTILES
                .iter()
                .map(|&p| (p, h.value_at_percentile(p)))
                .collect(),
        }
    }

    /// The value at percentile `p` (0..100) if it is in the list.
    pub fn at(&self, p: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (q - p).abs() < 1e-9)
            .map(|x| x.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_aligned_rounded_and_not_zero() {
        let b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(b.as_slice().iter().filter(|&&x| x == 0).count() < 100);
    }

    #[test]
    fn direct_write_works_with_the_buffer() {
        use std::os::unix::fs::FileExt;
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = d.path().join("f");
        let f = open(
            &p,
            OpenFlags {
                write: true,
                create: true,
                direct: true,
                ..Default::default()
            },
        )
        .unwrap();
        let b = AlignedBuf::new(8192);
        assert_eq!(f.write_at(b.as_slice(), 0).unwrap(), 8192);
    }

    #[test]
    fn summary_from_histogram() {
        let mut h = latency_histogram();
        for v in 1..=1000u64 {
            record_ns(&mut h, v * 1000);
        }
        let s = LatencyNs::from_histogram(&h);
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, 1000);
        let p99 = s.at(99.0).unwrap();
        assert!((989_000..=991_000).contains(&p99), "{p99}");
        assert!((s.mean - 500_500.0).abs() < 1000.0);
    }
}
