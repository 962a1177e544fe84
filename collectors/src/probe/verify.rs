//! fio's `verify`: every block a job writes carries a header and a checksum of its data;
//! after the write phase (`do_verify=1`, the default) the job reads back every block it
//! wrote and checks it, and a read-only job with `verify=` checks every block it reads.
//! `verify_only` skips the workload and checks the blocks it would have written.
//!
//! ## The on-disk block (one per `verify_interval` bytes, default the write block size)
//! fio 3.33's header layout, little endian, 40 bytes, then the checksum:
//!
//! ```text
//! 0  magic u16 = 0xacca      2  verify_type u16 (fio's numbers: meta 1, md5 2, crc64 3,
//! 4  len u32 (the interval)                     crc32c 5, sha256 9)
//! 8  rand_seed u64 (what filled the data)    16 offset u64 (the interval's byte offset)
//! 24 time_sec u32, 28 time_nsec u32 (CLOCK_MONOTONIC at the fill)
//! 32 thread u16 (job from 1)   34 numberio u16 (the job's write count, wrapping)
//! 36 crc32 u32: crc32c of bytes 0..36
//! 40 checksum: crc32c 4 bytes, crc64 8 (fio's: the Jones polynomial, CRC-64/REDIS),
//!    md5 16, sha256 32 in a 64-byte field; meta has none
//! ```
//! The rest of the interval is random bytes (a copy from a per-job 1 MiB SplitMix64 pool,
//! starting where `rand_seed` says), or
//! `verify_pattern` repeated from the interval's start (the header overwrites its first
//! bytes, as in fio). A block is good when its magic, length, offset and header crc are
//! right and its checksum matches (meta with `verify_pattern`: every byte after the
//! header is the pattern's). `verify=pattern` writes no header at all, as fio 3.33 (its
//! `pattern` is `VERIFY_PATTERN_NO_HDR`): every byte of the block is the pattern's. The layout is
//! fio's, but the data and the seeds are ours: fio's `verify_only` does not accept our
//! files, nor we its (each regenerates its own seeds); the verdicts are the same.
//!
//! ## What fio prints on a bad block, and so do we (stderr, then the job's error)
//! ```text
//! crc32c: verify failed at file F offset O, length L (requested block: offset=RO, length=RL)
//!        Expected CRC: 047e8587
//!        Received CRC: bb436f2d
//! verify: bad magic header 0, wanted acca at file F offset O, length L (requested block: ...)
//! ```
//! The job stops at its first bad block (fio without `continue_on_error`), its error is
//! EILSEQ (84 in the JSON) and the probe exits 1.
//!
//! ## What must stay true
//! The fill and the check work on the engine's buffer in place: no allocation per I/O.
//! The blocks written are kept as a bitmap of intervals (1 bit per 4 KiB: 8 KiB per
//! 256 MiB), so the read-back reads each once whatever the write order; its order and
//! its engine are fio's (see [`back`]).

use std::path::{Path, PathBuf};

use md5::Digest;

use super::rng::SplitMix64;
use super::workload::Gen;
use super::ProbeError;
use crate::clock::monotonic_ns;

mod back;
pub(in crate::probe) use back::{mark_only, read_back, Backlog, Queue, ReadBack, ReadSlot};

const MAGIC: u16 = 0xacca;
/// Bytes of fio's `struct verify_header`.
pub const HDR_BYTES: usize = 40;
/// fio's EILSEQ for a bad block.
pub const EILSEQ: i32 = libc::EILSEQ;
const CRC32C: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
const CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// fio's `verify=` modes that we run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyKind {
    /// `meta`: the header only (fio's `VERIFY_HDR_ONLY`); the data is not checked.
    Meta,
    Md5,
    Crc64,
    /// `crc32c` and `crc32c-intel` (fio's hardware variant; same sums).
    Crc32c,
    Sha256,
    /// `pattern`: every byte after the header is `verify_pattern`.
    Pattern,
}

