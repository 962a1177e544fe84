//! What `record --trace` costs and how well its block latencies agree with fio's (issue
//! 11), on a loop device over a file in /var/tmp:
//! 1. cost: fio at its highest IOPS (randwrite 4k, O_DIRECT, libaio, iodepth 32) in five
//!    arms, their order rotating round by round (a machine getting busier favours none):
//!    fio alone (off); beside `record` without `--trace` (rec: the recorder's samplers,
//!    diskstats every ms); with the block tracepoints enabled in an instance of the
//!    bench's own and no reader at all (kernel: what the kernel's tracepoints cost by
//!    themselves, the floor for any tracefs reader); beside bpftrace doing biolatency's
//!    work over the same tracepoints (bpf: issue time in a map, a histogram in the kernel,
//!    nothing per event to user space; skipped without bpftrace); beside `record --trace`
//!    (on). Printed: IOPS, each arm over off, on over rec, events read and lost, and the
//!    CPU time of the recorder's `trace` thread and of the writer thread compressing
//!    block_requests.csv.gz (from /proc/PID/task/TID/stat), per event;
//! 2. latency at iodepth 32, from the traced runs of 1: fio's completion latency (clat)
//!    p50/p99/mean against the traced issue-to-completion p50/p99/mean, and the requests
//!    in flight each implies (Little's law: iops x mean). fio's clat runs from io_submit's
//!    return to fio reaping the completion; the trace sees the request from its issue to
//!    the driver to its completion in the kernel: at iodepth 32 on two busy cores fio's
//!    clat also holds the time a completed request waits for fio to come and reap it;
//! 3. latency at iodepth 1 for 4 KiB and 64 KiB writes, each run traced by `record --trace`
//!    and by bpftrace (biolatency's method, 1 us buckets to 1 ms, 20 us to 20 ms) on the
//!    same requests, fio waiting in io_getevents (`wait`) or spinning on the completion
//!    ring (`spin`: `--userspace_reap`, fio sees a completion within a loop turn). The
//!    request is issued inside io_submit, so fio's clat (from io_submit's return) starts
//!    after the issue and its lat (before io_submit) before it: with fio spinning the
//!    trace lies between the two; waiting, fio's clat also holds its wake-up.
//!
//! Both on a loop device whose writes land in the backing file's page cache (the CPU is
//! the limit) and on one with `--direct-io=on` (the loop's writes reach the disk under
//! /var/tmp; `record --device LOOP` then also traces that disk).
//!
//! Run (root, fio; bpftrace for the bpf arm and column): `cargo bench --bench trace`
//! (release build), or without a release build `cargo bench --profile dev --bench trace`.
//! `DISKPULSE_BENCH_SECS` sets each fio run's length (default 8), `DISKPULSE_BENCH_PAIRS`
//! the number of rounds (default 5), `DISKPULSE_BENCH_LAT_RUNS` the latency runs per
//! block size and mode (default 2), `DISKPULSE_BENCH_BACKING=cache|direct` one device,
//! `DISKPULSE_BENCH_TRACE_ARGS` more flags for the traced runs (e.g. `--trace-only block`).
#![allow(
    clippy::too_many_lines,
    reason = "each benchmark measures ours and the reference side by side in one function"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use diskpulse::format::block_requests;

