//! What `diskpulse report` costs as recordings get long (issue 13, "Done means" line 1):
//! measured before the streaming report (the baseline in docs/commands/report.md) and after it.
//!
//! For each size it WRITES a synthetic recording with the recorder's own writers
//! (`meta.json` through [`Meta::write`], `diskstats.csv.gz` through the recorder's
//! [`ChunkSink`] at its gzip level, rows formatted as the sampler does, `events.jsonl`
//! through [`EventLog`]): 4 devices whose counters change every millisecond (a steady
//! writer with jitter, some reads, a flush every 200 ms, and a 60 ms burst at ~800 MiB/s
//! every 5-7 s per device), so no row is suppressed: 4 rows a ms. Then it runs
//! `diskpulse report RUN` (charts, HTML and all, as a user would) and prints its wall
//! time and peak memory (`ru_maxrss` of the child from `wait4`), with the generation
//! time and the file's size.
//!
//! Run: `cargo bench --bench report_scale` (release build). Sizes:
//! `DISKPULSE_BENCH_SIZES=10m,1h,6h` (default `10m,1h`; any `Nm`/`Nh`). The files go to a
//! temporary directory under `DISKPULSE_BENCH_DIR` (default `/var/tmp`), removed at the
//! end, after a failure and on Ctrl-C. 10 minutes are 2.4 M rows; an hour 14.4 M rows
//! (~290 MB of gzip); 6 hours 86.4 M rows (~1.7 GB): for 6 h put `DISKPULSE_BENCH_DIR`
//! on a volume with room (RECIPES.md: a loop volume you remove again). Writing takes
//! ~21 s per recorded hour here (~2 min for 6 h) on a quiet machine. The report reads the
//! rows as a stream (issue 13 item 3, `report/stream.rs`): 10 min 124 MB, 1 h 172 MB, 6 h
//! 557 MB peak (it held every row before: 423 MB and 2.46 GB for 10 min and 1 h). With the
//! burst bins and rates.csv's sums in a scratch file (`report/spill.rs`), 2026-12-01 at load
//! average 9-12: 10 min 16.8 s / 97 MB, 1 h 98.5 s and 62.3 s / 130 MB twice, 6 h 699 s /
//! 459 MB; what still grew was the static timeline's burst shades (a rect per burst per
//! panel) and their PNG rendering. `DISKPULSE_BENCH_KEEP=1` keeps the recordings (and
//! prints where) to profile `report` on them.
//!
//! The recording has `envelopes.csv.gz` as the recorder writes it (fed row by row through
//! its `EnvelopeFeed`), so report.html's whole-run zoom data comes from there, as for a
//! user's run. `DISKPULSE_BENCH_ENVELOPES=with|without|both` (default `both`): `both`
//! reports each recording with it, then removes it and reports the same rows again (the
//! page's windows then take extra streamed passes over the rows: a recording from before
//! the envelopes). With the burst shades folded to the plot's pixel columns (1 h
//! timeline.svg: 3,097 `<rect>`, was 38,793), 2026-12-01 04:45-04:56, load average 2-5.5
//! on the 2 cores (other engineers' builds and a recording; the second 1 h "with" ran beside
//! a clippy and test build of ours): with / without envelopes, time and peak RSS:
//! 10 min 3.6 s / 4.5 s, 98 / 97 MB; 1 h 19.2 s and 37.9 s / 24.6 s and 22.9 s, 97 / 99 MB
//! (twice each); 6 h 107 s / 137 s, 102 / 104 MB. Memory is flat from 10 min to 6 h; the
//! 1 h report's heap peak (heaptrack, 83.5 MB, was 112 MB) is report.html's string as it is
//! built (a 16.5 MB page growing by doubling), bounded by the page's 2 M value budget and
//! the image sizes, not by the run's length. The recordings carry meminfo.csv every 10 ms
//! (as `record` writes it), folded by `report/fold.rs` as it is read: 2026-12-01, load
//! average 1-2, with envelopes: 10 min 4.9 s / 108 MB, 1 h 27.3 s / 106 MB, 6 h 171 s /
//! 110 MB.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use diskpulse::format::csv::put_u64;
use diskpulse::format::meta::{Meta, MetaDevice, SamplerMeta};
use diskpulse::recording::envelopes::EnvelopeFeed;
use diskpulse::recording::writer::ChunkSink;
use diskpulse::recording::EventLog;

const DEVICES: usize = 4;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One device's counters, in kernel order (17 fields).
#[derive(Default, Clone, Copy)]
struct Dev {
    f: [u64; 17],
}

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.len().checked_sub(1)?);
    let n: u64 = n.parse().ok()?;
    match unit {
        "m" => Some(n * 60),
        "h" => Some(n * 3600),
        _ => None,
    }
}

