//! `diskpulse bench`: measures the diskstats sampler itself. Prints figures; asserts nothing.
//!
//! 1. Cost: `DiskSampler::sample()` (pread, parse every line, write changed rows into the
//!    gzip sink) in a tight loop; thread CPU ns per sample.
//! 2. Schedule: the real 1 ms loop for `--duration`; CPU share of one core, samples taken
//!    vs expected, jitter p50/p99/max.
//! 3. The whole `record` process at its defaults for `--duration`, beside a reference
//!    loop reading the same files in the same run ([`super::bench_whole`]).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use collectors::clock::Clock;
use collectors::periodic::{self, thread_cpu_ns};

use ::format::cli::parse_duration;
use engines::recording::samplers::{DeviceFilter, DiskSampler, DiskSource};
use engines::recording::EventLog;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// How long to run the scheduled loop.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Sampling interval of the scheduled loop.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// Devices recorded by the scheduled loop (the first N in sysfs order).
    #[arg(long, default_value_t = 4)]
    pub devices: usize,
    /// Tight-loop iterations for the per-sample cost.
    #[arg(long, default_value_t = 20_000)]
    pub iterations: u64,
}

/// The most tight-loop iterations: at about 10 us a sample, 10 million take minutes per
/// stage; u64::MAX ran until killed.
const MAX_ITERATIONS: u64 = 10_000_000;
/// The longest scheduled loop: a day of jitter says all a bench can; record for longer.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    use ::format::cli::fmt_duration;
    if a.iterations > MAX_ITERATIONS {
        return Err(::format::usage!(
            "--iterations {}: at most {MAX_ITERATIONS} (at about 10 us a sample, more takes hours per stage); the default 20000 is plenty",
            a.iterations
        ));
    }
    if a.duration > MAX_DURATION {
        return Err(::format::usage!(
            "--duration {}: at most 24h (a day of the sampling loop says all a bench can); record a long run with `diskpulse record`",
            fmt_duration(a.duration)
        ));
    }
    if a.duration.is_zero() || a.iterations == 0 || a.devices == 0 {
        return Err(::format::usage!(
            "--duration, --iterations and --devices must be above 0; got --duration {} --iterations {} --devices {}",
            fmt_duration(a.duration),
            a.iterations,
            a.devices
        ));
    }
    let min = engines::recording::MIN_INTERVAL;
    if a.interval < min || a.interval > a.duration {
        return Err(::format::usage!(
            "--interval {} must be between {} (below it the read itself dominates) and --duration {}",
            fmt_duration(a.interval),
            fmt_duration(min),
            fmt_duration(a.duration)
        ));
    }
    // SIGINT/SIGTERM set `stop`: every loop below looks at it, so the scratch directory
    // is removed on every way out (it was left behind when a signal ended the process).
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    // A new directory of a unique name (never an existing one, nor a symlink planted at
    // a guessable name in a shared /tmp), removed when it is dropped.
    let tmp = tempfile::Builder::new()
        .prefix("diskpulse-bench-")
        .tempdir()
        .map_err(|e| {
            ::format::usage!(
                "cannot create a scratch directory in {} ($TMPDIR): {}; set TMPDIR to a writable directory, e.g. TMPDIR=/var/tmp",
                std::env::temp_dir().display(),
                ::format::atomic::plain(e)
            )
        })?;
    let r = bench(&a, tmp.path(), &stop);
    drop(tmp);
    if stop.load(Ordering::SeqCst) {
        eprintln!("interrupted: the figures above are from before the signal");
        return Ok(130);
    }
    r
}

