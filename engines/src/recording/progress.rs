//! `record`'s line a second while it runs, as `iostat -x -d 1` shows a device (`r/s w/s
//! rkB/s wkB/s aqu-sz %util`, iostat's names, units and formulas), plus what iostat
//! cannot show: `peak10ms` MiB/s, the highest read+write rate over one ~10 ms step of that
//! second (a second at 50 MiB/s can hold 10 ms at 800).
//!
//! A thread of its own reads `/proc/diskstats` every 10 ms (not the 1 ms sampler's
//! samples: the recording's files stay exactly what they were) and prints when a second
//! of the run has passed. It only prints: nothing it computes is recorded, and an error
//! reading diskstats ends the line (with one note on stderr), never the recording. The
//! report's figures come from the 1 ms samples, so its 10 ms peaks are the ones to quote.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use collectors::diskstats::{self as ds, DiskCounters, DiskstatsReader};

/// The step of the peak reads.
const STEP: Duration = Duration::from_millis(10);
/// The header is printed again after this many lines, as a reader scrolls.
const HEADER_EVERY: usize = 24;

/// One device's figures over one second, iostat's way.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Second {
    r_s: f64,
    pub w_s: f64,
    rkb_s: f64,
    wkb_s: f64,
    pub aqu_sz: f64,
    pub util_pct: f64,
    /// Highest read+write MiB/s over one step of the second.
    pub peak_mib_s: f64,
}

fn delta(a: &DiskCounters, b: &DiskCounters, f: usize) -> f64 {
    match (a.get(f), b.get(f)) {
        (Some(x), Some(y)) => ds::counter_delta(f, x, y).unwrap_or(0) as f64,
        _ => 0.0,
    }
}

/// Read+write bytes between two samples.
fn bytes(a: &DiskCounters, b: &DiskCounters) -> f64 {
    (delta(a, b, ds::F_SECTORS_READ) + delta(a, b, ds::F_SECTORS_WRITTEN)) * 512.0
}

/// iostat -x's formulas over `secs` between two samples (kB = 1024 bytes).
pub fn second(a: &DiskCounters, b: &DiskCounters, secs: f64, peak_mib_s: f64) -> Second {
    let ms = secs * 1e3;
    Second {
        r_s: delta(a, b, ds::F_READS) / secs,
        w_s: delta(a, b, ds::F_WRITES) / secs,
        rkb_s: delta(a, b, ds::F_SECTORS_READ) / 2.0 / secs,
        wkb_s: delta(a, b, ds::F_SECTORS_WRITTEN) / 2.0 / secs,
        aqu_sz: delta(a, b, ds::F_WEIGHTED_MS) / ms,
        util_pct: 100.0 * delta(a, b, ds::F_IO_MS) / ms,
        peak_mib_s,
    }
}

pub fn header() -> String {
    format!(
        "{:>7} {:<12} {:>9} {:>9} {:>11} {:>11} {:>7} {:>6} {:>14}\n",
        "time", "Device", "r/s", "w/s", "rkB/s", "wkB/s", "aqu-sz", "%util", "peak10ms MiB/s"
    )
}

/// One line: the run's second (its end), the device, the figures.
pub fn line(t_s: f64, device: &str, s: &Second) -> String {
    format!(
        "{:>6.0}s {:<12} {:>9.2} {:>9.2} {:>11.2} {:>11.2} {:>7.2} {:>6.2} {:>14.1}\n",
        t_s, device, s.r_s, s.w_s, s.rkb_s, s.wkb_s, s.aqu_sz, s.util_pct, s.peak_mib_s
    )
}

/// `record`'s choice: the line on stdout when stdout is a terminal or `--progress` asks,
/// never with `--no-progress`; `None` when not printing (or when diskstats cannot be
/// opened: one note on stderr, the recording goes on).
pub fn for_record(
    progress: bool,
    no_progress: bool,
    devices: &[collectors::devices::Device],
    procfs: &Path,
) -> Option<Progress> {
    use std::io::IsTerminal;
    if no_progress || !(progress || std::io::stdout().is_terminal()) || devices.is_empty() {
        return None;
    }
    let devs = devices
        .iter()
        .map(|d| (d.name.clone(), d.num.major, d.num.minor))
        .collect();
    match Progress::start(procfs, devs, Box::new(std::io::stdout())) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("note: no per-second line ({e}); the recording goes on");
            None
        }
    }
}