impl VerifyKind {
    /// fio's spelling; `None` for modes we do not run (`crc32`, `crc16`, `sha1`, ...).
    pub fn parse(s: &str) -> Option<VerifyKind> {
        Some(match s {
            "meta" => VerifyKind::Meta,
            "md5" => VerifyKind::Md5,
            "crc64" => VerifyKind::Crc64,
            "crc32c" | "crc32c-intel" => VerifyKind::Crc32c,
            "sha256" => VerifyKind::Sha256,
            "pattern" => VerifyKind::Pattern,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            VerifyKind::Meta => "meta",
            VerifyKind::Md5 => "md5",
            VerifyKind::Crc64 => "crc64",
            VerifyKind::Crc32c => "crc32c",
            VerifyKind::Sha256 => "sha256",
            VerifyKind::Pattern => "pattern",
        }
    }

    /// fio 3.33's `verify_type` number.
    fn fio_type(self) -> u16 {
        match self {
            VerifyKind::Meta => 1,
            VerifyKind::Md5 => 2,
            VerifyKind::Crc64 => 3,
            VerifyKind::Crc32c => 5,
            VerifyKind::Sha256 => 9,
            VerifyKind::Pattern => 17,
        }
    }

    /// Bytes of the checksum field after the header.
    fn sum_bytes(self) -> usize {
        match self {
            VerifyKind::Meta | VerifyKind::Pattern => 0,
            VerifyKind::Crc32c => 4,
            VerifyKind::Crc64 => 8,
            VerifyKind::Md5 => 16,
            VerifyKind::Sha256 => 64,
        }
    }

    /// Header and checksum: the interval must be longer. `pattern` has no header (fio
    /// 3.33's `verify=pattern` is its `VERIFY_PATTERN_NO_HDR`: the block is the pattern).
    pub fn hdr_bytes(self) -> usize {
        match self {
            VerifyKind::Pattern => 0,
            _ => HDR_BYTES + self.sum_bytes(),
        }
    }
}

/// A job's verify options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySpec {
    pub kind: VerifyKind,
    /// `verify_pattern` bytes; empty: random data.
    pub pattern: Vec<u8>,
    /// `verify_interval` bytes; 0: the write block size.
    pub interval: u64,
    /// `do_verify` (default 1): read back what a write job wrote.
    pub do_verify: bool,
    /// `verify_only`: do not run the workload, check what it would have written.
    pub only: bool,
}

/// One bad block: fio's lines (for stderr) and the job's error.
#[derive(Debug)]
pub(crate) struct Bad {
    pub lines: Vec<String>,
    pub error: ProbeError,
}

/// A job's verify state: fills write buffers, checks read buffers, remembers what was
/// written.
pub(crate) struct JobVerify {
    spec: VerifySpec,
    interval: u64,
    thread: u16,
    numberio: u16,
    seed: SplitMix64,
    /// One bit per interval of the file written by this job.
    written: Vec<u64>,
    path: PathBuf,
    /// Reads are checked as they complete (a read-only job; fio: `!td_rw`).
    check_reads: bool,
    /// Random bytes made once; each block's data is a copy from a seed-chosen place in it
    /// (a `memcpy` per block instead of a generator call per 8 bytes). With
    /// `verify_pattern`: one interval of the pattern repeated from its start, so a fill is
    /// a `memcpy` and a check a `memcmp` (fio's too; a byte loop with a `%` per byte cost
    /// ~100 us per 8 KiB block and held the job to 0.3-0.5x fio's IOPS).
    pool: Vec<u8>,
    /// The job's offset generator before its workload, when fio reads back in write
    /// order (a random map: see [`back`]).
    replay: Option<Gen>,
}

/// Bytes of the random pool the data is copied from.
const POOL_BYTES: usize = 1 << 20;

impl JobVerify {
    /// `interval`: the resolved interval (bytes); `size`: the job's region.
    /// `check_reads`: a read-only job (its reads are checked as they complete).
    pub fn new(
        spec: &VerifySpec,
        interval: u64,
        size: u64,
        job: u32,
        seed: u64,
        path: &Path,
        check_reads: bool,
    ) -> JobVerify {
        let units = size.div_ceil(interval.max(1));
        JobVerify {
            spec: spec.clone(),
            interval: interval.max(1),
            thread: (job + 1) as u16,
            numberio: 0,
            seed: SplitMix64::new(seed ^ 0x7E51_F1ED),
            written: vec![0; units.div_ceil(64) as usize],
            path: path.to_path_buf(),
            check_reads,
            pool: if spec.pattern.is_empty() {
                let mut r = SplitMix64::new(seed ^ 0xDA7A);
                let n = POOL_BYTES + interval as usize;
                (0..n.div_ceil(8))
                    .flat_map(|_| r.next_u64().to_le_bytes())
                    .collect()
            } else {
                let p = &spec.pattern;
                (0..interval.max(1) as usize)
                    .map(|j| p[j % p.len()])
                    .collect()
            },
            replay: None,
        }
    }

