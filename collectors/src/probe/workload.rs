//! What each job does next: direction, offset and length of every I/O, and when to sync.
//!
//! fio's rules (the options are in [`super::place`], whose doc gives their meanings): a
//! mixed job draws each I/O's direction from the mix; random offsets are multiples of the
//! direction's block alignment, chosen by the distribution and, by default, through the
//! random map (every block once per pass); sequential jobs keep one position per
//! direction, add the stride after each I/O and wrap at the region's end (or the zone's);
//! `--fsync N` / `--fdatasync N` sync after every N writes; without `--time-based` a pass
//! ends after `io_size` bytes (default `size`) or `number_ios` I/Os, and the job after
//! `loops` passes. Each pass starts from the region's start with a fresh random map and
//! the offset generator re-seeded, so passes repeat (fio does the same).
//!
//! What must stay true: `next_op` allocates nothing; an I/O never crosses the job's
//! region (or zone) end.

use super::place::{BsChoice, Dist, Placement, Zone};
use super::randmap::RandMap;
use super::rng::SplitMix64;
use super::stats::{READ, TRIM, WRITE};

/// How a job discards (fio's third direction): a trim job's I/Os are placed as a write
/// job's would be (the write block size, the write random map) and issued as discards;
/// `trimwrite` discards a block, then writes the same block, then the next (fio's
/// `set_rw_ddir`: a write follows the trim at its offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrimMode {
    None,
    Trim,
    TrimWrite,
}

impl TrimMode {
    pub(crate) fn of(rw: super::Rw) -> TrimMode {
        match rw {
            super::Rw::Trim | super::Rw::RandTrim => TrimMode::Trim,
            super::Rw::TrimWrite => TrimMode::TrimWrite,
            _ => TrimMode::None,
        }
    }
}

/// One I/O to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub dir: usize,
    pub offset: u64,
    pub len: u64,
    /// Sync after this write completes.
    pub(crate) sync_after: bool,
    /// Which of the job's files (0 with one; see `files::JobGen`).
    pub(crate) file: u32,
}

/// What a job's generator is made from.
pub(crate) struct JobShape<'a> {
    pub random: bool,
    /// Share of reads (100 for a read job, 0 for a write job).
    pub read_pct: f64,
    /// The fixed block sizes [read, write] (the largest, with bsrange/bssplit).
    pub bs: [u64; 2],
    pub place: &'a Placement,
    /// The target's size (what percentages are of).
    pub target_size: u64,
    /// `--size` as given (None: the target's size from the region's start).
    pub size: Option<u64>,
    /// This job's index among its numjobs copies (offset_increment).
    pub job: u32,
    pub seed: u64,
    pub sync_every: u32,
    pub time_based: bool,
    pub trim: TrimMode,
}

/// Per direction.
#[derive(Debug, Clone)]
struct DirGen {
    choice: BsChoice,
    min_bs: u64,
    max_bs: u64,
    ba: u64,
    /// Where the next sequential I/O would start (relative to the zone or region).
    pos: u64,
    last_start: Option<u64>,
    map: usize,
}

/// A non-uniform distribution's constants.
#[derive(Debug, Clone)]
enum DistGen {
    Uniform,
    Zipf {
        theta: f64,
        zetan: f64,
        zeta2: f64,
        n: u64,
        off: u64,
    },
    Pareto {
        pow: f64,
        n: u64,
        off: u64,
    },
    Normal {
        stddev: u64,
        n: u64,
        off: u64,
    },
    Zoned,
}

/// The I/O generator of one job.
#[derive(Debug, Clone)]
pub(crate) struct Gen {
    random: bool,
    /// Reads out of 10,000 (rwmixread 70 -> 7000); 10,000 = reads only, 0 = writes only.
    read_per_10k: u64,
    d: [DirGen; 2],
    maps: Vec<RandMap>,
    randommap: bool,
    dist: Dist,
    dist_gen: DistGen,
    region_start: u64,
    region_len: u64,
    zone: Option<Zone>,
    zone_base: u64,
    zone_bytes: u64,
    seq_add: i64,
    seq_nr: u32,
    seq_identical: bool,
    bs_unaligned: bool,
    issued: u64,
    /// Mix and block sizes.
    rng: SplitMix64,
    /// Offsets (re-seeded per pass).
    off_rng: SplitMix64,
    off_seed: u64,
    sync_every: u32,
    writes_since_sync: u32,
    time_based: bool,
    pass_bytes: u64,
    pass_ios: Option<u64>,
    done_bytes: u64,
    done_ios: u64,
    loops_left: u32,
    /// A time-based pass just began again (the random map was full, or a sequential run
    /// wrapped): fio drops the file's cached pages then (`loop_cache_invalidate`).
    wrapped: bool,
    /// `loops` as given, for `restart`.
    loops: u32,
    trim: TrimMode,
    /// `trimwrite`: the block just discarded, to be written next.
    trimmed: Option<(u64, u64)>,
}

