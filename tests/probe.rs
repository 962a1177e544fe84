//! `diskpulse probe` against real parts: files on ext4, loop devices, a cgroup-throttled
//! device, tracefs counting the system calls the probe makes, a seccomp filter that
//! refuses io_uring. Tests that need root (loop devices, tracefs, cgroups) say why they
//! skip without it.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn probe_in(dir: &Path, args: &[&str]) -> Output {
    diskpulse()
        .current_dir(dir)
        .arg("probe")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            text(&o.stdout),
            text(&o.stderr)
        )
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

/// The one error line (stderr's last non-empty line).
fn error_line(o: &Output) -> String {
    text(&o.stderr)
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// Tests whose figures depend on timing run one at a time: 2 CPUs shared by 14 tests
/// (and whatever else runs) would otherwise starve the probe they measure.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timing() -> std::sync::MutexGuard<'static, ()> {
    TIMING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A loop device over a file on tmpfs: a steady device (a memory copy), not the shared
/// virtual disk under /var/tmp, whose latency spikes to tens of ms on a busy machine.
/// Root only; detached and removed on drop.
struct ShmLoop {
    image: PathBuf,
    dev: String,
}

impl ShmLoop {
    fn new(size: &str) -> Option<ShmLoop> {
        if !is_root() || Command::new("losetup").arg("--version").output().is_err() {
            return None;
        }
        let image = PathBuf::from(format!(
            "/dev/shm/diskpulse-test-{}-{}.img",
            std::process::id(),
            collectors::clock::monotonic_ns() % 1_000_000_007
        ));
        sh("truncate", &["-s", size, image.to_str().unwrap()]);
        let dev = sh("losetup", &["-f", "--show", image.to_str().unwrap()]);
        Some(ShmLoop { image, dev })
    }
}

impl Drop for ShmLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

#[test]
fn a_rate_of_2000_for_2s_gives_4000_ios_and_a_70_30_mix() {
    let _t = timing();
    let d = scratch();
    let f = d.path().join("p.dat");
    let shm = ShmLoop::new("64M");
    let target = match &shm {
        Some(l) => l.dev.clone(),
        None => {
            eprintln!("not root: probing a file in /var/tmp (timing at the mercy of its disk)");
            f.to_str().unwrap().to_string()
        }
    };
    let o = probe_in(
        d.path(),
        &[
            "--allow-destructive",
            "--filename",
            &target,
            "--size",
            "32MiB",
            "--rw",
            "randrw",
            "--rwmixread",
            "70",
            "--bs",
            "4k",
            "--iodepth",
            "8",
            "--rate-iops",
            "2000",
            "--runtime",
            "2s",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let job = &j["jobs"][0];
    let reads = job["read"]["total_ios"].as_u64().unwrap();
    let writes = job["write"]["total_ios"].as_u64().unwrap();
    let total = reads + writes;
    assert!(
        (3800..=4200).contains(&total),
        "{total} I/Os: {reads} reads + {writes} writes"
    );
    let share = reads as f64 / total as f64 * 100.0;
    let missed = j["diskpulse"]["rate_missed_ios"].as_u64().unwrap();
    eprintln!("{total} I/Os ({missed} scheduled but not issued), {share:.1}% reads");
    assert!((67.0..=73.0).contains(&share), "reads are {share:.1}%");
    assert_eq!(
        total + missed,
        4000,
        "a linear schedule of 2000/s for 2 s has 4000 starts"
    );
    // A file the probe created is gone afterwards.
    assert!(!f.exists(), "the probe removes the file it created");
    // A rate means an intended-start latency, never below the completion latency's min.
    let co = &job["read"]["lat_co_ns"];
    assert_eq!(co["N"].as_u64(), Some(reads));
    let co_min = co["min"].as_u64().unwrap() as f64;
    assert!(co_min * 1.01 >= job["read"]["clat_ns"]["min"].as_u64().unwrap() as f64);
    assert_eq!(job["job options"]["rate_iops"], "1400,600");
}

/// Every key path under `v`, as "a.b.c" (array elements as "[]").
fn key_paths(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(p.clone());
                key_paths(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => {
            if let Some(x) = a.first() {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_json_has_the_keys_fio_emits() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("skipping: fio not found (apt-get install fio, or scripts/setup)");
        return;
    }
    let d = scratch();
    let f = d.path().join("p.dat");
    let fname = f.to_str().unwrap();
    let common_fio = [
        "--name=j",
        "--size=8m",
        "--rw=randrw",
        "--bs=4k",
        "--direct=1",
        "--ioengine=io_uring",
        "--iodepth=4",
        "--fdatasync=8",
        "--runtime=1",
        "--time_based",
        "--output-format=json",
    ];
    let fo = Command::new("fio")
        .current_dir(d.path())
        .arg(format!("--filename={fname}"))
        .args(common_fio)
        .output()
        .unwrap();
    assert!(fo.status.success(), "fio: {}", text(&fo.stderr));
    let fio: serde_json::Value = serde_json::from_slice(&fo.stdout).unwrap();
    let o = probe_in(
        d.path(),
        &[
            "--filename",
            fname,
            "--size",
            "8MiB",
            "--rw",
            "randrw",
            "--bs",
            "4k",
            "--iodepth",
            "4",
            "--fdatasync",
            "8",
            "--runtime",
            "1s",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ours = json_of(&o);
    let (mut fk, mut ok) = (vec![], vec![]);
    key_paths(&fio, "", &mut fk);
    key_paths(&ours, "", &mut ok);
    // Not produced (documented in the README): queue-depth histograms; the job options
    // are ours (fio echoes its own command line there).
    let skipped = [
        "global options",
        "jobs[].iodepth_level",
        "jobs[].iodepth_submit",
        "jobs[].iodepth_complete",
        "jobs[].job options",
    ];
    let missing: Vec<&String> = fk
        .iter()
        .filter(|k| !skipped.iter().any(|s| k.starts_with(s)) && !ok.contains(k))
        .collect();
    assert!(missing.is_empty(), "keys fio has and we lack: {missing:?}");
    let job = &ours["jobs"][0];
    for dir in ["read", "write"] {
        let p = &job[dir]["clat_ns"]["percentile"];
        for k in [
            "1.000000",
            "50.000000",
            "99.000000",
            "99.900000",
            "99.990000",
        ] {
            assert!(p[k].as_u64().unwrap() > 0, "{dir} {k}: {p}");
        }
        assert!(job[dir]["lat_co_ns"]["N"].as_u64().unwrap() > 0);
        assert!(job[dir]["iops"].as_f64().unwrap() > 0.0);
        assert_eq!(
            job[dir]["io_kbytes"].as_u64().unwrap(),
            job[dir]["io_bytes"].as_u64().unwrap() / 1024
        );
    }
    assert!(job["sync"]["total_ios"].as_u64().unwrap() > 0);
    // disk_util names the device under /var/tmp, as fio's does.
    let fio_disks: Vec<&str> = fio["disk_util"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let our_disks: Vec<&str> = ours["disk_util"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(
        fio_disks.iter().any(|d| our_disks.contains(d)),
        "fio {fio_disks:?} vs ours {our_disks:?}"
    );
    // fio's number formatting: floats with six decimals, percentile keys like 99.000000.
    let raw = text(&o.stdout);
    assert!(raw.contains("\"99.000000\" : "), "percentile keys");
    assert!(raw.contains("\"usr_cpu\" : ") && raw.contains("\"fio version\" : \"diskpulse-"));
    let mean = raw
        .lines()
        .find(|l| l.trim_start().starts_with("\"mean\" : "))
        .unwrap();
    let dec = mean
        .trim()
        .trim_end_matches(',')
        .rsplit('.')
        .next()
        .unwrap();
    assert_eq!(dec.len(), 6, "{mean}");
}

/// A tracefs instance that records some events of one process tree only.
struct Tracer {
    dir: PathBuf,
    events: Vec<String>,
}

impl Tracer {
    fn new(events: &[&str]) -> Option<Tracer> {
        let root = Path::new("/sys/kernel/tracing");
        if !root.join("instances").exists() {
            let _ = Command::new("mount")
                .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
                .status();
        }
        let dir = root.join(format!(
            "instances/diskpulse-test-{}-{}",
            std::process::id(),
            events.len()
        ));
        std::fs::create_dir(&dir).ok()?;
        let t = Tracer {
            dir,
            events: events.iter().map(|s| s.to_string()).collect(),
        };
        std::fs::write(t.dir.join("options/event-fork"), "1").ok()?;
        // The pid filter alone has let other processes' events through here (busy
        // machines): each line also carries its thread group id, and we count ours.
        std::fs::write(t.dir.join("options/record-tgid"), "1").ok()?;
        std::fs::write(t.dir.join("buffer_size_kb"), "8192").ok()?;
        for e in events {
            std::fs::write(t.dir.join(format!("events/{e}/enable")), "1").ok()?;
        }
        Some(t)
    }

    /// Runs `argv` in this instance's pid filter (a shell that adds itself, then execs);
    /// returns its output and its pid (the pid of `argv` after the exec).
    fn run(&self, argv: &[&str], dir: &Path) -> (Output, u32) {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {}/set_event_pid && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .args(argv)
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        (child.wait_with_output().unwrap(), pid)
    }

    /// Lines with `needle` from threads of process `tgid`.
    fn count(&self, needle: &str, tgid: u32) -> usize {
        let ours = format!("({tgid:>7})");
        std::fs::read_to_string(self.dir.join("trace"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(needle) && l.contains(&ours))
            .count()
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        for e in &self.events {
            let _ = std::fs::write(self.dir.join(format!("events/{e}/enable")), "0");
        }
        if std::env::var_os("DISKPULSE_KEEP_TRACE").is_none() {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

#[test]
fn fdatasync_1_issues_one_fdatasync_per_write_counted_by_tracefs() {
    if !is_root() {
        eprintln!("skipping: tracefs needs root");
        return;
    }
    let Some(t) = Tracer::new(&[
        "syscalls/sys_enter_fdatasync",
        "syscalls/sys_enter_pwrite64",
    ]) else {
        eprintln!("skipping: no tracefs syscall events here");
        return;
    };
    let d = scratch();
    let f = d.path().join("wal.dat");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let (o, pid) = t.run(
        &[
            bin,
            "probe",
            "--filename",
            f.to_str().unwrap(),
            "--preset",
            "wal",
            "--runtime",
            "1s",
            "--output-format",
            "json",
        ],
        d.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap() as usize;
    let syncs = j["jobs"][0]["sync"]["total_ios"].as_u64().unwrap() as usize;
    assert!(writes > 10, "{writes} writes in 1 s");
    let traced_syncs = t.count("sys_fdatasync(", pid);
    let traced_writes = t.count("sys_pwrite64(", pid);
    eprintln!("{writes} writes; tracefs: {traced_syncs} fdatasync, {traced_writes} pwrite64");
    // The layout uses 1 MiB pwrites and one fsync (not fdatasync): 64 MiB = 64 of them.
    assert_eq!(
        traced_syncs, writes,
        "fdatasync calls seen by the kernel vs writes we report"
    );
    assert_eq!(syncs, writes);
    assert_eq!(
        traced_writes,
        writes + 64,
        "pwrite64 calls: the measured ones + 64 of layout"
    );
}

#[test]
fn io_uring_fdatasync_is_one_fsync_op_per_write_counted_by_tracefs() {
    if !is_root() {
        eprintln!("skipping: tracefs needs root");
        return;
    }
    let Some(t) = Tracer::new(&["io_uring/io_uring_submit_req"]) else {
        eprintln!("skipping: no io_uring tracepoints here");
        return;
    };
    let d = scratch();
    let f = d.path().join("wal.dat");
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let (o, pid) = t.run(
        &[
            bin,
            "probe",
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "16MiB",
            "--rw",
            "write",
            "--bs",
            "8k",
            "--iodepth",
            "4",
            "--fdatasync",
            "1",
            "--runtime",
            "1s",
            "--time-based",
            "--output-format",
            "json",
        ],
        d.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap() as usize;
    assert!(writes > 10, "{writes}");
    assert_eq!(
        t.count("opcode FSYNC", pid),
        writes,
        "IORING_OP_FSYNC submissions"
    );
    assert_eq!(
        t.count("opcode WRITE_FIXED", pid),
        writes,
        "IORING_OP_WRITE_FIXED submissions"
    );
}

/// A cgroup v1 blkio group with an IOPS cap; removed on drop.
struct Blkio {
    dir: PathBuf,
}

impl Blkio {
    fn new(dev: &str, write_iops: u32) -> Option<Blkio> {
        let base = Path::new("/sys/fs/cgroup/blkio");
        if !base.join("cgroup.procs").exists() {
            return None;
        }
        let dir = base.join(format!("diskpulse-test-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let b = Blkio { dir };
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(dev).ok()?.rdev();
        let rule = format!("{}:{} {write_iops}", libc::major(rdev), libc::minor(rdev));
        std::fs::write(b.dir.join("blkio.throttle.write_iops_device"), rule).ok()?;
        Some(b)
    }

    fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .args(argv);
        c
    }
}

impl Drop for Blkio {
    fn drop(&mut self) {
        // The probe has exited; an empty cgroup can be removed.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn write_iops(o: &Output) -> f64 {
    assert!(o.status.success(), "{}", text(&o.stderr));
    json_of(o)["jobs"][0]["write"]["iops"].as_f64().unwrap()
}

#[test]
fn a_throttled_loop_device_shows_up_as_slower() {
    if !can_use_loop_devices() {
        return;
    }
    let _t = timing();
    let lo = LoopDev::new("64M");
    let args = [
        "probe",
        "--filename",
        &lo.dev,
        "--allow-destructive",
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--runtime",
        "1500ms",
        "--time-based",
        "--output-format",
        "json",
    ];
    let free = write_iops(&diskpulse().args(args).output().unwrap());
    let Some(cg) = Blkio::new(&lo.dev, 200) else {
        eprintln!("skipping: no cgroup v1 blkio controller here");
        return;
    };
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let mut argv = vec![bin];
    argv.extend_from_slice(&args);
    let capped = write_iops(&cg.command(&argv).output().unwrap());
    eprintln!("write IOPS: {free:.0} unthrottled, {capped:.0} capped at 200");
    assert!(
        (150.0..=260.0).contains(&capped),
        "capped at 200 write IOPS, the probe saw {capped:.0}"
    );
    assert!(
        free > 3.0 * capped,
        "unthrottled {free:.0} vs throttled {capped:.0}"
    );

    // Asked for 1000/s from a device capped at 200/s: the run still ends on time, says
    // how many scheduled I/Os it never issued, and the latency from the intended start
    // (coordinated omission corrected) shows the backlog that clat alone hides.
    let mut argv = vec![bin];
    argv.extend_from_slice(&args);
    argv.extend_from_slice(&["--rate-iops", "1000", "--iodepth", "4"]);
    let t = std::time::Instant::now();
    let o = cg.command(&argv).output().unwrap();
    let took = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let w = &j["jobs"][0]["write"];
    let done = w["total_ios"].as_u64().unwrap();
    let missed = j["diskpulse"]["rate_missed_ios"].as_u64().unwrap();
    let co_p99 = w["lat_co_ns"]["percentile"]["99.000000"].as_u64().unwrap();
    let clat_p99 = w["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap();
    eprintln!("rate 1000 on a 200 cap: {done} done, {missed} missed, clat p99 {clat_p99} ns, lat_co p99 {co_p99} ns, {took:.2}s");
    assert!(took < 3.5, "a 1.5 s run took {took:.2}s");
    assert!(
        (900..=1_600).contains(&(done + missed)),
        "{done} + {missed} of 1500 scheduled"
    );
    assert!(missed > 800, "{missed}");
    assert!(
        co_p99 > 500_000_000,
        "lat_co p99 {co_p99} ns: the backlog grows to ~1 s"
    );
    // clat alone stays at the throttle's own queueing (tens to hundreds of ms here).
    assert!(
        co_p99 > 2 * clat_p99,
        "clat p99 {clat_p99} ns vs lat_co p99 {co_p99} ns"
    );
}

#[test]
fn inside_a_recording_probe_csv_and_the_device_counters_agree() {
    let _t = timing();
    let Some(lo) = ShmLoop::new("64M") else {
        eprintln!("skipping: loop device tests need root and losetup");
        return;
    };
    let name = lo.dev.trim_start_matches("/dev/").to_string();
    let d = scratch();
    let run = d.path().join("run");
    let o = diskpulse()
        .args([
            "record",
            "--device",
            &name,
            "--out",
            run.to_str().unwrap(),
            "--",
        ])
        .args([
            env!("CARGO_BIN_EXE_diskpulse"),
            "probe",
            "--filename",
            &lo.dev,
            "--allow-destructive",
            "--rw",
            "randwrite",
            "--bs",
            "4k",
            "--rate-iops",
            "3000",
            "--runtime",
            "1s",
            "--time-based",
            "--output-format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let csv = std::fs::read_to_string(run.join("probe.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..5],
        ["t_ns", "window_ns", "direction", "ios", "bytes"]
    );
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(
        (9..=13).contains(&rows.len()),
        "{} rows of 100 ms for 1 s",
        rows.len()
    );
    let mut last_t = 0u64;
    let mut ios = 0u64;
    for r in &rows {
        assert_eq!(r.len(), header.len());
        assert_eq!(r[col("direction")], "write");
        let t: u64 = r[col("t_ns")].parse().unwrap();
        assert!(t > last_t, "t_ns increases");
        last_t = t;
        ios += r[col("ios")].parse::<u64>().unwrap();
    }
    let j: serde_json::Value = read_json(&run.join("probe.json"));
    // The windows tile the run: from its start to its last completion, none longer than
    // --window, the last ending at the last completion.
    let span: u64 = rows
        .iter()
        .map(|r| r[col("window_ns")].parse::<u64>().unwrap())
        .sum();
    let x = &j["diskpulse"];
    let (t0, t1) = (
        x["start_t_ns"].as_u64().unwrap(),
        x["end_t_ns"].as_u64().unwrap(),
    );
    assert_eq!(span, t1 - t0, "sum of window_ns vs the run");
    assert_eq!(last_t, t1, "the last row ends at the last completion");
    assert!(rows
        .iter()
        .all(|r| r[col("window_ns")].parse::<u64>().unwrap() <= 100_000_000));
    let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(ios, writes, "probe.csv's windows add up to the total");
    // Every one of the 3000 scheduled writes was either issued or counted as missed
    // (how many got issued depends on how busy the machine is: the rate test checks that).
    let missed = j["diskpulse"]["rate_missed_ios"].as_u64().unwrap();
    assert_eq!(writes + missed, 3000, "{writes} issued + {missed} missed");
    assert!(writes >= 1500, "{writes} writes at 3000/s for 1 s");
    // Independent: the kernel's own count of writes completed by the loop device.
    let gz = std::fs::File::open(run.join("diskstats.csv.gz")).unwrap();
    let mut s = String::new();
    use std::io::Read;
    flate2::read::MultiGzDecoder::new(gz)
        .read_to_string(&mut s)
        .unwrap();
    let mut dl = s.lines();
    let h: Vec<&str> = dl.next().unwrap().split(',').collect();
    let (dc, wc) = (
        h.iter().position(|x| *x == "device").unwrap(),
        h.iter().position(|x| *x == "writes").unwrap(),
    );
    let w: Vec<u64> = dl
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[dc] == name)
        .map(|r| r[wc].parse().unwrap())
        .collect();
    let dev_writes = w.last().unwrap() - w.first().unwrap();
    eprintln!(
        "probe: {writes} writes in {} windows; {} counted by the device",
        rows.len(),
        dev_writes
    );
    assert_eq!(
        dev_writes, writes,
        "writes the loop device completed vs writes we report"
    );
}

#[test]
fn a_mounted_or_formatted_block_device_is_refused() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("64M");
    let m = lo.mount_ext4();
    let args = [
        "--filename",
        lo.dev.as_str(),
        "--rw",
        "randwrite",
        "--runtime",
        "1s",
    ];
    // Without the flag: told to pass it.
    let o = probe_in(&m, &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        error_line(&o).contains("--allow-destructive"),
        "{}",
        error_line(&o)
    );
    // With it, but mounted: refused anyway.
    let mut a2 = args.to_vec();
    a2.push("--allow-destructive");
    let o = probe_in(&m, &a2);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(e.contains("mounted on") && e.contains(&lo.dev), "{e}");
    // Unmounted, still an ext4 signature: refused.
    sh("umount", &[m.to_str().unwrap()]);
    lo.mount = None;
    let _ = std::fs::remove_dir(&m);
    let o = probe_in(Path::new("/var/tmp"), &a2);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(e.contains("ext2/3/4") && e.contains("wipefs"), "{e}");
    // A read-only job needs none of this.
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &lo.dev,
            "--rw",
            "randread",
            "--runtime",
            "300ms",
            "--time-based",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn enospc_names_the_file_and_the_fix() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("32M");
    let m = lo.mount_ext4();
    let f = m.join("big.dat");
    let o = probe_in(
        &m,
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "64MiB",
            "--rw",
            "randwrite",
            "--runtime",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("ENOSPC") && e.contains(f.to_str().unwrap()) && e.contains("--size"),
        "{e}"
    );
    assert!(!f.exists(), "the partial file is removed");
}

#[test]
fn a_read_only_file_system_is_one_clear_line() {
    if !can_use_loop_devices() {
        return;
    }
    let mut lo = LoopDev::new("32M");
    let m = lo.mount_ext4();
    sh("mount", &["-o", "remount,ro", m.to_str().unwrap()]);
    let f = m.join("p.dat");
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "1MiB",
            "--rw",
            "randwrite",
            "--runtime",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("EROFS") && e.contains(f.to_str().unwrap()),
        "{e}"
    );
}

#[test]
fn o_direct_on_tmpfs_is_refused_with_a_fix_or_warned_about() {
    let f = format!("/dev/shm/diskpulse-test-{}.dat", std::process::id());
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &f,
            "--size",
            "4MiB",
            "--rw",
            "randread",
            "--runtime",
            "200ms",
            "--time-based",
        ],
    );
    let err = text(&o.stderr);
    match o.status.code() {
        // Kernels before 6.6: tmpfs refuses O_DIRECT at open.
        Some(1) => {
            let e = error_line(&o);
            assert!(
                e.contains("tmpfs") && e.contains("O_DIRECT") && e.contains("--direct 0"),
                "{e}"
            );
        }
        // 6.6 and later accept it: the probe says no disk is measured.
        Some(0) => assert!(
            err.contains("tmpfs") && err.contains("no disk is measured"),
            "{err}"
        ),
        c => panic!("exit {c:?}: {err}"),
    }
    assert!(!Path::new(&f).exists());
}

#[test]
fn a_misaligned_direct_write_says_einval_and_keeps_what_was_measured() {
    let d = scratch();
    let f = d.path().join("p.dat");
    // 4 KiB reads work; 1000-byte direct writes do not (not a multiple of the sector).
    let o = probe_in(
        d.path(),
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "8MiB",
            "--rw",
            "randrw",
            "--rwmixread",
            "99",
            "--bs",
            "4k,1000",
            "--runtime",
            "2s",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("EINVAL")
            && e.contains("logical block size")
            && e.contains("--bs")
            && e.contains(f.to_str().unwrap()),
        "{e}"
    );
    let j = json_of(&o);
    assert_eq!(j["jobs"][0]["error"], 22);
    assert!(
        j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0,
        "reads before the failing write are kept"
    );
    assert!(j["diskpulse"]["error"].as_str().unwrap().contains("EINVAL"));
    assert!(!f.exists());
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["--iodepth", "8", "--ioengine", "sync"], "io_uring"),
        (vec!["--bs", "8q"], "'8q'"),
        (
            vec!["--rw", "randread", "--fdatasync", "1"],
            "does not write",
        ),
        (vec!["--runtime", "10"], "'10'"),
        (vec!["--preset", "fast"], "array-check"),
        (vec!["--filename", "/var/tmp"], "directory"),
    ] {
        let o = probe_in(Path::new("/var/tmp"), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
    }
}

/// Makes io_uring_setup fail with EPERM in the child, as a container's seccomp profile or
/// kernel.io_uring_disabled=2 would (without changing the machine-wide setting).
fn deny_io_uring(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let nr = libc::SYS_io_uring_setup as u32;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // SAFETY: pre_exec runs in the child between fork and exec; prctl is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            let prog = [
                f(LD_W_ABS, 0, 0, 4),
                f(JEQ_K, 0, 3, ARCH),
                f(LD_W_ABS, 0, 0, 0),
                f(JEQ_K, 0, 1, nr),
                f(RET_K, 0, 0, 0x0005_0000 | libc::EPERM as u32),
                f(RET_K, 0, 0, 0x7fff_0000),
            ];
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
}

#[test]
fn without_io_uring_the_probe_falls_back_to_sync_or_stops_if_asked_for_it() {
    let d = scratch();
    let f = d.path().join("p.dat");
    let base = [
        "probe",
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "4MiB",
        "--rw",
        "randread",
        "--iodepth",
        "8",
        "--runtime",
        "300ms",
        "--time-based",
        "--output-format",
        "json",
    ];
    let mut c = diskpulse();
    c.args(base);
    deny_io_uring(&mut c);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("io_uring is not available") && err.contains("--ioengine sync"),
        "{err}"
    );
    let j = json_of(&o);
    assert_eq!(j["jobs"][0]["job options"]["ioengine"], "psync");
    assert_eq!(j["jobs"][0]["job options"]["iodepth"], "1");
    assert!(j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0);

    let mut c = diskpulse();
    c.args(base).args(["--ioengine", "io_uring"]);
    deny_io_uring(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let e = error_line(&o);
    assert!(
        e.contains("io_uring is not available") && e.contains("Operation not permitted"),
        "{e}"
    );
    assert!(!f.exists());
}

#[test]
fn ctrl_c_prints_what_was_measured_and_exits_130() {
    let d = scratch();
    let f = d.path().join("p.dat");
    let child = diskpulse()
        .current_dir(d.path())
        .args([
            "probe",
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "8MiB",
            "--rw",
            "randread",
            "--runtime",
            "30s",
            "--time-based",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("read :") && out.contains("IOPS"), "{out}");
    assert!(!f.exists(), "the created file is removed after Ctrl-C too");
}

#[test]
fn several_jobs_share_a_claimed_block_device() {
    let Some(lo) = ShmLoop::new("64M") else {
        eprintln!("skipping: loop device tests need root and losetup");
        return;
    };
    let o = probe_in(
        Path::new("/var/tmp"),
        &[
            "--filename",
            &lo.dev,
            "--allow-destructive",
            "--rw",
            "randwrite",
            "--numjobs",
            "3",
            "--runtime",
            "300ms",
            "--time-based",
            "--output-format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3, "fio prints one entry per job");
    for job in jobs {
        assert!(job["write"]["total_ios"].as_u64().unwrap() > 0, "{job}");
    }
}

/// Runs `diskpulse probe ARGS` and kills it if it is not done within `secs`.
fn probe_with_deadline(dir: &Path, args: &[&str], secs: u64) -> Output {
    let mut child = diskpulse()
        .current_dir(dir)
        .arg("probe")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed().as_secs() >= secs {
            let _ = child.kill();
            let _ = child.wait();
            panic!("probe {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_rated_job_without_a_runtime_ends_after_size_bytes() {
    let d = scratch();
    let f = d.path().join("p.dat");
    // 1 MiB of 4 KiB reads at 2000/s: 256 I/Os in about 128 ms, nothing missed.
    let o = probe_with_deadline(
        d.path(),
        &[
            "--filename",
            f.to_str().unwrap(),
            "--size",
            "1MiB",
            "--rw",
            "randread",
            "--rate-iops",
            "2000",
            "--output-format",
            "json",
        ],
        20,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j = json_of(&o);
    assert_eq!(j["jobs"][0]["read"]["total_ios"], 256);
    assert_eq!(j["diskpulse"]["rate_missed_ios"], 0);
}