    /// Keeps a copy of the job's generator before the workload when fio would read back
    /// in write order: a random job with a random map (fio's `file_randommap`).
    pub fn keep_order(&mut self, gen: &Gen) {
        self.replay = gen.random_map().then(|| gen.clone());
    }

    /// Marks `offset..offset+len` written (the verify phase reads it back).
    pub fn mark(&mut self, offset: u64, len: u64) {
        let (a, b) = (
            offset / self.interval,
            (offset + len).div_ceil(self.interval),
        );
        for u in a..b {
            if let Some(w) = self.written.get_mut((u / 64) as usize) {
                *w |= 1 << (u % 64);
            }
        }
    }

    #[cfg(test)]
    fn is_written(&self, u: u64) -> bool {
        self.written
            .get((u / 64) as usize)
            .is_some_and(|w| w & (1 << (u % 64)) != 0)
    }

    /// Fills a write buffer for `offset` (hook 1: before every write) and marks it.
    pub fn fill(&mut self, buf: &mut [u8], offset: u64) {
        let iv = self.interval as usize;
        let hdr = self.spec.kind.hdr_bytes();
        let now = monotonic_ns();
        self.numberio = self.numberio.wrapping_add(1);
        for (i, blk) in buf.chunks_mut(iv).enumerate() {
            let seed = self.seed.next_u64();
            if self.spec.pattern.is_empty() {
                let at = (seed % POOL_BYTES as u64) as usize & !7;
                blk.copy_from_slice(&self.pool[at..at + blk.len()]);
            } else {
                blk.copy_from_slice(&self.pool[..blk.len()]);
            }
            if self.spec.kind == VerifyKind::Pattern {
                continue;
            }
            let h = &mut blk[..HDR_BYTES];
            h[0..2].copy_from_slice(&MAGIC.to_le_bytes());
            h[2..4].copy_from_slice(&self.spec.kind.fio_type().to_le_bytes());
            h[4..8].copy_from_slice(&(iv as u32).to_le_bytes());
            h[8..16].copy_from_slice(&seed.to_le_bytes());
            h[16..24].copy_from_slice(&(offset + (i * iv) as u64).to_le_bytes());
            h[24..28].copy_from_slice(&((now / 1_000_000_000) as u32).to_le_bytes());
            h[28..32].copy_from_slice(&((now % 1_000_000_000) as u32).to_le_bytes());
            h[32..34].copy_from_slice(&self.thread.to_le_bytes());
            h[34..36].copy_from_slice(&self.numberio.to_le_bytes());
            let c = CRC32C.checksum(&h[..36]);
            h[36..40].copy_from_slice(&c.to_le_bytes());
            let (head, data) = blk.split_at_mut(hdr);
            let sum = &mut head[HDR_BYTES..];
            match self.spec.kind {
                VerifyKind::Meta | VerifyKind::Pattern => {}
                VerifyKind::Crc32c => sum.copy_from_slice(&CRC32C.checksum(data).to_le_bytes()),
                VerifyKind::Crc64 => sum.copy_from_slice(&CRC64.checksum(data).to_le_bytes()),
                VerifyKind::Md5 => sum.copy_from_slice(&md5::Md5::digest(data)),
                VerifyKind::Sha256 => {
                    sum[..32].copy_from_slice(&sha2::Sha256::digest(data));
                    sum[32..].fill(0);
                }
            }
        }
        self.mark(offset, buf.len() as u64);
    }