/// A multiplicative scramble (a bijection on u64), so a skewed distribution's hot blocks
/// are spread over the region rather than packed at its start, as fio does.
#[inline]
fn scramble(v: u64) -> u64 {
    v.wrapping_mul(0x61C8_8646_80B5_83EB)
}

impl Gen {
    pub(crate) fn new(s: JobShape) -> Gen {
        let p = s.place;
        let whole = s.target_size;
        let region_start =
            (p.offset.of(whole) + s.job as u64 * p.offset_increment.of(whole)).min(whole);
        let left = whole - region_start;
        let region_len = match (p.size_pct, s.size) {
            (Some(pct), _) => ((whole as f64 * pct / 100.0) as u64).min(left),
            (None, Some(sz)) => sz.min(left),
            (None, None) => left,
        };
        let mk = |dir: usize| {
            let (min_bs, max_bs) = p.bs[dir].min_max(s.bs[dir]);
            DirGen {
                choice: p.bs[dir].clone(),
                min_bs,
                max_bs,
                ba: p.blockalign[dir].unwrap_or(min_bs).max(1),
                pos: 0,
                last_start: None,
                map: 0,
            }
        };
        let mut d = [mk(READ), mk(WRITE)];
        let space = p
            .zone
            .map(|z| z.range.min(region_len))
            .unwrap_or(region_len);
        let randommap = s.random && p.randommap && p.dist == Dist::Random;
        let mut maps = vec![];
        if randommap {
            maps.push(RandMap::new(last_block(&d[READ], space)));
            if d[WRITE].ba != d[READ].ba || d[WRITE].min_bs != d[READ].min_bs {
                maps.push(RandMap::new(last_block(&d[WRITE], space)));
                d[WRITE].map = 1;
            }
        }
        let mut rng = SplitMix64::new(s.seed);
        let n = last_block(&d[READ], space)
            .min(last_block(&d[WRITE], space))
            .max(1);
        let dist_gen = dist_gen(&p.dist, n, &mut rng);
        let off_seed = s.seed ^ 0x000F_F5E7;
        Gen {
            random: s.random,
            // A trim job is placed as a write job (see TrimMode).
            read_per_10k: match s.trim {
                TrimMode::None => (s.read_pct * 100.0).round().clamp(0.0, 10_000.0) as u64,
                _ => 0,
            },
            d,
            maps,
            randommap,
            dist: p.dist.clone(),
            dist_gen,
            region_start,
            region_len,
            zone: p.zone.map(|z| Zone {
                range: z.range.min(region_len),
                ..z
            }),
            zone_base: 0,
            zone_bytes: 0,
            seq_add: p.seq_add,
            seq_nr: p.seq_nr.max(1),
            seq_identical: p.seq_identical,
            bs_unaligned: p.bs_unaligned,
            issued: 0,
            rng,
            off_rng: SplitMix64::new(off_seed),
            off_seed,
            sync_every: s.sync_every,
            writes_since_sync: 0,
            time_based: s.time_based,
            pass_bytes: p.io_size.unwrap_or(region_len),
            pass_ios: p.number_ios,
            done_bytes: 0,
            done_ios: 0,
            loops_left: p.loops.max(1),
            loops: p.loops.max(1),
            wrapped: false,
            trim: s.trim,
            trimmed: None,
        }
    }

    /// Whether a time-based pass began again since the last call (see `wrapped`).
    #[inline]
    pub(crate) fn take_wrapped(&mut self) -> bool {
        std::mem::take(&mut self.wrapped)
    }

    /// Whether random offsets go through the random map (fio's `file_randommap`).
    pub(crate) fn random_map(&self) -> bool {
        self.randommap
    }