fn sh(prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {prog}: {e}"));
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

struct Loop {
    dev: String,
    image: PathBuf,
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// What fio measured: write IOPS and its completion latency (ns).
#[derive(Clone, Copy)]
struct Fio {
    iops: f64,
    clat_p50_ns: f64,
    clat_p90_ns: f64,
    clat_p99_ns: f64,
    clat_mean_ns: f64,
    /// Submission (before io_submit) to reaping: what the application waits.
    lat_p50_ns: f64,
    lat_p90_ns: f64,
    lat_p99_ns: f64,
}

/// fio randwrite 4k O_DIRECT libaio at `iodepth` on `dev` for `secs`.
fn fio(dev: &str, secs: u64, iodepth: u32) -> Fio {
    fio_with(dev, secs, iodepth, "4k", false)
}

/// fio randwrite `bs` O_DIRECT libaio at `iodepth`; `spin`: fio polls the completion ring
/// from user space instead of sleeping in io_getevents (`--userspace_reap`).
fn fio_with(dev: &str, secs: u64, iodepth: u32, bs: &str, spin: bool) -> Fio {
    let spin_args: &[&str] = match spin {
        true => &[
            "--userspace_reap",
            "--iodepth_batch_complete_min=0",
            "--iodepth_batch_complete_max=1",
        ],
        false => &[],
    };
    let out = sh(
        "fio",
        &[
            &[
                "--name=trace-bench",
                &format!("--filename={dev}"),
                "--rw=randwrite",
                &format!("--bs={bs}"),
                "--direct=1",
                "--ioengine=libaio",
                &format!("--iodepth={iodepth}"),
                "--size=256M",
                "--time_based",
                &format!("--runtime={secs}"),
                "--lat_percentiles=1",
                "--clat_percentiles=1",
                "--output-format=json",
            ][..],
            spin_args,
        ]
        .concat(),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("fio JSON");
    let w = &v["jobs"][0]["write"];
    let p = |q: &str| w["clat_ns"]["percentile"][q].as_f64().unwrap_or(f64::NAN);
    let l = |q: &str| w["lat_ns"]["percentile"][q].as_f64().unwrap_or(f64::NAN);
    Fio {
        iops: w["iops"].as_f64().unwrap_or(f64::NAN),
        clat_p50_ns: p("50.000000"),
        clat_p90_ns: p("90.000000"),
        clat_p99_ns: p("99.000000"),
        clat_mean_ns: w["clat_ns"]["mean"].as_f64().unwrap_or(f64::NAN),
        lat_p50_ns: l("50.000000"),
        lat_p90_ns: l("90.000000"),
        lat_p99_ns: l("99.000000"),
    }
}

/// A median and the range around it.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}-{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }
}

fn spread(v: &[f64]) -> Spread {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let median = match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    };
    Spread {
        median,
        min: s.first().copied().unwrap_or(f64::NAN),
        max: s.last().copied().unwrap_or(f64::NAN),
    }
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize] as f64
}

struct Traced {
    fio: Fio,
    /// bpftrace's histogram of the same requests (issue to completion), when asked.
    bpf: Option<Hist>,
    p50_ns: f64,
    p90_ns: f64,
    p99_ns: f64,
    mean_ns: f64,
    requests: usize,
    events_per_s: f64,
    /// Events read during the whole recording (fio's run and the seconds around it).
    events: f64,
    lost: u64,
    /// CPU time of the recorder's threads while fio ran, ms: the trace reader and the
    /// writer compressing block_requests.csv.gz.
    trace_cpu_ms: f64,
    writer_cpu_ms: f64,
    all_cpu_ms: f64,
}

/// CPU time (user + system) of each thread of `pid`, by thread name, ms.
fn thread_cpu_ms(pid: u32) -> Vec<(String, f64)> {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ... field 14 utime, 15 stime (after the comm's ')').
        let (Some(a), Some(b)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let f: Vec<&str> = stat[b + 2..].split(' ').collect();
        let ticks: f64 = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
        out.push((stat[a + 1..b].to_string(), ticks * 1e3 / tick));
    }
    out
}

/// The kernel's dev_t of a block device (`major << 20 | minor`), as the block tracepoints
/// carry it.
fn dev_t(name: &str) -> u64 {
    let mm = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
    let (ma, mi) = mm.trim().split_once(':').unwrap();
    (ma.parse::<u64>().unwrap() << 20) | mi.parse::<u64>().unwrap()
}