    /// Checks a read buffer read at `offset` (hook 2: after a read, and in the read-back).
    pub fn check(&self, buf: &[u8], offset: u64) -> Result<(), Box<Bad>> {
        let iv = self.interval as usize;
        for (i, blk) in buf.chunks(iv).enumerate() {
            let at = offset + (i * iv) as u64;
            self.check_one(blk, at, offset, buf.len() as u64)?;
        }
        Ok(())
    }

    fn check_one(&self, blk: &[u8], at: u64, req: u64, req_len: u64) -> Result<(), Box<Bad>> {
        let kind = self.spec.kind;
        let hdr = kind.hdr_bytes();
        let file = self.path.display();
        // Formatted only for a bad block: a good one allocates nothing.
        let tail = || {
            format!(
                "at file {file} offset {at}, length {} (requested block: offset={req}, length={req_len})",
                blk.len()
            )
        };
        let bad = |lines: Vec<String>, what: String| {
            Box::new(Bad {
                lines,
                error: ProbeError::Verify {
                    path: self.path.clone(),
                    offset: at,
                    len: blk.len() as u64,
                    what,
                },
            })
        };
        let u16_at = |o: usize| u16::from_le_bytes([blk[o], blk[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(blk[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(blk[o..o + 8].try_into().unwrap());
        let header_bad = |m: String| bad(vec![format!("verify: {m} {}", tail())], m);
        if kind == VerifyKind::Pattern {
            return self.check_pattern(blk, 0, tail, bad);
        }
        if blk.len() < hdr {
            return Err(header_bad(format!("short block of {} bytes", blk.len())));
        }
        if u16_at(0) != MAGIC {
            return Err(header_bad(format!(
                "bad magic header {:x}, wanted {MAGIC:x}",
                u16_at(0)
            )));
        }
        if u32_at(4) as usize != blk.len() {
            return Err(header_bad(format!(
                "bad header length {}, wanted {}",
                u32_at(4),
                blk.len()
            )));
        }
        if u64_at(16) != at {
            return Err(header_bad(format!(
                "bad header offset {}, wanted {at}",
                u64_at(16)
            )));
        }
        let crc = CRC32C.checksum(&blk[..36]);
        if crc != u32_at(36) {
            return Err(header_bad(format!(
                "bad header crc {:x}, calculated {crc:x}",
                u32_at(36)
            )));
        }
        let data = &blk[hdr..];
        let stored = &blk[HDR_BYTES..hdr];
        let mut sum = [0u8; 32];
        let n = match kind {
            // meta with verify_pattern: the data after the header is the pattern.
            VerifyKind::Meta | VerifyKind::Pattern => {
                return self.check_pattern(blk, hdr, tail, bad)
            }
            VerifyKind::Crc32c => put(&mut sum, &CRC32C.checksum(data).to_le_bytes()),
            VerifyKind::Crc64 => put(&mut sum, &CRC64.checksum(data).to_le_bytes()),
            VerifyKind::Md5 => put(&mut sum, &md5::Md5::digest(data)),
            VerifyKind::Sha256 => put(&mut sum, &sha2::Sha256::digest(data)),
        };
        let (found, stored) = (&sum[..n], &stored[..n]);
        if stored == found {
            return Ok(());
        }
        let (want, got) = (hex_of(stored), hex_of(found));
        Err(bad(
            vec![
                format!("{}: verify failed {}", kind.name(), tail()),
                format!("       Expected CRC: {want}"),
                format!("       Received CRC: {got}"),
            ],
            format!("{} expected {want}, received {got}", kind.name()),
        ))
    }

    fn check_pattern(
        &self,
        blk: &[u8],
        hdr: usize,
        tail: impl Fn() -> String,
        bad: impl Fn(Vec<String>, String) -> Box<Bad>,
    ) -> Result<(), Box<Bad>> {
        if self.spec.pattern.is_empty() || blk[hdr..] == self.pool[hdr..blk.len()] {
            return Ok(());
        }
        for (j, &b) in blk.iter().enumerate().skip(hdr) {
            let want = self.pool[j];
            if b != want {
                let tail = tail();
                let bits = (b ^ want).count_ones();
                return Err(bad(
                    vec![
                        format!("fio: got pattern '{b:02x}', wanted '{want:02x}'. Bad bits {bits}"),
                        format!("fio: bad pattern block offset {j}"),
                        format!("pattern: verify failed {tail}"),
                    ],
                    format!("pattern byte {j} of the block is {b:02x}, wanted {want:02x}"),
                ));
            }
        }
        Ok(())
    }
}

/// Hook 1, before every write: fills the buffer with headers and data (no-op without
/// verify).
#[inline]
pub(crate) fn before_write(v: &mut Option<JobVerify>, buf: &mut [u8], offset: u64) {
    if let Some(v) = v.as_mut() {
        v.fill(buf, offset);
    }
}

/// Hook 2, after every read that completed: in a read-only job with verify, checks the
/// bytes read; a bad block is printed as fio prints it and becomes the job's error.
#[inline]
pub(crate) fn after_read(v: &Option<JobVerify>, buf: &[u8], offset: u64) -> Result<(), ProbeError> {
    match v {
        Some(v) if v.check_reads => v.check(buf, offset).map_err(|bad| {
            for l in &bad.lines {
                eprintln!("{l}");
            }
            bad.error
        }),
        _ => Ok(()),
    }
}

/// Copies a checksum into `to` (no allocation per block); its length.
fn put(to: &mut [u8; 32], sum: &[u8]) -> usize {
    to[..sum.len()].copy_from_slice(sum);
    sum.len()
}

/// A checksum as fio's hexdump shows it: its bytes in memory order (a crc is stored
/// little endian, so its hex reads byte-reversed, as in fio's).
fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(kind: VerifyKind, pattern: &[u8]) -> JobVerify {
        let s = VerifySpec {
            kind,
            pattern: pattern.to_vec(),
            interval: 0,
            do_verify: true,
            only: false,
        };
        JobVerify::new(&s, 4096, 1 << 20, 0, 1, Path::new("/x/f"), false)
    }

    #[test]
    fn every_mode_passes_what_it_wrote_and_names_a_bad_block() {
        for (k, p) in [
            (VerifyKind::Crc32c, &b""[..]),
            (VerifyKind::Crc64, b""),
            (VerifyKind::Md5, b""),
            (VerifyKind::Sha256, b""),
            (VerifyKind::Pattern, b"\xde\xad\xbe\xef"),
            // meta with verify_pattern: the header, then the pattern (3 bytes: not a
            // divisor of the block).
            (VerifyKind::Meta, b"\x01\x02\x03"),
        ] {
            let mut v = job(k, p);
            let mut buf = vec![0u8; 8192];
            v.fill(&mut buf, 65536);
            v.check(&buf, 65536)
                .unwrap_or_else(|b| panic!("{k:?}: {:?}", b.lines));
            buf[4096 + 1000] ^= 0x10;
            let bad = v.check(&buf, 65536).expect_err("a flipped bit");
            let first = &bad.lines[bad.lines.len().min(if p.is_empty() { 1 } else { 3 }) - 1];
            assert!(
                first.contains("verify failed at file /x/f offset 69632, length 4096 (requested block: offset=65536, length=8192)"),
                "{k:?}: {:?}",
                bad.lines
            );
            assert!(matches!(
                bad.error,
                ProbeError::Verify { offset: 69632, .. }
            ));
        }
    }

    #[test]
    fn meta_checks_the_header_only() {
        let mut v = job(VerifyKind::Meta, b"");
        let mut buf = vec![0u8; 4096];
        v.fill(&mut buf, 0);
        buf[2000] ^= 1;
        assert!(v.check(&buf, 0).is_ok(), "data is not meta's business");
        buf[0] = 0;
        let bad = v.check(&buf, 0).expect_err("bad magic");
        assert!(
            bad.lines[0]
                .starts_with("verify: bad magic header ac00, wanted acca at file /x/f offset 0"),
            "{:?}",
            bad.lines
        );
        let mut buf = vec![0u8; 4096];
        v.fill(&mut buf, 0);
        assert!(
            v.check(&buf, 4096).is_err(),
            "a block read at another offset"
        );
    }

    #[test]
    fn the_written_map_is_per_interval() {
        let mut v = job(VerifyKind::Crc32c, b"");
        v.mark(8192, 8192);
        assert!(!v.is_written(1) && v.is_written(2) && v.is_written(3) && !v.is_written(4));
    }
}