    /// The largest block size (buffer size).
    pub(crate) fn max_bs(&self) -> u64 {
        self.d[READ].max_bs.max(self.d[WRITE].max_bs)
    }

    /// Starts the job over (all its loops): a time-based job of several files starts
    /// every file over when all are done (`files::JobGen`).
    pub(crate) fn restart(&mut self) {
        self.loops_left = self.loops;
        self.trimmed = None;
        self.new_pass();
    }

    /// Whether the next I/O must follow the last one on this file (a `trimwrite` write).
    #[inline]
    pub(crate) fn mid_pair(&self) -> bool {
        self.trimmed.is_some()
    }

    /// Starts a pass over: positions, random map, zone and offset generator.
    fn new_pass(&mut self) {
        for d in &mut self.d {
            d.pos = 0;
            d.last_start = None;
        }
        self.maps.iter_mut().for_each(RandMap::reset);
        self.off_rng = SplitMix64::new(self.off_seed);
        self.zone_base = 0;
        self.zone_bytes = 0;
        self.issued = 0;
        self.done_bytes = 0;
        self.done_ios = 0;
    }

    #[inline]
    pub(crate) fn next_op(&mut self) -> Option<Op> {
        match self.trim {
            TrimMode::None => self.next_rw(),
            TrimMode::Trim => self.next_rw().map(|o| Op { dir: TRIM, ..o }),
            TrimMode::TrimWrite => match self.trimmed.take() {
                // The write of the block just discarded: it counts for the pass (fio
                // doubles a trimwrite job's bytes and number_ios: each block twice).
                Some((offset, len)) => Some(self.count_write(offset, len)),
                None => {
                    if self.pass_done() {
                        return None;
                    }
                    let (rel, len) = self.place(WRITE)?;
                    self.zone_bytes += len;
                    let offset = self.region_start + self.zone_base + rel;
                    self.trimmed = Some((offset, len));
                    Some(Op {
                        dir: TRIM,
                        offset,
                        len,
                        sync_after: false,
                        file: 0,
                    })
                }
            },
        }
    }

    /// A `trimwrite` job's write of the block it just discarded.
    fn count_write(&mut self, offset: u64, len: u64) -> Op {
        self.done_bytes += len;
        self.done_ios += 1;
        let mut sync_after = false;
        if self.sync_every > 0 {
            self.writes_since_sync += 1;
            if self.writes_since_sync == self.sync_every {
                self.writes_since_sync = 0;
                sync_after = true;
            }
        }
        Op {
            dir: WRITE,
            offset,
            len,
            sync_after,
            file: 0,
        }
    }

    /// Whether the job has no I/O left: the pass is done and so are its loops (a new
    /// pass begins when loops are left).
    fn pass_done(&mut self) -> bool {
        if self.pass_ios.is_some_and(|n| self.done_ios >= n)
            || (!self.time_based && self.done_bytes >= self.pass_bytes)
        {
            if self.time_based || self.loops_left <= 1 {
                return true;
            }
            self.loops_left -= 1;
            self.new_pass();
        }
        false
    }

