//! Gen's unit tests (beside workload.rs to keep it short). The offset sequences expected
//! here are the ones fio 3.33's `write_iolog` showed for the same options (4 KiB blocks
//! of a 256 KiB file); tests/probe_where.rs checks them against fio itself.

use super::*;
use crate::probe::place::Amount;

struct G {
    random: bool,
    read_pct: f64,
    bs: [u64; 2],
    size: u64,
    place: Placement,
    time_based: bool,
    job: u32,
    sync_every: u32,
    trim: TrimMode,
}

impl G {
    fn new(random: bool, bs: u64, size: u64) -> G {
        G {
            random,
            read_pct: 100.0,
            bs: [bs, bs],
            size,
            place: Placement::default(),
            time_based: false,
            job: 0,
            sync_every: 0,
            trim: TrimMode::None,
        }
    }

    fn gen(&self) -> Gen {
        Gen::new(JobShape {
            random: self.random,
            read_pct: self.read_pct,
            bs: self.bs,
            place: &self.place,
            target_size: self.size,
            size: None,
            job: self.job,
            seed: 1,
            sync_every: self.sync_every,
            time_based: self.time_based,
            trim: self.trim,
        })
    }

    /// Offsets in blocks of 4 KiB, up to `n` I/Os.
    fn blocks(&self, n: usize) -> Vec<u64> {
        let mut g = self.gen();
        std::iter::from_fn(|| g.next_op())
            .take(n)
            .map(|o| o.offset / 4096)
            .collect()
    }
}

const K: u64 = 1024;

#[test]
fn random_offsets_are_aligned_and_inside() {
    let mut s = G::new(true, 8192, 1 << 20);
    s.bs = [8192, 65536];
    s.read_pct = 70.0;
    s.time_based = true;
    let mut g = s.gen();
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
    let mut s = G::new(false, 4096, 3 * 4096);
    s.read_pct = 0.0;
    s.sync_every = 2;
    s.time_based = true;
    let mut g = s.gen();
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
fn a_pass_of_size_bytes_ends_the_job() {
    assert_eq!(G::new(true, 4096, 3 * 4096).blocks(10).len(), 3);
    assert_eq!(G::new(false, 4096, 3 * 4096).blocks(10), vec![0, 1, 2]);
}

#[test]
fn the_random_map_covers_every_block_once_per_pass() {
    let mut s = G::new(true, 4096, 1000 * 4096);
    s.time_based = true;
    let b = s.blocks(3000);
    for pass in b.chunks(1000) {
        let mut seen = pass.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1000, "a pass repeated a block");
    }
    // Not in order: a random job.
    assert!(b.windows(2).filter(|w| w[1] == w[0] + 1).count() < 100);
    // norandommap: uniform with repeats (about 1 - 1/e of the blocks in one pass).
    s.place.randommap = false;
    let mut one = s.blocks(1000);
    one.sort_unstable();
    one.dedup();
    assert!((560..700).contains(&one.len()), "{}", one.len());
}

#[test]
fn the_random_map_with_two_block_sizes_keeps_each_direction_inside() {
    let mut s = G::new(true, 4096, 64 * 4096);
    s.bs = [4096, 16384];
    s.read_pct = 50.0;
    let mut g = s.gen();
    let mut bytes = 0;
    while let Some(op) = g.next_op() {
        assert_eq!(op.offset % op.len, 0);
        assert!(op.offset + op.len <= 64 * 4096);
        bytes += op.len;
    }
    assert!(bytes >= 64 * 4096);
}

fn distinct(s: &G, n: usize) -> usize {
    let mut b = s.blocks(n);
    b.sort_unstable();
    b.dedup();
    b.len()
}

#[test]
fn skewed_distributions_concentrate_on_few_blocks() {
    let mut s = G::new(true, 4096, 100_000 * 4096);
    s.time_based = true;
    s.place.randommap = false;
    let uniform = distinct(&s, 20_000);
    // fio's normal is the mean of 12 uniform draws (its spread is a twelfth of the
    // region), so it concentrates less than zipf and pareto.
    for (dist, most) in [
        (
            Dist::Zipf {
                theta: 1.2,
                center: None,
            },
            0.67,
        ),
        (
            Dist::Pareto {
                h: 0.9,
                center: None,
            },
            0.67,
        ),
        (
            Dist::Normal {
                dev_pct: 1.0,
                center: None,
            },
            0.9,
        ),
    ] {
        s.place.dist = dist.clone();
        let skewed = distinct(&s, 20_000);
        assert!(
            (skewed as f64) < uniform as f64 * most,
            "{dist:?}: {skewed} distinct blocks vs {uniform} uniform"
        );
        assert!(s.blocks(20_000).iter().all(|b| *b < 100_000));
    }
}

