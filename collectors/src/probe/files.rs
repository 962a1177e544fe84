//! Several files per job (fio's `nrfiles`, `filename=a:b:c`): which file each I/O goes to.
//!
//! fio keeps each file's own state (its sequential position, its random map) and picks the
//! file of the next I/O by `file_service_type` (fio 3.33's `get_next_file`):
//! - `roundrobin` (fio's default): the next file after every I/O;
//! - `sequential`: one file until its pass is done, then the next;
//! - `random`: a file drawn at random for every I/O.
//!
//! So each file has its own [`Gen`] over its own size, and [`JobGen`] picks among them.
//! A file whose pass is done is left out; when every file is done the job ends, or, with
//! `time_based`, every file starts a new pass (fio resets its files then). A `trimwrite`
//! pair (discard, then write of the same block) stays on one file.
//!
//! What must stay true: `next_op` allocates nothing; with one file it is that file's
//! [`Gen`] unchanged (same offsets, same passes as before several files were run).

use super::rng::SplitMix64;
use super::workload::{Gen, Op};

/// fio's `file_service_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileService {
    RoundRobin,
    Sequential,
    Random,
}

impl FileService {
    pub fn parse(s: &str) -> Option<FileService> {
        // fio allows a suffix (`random:4`, `roundrobin:2`: switch after N I/Os); the kind
        // is what is before it.
        Some(match s.split(':').next().unwrap_or(s) {
            "roundrobin" => FileService::RoundRobin,
            "sequential" => FileService::Sequential,
            "random" => FileService::Random,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            FileService::RoundRobin => "roundrobin",
            FileService::Sequential => "sequential",
            FileService::Random => "random",
        }
    }
}

/// The I/O generator of one job over its files.
#[derive(Debug, Clone)]
pub(crate) struct JobGen {
    gens: Vec<Gen>,
    done: Vec<bool>,
    service: FileService,
    /// The file of the last I/O.
    cur: usize,
    time_based: bool,
    rng: SplitMix64,
    /// A new pass of every file began (time-based): the caller drops cached pages.
    wrapped: bool,
}

impl JobGen {
    /// `gens`: one per file, in the job's file order. With several files each is built
    /// without `time_based` (a file's pass must end for the next to start); `time_based`
    /// here says whether the job starts them over.
    pub(crate) fn new(gens: Vec<Gen>, service: FileService, time_based: bool, seed: u64) -> JobGen {
        assert!(!gens.is_empty(), "a job has a file");
        JobGen {
            done: vec![false; gens.len()],
            gens,
            service,
            cur: usize::MAX,
            time_based,
            rng: SplitMix64::new(seed ^ 0xF11E_5E4C),
            wrapped: false,
        }
    }

    /// The largest block size (buffer size).
    /// The first file's generator (a job with verify has one file: several are refused).
    pub(crate) fn first(&self) -> &Gen {
        &self.gens[0]
    }

    pub(crate) fn max_bs(&self) -> u64 {
        self.gens[0].max_bs()
    }

    /// Whether a time-based pass began again since the last call.
    #[inline]
    pub(crate) fn take_wrapped(&mut self) -> bool {
        let mut w = std::mem::take(&mut self.wrapped);
        for g in &mut self.gens {
            w |= g.take_wrapped();
        }
        w
    }

    /// The next I/O and its file (`Op::file`).
    #[inline]
    pub(crate) fn next_op(&mut self) -> Option<Op> {
        if self.gens.len() == 1 {
            return self.gens[0].next_op();
        }
        // Every file is tried at most once per round, then (time-based) once more after
        // all were started over.
        for _ in 0..2 {
            for _ in 0..self.gens.len() {
                let f = self.pick();
                // A done file is passed over: the next pick starts after it.
                self.cur = f;
                if self.done[f] {
                    continue;
                }
                match self.gens[f].next_op() {
                    Some(op) => {
                        return Some(Op {
                            file: f as u32,
                            ..op
                        })
                    }
                    None => self.done[f] = true,
                }
            }
            if !self.done.iter().all(|d| *d) {
                continue;
            }
            if !self.time_based {
                return None;
            }
            self.gens.iter_mut().for_each(Gen::restart);
            self.done.iter_mut().for_each(|d| *d = false);
            // The new pass starts at the first file, as the first did.
            self.cur = usize::MAX;
            self.wrapped = true;
        }
        None
    }