    /// The next read or write (a trim job's I/Os are placed as writes).
    #[inline]
    fn next_rw(&mut self) -> Option<Op> {
        if self.pass_done() {
            return None;
        }
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
        let (rel, len) = self.place(dir)?;
        self.done_bytes += len;
        self.done_ios += 1;
        self.zone_bytes += len;
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
            offset: self.region_start + self.zone_base + rel,
            len,
            sync_after,
            file: 0,
        })
    }

    /// fio's strided zones: after `size` bytes in a zone, the next one.
    fn zone_step(&mut self, dir: usize) -> u64 {
        let Some(z) = self.zone else {
            return self.region_len;
        };
        if self.zone_bytes >= z.size {
            self.zone_bytes = 0;
            self.zone_base += z.range + z.skip;
            if self.zone_base + z.range > self.region_len {
                self.zone_base = 0;
            }
            self.d[dir].pos = 0;
        }
        if self.d[dir].pos >= z.range {
            self.d[dir].pos = 0;
        }
        if z.range > 0 && self.zone_bytes.is_multiple_of(z.range) {
            self.maps.iter_mut().for_each(RandMap::reset);
        }
        z.range
    }

    /// The next I/O's offset (relative to the zone or region) and length.
    fn place(&mut self, dir: usize) -> Option<(u64, u64)> {
        let space = self.zone_step(dir);
        if self.d[dir].min_bs > space {
            return None;
        }
        let d = &self.d[dir];
        // A sequential run that reaches the end takes a random offset instead (fio).
        let run_ended = !self.seq_identical && d.pos + d.min_bs > space;
        let random_now =
            self.random && (self.issued.is_multiple_of(self.seq_nr as u64) || run_ended);
        self.issued += 1;
        let (off, len) = if random_now {
            let b = self.rand_block(dir, space)?;
            let ba = self.d[dir].ba;
            let off = b * ba;
            let mut len = self.pick_len(dir, off, space);
            if self.randommap {
                let m = self.d[dir].map;
                let n = self.maps[m].mark(b, len.div_ceil(ba)).max(1);
                len = len.min(n * ba);
            }
            (off, len)
        } else if self.random && self.seq_identical && self.d[dir].last_start.is_some() {
            let off = self.d[dir].last_start.unwrap_or(0);
            (off, self.pick_len(dir, off, space))
        } else {
            let off = self.seq_pos(dir, space);
            if self.time_based
                && self.d[dir].last_start.is_some_and(|l| {
                    if self.seq_add < 0 {
                        off > l
                    } else {
                        off < l
                    }
                })
            {
                self.wrapped = true;
            }
            (off, self.pick_len(dir, off, space))
        };
        let d = &mut self.d[dir];
        d.last_start = Some(off);
        d.pos = off + len;
        Some((off, len))
    }

    /// fio's next sequential offset: the last I/O's end plus the stride, wrapping.
    fn seq_pos(&self, dir: usize, space: u64) -> u64 {
        let d = &self.d[dir];
        let mut pos = if d.pos >= space { 0 } else { d.pos };
        if pos != 0 && self.seq_add != 0 {
            let p = pos as i128 + self.seq_add as i128;
            pos = if p < 0 || p >= space as i128 {
                if self.seq_add > 0 {
                    0
                } else {
                    (space as i128 + self.seq_add as i128).max(0) as u64
                }
            } else {
                p as u64
            };
        }
        if pos + d.min_bs > space {
            0
        } else {
            pos
        }
    }

    /// A random block (in blockalign units) of `space`, by the distribution.
    fn rand_block(&mut self, dir: usize, space: u64) -> Option<u64> {
        let lastb = last_block(&self.d[dir], space);
        if lastb == 0 {
            return None;
        }
        let r = &mut self.off_rng;
        let b = match &self.dist_gen {
            DistGen::Uniform => r.below(lastb),
            DistGen::Zipf {
                theta,
                zetan,
                zeta2,
                n,
                off,
            } => {
                let u = r.unit_open();
                let uz = u * zetan;
                let v = if uz < 1.0 {
                    0
                } else if uz < 1.0 + 0.5f64.powf(*theta) {
                    1
                } else {
                    let nf = *n as f64;
                    let alpha = 1.0 / (1.0 - theta);
                    let eta = (1.0 - (2.0 / nf).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
                    ((nf * (eta * u - eta + 1.0).powf(alpha)) as u64).min(n - 1)
                };
                scramble(v).wrapping_add(*off) % n % lastb
            }
            DistGen::Pareto { pow, n, off } => {
                let v = ((n - 1) as f64 * r.unit_open().powf(*pow)) as u64;
                scramble(v).wrapping_add(*off) % n % lastb
            }
            DistGen::Normal { stddev, n, off } => {
                let mut sum = 0u64;
                for _ in 0..12 {
                    sum += r.below(n + 1);
                }
                let mut v = sum.div_ceil(12) as i64;
                if *stddev > 0 {
                    let mut dev = r.below(*stddev) as i64 - (*stddev / 2) as i64;
                    while dev != 0 && (v + dev >= *n as i64 || v + dev < 0) {
                        dev /= 2;
                    }
                    v += dev;
                }
                scramble(v as u64).wrapping_add(*off) % n % lastb
            }
            DistGen::Zoned => zoned_block(&self.dist, dir, lastb, self.d[dir].ba, r),
        };
        if !self.randommap {
            return Some(b);
        }
        let m = self.d[dir].map;
        match self.maps[m].free_from(b) {
            Some(f) => Some(f),
            None => {
                // The pass covered every block: a new one (fio's time_based reset).
                self.maps[m].reset();
                self.wrapped = true;
                self.maps[m].free_from(b)
            }
        }
    }

    /// The I/O's length: fixed, or from bsrange/bssplit, fitting `space` from `off`.
    fn pick_len(&mut self, dir: usize, off: u64, space: u64) -> u64 {
        let d = &self.d[dir];
        if d.min_bs == d.max_bs {
            return d.min_bs;
        }
        let fits = |l: u64| off + l <= space;
        for _ in 0..64 {
            let mut l = match &d.choice {
                BsChoice::Split(v) => {
                    let r = self.rng.below(10_000) as f64 / 100.0;
                    let mut cum = 0.0;
                    let mut pick = d.min_bs;
                    for (b, p) in v.iter().filter(|(_, p)| *p > 0.0) {
                        cum += p;
                        pick = *b;
                        if r < cum && fits(*b) {
                            break;
                        }
                    }
                    pick
                }
                _ => d.min_bs + (d.max_bs as f64 * self.rng.unit_open()) as u64,
            };
            if !self.bs_unaligned {
                l -= l % d.min_bs;
            }
            l = l.clamp(d.min_bs, d.max_bs);
            if fits(l) {
                return l;
            }
        }
        d.min_bs
    }
}