#[test]
fn zoned_sends_each_share_to_its_part_of_the_region() {
    let mut s = G::new(true, 4096, 10_000 * 4096);
    s.time_based = true;
    s.place.dist = Dist::Zoned([vec![(60.0, 10.0), (40.0, 90.0)], vec![]]);
    let b = s.blocks(20_000);
    let low = b.iter().filter(|b| **b < 1000).count() as f64 / 20_000.0;
    assert!((0.57..0.63).contains(&low), "{low}");
    s.place.dist = Dist::ZonedAbs([vec![(50.0, 40 * K), (50.0, 4000 * K)], vec![]]);
    let b = s.blocks(20_000);
    let low = b.iter().filter(|b| **b < 10).count() as f64 / 20_000.0;
    assert!((0.47..0.53).contains(&low), "{low}");
}

fn seq(rw_random: bool, f: impl FnOnce(&mut G)) -> Vec<u64> {
    let mut s = G::new(rw_random, 4096, 256 * K);
    f(&mut s);
    s.blocks(10_000)
}

#[test]
fn strides_go_as_fio_goes() {
    let fwd: Vec<u64> = (0..32)
        .map(|i| i * 2)
        .chain((0..32).map(|i| i * 2))
        .collect();
    assert_eq!(seq(false, |s| s.place.seq_add = 4096), fwd);
    let back: Vec<u64> = std::iter::once(0).chain((0..63).rev()).collect();
    assert_eq!(seq(false, |s| s.place.seq_add = -8192), back);
    let holes: Vec<u64> = [0, 29, 58].into_iter().cycle().take(64).collect();
    assert_eq!(seq(false, |s| s.place.seq_add = 112 * 1024), holes);
}

#[test]
fn strided_zones_go_as_fio_goes() {
    let z = |size, range, skip| Some(Zone { size, range, skip });
    let one: Vec<u64> = [0, 12, 24, 36, 48, 60]
        .iter()
        .flat_map(|b| *b..*b + 4)
        .collect();
    let want: Vec<u64> = one.iter().cycle().take(64).copied().collect();
    assert_eq!(
        seq(false, |s| s.place.zone = z(16 * K, 16 * K, 32 * K)),
        want
    );
    let one: Vec<u64> = [0, 16, 32, 48].iter().flat_map(|b| *b..*b + 4).collect();
    let want: Vec<u64> = one.iter().cycle().take(64).copied().collect();
    assert_eq!(seq(false, |s| s.place.zone = z(16 * K, 64 * K, 0)), want);
}

#[test]
fn offsets_sizes_and_passes_go_as_fio_goes() {
    // offset=16k offset_increment=64k size=32k, job 1 of 2 (a 256 KiB target).
    let mut s = G::new(false, 4096, 256 * K);
    s.place.offset = Amount::Bytes(16 * K);
    s.place.offset_increment = Amount::Bytes(64 * K);
    s.job = 1;
    let mut g = Gen::new(JobShape {
        size: Some(32 * K),
        ..shape(&s)
    });
    let b: Vec<u64> = std::iter::from_fn(|| g.next_op())
        .map(|o| o.offset / 4096)
        .collect();
    assert_eq!(b, (20..28).collect::<Vec<_>>());
    // size=25% of the target.
    assert_eq!(
        seq(false, |s| s.place.size_pct = Some(25.0)),
        (0..16).collect::<Vec<_>>()
    );
    // io_size twice the size: two passes; number_ios=5: five I/Os; loops=2: two passes.
    let two: Vec<u64> = (0..64).chain(0..64).collect();
    assert_eq!(seq(false, |s| s.place.io_size = Some(512 * K)), two);
    assert_eq!(
        seq(false, |s| s.place.number_ios = Some(5)),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(seq(false, |s| s.place.loops = 2), two);
    // A random pass repeats in the same order (fio re-seeds at a loop).
    let r = seq(true, |s| s.place.loops = 2);
    assert_eq!(r.len(), 128);
    assert_eq!(r[..64], r[64..]);
}

fn shape(s: &G) -> JobShape<'_> {
    JobShape {
        random: s.random,
        read_pct: s.read_pct,
        bs: s.bs,
        place: &s.place,
        target_size: s.size,
        size: None,
        job: s.job,
        seed: 1,
        sync_every: s.sync_every,
        time_based: s.time_based,
        trim: s.trim,
    }
}