const TRACEFS: &str = "/sys/kernel/tracing";
const BLOCK_EVENTS: [&str; 3] = ["block_rq_insert", "block_rq_issue", "block_rq_complete"];

/// The block tracepoints `record --trace` enables (with its `dev ==` filter), on in a
/// trace instance of the bench's own, with no reader: the ring overwrites itself, so what
/// fio loses is what the kernel's tracepoints cost by themselves.
struct KernelOnly(PathBuf);

impl KernelOnly {
    fn start(name: &str) -> KernelOnly {
        if !Path::new(TRACEFS).join("instances").exists() {
            sh("mount", &["-t", "tracefs", "nodev", TRACEFS]);
        }
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("diskpulse-bench-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let k = KernelOnly(dir);
        for e in BLOCK_EVENTS {
            let ev = k.0.join("events/block").join(e);
            std::fs::write(ev.join("filter"), format!("dev == {}", dev_t(name))).unwrap();
            std::fs::write(ev.join("enable"), "1").unwrap();
        }
        k
    }
}

impl Drop for KernelOnly {
    fn drop(&mut self) {
        for e in BLOCK_EVENTS {
            let _ = std::fs::write(self.0.join("events/block").join(e).join("enable"), "0");
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A latency histogram from bpftrace's `lhist` output: 1 us buckets to 1 ms, 20 us to
/// 20 ms, (from, to, count) in us.
struct Hist {
    fine: Vec<(f64, f64, u64)>,
    coarse: Vec<(f64, f64, u64)>,
    total: u64,
}

impl Hist {
    /// The `p` quantile, us: a bucket's middle, from the fine buckets when it lies there.
    fn quantile(&self, p: f64) -> f64 {
        let want = (p * self.total as f64).ceil() as u64;
        for (buckets, top) in [(&self.fine, 1000.0), (&self.coarse, f64::INFINITY)] {
            let mut acc = 0;
            for &(a, b, c) in buckets {
                acc += c;
                if acc >= want.max(1) {
                    if b > top {
                        break;
                    }
                    return (a + b) / 2.0;
                }
            }
        }
        f64::NAN
    }
}

/// bpftrace doing biolatency's work on one device: the issue time per sector in a map,
/// issue to completion in a histogram in the kernel, nothing per event to user space.
struct Bpf {
    child: std::process::Child,
    out: PathBuf,
}

fn have_bpftrace() -> bool {
    Command::new("bpftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Bpf {
    /// `None` without bpftrace, or when it did not attach within 20 s.
    fn start(dev: u64, out: &Path) -> Option<Bpf> {
        if !have_bpftrace() {
            return None;
        }
        let prog = format!(
            "tracepoint:block:block_rq_issue /args->dev == {dev}/ {{ @s[args->sector] = nsecs; }} \
             tracepoint:block:block_rq_complete /args->dev == {dev} && @s[args->sector]/ {{ \
             $d = (nsecs - @s[args->sector]) / 1000; @fine = lhist($d, 0, 1000, 1); \
             @coarse = lhist($d, 0, 20000, 20); delete(@s[args->sector]); }}"
        );
        let child = Command::new("bpftrace")
            .args(["-e", &prog])
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let b = Bpf {
            child,
            out: out.to_path_buf(),
        };
        for _ in 0..400 {
            if std::fs::read_to_string(out).is_ok_and(|t| t.contains("Attaching")) {
                std::thread::sleep(Duration::from_millis(200));
                return Some(b);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("bpftrace did not attach in 20 s: {out:?}");
        Some(b)
    }

    /// Stops bpftrace (it prints its maps on SIGINT) and reads the histograms.
    fn finish(mut self) -> Hist {
        // SAFETY: kill with our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let mut h = Hist {
            fine: vec![],
            coarse: vec![],
            total: 0,
        };
        let mut fine = true;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("@fine") {
                fine = true;
            } else if t.starts_with("@coarse") {
                fine = false;
            }
            // "[12, 13)   456 |@@@   |" (the overflow bucket "[1000, ...)" has no top).
            let Some(rest) = t.strip_prefix('[') else {
                continue;
            };
            let Some((range, tail)) = rest.split_once(')') else {
                continue;
            };
            let Some((a, b)) = range.split_once(", ") else {
                continue;
            };
            let a: f64 = a.trim().parse().unwrap_or(f64::NAN);
            let b: f64 = b.trim().parse().unwrap_or(f64::INFINITY);
            let c: u64 = tail
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            match fine {
                true => h.fine.push((a, b, c)),
                false => {
                    h.coarse.push((a, b, c));
                    h.total += c;
                }
            }
        }
        h
    }
}

impl Drop for Bpf {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One fio run beside `record`: its length, depth, block size and way of reaping, whether
/// `record` traces, and whether bpftrace measures the same requests (section 3).
#[derive(Clone, Copy)]
struct RunOpts<'a> {
    secs: u64,
    iodepth: u32,
    trace: bool,
    bs: &'a str,
    spin: bool,
    bpf: bool,
}

impl RunOpts<'_> {
    fn cost(secs: u64, trace: bool) -> RunOpts<'static> {
        RunOpts {
            secs,
            iodepth: 32,
            trace,
            bs: "4k",
            spin: false,
            bpf: false,
        }
    }
}

/// fio beside `diskpulse record --device LOOP` (with `--trace` when `trace`), and beside
/// bpftrace when `bpf`.
fn traced_fio(lo: &Loop, name: &str, o: RunOpts, runs: &Path, i: usize) -> Traced {
    let RunOpts {
        secs,
        iodepth,
        trace,
        ..
    } = o;
    let dir = runs.join(format!("run{i}"));
    let mut rec = Command::new(env!("CARGO_BIN_EXE_diskpulse"))
        .args(["record", "--device", name, "--duration", "1h"])
        .args(trace.then_some("--trace"))
        // DISKPULSE_BENCH_TRACE_ARGS: more flags for the traced runs (`--trace-only block`).
        .args(
            match trace {
                true => std::env::var("DISKPULSE_BENCH_TRACE_ARGS").unwrap_or_default(),
                false => String::new(),
            }
            .split_whitespace(),
        )
        .arg("--out")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the trace (or the samplers) to run.
    let ready = if trace { "\"trace\"" } else { "\"samplers\"" };
    for _ in 0..500 {
        if std::fs::read_to_string(dir.join("meta.json")).is_ok_and(|t| t.contains(ready)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let bpf = o
        .bpf
        .then(|| Bpf::start(dev_t(name), &runs.join(format!("bpf{i}.out"))))
        .flatten();
    let cpu0 = thread_cpu_ms(rec.id());
    let f = fio_with(&lo.dev, secs, iodepth, o.bs, o.spin);
    let cpu1 = thread_cpu_ms(rec.id());
    let bpf = bpf.map(Bpf::finish);
    let used = |pre: &str| -> f64 {
        let sum = |v: &[(String, f64)]| {
            v.iter()
                .filter(|(n, _)| n.starts_with(pre))
                .map(|(_, ms)| ms)
                .sum::<f64>()
        };
        sum(&cpu1) - sum(&cpu0)
    };
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let _ = rec.wait();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let stats = &meta["trace"]["stats"];
    let dur_s = meta["duration_ns"].as_f64().unwrap_or(f64::NAN) / 1e9;
    let rows = match trace {
        true => block_requests::read(&dir).unwrap().0,
        false => vec![],
    };
    let mut lat: Vec<u64> = rows
        .iter()
        .filter(|r| r.device == name && r.op == "write")
        .map(|r| r.queue_ns.unwrap_or(0) + r.service_ns)
        .collect();
    let requests = lat.len();
    let mean_ns = lat.iter().sum::<u64>() as f64 / requests.max(1) as f64;
    let _ = std::fs::remove_dir_all(&dir);
    Traced {
        bpf,
        fio: f,
        p50_ns: percentile(&mut lat, 0.5),
        p90_ns: percentile(&mut lat, 0.9),
        p99_ns: percentile(&mut lat, 0.99),
        mean_ns,
        requests,
        trace_cpu_ms: used("trace"),
        writer_cpu_ms: used("write-block_req"),
        all_cpu_ms: used(""),
        events_per_s: stats["events"].as_f64().unwrap_or(f64::NAN) / dur_s,
        events: stats["events"].as_f64().unwrap_or(f64::NAN),
        lost: stats["lost_events"].as_u64().unwrap_or(u64::MAX),
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: the trace bench needs root (tracefs, loop devices)");
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("skipping: fio not found (apt-get install fio)");
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let secs = env("DISKPULSE_BENCH_SECS", 8);
    let pairs = env("DISKPULSE_BENCH_PAIRS", 5) as usize;
    // Two loop devices over the same kind of file: the loop's default (its writes land in
    // the backing file's page cache: no device behind it, the CPU is the limit and every
    // ns the tracepoints take is an IOPS lost) and `--direct-io=on` (the loop's writes go
    // to the disk under /var/tmp with O_DIRECT: a device that takes time, as a real one).
    // DISKPULSE_BENCH_BACKING=cache|direct runs one of them.
    let which = std::env::var("DISKPULSE_BENCH_BACKING").unwrap_or_default();
    for (key, backing, dio) in [
        ("cache", "page cache", "off"),
        ("direct", "direct I/O", "on"),
    ] {
        if which.is_empty() || which == key {
            bench_one(backing, dio, secs, pairs);
        }
    }
}

fn bench_one(backing: &str, dio: &str, secs: u64, pairs: usize) {
    let image = PathBuf::from(format!(
        "/var/tmp/diskpulse-trace-bench-{}.img",
        std::process::id()
    ));
    sh("truncate", &["-s", "256M", image.to_str().unwrap()]);
    let lo = Loop {
        dev: sh(
            "losetup",
            &[
                "-f",
                "--show",
                &format!("--direct-io={dio}"),
                image.to_str().unwrap(),
            ],
        ),
        image,
    };
    let name = lo.dev.trim_start_matches("/dev/").to_string();
    let runs = tempfile::tempdir().unwrap();
    // Warm up: the image's blocks allocated, the page cache filled.
    fio(&lo.dev, 2, 32);
    println!();
    println!("== loop device over a file in /var/tmp, backing through the {backing} (losetup --direct-io={dio}) ==");
    let bpf = have_bpftrace();
    if !bpf {
        println!("(bpftrace not found: no bpf arm; apt-get install bpftrace)");
    }
    let mut arms = vec!["off", "rec", "kernel", "bpf", "on"];
    arms.retain(|a| bpf || *a != "bpf");
    println!(
        "1. cost: fio randwrite 4k direct libaio iodepth 32 on {name}, {secs} s a run, {pairs} rounds of {} arms (the order rotates)",
        arms.len()
    );
    println!("round  first   iops_off  iops_rec  iops_kernel  iops_bpf  iops_on  rec/off  kernel/off  bpf/off  on/off  on/rec  requests  events  events_per_s  lost  trace_cpu_ms  writer_cpu_ms  recorder_cpu_ms  trace_ns_per_ev  writer_ns_per_ev  recorder_ns_per_ev");
    // off, rec, kernel, bpf, on, then the ratios rec/off, kernel/off, bpf/off, on/off,
    // on/rec, then trace/writer/recorder ns per event and events/s.
    let mut cols: [Vec<f64>; 14] = Default::default();
    let mut deep = vec![];
    for i in 0..pairs {
        let mut iops = [f64::NAN; 5];
        let mut traced = None;
        for k in 0..arms.len() {
            let arm = arms[(i + k) % arms.len()];
            match arm {
                "off" => iops[0] = fio(&lo.dev, secs, 32).iops,
                "rec" => {
                    iops[1] =
                        traced_fio(&lo, &name, RunOpts::cost(secs, false), runs.path(), 100 + i)
                            .fio
                            .iops
                }
                "kernel" => {
                    let _k = KernelOnly::start(&name);
                    iops[2] = fio(&lo.dev, secs, 32).iops;
                }
                "bpf" => {
                    let b = Bpf::start(dev_t(&name), &runs.path().join("bpf-cost.out"));
                    iops[3] = fio(&lo.dev, secs, 32).iops;
                    drop(b.map(Bpf::finish));
                }
                _ => {
                    let on = traced_fio(&lo, &name, RunOpts::cost(secs, true), runs.path(), i);
                    iops[4] = on.fio.iops;
                    traced = Some(on);
                }
            }
        }
        let on = traced.unwrap();
        // CPU per event: the recorder's CPU while fio ran over the events it read (the
        // recording starts before fio and ends after it, with next to no I/O outside).
        let per_ev = |ms: f64| ms * 1e6 / on.events.max(1.0);
        let row = [
            iops[0],
            iops[1],
            iops[2],
            iops[3],
            iops[4],
            iops[1] / iops[0],
            iops[2] / iops[0],
            iops[3] / iops[0],
            iops[4] / iops[0],
            iops[4] / iops[1],
            per_ev(on.trace_cpu_ms),
            per_ev(on.writer_cpu_ms),
            per_ev(on.all_cpu_ms),
            on.events_per_s,
        ];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
        println!(
            "{i:>5}  {:<6}  {:>8.0}  {:>8.0}  {:>11.0}  {:>8.0}  {:>7.0}  {:>7.3}  {:>10.3}  {:>7.3}  {:>6.3}  {:>6.3}  {:>8}  {:>6.0}  {:>12.0}  {:>4}  {:>12.0}  {:>13.0}  {:>15.0}  {:>15.0}  {:>16.0}  {:>18.0}",
            arms[i % arms.len()],
            iops[0],
            iops[1],
            iops[2],
            iops[3],
            iops[4],
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
            on.requests,
            on.events,
            on.events_per_s,
            on.lost,
            on.trace_cpu_ms,
            on.writer_cpu_ms,
            on.all_cpu_ms,
            row[10],
            row[11],
            row[12],
        );
        deep.push(on);
    }
    let m = |i: usize| spread(&cols[i]);
    println!(
        "IOPS, median (min-max) of {pairs}: off {}, rec {}, kernel {}, bpf {}, on {}",
        m(0).show(0),
        m(1).show(0),
        m(2).show(0),
        m(3).show(0),
        m(4).show(0)
    );
    println!(
        "over off: rec {}, kernel {} (the tracepoints alone cost {:.1}%), bpf {} ({:.1}%), on {} (record --trace costs {:.1}%); on/rec {} (the trace over a record without it: {:.1}%)",
        m(5).show(3),
        m(6).show(3),
        (1.0 - m(6).median) * 100.0,
        m(7).show(3),
        (1.0 - m(7).median) * 100.0,
        m(8).show(3),
        (1.0 - m(8).median) * 100.0,
        m(9).show(3),
        (1.0 - m(9).median) * 100.0
    );
    println!(
        "CPU per event read, ns: trace thread {}, block_requests writer {}, whole recorder {}; {} events/s",
        m(10).show(0),
        m(11).show(0),
        m(12).show(0),
        m(13).show(0)
    );
    // fio's clat runs from io_submit's return to fio reaping the completion; the trace
    // sees issue to completion in the kernel. At iodepth 32 the difference is the time a
    // completed request waits for fio to reap it: Little's law gives the requests in
    // flight each way (fio: iops x clat mean; the device: iops x traced mean).
    println!();
    println!("2. latency at iodepth 32 (the traced runs above), us; in flight = iops x mean");
    println!("round  fio_clat_p50  trace_p50  fio_clat_p90  trace_p90  fio_clat_p99  trace_p99  fio_clat_mean  trace_mean  in_flight_fio  in_flight_device");
    for (i, on) in deep.iter().enumerate() {
        println!(
            "{i:>5}  {:>12.1}  {:>9.1}  {:>12.1}  {:>9.1}  {:>12.1}  {:>9.1}  {:>13.1}  {:>10.1}  {:>13.1}  {:>16.1}",
            on.fio.clat_p50_ns / 1e3,
            on.p50_ns / 1e3,
            on.fio.clat_p90_ns / 1e3,
            on.p90_ns / 1e3,
            on.fio.clat_p99_ns / 1e3,
            on.p99_ns / 1e3,
            on.fio.clat_mean_ns / 1e3,
            on.mean_ns / 1e3,
            on.fio.iops * on.fio.clat_mean_ns / 1e9,
            on.fio.iops * on.mean_ns / 1e9,
        );
    }
    // Like for like: at iodepth 1 fio waits for its one request. Its clat starts when
    // io_submit returns (the request was issued inside it), its lat before io_submit:
    // with fio spinning on the completion ring the traced issue-to-completion lies between
    // the two; sleeping in io_getevents, fio's clat also holds its own wake-up. bpftrace
    // measures the same requests the same way as the trace, independently.
    let lat_runs = std::env::var("DISKPULSE_BENCH_LAT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2usize);
    println!();
    println!("3. latency at iodepth 1, traced by record --trace and by bpftrace on the same requests, us (fio clat <= trace <= fio lat when fio spins)");
    println!("bs   reap  run  fio_iops  requests  bpf_n  lost  p50: clat  trace    bpf    lat  p90: clat  trace    bpf    lat  p99: clat  trace    bpf    lat  trace/clat p50 p90 p99  trace/bpf p50 p90 p99");
    let mut n = 0;
    for bs in ["4k", "64k"] {
        for spin in [false, true] {
            for r in 0..lat_runs {
                n += 1;
                let o = RunOpts {
                    secs,
                    iodepth: 1,
                    trace: true,
                    bs,
                    spin,
                    bpf,
                };
                let on = traced_fio(&lo, &name, o, runs.path(), 1000 + n);
                let f = &on.fio;
                let b = |p: f64| on.bpf.as_ref().map_or(f64::NAN, |h| h.quantile(p));
                let (t50, t90, t99) = (on.p50_ns / 1e3, on.p90_ns / 1e3, on.p99_ns / 1e3);
                println!(
                    "{bs:<4} {:<5} {r:>3}  {:>8.0}  {:>8}  {:>5}  {:>4}  {:>9.1} {:>6.1} {:>6.1} {:>6.1}  {:>9.1} {:>6.1} {:>6.1} {:>6.1}  {:>9.1} {:>6.1} {:>6.1} {:>6.1}  {:>14.2} {:>4.2} {:>4.2}  {:>13.2} {:>4.2} {:>4.2}",
                    if spin { "spin" } else { "wait" },
                    f.iops,
                    on.requests,
                    on.bpf.as_ref().map_or(0, |h| h.total),
                    on.lost,
                    f.clat_p50_ns / 1e3,
                    t50,
                    b(0.5),
                    f.lat_p50_ns / 1e3,
                    f.clat_p90_ns / 1e3,
                    t90,
                    b(0.9),
                    f.lat_p90_ns / 1e3,
                    f.clat_p99_ns / 1e3,
                    t99,
                    b(0.99),
                    f.lat_p99_ns / 1e3,
                    on.p50_ns / f.clat_p50_ns,
                    on.p90_ns / f.clat_p90_ns,
                    on.p99_ns / f.clat_p99_ns,
                    t50 / b(0.5),
                    t90 / b(0.9),
                    t99 / b(0.99),
                );
            }
        }
    }
}