/// fio's `last_block`: how many aligned starts fit a block of the minimum size.
fn last_block(d: &DirGen, space: u64) -> u64 {
    let mut max = space;
    if d.min_bs > d.ba {
        max = max.saturating_sub(d.min_bs - d.ba);
    }
    max / d.ba
}

fn dist_gen(dist: &Dist, n: u64, rng: &mut SplitMix64) -> DistGen {
    let off = |center: &Option<f64>, rng: &mut SplitMix64| match center {
        Some(c) => (n as f64 * c) as u64,
        None => rng.next_u64() >> 32,
    };
    match dist {
        Dist::Random => DistGen::Uniform,
        Dist::Zipf { theta, center } => {
            // Cap the sum as fio does (10M terms: precise enough, and bounded).
            let zetan = (1..=n.min(10_000_000))
                .map(|i| (1.0 / i as f64).powf(*theta))
                .sum();
            DistGen::Zipf {
                theta: *theta,
                zetan,
                zeta2: 1.0 + 0.5f64.powf(*theta),
                n,
                off: off(center, rng),
            }
        }
        Dist::Pareto { h, center } => DistGen::Pareto {
            pow: h.ln() / (1.0 - h).ln(),
            n,
            off: off(center, rng),
        },
        Dist::Normal { dev_pct, center } => DistGen::Normal {
            stddev: ((n as f64 * dev_pct / 100.0).ceil() as u64).min(n / 2),
            n,
            off: center
                .map(|c| (n as f64 * (c - 0.5)).rem_euclid(n as f64) as u64)
                .unwrap_or(0),
        },
        Dist::Zoned(_) | Dist::ZonedAbs(_) => DistGen::Zoned,
    }
}

/// fio's zoned distributions: pick a zone by its share of accesses, then a uniform block
/// in it (zones past the region's end are cut at it).
fn zoned_block(dist: &Dist, dir: usize, lastb: u64, ba: u64, r: &mut SplitMix64) -> u64 {
    let v = 1.0 + r.below(100) as f64;
    let (start, end) = match dist {
        Dist::Zoned(z) => {
            let (mut acc, mut sz) = (0.0, 0.0);
            let mut out = (0, lastb);
            for (a, s) in &z[dir] {
                let from = sz;
                acc += a;
                sz += s;
                if v <= acc + 1e-9 {
                    out = (
                        (from * lastb as f64 / 100.0) as u64,
                        (sz * lastb as f64 / 100.0) as u64,
                    );
                    break;
                }
            }
            out
        }
        Dist::ZonedAbs(z) => {
            let (mut acc, mut bytes) = (0.0, 0u64);
            let mut out = (0, lastb);
            for (a, b) in &z[dir] {
                let from = bytes;
                acc += a;
                bytes += b;
                if v <= acc + 1e-9 {
                    out = (from / ba, bytes / ba);
                    break;
                }
            }
            out
        }
        _ => (0, lastb),
    };
    let start = start.min(lastb - 1);
    let end = end.clamp(start + 1, lastb);
    start + r.below(end - start)
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