/// Writes a recording of `secs` seconds into `dir`, with `envelopes.csv.gz` fed row by
/// row as the recorder's diskstats sampler feeds it (`recording/samplers/disk.rs`);
/// returns the rows written, or `None` when interrupted.
#[allow(
    clippy::too_many_lines,
    reason = "one synthetic recording written file by file, as the recorder writes them, so the bench reads like the run it imitates"
)]
fn generate(dir: &Path, secs: u64, stop: &AtomicBool) -> anyhow::Result<Option<u64>> {
    std::fs::create_dir_all(dir)?;
    let names: Vec<String> = (0..DEVICES).map(|d| format!("syn{d}")).collect();
    let mut meta = Meta {
        format_version: diskpulse::format::FORMAT_VERSION,
        tool: "diskpulse".into(),
        version: "bench".into(),
        argv: vec!["benches/report_scale".into()],
        host: "synthetic".into(),
        kernel: "synthetic".into(),
        start_wall: "2026-11-30T00:00:00.000000000Z".into(),
        end_wall: Some("2026-11-30T00:00:00.000000000Z".into()),
        duration_ns: Some(secs * 1_000_000_000),
        user_hz: 100,
        device_filter: "listed".into(),
        complete: true,
        clock_zero_unix_ns: 1_796_000_000_000_000_000,
        ..Default::default()
    };
    meta.devices = names
        .iter()
        .enumerate()
        .map(|(i, n)| MetaDevice {
            name: n.clone(),
            major: 250,
            minor: i as u32,
            why: Some("named".into()),
            ..Default::default()
        })
        .collect();
    meta.samplers.insert(
        "diskstats".into(),
        SamplerMeta {
            file: diskpulse::format::diskstats::FILE.into(),
            interval_us: 1000,
            source: Some("/proc/diskstats".into()),
            stats: None,
        },
    );
    meta.samplers.insert(
        "meminfo".into(),
        SamplerMeta {
            file: diskpulse::format::procfs::MEMINFO_FILE.into(),
            interval_us: 10_000,
            source: None,
            stats: None,
        },
    );
    meta.write(&dir.join(diskpulse::format::meta::FILE))?;
    // meminfo.csv every 10 ms, as `record` writes it by default: Dirty grows with the
    // steady writes and falls at each device 0 burst, Writeback rises during it.
    let mut mem = std::io::BufWriter::new(std::fs::File::create(
        dir.join(diskpulse::format::procfs::MEMINFO_FILE),
    )?);
    {
        use std::io::Write as _;
        writeln!(
            mem,
            "{}",
            diskpulse::format::procfs::header(&diskpulse::format::procfs::MEM_COLUMNS)
        )?;
    }
    let events = EventLog::create(
        &dir.join(diskpulse::format::events::FILE),
        collectors::clock::Clock::start(),
    )?;
    let mut sink = ChunkSink::create(
        &dir.join(diskpulse::format::diskstats::FILE),
        &diskpulse::format::diskstats::header(),
        true,
    )?;
    let mut env = EnvelopeFeed::create(&dir.join(diskpulse::format::envelopes::FILE))?;
    for (d, n) in names.iter().enumerate() {
        env.device(d as u32, n.as_bytes());
    }
    let mut devs = [Dev::default(); DEVICES];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut rows = 0u64;
    for ms in 0..=secs * 1000 {
        if ms % 1000 == 0 && stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let t = ms * 1_000_000;
        for (d, dev) in devs.iter_mut().enumerate() {
            let period = 5000 + 700 * d as u64;
            let burst = ms % period >= 1000 && ms % period < 1060;
            if burst && ms % period == 1000 && d == 0 {
                // A kind no writer has: read back as `Other`, as a newer version's would be.
                let body = diskpulse::format::events::Body::Other {
                    kind: "marker".into(),
                    detail: serde_json::json!({"text": "burst"}),
                };
                events.event_at(t, body);
            }
            let f = &mut dev.f;
            if ms > 0 {
                // 4 KiB writes: ~5/ms (20 MiB/s) steady, 200/ms (800 MiB/s) in a burst.
                let w = if burst { 200 } else { 3 + rng.below(5) };
                let r = rng.below(3);
                f[0] += r;
                f[2] += r * 8;
                f[3] += r / 2;
                f[4] += w;
                f[5] += w / 4;
                f[6] += w * 8;
                f[7] += if burst { 30 } else { 1 };
                f[8] = if burst { 32 } else { rng.below(4) };
                f[9] += 1;
                f[10] += f[8];
                if ms % 200 == 0 {
                    f[15] += 1;
                    f[16] += 1;
                }
            }
            env.push(
                d as u32,
                t,
                &collectors::diskstats::DiskCounters { f: *f, nfields: 17 },
            );
            let b = sink.buf();
            put_u64(b, t);
            b.push(b',');
            b.extend_from_slice(names[d].as_bytes());
            b.extend_from_slice(b",250,");
            put_u64(b, d as u64);
            for v in f.iter() {
                b.push(b',');
                put_u64(b, *v);
            }
            b.push(b'\n');
            rows += 1;
        }
        sink.row_done(t);
        env.done(t);
        if ms % 10 == 0 {
            use std::io::Write as _;
            let phase = ms % 5000;
            let dirty = if phase < 1000 {
                4000 + phase * 60
            } else {
                4000 + (phase - 1000) * 2
            };
            let writeback = if (1000..1060).contains(&phase) {
                50_000
            } else {
                rng.below(64)
            };
            writeln!(mem, "{t},{dirty},{writeback},8000000,20000000")?;
        }
    }
    {
        use std::io::Write as _;
        mem.flush()?;
    }
    env.finish()?;
    sink.finish()?;
    Ok(Some(rows))
}

