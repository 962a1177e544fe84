//! fio's random map: which blocks of a job's region a pass has touched, so a random job
//! covers every block once before any repeats.
//!
//! One bit per block (a 1 TiB region of 4 KiB blocks: 32 MiB, as fio's axmap) and one
//! bit per 64-block word telling that the word is full, so finding the next free block
//! after a used one skips full stretches 4096 blocks at a time. A random pick that lands
//! on a used block takes the next free one after it (wrapping), as fio's
//! `axmap_next_free`. Bits past the last block are set from the start, so they are never
//! free.

#[derive(Debug, Clone)]
pub(crate) struct RandMap {
    words: Vec<u64>,
    /// Bit i set: `words[i]` is full.
    full: Vec<u64>,
    blocks: u64,
    used: u64,
}

impl RandMap {
    pub(crate) fn new(blocks: u64) -> RandMap {
        let nw = blocks.div_ceil(64).max(1) as usize;
        let mut m = RandMap {
            words: vec![0; nw],
            full: vec![0; nw.div_ceil(64)],
            blocks,
            used: 0,
        };
        m.reset();
        m
    }

    pub(crate) fn reset(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
        self.full.iter_mut().for_each(|w| *w = 0);
        self.used = 0;
        let tail = self.blocks % 64;
        let last = self.words.len() - 1;
        if tail != 0 || self.blocks == 0 {
            self.words[last] = if self.blocks == 0 { !0 } else { !0u64 << tail };
            self.note(last);
        }
        // Summary bits past the last word count as full.
        let nw = self.words.len();
        if !nw.is_multiple_of(64) {
            let fl = self.full.len() - 1;
            self.full[fl] |= !0u64 << (nw % 64);
        }
    }

    /// Every block of the pass is used.
    pub(crate) fn is_full(&self) -> bool {
        self.used >= self.blocks
    }

    fn note(&mut self, w: usize) {
        if self.words[w] == !0 {
            self.full[w / 64] |= 1 << (w % 64);
        }
    }

    fn is_set(&self, b: u64) -> bool {
        self.words[(b / 64) as usize] >> (b % 64) & 1 == 1
    }

    /// `b` if free, else the next free block after it (wrapping); None when full.
    pub(crate) fn free_from(&self, b: u64) -> Option<u64> {
        if self.is_full() {
            return None;
        }
        let b = b % self.blocks;
        if !self.is_set(b) {
            return Some(b);
        }
        let w = (b / 64) as usize;
        let rest = !self.words[w] & (!0u64 << (b % 64));
        if rest != 0 {
            return Some(w as u64 * 64 + rest.trailing_zeros() as u64);
        }
        let nw = self.words.len();
        // The next word that is not full, from w + 1 on, then from 0.
        let next_word = |from: usize| -> Option<usize> {
            let mut i = from;
            while i < nw {
                let fw = !self.full[i / 64] & (!0u64 << (i % 64));
                if fw != 0 {
                    return Some((i / 64) * 64 + fw.trailing_zeros() as usize);
                }
                i = (i / 64 + 1) * 64;
            }
            None
        };
        let wf = next_word(w + 1).or_else(|| next_word(0))?;
        Some(wf as u64 * 64 + (!self.words[wf]).trailing_zeros() as u64)
    }

    /// Marks up to `n` blocks from `b`, stopping at the first used one or the region's
    /// end; returns how many it marked (at least 1 when `b` is free).
    pub(crate) fn mark(&mut self, b: u64, n: u64) -> u64 {
        let mut k = 0;
        while k < n && b + k < self.blocks && !self.is_set(b + k) {
            let x = b + k;
            let w = (x / 64) as usize;
            self.words[w] |= 1 << (x % 64);
            self.note(w);
            k += 1;
        }
        self.used += k;
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_used_block_gives_the_next_free_one_and_wraps() {
        let mut m = RandMap::new(200);
        assert_eq!(m.mark(5, 1), 1);
        assert_eq!(m.free_from(5), Some(6));
        for b in 0..200 {
            if b != 3 && b != 5 {
                m.mark(b, 1);
            }
        }
        assert_eq!(m.free_from(150), Some(3));
        assert_eq!(m.mark(3, 4), 1);
        assert!(m.is_full());
        assert_eq!(m.free_from(0), None);
        m.reset();
        assert_eq!(m.free_from(199), Some(199));
        assert!(!m.is_full());
    }

    #[test]
    fn marking_stops_at_a_used_block() {
        let mut m = RandMap::new(10_000);
        m.mark(70, 1);
        assert_eq!(m.mark(60, 16), 10);
        assert_eq!(m.free_from(60), Some(71));
    }
}
