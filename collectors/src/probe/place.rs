//! Where a job's I/Os go: fio's options that choose each I/O's offset and length, as a
//! validated [`Placement`] (part of [`super::ProbeSpec`]); [`super::workload::Gen`]
//! follows it.
//!
//! Units: bytes for sizes and offsets, percentages as 0..=100. fio's meanings (checked
//! against fio 3.33's `write_iolog` output, tests/probe_where.rs):
//! - `norandommap` off (the default): a random job touches every block of its region
//!   once per pass before any block repeats (fio's random map); a pass that is used up
//!   starts again (with `time_based`, `io_size` > `size` or `loops`) in the same order,
//!   as fio re-seeds its offset generator when it resets a file. Non-uniform
//!   distributions imply `norandommap`, as in fio.
//! - `rw=read:8k` (`seq_add`): sequential jobs skip 8 KiB after each I/O; negative runs
//!   backwards, wrapping to the end. `rw=randread:8` (`seq_nr`): every 8th I/O gets a new
//!   random offset, the ones between go on sequentially (`rw_sequencer=sequential`) or
//!   repeat it (`identical`).
//! - Block sizes: fixed (`bs`), `bsrange` (uniform, aligned to its minimum) or `bssplit`
//!   (weighted); random offsets are multiples of `blockalign` (default: the minimum size).
//! - `zonemode=strided`: `zonesize` bytes in a zone of `zonerange` (default zonesize), then
//!   the next zone `zonerange + zoneskip` further, wrapping at the region's end.
//! - The region: `offset` (+ `offset_increment` per numjobs copy) .. + `size`; `size` and
//!   `offset` may be percentages of the target's size. Bytes per pass: `io_size`
//!   (default `size`, may exceed it: wraps); `number_ios` ends a pass early; `loops`
//!   passes.

/// A size or a share of the target's size (fio's `size=50%`, `offset=10%`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Bytes(u64),
    Pct(f64),
}

impl Amount {
    /// Bytes of a target of `whole` bytes.
    pub fn of(self, whole: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::Pct(p) => (whole as f64 * p / 100.0) as u64,
        }
    }
}

/// How one direction picks its block sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum BsChoice {
    /// The spec's `bs` for the direction.
    Fixed,
    /// fio's `bsrange=MIN-MAX`.
    Range { min: u64, max: u64 },
    /// fio's `bssplit`: (size, percentage) pairs, percentages summing to 100.
    Split(Vec<(u64, f64)>),
}

impl BsChoice {
    /// The smallest and the largest size, given the direction's fixed `bs`.
    pub fn min_max(&self, bs: u64) -> (u64, u64) {
        match self {
            BsChoice::Fixed => (bs, bs),
            BsChoice::Range { min, max } => (*min, *max),
            BsChoice::Split(v) => {
                let it = v.iter().filter(|(_, p)| *p > 0.0).map(|(b, _)| *b);
                (it.clone().min().unwrap_or(bs), it.max().unwrap_or(bs))
            }
        }
    }
}

/// fio's `random_distribution`.
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    /// Uniform (with the random map unless `norandommap`).
    Random,
    /// `zipf:theta[:center]`.
    Zipf { theta: f64, center: Option<f64> },
    /// `pareto:h[:center]`.
    Pareto { h: f64, center: Option<f64> },
    /// `normal:dev[:center]` (fio's gauss): dev as a percentage of the region.
    Normal { dev_pct: f64, center: Option<f64> },
    /// `zoned:60/10:30/20:...` per direction: (share of accesses %, share of region %).
    Zoned([Vec<(f64, f64)>; 2]),
    /// `zoned_abs:60/20k:...` per direction: (share of accesses %, bytes).
    ZonedAbs([Vec<(f64, u64)>; 2]),
}

/// fio's `zonemode=strided`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    /// Bytes done in a zone before moving on.
    pub size: u64,
    /// Width of a zone (offsets inside it), default `size`.
    pub range: u64,
    /// Bytes skipped after a zone.
    pub skip: u64,
}

/// Where the I/Os of a job go (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// fio's random map (off with `norandommap`).
    pub randommap: bool,
    /// `rw=read:N`: bytes added after each sequential I/O (negative: backwards).
    pub seq_add: i64,
    /// `rw=randread:N`: a new random offset every N I/Os (1: every I/O).
    pub seq_nr: u32,
    /// `rw_sequencer=identical`: the I/Os between random ones repeat its offset.
    pub seq_identical: bool,
    /// Per direction [read, write].
    pub bs: [BsChoice; 2],
    /// `blockalign` per direction; None: the direction's minimum block size.
    pub blockalign: [Option<u64>; 2],
    pub bs_unaligned: bool,
    pub dist: Dist,
    pub zone: Option<Zone>,
    pub offset: Amount,
    /// `--size` as given (None: the target's size from the region's start).
    pub size: Option<u64>,
    /// Added to `offset` for each numjobs copy (job N starts N increments further).
    pub offset_increment: Amount,
    /// `size=X%` (else the target's size, i.e. `--size`).
    pub size_pct: Option<f64>,
    /// Bytes per pass; None: the region's size.
    pub io_size: Option<u64>,
    /// I/Os per pass.
    pub number_ios: Option<u64>,
    /// Passes (fio's `loops`), at least 1.
    pub loops: u32,
}

impl Default for Placement {
    fn default() -> Placement {
        Placement {
            randommap: true,
            seq_add: 0,
            seq_nr: 1,
            seq_identical: false,
            bs: [BsChoice::Fixed, BsChoice::Fixed],
            blockalign: [None, None],
            bs_unaligned: false,
            dist: Dist::Random,
            zone: None,
            offset: Amount::Bytes(0),
            size: None,
            offset_increment: Amount::Bytes(0),
            size_pct: None,
            io_size: None,
            number_ios: None,
            loops: 1,
        }
    }
}

impl Placement {
    /// Bytes of the target past the first job's region start that the last numjobs copy
    /// reaches beyond `size`: what a new file must be laid out to hold.
    pub fn extent(&self, size: u64, numjobs: u32) -> u64 {
        let inc = match self.offset_increment {
            Amount::Bytes(b) => b,
            Amount::Pct(_) => 0,
        };
        let off = match self.offset {
            Amount::Bytes(b) => b,
            Amount::Pct(_) => 0,
        };
        off + inc * numjobs.saturating_sub(1) as u64 + size
    }

    /// Whether anything needs the target's size to be known first (a percentage).
    pub fn relative(&self) -> bool {
        self.size_pct.is_some()
            || matches!(self.offset, Amount::Pct(_))
            || matches!(self.offset_increment, Amount::Pct(_))
    }
}
