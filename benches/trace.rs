//! What `record --trace` costs and how well its block latencies agree with fio's (issue
//! 11), on a loop device over a file in /var/tmp:
//! 1. cost: fio at its highest IOPS (randwrite 4k, O_DIRECT, libaio, iodepth 32), in
//!    pairs without and with `diskpulse record --trace --device LOOP` beside it (the
//!    order alternates, so a machine getting busier does not favour one side): the IOPS
//!    ratio, the events/s read, the events lost, and the CPU time of the recorder's
//!    `trace` thread and of the writer thread compressing block_requests.csv.gz (from
//!    /proc/PID/task/TID/stat), per request;
//! 2. latency at iodepth 32, from the traced runs of 1: fio's completion latency (clat)
//!    p50/p99/mean against the traced issue-to-completion p50/p99/mean, and the requests
//!    in flight each implies (Little's law: iops x mean). fio's clat runs from io_submit's
//!    return to fio reaping the completion; the trace sees the request from its issue to
//!    the driver to its completion in the kernel: at iodepth 32 on two busy cores fio's
//!    clat also holds the time a completed request waits for fio to come and reap it;
//! 3. latency at iodepth 1, traced: fio waits in io_getevents for its one request; its
//!    clat starts when io_submit returns (after the request's issue), its lat before
//!    io_submit: the traced issue-to-completion lies between the two.
//!
//! Cost has three arms: fio alone (off), fio beside `record` without `--trace` (rec: the
//! recorder's own samplers, diskstats every ms), and beside `record --trace` (on).
//!
//! Both on a loop device whose writes land in the backing file's page cache (the CPU is
//! the limit) and on one with `--direct-io=on` (a device that takes time).
//!
//! Run (root, fio): `cargo bench --bench trace` (release build), or without a release
//! build `cargo bench --profile dev --bench trace`. `DISKPULSE_BENCH_SECS` sets each fio
//! run's length (default 8), `DISKPULSE_BENCH_PAIRS` the number of rounds (default 5),
//! `DISKPULSE_BENCH_TRACE_ARGS` more flags for the traced runs (e.g. `--trace-only block`).

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
    let out = sh(
        "fio",
        &[
            "--name=trace-bench",
            &format!("--filename={dev}"),
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            &format!("--iodepth={iodepth}"),
            "--size=256M",
            "--time_based",
            &format!("--runtime={secs}"),
            "--lat_percentiles=1",
            "--output-format=json",
        ],
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

/// fio beside `diskpulse record --device LOOP` (with `--trace` when `trace`).
fn traced_fio(
    lo: &Loop,
    name: &str,
    (secs, iodepth, trace): (u64, u32, bool),
    runs: &Path,
    i: usize,
) -> Traced {
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
    let cpu0 = thread_cpu_ms(rec.id());
    let f = fio(&lo.dev, secs, iodepth);
    let cpu1 = thread_cpu_ms(rec.id());
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
    println!(
        "1. cost: fio randwrite 4k direct libaio iodepth 32 on {name}, {secs} s a run, {pairs} pairs (the order alternates)"
    );
    println!("round  order   iops_off  iops_rec  iops_on  rec/off  on/rec  on/off  requests  events  events_per_s  lost  trace_cpu_ms  writer_cpu_ms  recorder_cpu_ms  trace_ns_per_ev  writer_ns_per_ev  recorder_ns_per_ev");
    let mut cols: [Vec<f64>; 9] = Default::default();
    let mut deep = vec![];
    for i in 0..pairs {
        let (off, rec, on) = if i % 2 == 0 {
            let off = fio(&lo.dev, secs, 32);
            let rec = traced_fio(&lo, &name, (secs, 32, false), runs.path(), 100 + i);
            (
                off,
                rec,
                traced_fio(&lo, &name, (secs, 32, true), runs.path(), i),
            )
        } else {
            let on = traced_fio(&lo, &name, (secs, 32, true), runs.path(), i);
            let rec = traced_fio(&lo, &name, (secs, 32, false), runs.path(), 100 + i);
            (fio(&lo.dev, secs, 32), rec, on)
        };
        // CPU per event: the recorder's CPU while fio ran over the events it read (the
        // recording starts before fio and ends after it, with next to no I/O outside).
        let per_ev = |ms: f64| ms * 1e6 / on.events.max(1.0);
        let row = [
            off.iops,
            rec.fio.iops,
            on.fio.iops,
            on.fio.iops / off.iops,
            on.fio.iops / rec.fio.iops,
            per_ev(on.trace_cpu_ms),
            per_ev(on.writer_cpu_ms),
            per_ev(on.all_cpu_ms),
            on.events_per_s,
        ];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
        println!(
            "{i:>5}  {:<6}  {:>8.0}  {:>8.0}  {:>7.0}  {:>7.3}  {:>6.3}  {:>6.3}  {:>8}  {:>6.0}  {:>12.0}  {:>4}  {:>12.0}  {:>13.0}  {:>15.0}  {:>15.0}  {:>16.0}  {:>18.0}",
            if i % 2 == 0 { "off-on" } else { "on-off" },
            off.iops,
            rec.fio.iops,
            on.fio.iops,
            rec.fio.iops / off.iops,
            on.fio.iops / rec.fio.iops,
            on.fio.iops / off.iops,
            on.requests,
            on.events,
            on.events_per_s,
            on.lost,
            on.trace_cpu_ms,
            on.writer_cpu_ms,
            on.all_cpu_ms,
            per_ev(on.trace_cpu_ms),
            per_ev(on.writer_cpu_ms),
            per_ev(on.all_cpu_ms),
        );
        deep.push(on);
    }
    let m = |i: usize| spread(&cols[i]);
    println!(
        "IOPS, median (min-max) of {pairs}: off {}, rec {}, on {}",
        m(0).show(0),
        m(1).show(0),
        m(2).show(0)
    );
    println!(
        "on/off {} (record --trace costs {:.1}% at the median); on/rec {} (the trace alone, over a record without it, costs {:.1}%)",
        m(3).show(3),
        (1.0 - m(3).median) * 100.0,
        m(4).show(3),
        (1.0 - m(4).median) * 100.0
    );
    println!(
        "CPU per event read, ns: trace thread {}, block_requests writer {}, whole recorder {}; {} events/s",
        m(5).show(0),
        m(6).show(0),
        m(7).show(0),
        m(8).show(0)
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
    // Like for like: at iodepth 1 fio waits in io_getevents for its one request. Its clat
    // starts when io_submit returns, after the request was issued; its lat starts before
    // io_submit: the traced issue-to-completion lies between the two.
    println!();
    println!("3. latency at iodepth 1 (fio waits for each request), traced, us: fio clat <= trace <= fio lat");
    println!("run  fio_iops  fio_clat_p50  trace_p50  fio_lat_p50  fio_clat_p90  trace_p90  fio_lat_p90  fio_clat_p99  trace_p99  fio_lat_p99  requests  lost  trace/clat_p50  trace/clat_p90  trace/clat_p99");
    for i in 0..pairs {
        let on = traced_fio(&lo, &name, (secs, 1, true), runs.path(), pairs + i);
        println!(
            "{i:>3}  {:>8.0}  {:>12.1}  {:>9.1}  {:>11.1}  {:>12.1}  {:>9.1}  {:>11.1}  {:>12.1}  {:>9.1}  {:>11.1}  {:>8}  {:>4}  {:>14.2}  {:>14.2}  {:>14.2}",
            on.fio.iops,
            on.fio.clat_p50_ns / 1e3,
            on.p50_ns / 1e3,
            on.fio.lat_p50_ns / 1e3,
            on.fio.clat_p90_ns / 1e3,
            on.p90_ns / 1e3,
            on.fio.lat_p90_ns / 1e3,
            on.fio.clat_p99_ns / 1e3,
            on.p99_ns / 1e3,
            on.fio.lat_p99_ns / 1e3,
            on.requests,
            on.lost,
            on.p50_ns / on.fio.clat_p50_ns,
            on.p90_ns / on.fio.clat_p90_ns,
            on.p99_ns / on.fio.clat_p99_ns,
        );
    }
}
