//! Why the 1 ms diskstats path keeps its own reader: time and heap allocations per sample
//! of our parser against procfs-core's `DiskStat` over the same `/proc/diskstats` bytes,
//! and of the whole sample (pread into the reused buffer + parse). Also procfs-core's
//! `Meminfo` parse, which the 10 ms meminfo sampler uses, for scale.
//!
//! Run: `cargo bench -p collectors --bench diskstats_vs_procfs` (prints figures, asserts
//! nothing). `ITERATIONS=N` changes the loop count (default 20000).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::io::BufRead;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use collectors::diskstats::{self, DiskstatsReader};
use collectors::periodic::thread_cpu_ns;
use procfs_core::{DiskStat, FromBufRead, Meminfo};

/// Counts every allocation (and reallocation) made through the global allocator.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only adds a relaxed counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` `n` times; (thread CPU ns per call, allocations per call, wall ns per call).
fn measure(n: u64, mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..n.min(100) {
        f();
    }
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let c0 = thread_cpu_ns();
    let w0 = Instant::now();
    for _ in 0..n {
        f();
    }
    let wall = w0.elapsed().as_nanos() as f64;
    let cpu = (thread_cpu_ns() - c0) as f64;
    let allocs = (ALLOCS.load(Ordering::Relaxed) - a0) as f64;
    (cpu / n as f64, allocs / n as f64, wall / n as f64)
}

fn row(label: &str, (cpu, allocs, wall): (f64, f64, f64)) {
    println!("  {label:<52} {cpu:>9.0} ns CPU {wall:>9.0} ns wall {allocs:>7.1} allocs");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::var("ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let text = std::fs::read_to_string("/proc/diskstats")?;
    let lines = text.lines().count();
    println!(
        "per sample of /proc/diskstats ({lines} devices, {} bytes), {n} samples:",
        text.len()
    );

    let ours = measure(n, || {
        let mut sum = 0u64;
        diskstats::for_each_line(text.as_bytes(), |l| sum += l.counters.f[0]);
        black_box(sum);
    });
    let theirs = measure(n, || {
        let mut sum = 0u64;
        for line in text.as_bytes().lines() {
            if let Ok(d) = DiskStat::from_line(&line.unwrap_or_default()) {
                sum += d.reads;
            }
        }
        black_box(sum);
    });
    row("parse, ours (diskstats::for_each_line)", ours);
    row("parse, procfs-core DiskStat::from_line", theirs);

    let mut reader = DiskstatsReader::open(Path::new("/proc"))?;
    let ours_full = measure(n, || {
        let mut sum = 0u64;
        let buf = reader.read().expect("read /proc/diskstats");
        diskstats::for_each_line(buf, |l| sum += l.counters.f[0]);
        black_box(sum);
    });
    let theirs_full = measure(n, || {
        let f = std::fs::File::open("/proc/diskstats").expect("open /proc/diskstats");
        let d = procfs_core::DiskStats::from_buf_read(std::io::BufReader::new(f));
        black_box(d.map(|d| d.0.len()).unwrap_or(0));
    });
    row("pread + parse, ours (held file, reused buffer)", ours_full);
    row("open + read + parse, procfs-core DiskStats", theirs_full);
    println!(
        "  procfs-core / ours: {:.1}x the CPU for the parse, {:.1} vs {:.1} allocations",
        theirs.0 / ours.0.max(1.0),
        theirs.1,
        ours.1
    );

    let mem = std::fs::read("/proc/meminfo")?;
    println!(
        "per sample of /proc/meminfo ({} bytes; sampled every 10 ms by a recording):",
        mem.len()
    );
    let m = measure(n, || {
        black_box(
            Meminfo::from_buf_read(mem.as_slice())
                .map(|m| m.dirty)
                .unwrap_or(0),
        );
    });
    row("parse, procfs-core Meminfo", m);
    println!(
        "  = {:.3}% of one core at 10 ms",
        100.0 * m.0 / 10_000_000.0
    );
    Ok(())
}
