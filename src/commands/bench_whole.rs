//! `diskpulse bench`'s last stage: the whole `record` process at its defaults, beside a
//! reference loop in the same run (issue 27: "a recorder that costs its loop").
//!
//! The reference is what any recorder of the same data must pay: one thread at real-time
//! priority on absolute deadlines (`clock_nanosleep(TIMER_ABSTIME)`, as a C loop would),
//! reading the files `record` reads at its default intervals (/proc/diskstats every 1 ms,
//! /proc/meminfo every 10 ms, /proc/stat every 100 ms) into a buffer, parsing nothing,
//! writing nothing. `record` is the real binary run as a child with no option but its
//! output directory: its CPU is every thread's (`/proc/PID/task/*/schedstat`, ns on CPU),
//! from 1.5 s after its start (exec, device scans and meta.json are not the loop's cost)
//! to the end of the window. Both run at the same time, so the machine's load hits both.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::clock::Clock;
use collectors::periodic::{self, thread_cpu_ns};

/// Start-up left out of the window (exec, device scans, the first meta.json).
const WARM_NS: u64 = 1_500_000_000;

/// A process's threads and their CPU time so far, in ns (none when it is gone).
fn threads_cpu_ns(pid: u32) -> Vec<(String, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    let mut out: Vec<(String, u64)> = tasks
        .flatten()
        .filter_map(|t| {
            let ns = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let ns = ns.split_whitespace().next()?.parse::<u64>().ok()?;
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((comm.trim().to_string(), ns))
        })
        .collect();
    out.sort();
    out
}

/// Each thread name's CPU between two [`threads_cpu_ns`] (a thread new since counts what
/// the later one saw of it), most first.
fn threads_since(a: &[(String, u64)], b: &[(String, u64)]) -> Vec<(String, u64)> {
    let sum = |v: &[(String, u64)], name: &str| -> u64 {
        v.iter().filter(|x| x.0 == name).map(|x| x.1).sum()
    };
    let mut names: Vec<&str> = b.iter().map(|x| x.0.as_str()).collect();
    names.dedup();
    let mut out: Vec<(String, u64)> = names
        .into_iter()
        .map(|n| (n.to_string(), sum(b, n).saturating_sub(sum(a, n))))
        .collect();
    out.sort_by_key(|y| std::cmp::Reverse(y.1));
    out
}

/// The reference loop for `window_ns` after `WARM_NS`: its thread's CPU over the window.
fn reference_loop(clock: Clock, until_ns: u64, stop: Arc<AtomicBool>) -> anyhow::Result<u64> {
    let open =
        |p: &str| std::fs::File::open(p).map_err(|e| anyhow::anyhow!("cannot open {p}: {e}"));
    let (disk, mem, stat) = (
        open("/proc/diskstats")?,
        open("/proc/meminfo")?,
        open("/proc/stat")?,
    );
    let _ = periodic::try_realtime();
    let mut buf = vec![0u8; 1 << 16];
    let (mut k, mut cpu_warm) = (0u64, None);
    periodic::run(&clock, 1_000_000, &stop, |_| {
        let _ = disk.read_at(&mut buf, 0);
        if k % 10 == 0 {
            let _ = mem.read_at(&mut buf, 0);
        }
        if k % 100 == 0 {
            let _ = stat.read_at(&mut buf, 0);
        }
        k += 1;
        let now = clock.now_ns();
        if now >= WARM_NS && cpu_warm.is_none() {
            cpu_warm = Some(thread_cpu_ns());
        }
        now < until_ns
    });
    Ok(thread_cpu_ns() - cpu_warm.unwrap_or(0))
}

/// Runs the stage for `window` and prints its lines; Ok(false) when interrupted.
pub(super) fn run(window: Duration, tmp: &Path, stopped: &Arc<AtomicBool>) -> anyhow::Result<bool> {
    let window_ns = window.as_nanos() as u64;
    let until_ns = WARM_NS + window_ns;
    let exe = std::env::current_exe()?;
    let clock = Clock::start();
    let stop = Arc::new(AtomicBool::new(false));
    let r = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("reference".into())
            .spawn(move || reference_loop(clock, until_ns, stop))?
    };
    let child = std::process::Command::new(&exe)
        .args(["record", "--no-progress", "--duration"])
        .arg(format!("{}ms", (until_ns + 5_000_000_000) / 1_000_000))
        .arg("--out")
        .arg(tmp.join("record"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {} record: {e}", exe.display()))?;
    let pid = child.id();
    let sleep_to = |t: u64| {
        while clock.now_ns() < t && !stopped.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    sleep_to(WARM_NS);
    let c0 = threads_cpu_ns(pid);
    let t0 = clock.now_ns();
    sleep_to(until_ns);
    let c1 = threads_cpu_ns(pid);
    let t1 = clock.now_ns();
    stop.store(true, Ordering::SeqCst);
    let ref_ns = r
        .join()
        .map_err(|_| anyhow::anyhow!("reference loop panicked"))??;
    // SAFETY: kill has no memory preconditions; the pid is our child, not yet waited for.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output()?;
    if stopped.load(Ordering::Relaxed) {
        return Ok(false);
    }
    let alive = !c1.is_empty()
        && out
            .status
            .code()
            .is_some_and(|c| c == 0 || c == 130 || c == 143);
    if !alive {
        anyhow::bail!(
            "{} record ended before the window did ({}): {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let wall = (t1 - t0).max(1) as f64;
    let per = threads_since(&c0, &c1);
    let rec = per.iter().map(|p| p.1).sum::<u64>() as f64 / wall;
    let refr = ref_ns as f64 / wall;
    println!(
        "whole `record` process at its defaults (every device, diskstats 1 ms, meminfo 10 ms, cpu 100 ms) for {:.1} s, beside a reference loop in the same run (one real-time thread on absolute deadlines reading the same files at the same intervals, parsing and writing nothing):",
        wall / 1e9
    );
    let split: Vec<String> = per
        .iter()
        .filter(|p| p.1 > 0)
        .map(|(n, ns)| format!("{n} {:.2}%", 100.0 * *ns as f64 / wall))
        .collect();
    println!(
        "  record, all its threads: {:.2}% of a core ({})",
        100.0 * rec,
        split.join(", ")
    );
    println!("  reference loop: {:.2}% of a core", 100.0 * refr);
    println!("  record / reference: {:.2}x", rec / refr.max(1e-9));
    Ok(true)
}