#[allow(
    clippy::too_many_lines,
    reason = "natscli's bench output, line for line in its order"
)]
fn bench(a: &BenchArgs, tmp: &Path, stopped: &Arc<AtomicBool>) -> anyhow::Result<i32> {
    let interrupted = || stopped.load(Ordering::Relaxed);
    let clock = Clock::start();
    let events = EventLog::disabled(clock);
    let ndev = std::fs::read_to_string("/proc/diskstats")?.lines().count();

    // The kernel's part: pread of /proc/diskstats alone.
    let mut reader = collectors::diskstats::DiskstatsReader::open(Path::new("/proc"))?;
    let c0 = thread_cpu_ns();
    for _ in 0..a.iterations {
        std::hint::black_box(reader.read()?.len());
        if interrupted() {
            return Ok(130);
        }
    }
    let read_ns = (thread_cpu_ns() - c0) as f64 / a.iterations as f64;
    println!("diskstats sample cost, thread CPU per sample ({ndev} devices in /proc/diskstats):");
    println!("  pread of /proc/diskstats alone (kernel formatting): {read_ns:.0} ns");
    let all: Vec<(String, collectors::devices::DevNum)> =
        collectors::devices::Resolver::default().all();
    let four: Vec<(u32, u32, String)> = all
        .iter()
        .take(4)
        .map(|(n, d)| (d.major, d.minor, n.clone()))
        .collect();
    let one: Vec<(u32, u32, String)> = four.iter().take(1).cloned().collect();
    let only =
        |v: &[(u32, u32, String)]| DeviceFilter::Only(v.iter().map(|x| (x.0, x.1)).collect());
    let procfs = DiskSource::Procfs("/proc".into());
    let sysfs = DiskSource::Sysfs("/sys".into());
    for (label, source, filter, names) in [
        (
            "/proc/diskstats, all devices recorded".to_string(),
            procfs.clone(),
            DeviceFilter::All,
            vec![],
        ),
        (
            format!("/proc/diskstats, {} devices recorded", four.len()),
            procfs.clone(),
            only(&four),
            four.clone(),
        ),
        (
            format!("sysfs stat files, {} devices recorded", four.len()),
            sysfs.clone(),
            only(&four),
            four.clone(),
        ),
        (
            "sysfs stat file, 1 device recorded".to_string(),
            sysfs.clone(),
            only(&one),
            one.clone(),
        ),
    ] {
        let mut s = DiskSampler::new(
            source,
            filter,
            &names,
            &tmp.join("tight.csv.gz"),
            events.clone(),
        )?;
        for _ in 0..100 {
            s.sample();
        }
        let c0 = thread_cpu_ns();
        for _ in 0..a.iterations {
            s.sample();
            if interrupted() {
                s.finish()?;
                return Ok(130);
            }
        }
        let cpu = thread_cpu_ns() - c0;
        s.finish()?;
        println!(
            "  read + parse + write rows, {label}: {:.0} ns",
            cpu as f64 / a.iterations as f64
        );
    }

    // The floor: a 1 ms absolute-deadline loop that does nothing.
    let empty_ns = (a.duration.as_nanos() as u64 / 5).max(1_000_000_000);
    let t_end = clock.now_ns() + empty_ns;
    let st = periodic::run(&clock, a.interval.as_nanos() as u64, stopped, |_| {
        clock.now_ns() < t_end
    });
    if interrupted() {
        return Ok(130);
    }
    println!(
        "empty loop at {} for {:.1} s (the cost of sleeping and waking alone): {:.2}% of a core, {:.0} ns CPU per wake-up, jitter p99 {:.1} us",
        ::format::cli::fmt_duration(a.interval),
        (st.ended_ns - st.started_ns) as f64 / 1e9,
        100.0 * st.thread_cpu_ns as f64 / (st.ended_ns - st.started_ns) as f64,
        st.thread_cpu_ns as f64 / st.samples.max(1) as f64,
        st.jitter_us(0.99)
    );

    let four: Vec<(u32, u32, String)> = all
        .iter()
        .take(a.devices.max(1))
        .map(|(n, d)| (d.major, d.minor, n.clone()))
        .collect();
    let filter = only(&four);
    let source = DiskSource::auto(Path::new("/proc"), Path::new("/sys"), &filter, &four);
    println!("sampling loop source: {}", source.describe());
    let mut s = DiskSampler::new(source, filter, &four, &tmp.join("loop.csv.gz"), events)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let interval_ns = a.interval.as_nanos() as u64;
    let dur = a.duration;
    let h = std::thread::Builder::new()
        .name("diskstats".into())
        .spawn(move || {
            let _ = periodic::try_realtime();
            let st = periodic::run(&clock, interval_ns, &stop2, |_| {
                s.sample();
                true
            });
            let _ = s.finish();
            st
        })?;
    let t_end = clock.now_ns() + dur.as_nanos() as u64;
    while clock.now_ns() < t_end && !interrupted() {
        std::thread::sleep(Duration::from_millis(20).min(dur));
    }
    stop.store(true, Ordering::SeqCst);
    let st = h.join().map_err(|_| anyhow::anyhow!("sampler panicked"))?;
    if interrupted() {
        return Ok(130);
    }
    let wall = (st.ended_ns - st.started_ns) as f64;
    println!(
        "sampling loop at {} for {:.1} s, {} devices recorded, real-time priority: {}:",
        ::format::cli::fmt_duration(a.interval),
        wall / 1e9,
        four.len(),
        st.realtime
    );
    println!(
        "  CPU share of one core: {:.2}% ({:.0} ns CPU per sample incl. sleeping/waking)",
        100.0 * st.thread_cpu_ns as f64 / wall,
        st.thread_cpu_ns as f64 / st.samples.max(1) as f64
    );
    println!(
        "  samples taken vs expected: {} / {} = {:.2}% ({} deadlines skipped)",
        st.samples,
        st.expected,
        100.0 * st.samples as f64 / st.expected.max(1) as f64,
        st.skipped
    );
    println!(
        "  schedule jitter: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us",
        st.jitter_us(0.5),
        st.jitter_us(0.99),
        st.jitter_us(0.999),
        st.jitter.max() as f64 / 1000.0
    );
    if !super::bench_whole::run(a.duration, tmp, stopped)? {
        return Ok(130);
    }
    Ok(0)
}