#[test]
fn random_runs_of_n_go_on_sequentially_or_repeat() {
    let b = seq(true, |s| s.place.seq_nr = 8);
    for run in b.chunks(8) {
        // A run that reaches the end goes on from a new random offset, as fio's.
        assert!(
            run.windows(2).all(|w| w[1] == w[0] + 1 || w[0] == 63),
            "{run:?}"
        );
    }
    let b = seq(true, |s| {
        s.place.seq_nr = 4;
        s.place.seq_identical = true;
    });
    for run in b.chunks(4) {
        assert!(run.iter().all(|x| *x == run[0]), "{run:?}");
    }
}

#[test]
fn bssplit_shares_and_bsrange_sizes_hold() {
    let mut s = G::new(true, 64 * K, 1 << 30);
    s.time_based = true;
    // The random map may shorten an I/O that reaches a used block (as fio's does).
    s.place.randommap = false;
    s.place.bs = [
        BsChoice::Split(vec![(4 * K, 10.0), (64 * K, 50.0), (32 * K, 40.0)]),
        BsChoice::Fixed,
    ];
    let mut g = s.gen();
    let mut n = [0u32; 3];
    for _ in 0..100_000 {
        let op = g.next_op().unwrap();
        assert_eq!(op.offset % (4 * K), 0);
        let i = [4 * K, 64 * K, 32 * K]
            .iter()
            .position(|b| *b == op.len)
            .unwrap();
        n[i] += 1;
    }
    for (got, want) in n.iter().zip([10_000.0, 50_000.0, 40_000.0]) {
        assert!((*got as f64 - want).abs() < 0.05 * want, "{n:?}");
    }
    s.place.bs = [BsChoice::Range { min: K, max: 4 * K }, BsChoice::Fixed];
    s.bs = [4 * K, 4 * K];
    let mut g = s.gen();
    let mut n = [0u32; 4];
    for _ in 0..40_000 {
        let op = g.next_op().unwrap();
        assert_eq!(op.offset % K, 0);
        n[(op.len / K - 1) as usize] += 1;
    }
    assert!(n.iter().all(|c| (9_000..11_000).contains(c)), "{n:?}");
}

#[test]
fn trim_jobs_discard_where_a_write_job_would_write() {
    let mut g = G::new(false, 4 * K, 64 * K);
    g.read_pct = 100.0;
    g.trim = TrimMode::Trim;
    let ops: Vec<Op> = {
        let mut gen = g.gen();
        std::iter::from_fn(|| gen.next_op()).collect()
    };
    assert_eq!(ops.len(), 16, "one pass over the region, read_pct ignored");
    assert!(ops.iter().all(|o| o.dir == TRIM));
    assert_eq!(ops[3].offset, 12 * K);
    // randtrim: every block once (the write random map), as a randwrite's would be.
    g.random = true;
    let mut b = g.blocks(100);
    b.sort_unstable();
    assert_eq!(b, (0..16).collect::<Vec<_>>());
}

#[test]
fn trimwrite_discards_a_block_then_writes_it_and_counts_the_pair_once() {
    let mut g = G::new(false, 4 * K, 16 * K);
    g.trim = TrimMode::TrimWrite;
    g.sync_every = 2;
    let mut gen = g.gen();
    let ops: Vec<(usize, u64, bool)> = std::iter::from_fn(|| gen.next_op())
        .map(|o| (o.dir, o.offset / 4096, o.sync_after))
        .collect();
    assert_eq!(
        ops,
        vec![
            (TRIM, 0, false),
            (WRITE, 0, false),
            (TRIM, 1, false),
            (WRITE, 1, true),
            (TRIM, 2, false),
            (WRITE, 2, false),
            (TRIM, 3, false),
            (WRITE, 3, true),
        ],
        "fio's set_rw_ddir: the write follows the trim at its offset; size= counts blocks, not both I/Os"
    );
}