/// The running line; [`Progress::stop`] (or drop) ends it.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts printing for these devices (name, major, minor) to `out`, from now.
    pub fn start(
        procfs: &Path,
        devices: Vec<(String, u32, u32)>,
        out: Box<dyn Write + Send>,
    ) -> anyhow::Result<Progress> {
        let reader = DiskstatsReader::open(procfs)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || run(reader, devices, out, &s))?;
        Ok(Progress {
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.end();
    }
}

/// The counters of each device in one read (`None`: the device is not in diskstats).
fn sample(
    r: &mut DiskstatsReader,
    devices: &[(String, u32, u32)],
) -> anyhow::Result<Vec<Option<DiskCounters>>> {
    let buf = r.read()?;
    let mut out = vec![None; devices.len()];
    ds::for_each_line(buf, |l| {
        if let Some(i) = devices
            .iter()
            .position(|(_, ma, mi)| *ma == l.major && *mi == l.minor)
        {
            out[i] = Some(l.counters);
        }
    });
    Ok(out)
}

fn run(
    mut r: DiskstatsReader,
    devices: Vec<(String, u32, u32)>,
    mut out: Box<dyn Write + Send>,
    stop: &AtomicBool,
) {
    let t0 = Instant::now();
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("note: the per-second line stopped ({e}); the recording goes on");
    };
    let first = match sample(&mut r, &devices) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let (mut sec_start, mut sec_t) = (first.clone(), t0);
    let (mut prev, mut prev_t) = (first, t0);
    let mut peak = vec![0.0f64; devices.len()];
    let mut lines = 0usize;
    let mut k: u32 = 1;
    let mut step: u32 = 1;
    while !stop.load(Ordering::Relaxed) {
        let next = t0 + STEP * step;
        step += 1;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let now = match sample(&mut r, &devices) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        let t = Instant::now();
        let dt = t.duration_since(prev_t).as_secs_f64();
        for (i, (a, b)) in prev.iter().zip(&now).enumerate() {
            if let (Some(a), Some(b)) = (a, b) {
                if dt > 0.0 {
                    peak[i] = peak[i].max(bytes(a, b) / (1 << 20) as f64 / dt);
                }
            }
        }
        (prev, prev_t) = (now, t);
        if t.duration_since(t0) < Duration::from_secs(k as u64) {
            continue;
        }
        let secs = t.duration_since(sec_t).as_secs_f64();
        let mut text = String::new();
        if lines.is_multiple_of(HEADER_EVERY) {
            text += &header();
        }
        for (i, (name, _, _)) in devices.iter().enumerate() {
            if let (Some(a), Some(b)) = (&sec_start[i], &prev[i]) {
                text += &line(k as f64, name, &second(a, b, secs, peak[i]));
                lines += 1;
            }
        }
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return; // stdout went away: the recording goes on without the line.
        }
        (sec_start, sec_t) = (prev.clone(), t);
        peak.iter_mut().for_each(|p| *p = 0.0);
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(f: &[(usize, u64)]) -> DiskCounters {
        let mut c = DiskCounters {
            nfields: 17,
            ..Default::default()
        };
        for (i, v) in f {
            c.f[*i] = *v;
        }
        c
    }

    #[test]
    fn a_second_is_iostats_formulas() {
        let a = counters(&[]);
        // 2 s: 100 reads of 8 sectors, 4000 writes of 8 sectors (4 KiB), 9000 ms weighted,
        // 1500 ms busy.
        let b = counters(&[
            (ds::F_READS, 100),
            (ds::F_SECTORS_READ, 800),
            (ds::F_WRITES, 4000),
            (ds::F_SECTORS_WRITTEN, 32000),
            (ds::F_WEIGHTED_MS, 9000),
            (ds::F_IO_MS, 1500),
        ]);
        let s = second(&a, &b, 2.0, 12.5);
        assert_eq!(s.r_s, 50.0);
        assert_eq!(s.w_s, 2000.0);
        assert_eq!(s.rkb_s, 200.0);
        assert_eq!(s.wkb_s, 8000.0);
        assert_eq!(s.aqu_sz, 4.5);
        assert_eq!(s.util_pct, 75.0);
        let l = line(3.0, "loop3", &s);
        assert_eq!(
            l.split_whitespace().collect::<Vec<_>>(),
            ["3s", "loop3", "50.00", "2000.00", "200.00", "8000.00", "4.50", "75.00", "12.5"]
        );
        // The header names the columns the line has, iostat's where iostat has them.
        assert_eq!(
            header().split_whitespace().collect::<Vec<_>>(),
            [
                "time", "Device", "r/s", "w/s", "rkB/s", "wkB/s", "aqu-sz", "%util", "peak10ms",
                "MiB/s"
            ]
        );
    }
}
