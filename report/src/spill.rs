//! Window values the report writes once, in order, and reads back later (issue 13: the
//! report's memory flat in the run's length): the burst finder's 10 ms bins and
//! rates.csv's 100 ms sums grow with the run (8 bytes per window and series: 23 MB an
//! hour of 4 devices for the bins alone), so they go to an unnamed scratch file
//! ([`tempfile::tempfile_in`]: `O_TMPFILE` in the run directory, never visible by a name
//! and gone when the report ends, however it ends) and are read back in 64 KiB blocks.
//! Without a scratch directory they stay in memory (passes that keep no windows, tests).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes buffered while writing and read at once when reading back.
const BLOCK: usize = 64 * 1024;

/// A sequence of 8-byte words appended in order, then read back any number of times.
#[derive(Debug)]
pub(crate) enum Words {
    Mem(Vec<u64>),
    File {
        f: File,
        /// Words not written yet (whole blocks are written at `written`).
        buf: Vec<u8>,
        /// Bytes of the file written, all of them whole words.
        written: u64,
        len: usize,
        /// Writing ended ([`Words::finish`]): the words can be read.
        done: bool,
    },
}

impl Default for Words {
    fn default() -> Self {
        Words::Mem(vec![])
    }
}

impl Words {
    /// In memory when `dir` is None, else in an unnamed file in `dir` (or, when `dir`
    /// refuses one, the system's temporary directory). A scratch file that cannot be
    /// written (its file system full) hands what it holds to memory and the words go on
    /// there: the report still ends, only with the memory it would have used before.
    pub fn new(dir: Option<&Path>) -> anyhow::Result<Words> {
        let Some(dir) = dir else {
            return Ok(Words::Mem(vec![]));
        };
        let f = tempfile::tempfile_in(dir)
            .or_else(|_| tempfile::tempfile())
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot make the report's scratch file in {} or the temporary directory: {e}; free some space or make it writable",
                    dir.display()
                )
            })?;
        Ok(Words::File {
            f,
            buf: Vec::with_capacity(BLOCK),
            written: 0,
            len: 0,
            done: false,
        })
    }

    #[inline]
    pub fn push(&mut self, x: u64) {
        match self {
            Words::Mem(v) => v.push(x),
            Words::File { buf, len, .. } => {
                buf.extend_from_slice(&x.to_le_bytes());
                *len += 1;
                if buf.len() >= BLOCK {
                    self.write_block();
                }
            }
        }
    }

    /// Writes the buffered words at the file's end; on an error, moves every word to
    /// memory (what the file holds is read back; a short write counts for nothing).
    fn write_block(&mut self) {
        let Words::File {
            f, buf, written, ..
        } = self
        else {
            return;
        };
        if buf.is_empty() {
            return;
        }
        if f.write_all_at(buf, *written).is_ok() {
            *written += buf.len() as u64;
            buf.clear();
            return;
        }
        let mut bytes = vec![0u8; *written as usize];
        let words = match f.read_exact_at(&mut bytes, 0) {
            Ok(()) => bytes.chunks_exact(8).chain(buf.chunks_exact(8)),
            // Cannot happen for a file we just wrote; keep the buffer at least.
            Err(_) => [].chunks_exact(8).chain(buf.chunks_exact(8)),
        };
        let v: Vec<u64> = words
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        *self = Words::Mem(v);
    }

    #[inline]
    pub(crate) fn push_f64(&mut self, x: f64) {
        self.push(x.to_bits());
    }

    /// Ends the writing; after it the words can be read.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        self.write_block();
        if let Words::File { done, .. } = self {
            *done = true;
        }
        Ok(())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            Words::Mem(v) => v.len(),
            Words::File { len, .. } => *len,
        }
    }

    /// The words in order (after [`Words::finish`]; a file not finished reads as empty).
    pub fn iter(&self) -> WordIter<'_> {
        match self {
            Words::Mem(v) => WordIter::Mem(v.iter()),
            Words::File { f, len, done, .. } => WordIter::File {
                f: Some(f),
                buf: vec![],
                at: 0,
                pos: 0,
                left: if *done { *len } else { 0 },
            },
        }
    }

    /// The words as f64.
    pub(crate) fn iter_f64(&self) -> impl Iterator<Item = f64> + '_ {
        self.iter().map(f64::from_bits)
    }
}

/// [`Words::iter`].
pub(crate) enum WordIter<'a> {
    Mem(std::slice::Iter<'a, u64>),
    File {
        f: Option<&'a File>,
        buf: Vec<u8>,
        /// Next byte of `buf` to hand out.
        at: usize,
        /// File offset of the next block.
        pos: u64,
        /// Words not handed out yet.
        left: usize,
    },
}

impl Iterator for WordIter<'_> {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Option<u64> {
        match self {
            WordIter::Mem(it) => it.next().copied(),
            WordIter::File {
                f,
                buf,
                at,
                pos,
                left,
            } => {
                if *left == 0 {
                    return None;
                }
                if *at + 8 > buf.len() {
                    let f = (*f)?;
                    let want = (*left * 8).min(BLOCK);
                    buf.resize(want, 0);
                    // A scratch file we wrote ourselves: a short read is damage.
                    if f.read_exact_at(buf, *pos).is_err() {
                        *left = 0;
                        return None;
                    }
                    *pos += want as u64;
                    *at = 0;
                }
                let x = u64::from_le_bytes(buf[*at..*at + 8].try_into().unwrap());
                *at += 8;
                *left -= 1;
                Some(x)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            WordIter::Mem(it) => it.len(),
            WordIter::File { left, .. } => *left,
        };
        (n, Some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_file_reads_back_what_was_written_and_leaves_no_name() {
        let d = tempfile::tempdir().unwrap();
        let mut w = Words::new(Some(d.path())).unwrap();
        let mut m = Words::new(None).unwrap();
        // Past one block, not a whole number of blocks.
        let n = BLOCK / 8 * 3 + 5;
        for k in 0..n {
            let x = (k as f64 * 0.1 - 7.0).to_bits();
            w.push(x);
            m.push(x);
        }
        w.finish().unwrap();
        m.finish().unwrap();
        assert!(matches!(w, Words::File { .. }));
        assert_eq!(w.len(), n);
        let a: Vec<u64> = w.iter().collect();
        let b: Vec<u64> = m.iter().collect();
        assert_eq!(a, b);
        // Twice, and two readers at once.
        let both: Vec<(u64, u64)> = w.iter().zip(w.iter()).collect();
        assert!(both.iter().all(|(x, y)| x == y));
        assert_eq!(both.len(), n);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_full_file_system_moves_the_words_to_memory_and_loses_none() {
        // /dev/full: every write fails with ENOSPC, as a full run directory's would.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut w = Words::File {
            f,
            buf: Vec::with_capacity(BLOCK),
            written: 0,
            len: 0,
            done: false,
        };
        let n = BLOCK / 8 * 2 + 3;
        for k in 0..n as u64 {
            w.push(k * 3);
        }
        w.finish().unwrap();
        assert!(matches!(w, Words::Mem(_)), "{:?}", w.len());
        assert_eq!(w.len(), n);
        assert!(w.iter().enumerate().all(|(k, x)| x == k as u64 * 3));
    }
}