/// Runs `diskpulse report RUN`: (wall s, peak RSS bytes, exit code).
fn report(dir: &Path) -> anyhow::Result<(f64, u64, i32)> {
    let t0 = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_diskpulse"))
        .arg("report")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0i32;
    // SAFETY: plain syscall on our own child; rusage is written by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r != pid {
        anyhow::bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let wall = t0.elapsed().as_secs_f64();
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    Ok((wall, ru.ru_maxrss as u64 * 1024, code))
}

fn main() -> anyhow::Result<()> {
    let sizes = std::env::var("DISKPULSE_BENCH_SIZES").unwrap_or_else(|_| "10m,1h".into());
    let sizes: Vec<(String, u64)> = sizes
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            parse_size(s).map(|n| (s.trim().to_string(), n)).ok_or_else(|| {
                anyhow::anyhow!(
                    "DISKPULSE_BENCH_SIZES: '{s}' is not a size; use minutes or hours like 10m,1h,6h"
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let base = std::env::var("DISKPULSE_BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into());
    // DISKPULSE_BENCH_KEEP=1: keep the recordings (to profile `report` on them).
    let keep = std::env::var_os("DISKPULSE_BENCH_KEEP").is_some_and(|v| v == "1");
    // DISKPULSE_BENCH_ENVELOPES: report the recording as the recorder leaves it (with
    // envelopes.csv.gz), without it (an older recording: report.html's zoom data then
    // takes extra passes over the rows), or both, one after the other on the same rows.
    let modes: &[bool] = match std::env::var("DISKPULSE_BENCH_ENVELOPES")
        .unwrap_or_else(|_| "both".into())
        .as_str()
    {
        "with" => &[true],
        "without" => &[false],
        "both" => &[true, false],
        other => {
            anyhow::bail!("DISKPULSE_BENCH_ENVELOPES: '{other}' is not one of with, without, both")
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    let tmp = tempfile::Builder::new()
        .prefix("diskpulse-report-scale-")
        .tempdir_in(&base)
        .map_err(|e| anyhow::anyhow!("cannot make a temporary directory in {base}: {e}"))?;
    println!(
        "report of synthetic recordings: {DEVICES} devices, counters change every ms (4 rows/ms)"
    );
    println!(
        "{:>5} {:>11} {:>9} {:>9} {:>9} {:>10} {:>12} {:>6}",
        "size", "rows", "gz_MB", "gen_s", "envelopes", "report_s", "peak_rss_MB", "exit"
    );
    for (label, secs) in sizes {
        let dir = tmp.path().join(&label);
        let g0 = Instant::now();
        let Some(rows) = generate(&dir, secs, &stop)? else {
            println!(
                "interrupted while writing {label}; removing {}",
                tmp.path().display()
            );
            return Ok(());
        };
        let gen_s = g0.elapsed().as_secs_f64();
        let gz = std::fs::metadata(dir.join(diskpulse::format::diskstats::FILE))?.len();
        let env_file = dir.join(diskpulse::format::envelopes::FILE);
        for &with in modes {
            if !with {
                // The same recording as one made before the envelopes existed.
                std::fs::remove_file(&env_file)?;
            }
            let (wall, rss, code) = report(&dir)?;
            if stop.load(Ordering::Relaxed) {
                println!(
                    "interrupted during the report of {label}; removing {}",
                    tmp.path().display()
                );
                return Ok(());
            }
            println!(
                "{label:>5} {rows:>11} {:>9.1} {gen_s:>9.1} {:>9} {wall:>10.2} {:>12.0} {code:>6}",
                gz as f64 / 1e6,
                if with { "with" } else { "without" },
                rss as f64 / 1e6
            );
        }
        if !keep {
            std::fs::remove_dir_all(&dir)?;
        }
    }
    if keep {
        println!("kept: {}", tmp.keep().display());
    }
    Ok(())
}