    /// The file for the next I/O (it may be done: the caller tries another).
    fn pick(&mut self) -> usize {
        let n = self.gens.len();
        if self.cur < n && self.gens[self.cur].mid_pair() {
            return self.cur;
        }
        match self.service {
            FileService::RoundRobin => self.cur.wrapping_add(1) % n,
            FileService::Sequential if self.cur < n && !self.done[self.cur] => self.cur,
            FileService::Sequential => {
                let from = if self.cur < n { self.cur } else { n - 1 };
                (from + 1) % n
            }
            FileService::Random => {
                let open: u64 = self.done.iter().filter(|d| !**d).count() as u64;
                let mut k = self.rng.below(open.max(1));
                for (i, d) in self.done.iter().enumerate() {
                    if !*d {
                        if k == 0 {
                            return i;
                        }
                        k -= 1;
                    }
                }
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::place::Placement;
    use crate::probe::workload::{JobShape, TrimMode};

    fn gens(n: usize, size: u64, random: bool, place: &Placement) -> Vec<Gen> {
        (0..n)
            .map(|i| {
                Gen::new(JobShape {
                    random,
                    read_pct: 100.0,
                    bs: [4096, 4096],
                    place,
                    target_size: size,
                    size: None,
                    job: 0,
                    seed: 7 + i as u64,
                    sync_every: 0,
                    time_based: false,
                    trim: TrimMode::None,
                })
            })
            .collect()
    }

    fn run(g: &mut JobGen, n: usize) -> Vec<(u32, u64)> {
        std::iter::from_fn(|| g.next_op())
            .take(n)
            .map(|o| (o.file, o.offset / 4096))
            .collect()
    }

    #[test]
    fn roundrobin_takes_the_next_file_after_every_io_and_ends_when_all_are_done() {
        let p = Placement::default();
        let mut g = JobGen::new(gens(3, 8192, false, &p), FileService::RoundRobin, false, 1);
        assert_eq!(
            run(&mut g, 100),
            vec![(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
        );
    }

    #[test]
    fn a_file_done_early_is_passed_over_and_the_others_finish() {
        let p = Placement::default();
        let mut g = gens(2, 4096, false, &p);
        g.extend(gens(1, 3 * 4096, false, &p));
        let mut g = JobGen::new(g, FileService::RoundRobin, false, 1);
        assert_eq!(
            run(&mut g, 100),
            vec![(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)]
        );
    }

    #[test]
    fn sequential_finishes_a_file_before_the_next_and_time_based_starts_them_over() {
        let p = Placement::default();
        let mut g = JobGen::new(gens(2, 8192, false, &p), FileService::Sequential, true, 1);
        assert_eq!(
            run(&mut g, 6),
            vec![(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1)]
        );
        assert!(g.take_wrapped(), "a new pass of every file");
    }

    #[test]
    fn random_service_spreads_ios_and_each_file_keeps_its_random_map() {
        let p = Placement::default();
        let mut g = JobGen::new(gens(4, 64 * 4096, true, &p), FileService::Random, false, 3);
        let ops = run(&mut g, 10_000);
        assert_eq!(ops.len(), 4 * 64, "every block of every file once");
        for f in 0..4 {
            let mut b: Vec<u64> = ops.iter().filter(|o| o.0 == f).map(|o| o.1).collect();
            b.sort_unstable();
            assert_eq!(b, (0..64).collect::<Vec<_>>(), "file {f}");
        }
        // Not one file after another: the first 16 I/Os touch more than one file.
        let first: std::collections::BTreeSet<u32> = ops[..16].iter().map(|o| o.0).collect();
        assert!(first.len() > 1, "{first:?}");
    }
}
