//! What each job does next: direction, offset and length of every I/O, and when to sync.
//!
//! fio's rules: random offsets are uniform over the whole blocks of `size` for that
//! direction's block size (aligned to it; offsets may repeat, as with fio's
//! `norandommap`); sequential jobs keep one position per direction and wrap at `size`;
//! a mixed job draws each I/O's direction from the mix; `--fsync N` / `--fdatasync N`
//! sync after every N writes; without `--time-based` a job stops after `size` bytes.

use super::rng::SplitMix64;
use super::stats::{READ, WRITE};

/// One I/O to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub dir: usize,
    pub offset: u64,
    pub len: u64,
    /// Sync after this write completes.
    pub(crate) sync_after: bool,
}

/// The I/O generator of one job.
#[derive(Debug, Clone)]
pub(crate) struct Gen {
    random: bool,
    /// Reads out of 10,000 (rwmixread 70 -> 7000); 10,000 = reads only, 0 = writes only.
    read_per_10k: u64,
    bs: [u64; 2],
    blocks: [u64; 2],
    pos: [u64; 2],
    size: u64,
    rng: SplitMix64,
    sync_every: u32,
    writes_since_sync: u32,
    bytes_left: Option<u64>,
}

impl Gen {
    /// `read_pct`: share of reads (100 for a read job, 0 for a write job). `bytes_limit`:
    /// stop after this many bytes (None: time-based).
    pub fn new(
        random: bool,
        read_pct: f64,
        bs: [u64; 2],
        size: u64,
        seed: u64,
        sync_every: u32,
        bytes_limit: Option<u64>,
    ) -> Gen {
        Gen {
            random,
            read_per_10k: (read_pct * 100.0).round().clamp(0.0, 10_000.0) as u64,
            bs,
            blocks: [(size / bs[READ]).max(1), (size / bs[WRITE]).max(1)],
            pos: [0, 0],
            size,
            rng: SplitMix64::new(seed),
            sync_every,
            writes_since_sync: 0,
            bytes_left: bytes_limit,
        }
    }

    /// The largest block size (buffer size).
    pub(crate) fn max_bs(&self) -> u64 {
        self.bs[READ].max(self.bs[WRITE])
    }

    #[inline]
    pub(crate) fn next_op(&mut self) -> Option<Op> {
        let dir = match self.read_per_10k {
            10_000 => READ,
            0 => WRITE,
            t => {
                if self.rng.below(10_000) < t {
                    READ
                } else {
                    WRITE
                }
            }
        };
        let len = self.bs[dir];
        if let Some(left) = self.bytes_left.as_mut() {
            if *left < len {
                return None;
            }
            *left -= len;
        }
        let offset = if self.random {
            self.rng.below(self.blocks[dir]) * len
        } else {
            if self.pos[dir] + len > self.size {
                self.pos[dir] = 0;
            }
            let o = self.pos[dir];
            self.pos[dir] += len;
            o
        };
        let mut sync_after = false;
        if dir == WRITE && self.sync_every > 0 {
            self.writes_since_sync += 1;
            if self.writes_since_sync == self.sync_every {
                self.writes_since_sync = 0;
                sync_after = true;
            }
        }
        Some(Op {
            dir,
            offset,
            len,
            sync_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_offsets_are_aligned_and_inside() {
        let mut g = Gen::new(true, 70.0, [8192, 65536], 1 << 20, 1, 0, None);
        let mut reads = 0;
        for _ in 0..10_000 {
            let op = g.next_op().unwrap();
            assert_eq!(op.offset % op.len, 0);
            assert!(op.offset + op.len <= 1 << 20);
            reads += (op.dir == READ) as u32;
        }
        assert!((6_800..7_200).contains(&reads), "{reads}");
    }

    #[test]
    fn sequential_wraps_and_syncs_every_n_writes() {
        let mut g = Gen::new(false, 0.0, [4096, 4096], 3 * 4096, 1, 2, None);
        let offs: Vec<(u64, bool)> = (0..5)
            .map(|_| {
                let o = g.next_op().unwrap();
                (o.offset, o.sync_after)
            })
            .collect();
        assert_eq!(
            offs,
            vec![
                (0, false),
                (4096, true),
                (8192, false),
                (0, true),
                (4096, false)
            ]
        );
    }

    #[test]
    fn a_byte_limit_stops_the_job() {
        let mut g = Gen::new(true, 100.0, [4096, 4096], 1 << 20, 1, 0, Some(3 * 4096));
        assert!(g.next_op().is_some() && g.next_op().is_some() && g.next_op().is_some());
        assert!(g.next_op().is_none());
    }
}
