//! `record --trace` against the real kernel (issue 11): tracefs, loop devices, a blkio
//! throttle. The programs traced are this test process's own threads (exactly N
//! fdatasync calls, each timed here) and O_DIRECT writes made here, so the counts and
//! durations the trace records are compared with what really happened.

mod common;

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use diskpulse::format::{block_requests, fsync_calls};

const TRACEFS: &str = "/sys/kernel/tracing";

/// One tracing diskpulse at a time in this binary: a starting tracer removes the stale
/// instances of others, and the stale-instance test must see its own removal.
static ONE_TRACE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_trace_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_TRACE.lock().unwrap_or_else(|e| e.into_inner())
}

fn can_trace() -> bool {
    if !can_use_loop_devices() {
        return false;
    }
    if !Path::new(TRACEFS).join("instances").is_dir()
        && !Path::new("/sys/kernel/debug/tracing/instances").is_dir()
        && !Path::new("/sys/kernel/tracing").is_dir()
    {
        return skip("no tracefs in this kernel (CONFIG_TRACING)");
    }
    true
}

/// Starts `record --trace ARGS --out DIR` and waits until its trace runs (meta.json has
/// its `trace` section).
fn start_record(dir: &Path, args: &[&str]) -> Child {
    let mut c = diskpulse()
        .arg("record")
        .arg("--trace")
        .args(args)
        .arg("--out")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let ready = std::fs::read_to_string(dir.join("meta.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|m| m.get("trace").is_some());
        if ready {
            return c;
        }
        if let Some(st) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            panic!(
                "record ended before tracing ({st}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "trace not ready");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ctrl-C: SIGINT, then the exit status and stderr.
fn interrupt(c: Child) -> (i32, String) {
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn instance_of(pid: u32) -> PathBuf {
    Path::new(TRACEFS)
        .join("instances")
        .join(format!("diskpulse-{pid}"))
}

fn mono_ns() -> u64 {
    collectors::clock::monotonic_ns()
}

fn trace_stats(dir: &Path) -> serde_json::Value {
    read_json(&dir.join("meta.json"))["trace"]["stats"].clone()
}

#[test]
fn n_fdatasync_calls_are_recorded_exactly_with_their_own_durations_and_ctrl_c_removes_the_instance()
{
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let mut lo = LoopDev::new("256M");
    let mnt = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let me = std::process::id().to_string();
    let rec = start_record(&dir, &["--trace-pid", &me, "--device", lo.name()]);
    let rec_pid = rec.id();
    assert!(
        instance_of(rec_pid).is_dir(),
        "the instance exists while tracing"
    );
    let zero = read_json(&dir.join("meta.json"))["clock_zero_monotonic_ns"]
        .as_u64()
        .unwrap();

    const N: usize = 200;
    let path = mnt.join("wal");
    let p = path.clone();
    // One thread makes the calls: its tid picks them out of the process's rows.
    let (tid, own) = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        // Real-time priority (root): a compiler on the other core cannot preempt the
        // thread between its clock reads and the call, which would lengthen its own
        // timing and not the traced one.
        let prio = libc::sched_param { sched_priority: 10 };
        // SAFETY: sets this thread's policy; prio outlives the call.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        let block = vec![7u8; 4096];
        let mut own = vec![];
        for i in 0..N {
            f.write_at(&block, (i * 4096) as u64).unwrap();
            let t0 = mono_ns();
            f.sync_data().unwrap();
            let t1 = mono_ns();
            own.push((t0, t1));
        }
        (tid, own)
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let (code, stderr) = interrupt(rec);
    assert_eq!(code, 130, "Ctrl-C ends record with 130: {stderr}");
    assert!(
        !instance_of(rec_pid).exists(),
        "the trace instance is removed on Ctrl-C"
    );

    let (rows, warnings) = fsync_calls::read(&dir).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let mine: Vec<&fsync_calls::FsyncCall> = rows.iter().filter(|r| r.tid == tid).collect();
    assert_eq!(
        mine.len(),
        N,
        "exactly {N} calls of thread {tid}: {mine:#?}"
    );
    let stats = trace_stats(&dir);
    assert_eq!(stats["lost_events"], 0, "{stats}");
    // The mono trace clock is CLOCK_MONOTONIC: the offset measured at the start lies
    // within its bound, and the bound is tight.
    let t = &read_json(&dir.join("meta.json"))["trace"];
    let bound = t["clock_offset_bound_ns"].as_u64().unwrap();
    assert!(bound < 100_000, "{t}");
    assert!(
        t["clock_offset_ns"].as_i64().unwrap().unsigned_abs() <= bound,
        "{t}"
    );
    for (i, (r, (t0, t1))) in mine.iter().zip(&own).enumerate() {
        assert_eq!(r.pid, std::process::id());
        assert_eq!(r.call, "fdatasync");
        assert_eq!(r.ret, 0);
        assert_eq!(Path::new(&r.file), path, "call {i}: the file behind the fd");
        let own_ns = t1 - t0;
        let diff = own_ns.abs_diff(r.dur_ns);
        assert!(
            diff * 10 <= own_ns || diff <= 20_000,
            "call {i}: traced {} ns, timed {own_ns} ns",
            r.dur_ns
        );
        // The call's start lies inside this thread's own timing of it.
        let start = r.t_ns + zero;
        assert!(
            start + 20_000 >= *t0 && start <= *t1,
            "call {i}: traced start {start} outside [{t0}, {t1}]"
        );
    }
    // The data of those calls reached the loop device as write requests.
    let (reqs, _) = block_requests::read(&dir).unwrap();
    let writes = reqs
        .iter()
        .filter(|r| r.device == lo.name() && r.op == "write")
        .count();
    assert!(writes >= N, "{writes} write requests for {N} synced blocks");
    let devices: std::collections::BTreeSet<&str> =
        reqs.iter().map(|r| r.device.as_str()).collect();
    let meta_devices: Vec<String> = read_json(&dir.join("meta.json"))["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        devices.iter().all(|d| meta_devices.iter().any(|m| m == d)),
        "only the run's devices {meta_devices:?}: {devices:?}"
    );
    drop(lo);
}

/// An 4 KiB-aligned buffer for O_DIRECT.
fn aligned(bytes: usize) -> (*mut u8, std::alloc::Layout) {
    let layout = std::alloc::Layout::from_size_align(bytes, 4096).unwrap();
    // SAFETY: non-zero size; freed by the caller with the same layout.
    (unsafe { std::alloc::alloc_zeroed(layout) }, layout)
}

#[test]
fn m_direct_writes_to_a_loop_device_are_m_write_requests_of_their_size() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let lo = LoopDev::new("128M");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let rec = start_record(&dir, &["--device", lo.name()]);
    const M: usize = 300;
    const BYTES: usize = 64 << 10;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&lo.dev)
        .unwrap();
    let (buf, layout) = aligned(BYTES);
    // SAFETY: buf is valid for BYTES bytes until dealloc below.
    let data = unsafe { std::slice::from_raw_parts(buf, BYTES) };
    for i in 0..M {
        f.write_at(data, (i * BYTES) as u64).unwrap();
    }
    // SAFETY: allocated by `aligned` with this layout.
    unsafe { std::alloc::dealloc(buf, layout) };
    drop(f);
    std::thread::sleep(Duration::from_millis(100));
    let (code, stderr) = interrupt(rec);
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("0 lost"), "{stderr}");
    let (reqs, warnings) = block_requests::read(&dir).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let writes: Vec<&block_requests::BlockRequest> = reqs
        .iter()
        .filter(|r| r.device == lo.name() && r.op == "write")
        .collect();
    assert_eq!(writes.len(), M, "exactly {M} write requests");
    let mut sectors: Vec<u64> = writes.iter().map(|r| r.sector).collect();
    sectors.sort_unstable();
    let want: Vec<u64> = (0..M as u64).map(|i| i * (BYTES as u64 / 512)).collect();
    assert_eq!(sectors, want, "one request per write, at its offset");
    assert!(writes
        .iter()
        .all(|r| r.bytes == BYTES as u64 && r.error == 0));
    assert!(writes
        .iter()
        .all(|r| r.service_ns > 0 && r.service_ns < 1_000_000_000));
    assert_eq!(trace_stats(&dir)["lost_events"], 0);
}

fn percentile(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A blkio (cgroup v1) throttle delays bios before they become requests, so each
/// request's own queue and service times stay short: the throttle shows as the spacing
/// of the requests' issue times, 1/iops.
#[test]
fn a_throttled_loop_device_issues_its_requests_at_the_throttle_rate() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let _lock = cgroup::lock();
    let Some(h) = cgroup::hierarchy() else {
        return;
    };
    let lo = LoopDev::new("64M");
    // Low enough that dd unthrottled is far faster even on a busy machine (4.6 ms a
    // write measured during a release build).
    const IOPS: u64 = 20;
    let cg = cgroup::Throttled::new(&h, lo.name(), IOPS as u32);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let rec = start_record(&dir, &["--device", lo.name()]);
    // The same 30 writes outside the cgroup (sectors from 0), then inside (from 8 MiB).
    let dd = |inside: bool| {
        let of = format!("of={}", lo.dev);
        let seek = format!("seek={}", if inside { 2048 } else { 0 });
        let argv = [
            "dd",
            "if=/dev/zero",
            &of,
            "bs=4k",
            "count=30",
            &seek,
            "oflag=direct",
            "status=none",
        ];
        let st = if inside {
            cg.command(&argv).status()
        } else {
            std::process::Command::new(argv[0])
                .args(&argv[1..])
                .status()
        }
        .unwrap();
        assert!(st.success());
    };
    dd(false);
    dd(true);
    std::thread::sleep(Duration::from_millis(100));
    let (code, stderr) = interrupt(rec);
    assert_eq!(code, 130, "{stderr}");
    let (reqs, _) = block_requests::read(&dir).unwrap();
    let split = |inside: bool| -> Vec<&block_requests::BlockRequest> {
        reqs.iter()
            .filter(|r| r.device == lo.name() && r.op == "write")
            .filter(|r| (r.sector >= 2048 * 8) == inside)
            .collect()
    };
    let mean_gap = |w: &[&block_requests::BlockRequest]| {
        (w.last().unwrap().t_ns - w[0].t_ns) / (w.len() as u64 - 1)
    };
    let (free, writes) = (split(false), split(true));
    assert_eq!((free.len(), writes.len()), (30, 30), "dd's 30 + 30 writes");
    // blk-throttle lets a slice's share through at once (bursts of about IOPS/10 per
    // 100 ms slice, more after an idle slice); on average at most one per 1/iops.
    let want = 1_000_000_000 / IOPS;
    let (gap_free, gap) = (mean_gap(&free), mean_gap(&writes));
    assert!(
        gap * 4 >= want * 3,
        "throttled: mean issue spacing {gap} ns, the throttle allows one per {want} ns"
    );
    assert!(
        gap_free * 4 < want,
        "unthrottled: mean issue spacing {gap_free} ns (the throttle must make the difference)"
    );
    let mut service: Vec<u64> = writes.iter().map(|r| r.service_ns).collect();
    let p50_service = percentile(&mut service, 0.5);
    assert!(
        p50_service * 4 < want,
        "service p50 {p50_service} ns: the throttle acts before the request"
    );
    drop(lo);
}

/// The enable switch of a tracepoint in a running record's instance.
fn enabled(rec_pid: u32, event: &str) -> bool {
    std::fs::read_to_string(
        instance_of(rec_pid)
            .join("events")
            .join(event)
            .join("enable"),
    )
    .map(|t| t.trim() == "1")
    .unwrap_or(false)
}

#[test]
fn trace_only_block_leaves_every_syscall_tracepoint_off_and_trace_only_sync_the_block_ones() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let mut lo = LoopDev::new("256M");
    let mnt = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    const N: usize = 20;
    let sync_n = |name: &str| {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(mnt.join(name))
            .unwrap();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        for i in 0..N {
            f.write_at(&[1u8; 4096], (i * 4096) as u64).unwrap();
            f.sync_data().unwrap();
        }
        tid
    };
    for (only, pid_args) in [
        ("block", vec![]),
        ("sync", vec!["--trace-pid", me.as_str()]),
    ] {
        let dir = out.path().join(only);
        let mut args = vec!["--trace-only", only, "--device", lo.name()];
        args.extend(pid_args);
        let rec = start_record(&dir, &args);
        let rec_pid = rec.id();
        let sys_on = enabled(rec_pid, "syscalls/sys_enter_fdatasync")
            || enabled(rec_pid, "syscalls/sys_exit_fsync");
        let blk_on = enabled(rec_pid, "block/block_rq_issue");
        let tid = std::thread::scope(|s| s.spawn(|| sync_n(only)).join().unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let (code, stderr) = interrupt(rec);
        assert_eq!(code, 130, "{stderr}");
        let events = read_json(&dir.join("meta.json"))["trace"]["events"].clone();
        let has = |g: &str| {
            events
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.as_str().unwrap().starts_with(g))
        };
        let (calls, _) = fsync_calls::read(&dir).unwrap();
        let mine = calls.iter().filter(|c| c.tid == tid).count();
        let (reqs, _) = block_requests::read(&dir).unwrap();
        let writes = reqs
            .iter()
            .filter(|r| r.device == lo.name() && r.op == "write")
            .count();
        if only == "block" {
            assert!(!sys_on && blk_on, "block only: syscalls off, block on");
            assert!(!has("syscalls:") && has("block:"), "{events}");
            assert_eq!(calls.len(), 0, "no sync call traced: {calls:?}");
            assert!(writes >= N, "{writes} write requests for {N} synced writes");
            assert!(stderr.contains("sync calls not traced"), "{stderr}");
        } else {
            assert!(sys_on && !blk_on, "sync only: syscalls on, block off");
            assert!(has("syscalls:") && !has("block:"), "{events}");
            assert_eq!(mine, N, "exactly {N} calls of thread {tid}");
            assert!(reqs.is_empty(), "no block request traced: {}", reqs.len());
            assert!(stderr.contains("block requests not traced"), "{stderr}");
        }
    }
}

#[test]
fn a_stale_instance_of_a_dead_diskpulse_is_removed_at_the_next_start() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    // A pid that is certainly gone: a child that exited.
    let mut c = std::process::Command::new("true").spawn().unwrap();
    c.wait().unwrap();
    let stale = instance_of(c.id());
    std::fs::create_dir(&stale).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let o = diskpulse()
        .args(["record", "--trace", "--duration", "300ms"])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let _ = std::fs::remove_dir(&stale);
    assert!(o.status.success(), "{stderr}");
    assert!(!stale.exists(), "the stale instance is gone");
    assert!(
        stderr.contains(&format!("diskpulse-{}", c.id())) && stderr.contains("removed"),
        "{stderr}"
    );
    assert!(dir.join(fsync_calls::FILE).exists());
}

#[test]
fn without_root_trace_says_so_in_one_line_and_the_rest_records() {
    if !need_root("dropping to an unprivileged user") || !have_tool("setpriv", "util-linux") {
        return;
    }
    let _one = one_trace_at_a_time();
    let out = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        out.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let dir = out.path().join("run");
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_diskpulse"))
        .args(["record", "--trace", "--duration", "300ms"])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("trace")).collect();
    assert_eq!(lines.len(), 1, "one line about the trace: {stderr}");
    assert!(lines[0].contains("root"), "{stderr}");
    assert!(dir.join("diskstats.csv.gz").exists());
    assert!(!dir.join(fsync_calls::FILE).exists());
    let m = read_json(&dir.join("meta.json"));
    assert_eq!(m["complete"], true);
    assert!(m.get("trace").is_none());
}

#[test]
fn bad_trace_input_is_refused_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--trace", "--trace-pid", "999999999"],
            "--trace-pid 999999999",
        ),
        (
            &["--trace", "--trace-only", "block", "--trace-pid", "1"],
            "--trace-only block",
        ),
        (&["--trace", "--trace-only", "disk"], "--trace-only"),
        (&["--trace-only", "block"], "--trace"),
        (
            &["--trace", "--trace-comm", "a-name-of-16-chr"],
            "--trace-comm 'a-name-of-16-chr'",
        ),
        (&["--trace-pid", "1"], "--trace"),
    ];
    for (args, names) in cases {
        let o = diskpulse()
            .arg("record")
            .args(args)
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
        assert!(!dir.exists(), "{args:?}: nothing written");
    }
    let o = diskpulse()
        .args(["record", "--trace", "--trace-comm", "a-name-of-16-chr"])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("15"), "names the limit: {stderr}");
    let _ = std::io::stderr().flush();
}

#[test]
fn record_trace_with_a_command_traces_its_short_children() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let mut lo = LoopDev::new("128M");
    let mnt = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    // Three dd processes, each gone right after its one fdatasync: known by their fork
    // and exec events, not by /proc.
    let script = format!(
        "for i in 1 2 3; do dd if=/dev/zero of={}/f$i bs=4k count=1 conv=fdatasync status=none; done",
        mnt.display()
    );
    let o = diskpulse()
        .args(["record", "--trace", "--device", lo.name(), "--out"])
        .arg(&dir)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let (rows, _) = fsync_calls::read(&dir).unwrap();
    assert_eq!(
        rows.len(),
        3,
        "the three dd calls and nothing else: {rows:#?}"
    );
    let pids: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.pid).collect();
    assert_eq!(pids.len(), 3, "three processes: {rows:#?}");
    assert!(
        rows.iter()
            .all(|r| r.comm == "dd" && r.call == "fdatasync" && r.ret == 0),
        "{rows:#?}"
    );
    let m = read_json(&dir.join("meta.json"));
    assert_eq!(m["trace"]["children"], true);
    assert_eq!(m["trace"]["stats"]["lost_events"], 0);
    drop(lo);
}

#[test]
fn a_run_that_loses_events_says_so_in_meta_events_and_on_stderr() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let lo = LoopDev::new("64M");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    // A 4 KiB ring buffer per CPU holds ~50 events: 4,000 direct writes (8,000 events)
    // between two 10 ms reads overflow it.
    let mut c = diskpulse()
        .env("DISKPULSE_TRACE_BUFFER_KIB", "4")
        .args([
            "record",
            "--trace",
            "--device",
            lo.name(),
            "--duration",
            "30s",
        ])
        .arg("--out")
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !std::fs::read_to_string(dir.join("meta.json")).is_ok_and(|t| t.contains("\"trace\"")) {
        assert!(c.try_wait().unwrap().is_none(), "record ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    write_direct(Path::new(&lo.dev), 16 << 20, 4096);
    std::thread::sleep(Duration::from_millis(1200));
    let (code, stderr) = interrupt(c);
    assert_eq!(code, 130, "{stderr}");
    let lost = trace_stats(&dir)["lost_events"].as_u64().unwrap();
    assert!(lost > 0, "a 4 KiB buffer lost nothing? {stderr}");
    assert!(
        stderr.contains("incomplete") && stderr.contains(&format!("{lost} lost")),
        "{stderr}"
    );
    let events = diskpulse::format::events::read(&dir).unwrap();
    let noted: u64 = events
        .iter()
        .filter(|e| e.kind() == "trace_lost")
        .map(|e| e.detail()["lost_events"].as_u64().unwrap())
        .sum();
    assert_eq!(noted, lost, "the trace_lost events add up to the total");
    let _ = std::io::stdout().flush();
}

#[test]
fn a_bad_trace_buffer_size_is_refused_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    for v in ["lots", "2", "2000000"] {
        let o = diskpulse()
            .env("DISKPULSE_TRACE_BUFFER_KIB", v)
            .args(["record", "--trace", "--duration", "200ms", "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{v}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("DISKPULSE_TRACE_BUFFER_KIB={v}"))
                && stderr.contains("4 to 1048576"),
            "{stderr}"
        );
        assert!(!dir.exists(), "{v}: nothing written");
    }
}

/// `record --trace --chunk 1s --keep 2s`: fsync_calls.csv.gz and block_requests.csv.gz
/// are cut into chunks of one aligned second each and dropped by `--keep` as diskstats
/// is; their readers read the kept chunks, then the file, as one: every kept row once,
/// this thread's calls in order with no hole at a seam.
#[test]
fn a_chunked_trace_is_cut_and_dropped_by_the_recordings_rules_and_read_as_one() {
    if !can_trace() {
        return;
    }
    let _one = one_trace_at_a_time();
    let mut lo = LoopDev::new("256M");
    let mnt = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let me = std::process::id().to_string();
    let rec = start_record(
        &dir,
        &[
            "--trace-pid",
            &me,
            "--device",
            lo.name(),
            "--chunk",
            "1s",
            "--keep",
            "2s",
            "--trigger-window",
            "1s",
        ],
    );
    // Calls for 5.5 s, one every ~5 ms, each after a 4 KiB write: each second of the
    // run has calls and block requests of the loop device.
    let p = mnt.join("wal");
    let (tid, made) = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&p)
            .unwrap();
        let block = vec![7u8; 4096];
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed() < Duration::from_millis(5500) {
            f.write_at(&block, (n % 1024) * 4096).unwrap();
            f.sync_data().unwrap();
            n += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        (tid, n)
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, stderr) = interrupt(rec);
    assert_eq!(code, 130, "{stderr}");
    let meta = read_json(&dir.join("meta.json"));
    let s = 1_000_000_000u64;
    let kept_rows = |file: &str| check_chunk_list(&dir, &meta, file, 5, false).kept_rows;
    let (calls, warnings) = fsync_calls::read(&dir).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        calls.len() as u64,
        kept_rows(fsync_calls::FILE),
        "calls read"
    );
    let (reqs, warnings) = block_requests::read(&dir).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        reqs.len() as u64,
        kept_rows(block_requests::FILE),
        "requests read"
    );
    // This thread's calls: in order, from the first kept chunk to the end, no hole at
    // a seam (a call every ~5 ms; 200 ms allows a loaded machine's stall).
    let mine: Vec<u64> = calls
        .iter()
        .filter(|c| c.tid == tid)
        .map(|c| c.t_ns)
        .collect();
    let dropped_to = check_chunk_list(&dir, &meta, fsync_calls::FILE, 5, false).dropped_to;
    assert!(
        !mine.is_empty() && mine[0] > dropped_to,
        "{dropped_to} {mine:?}"
    );
    assert!(
        (mine.len() as u64) < made,
        "{} of {made} calls read although chunks were dropped",
        mine.len()
    );
    for w in mine.windows(2) {
        assert!(w[1] > w[0], "calls out of order: {w:?}");
        assert!(w[1] - w[0] < 200_000_000, "a hole at {} ns: {w:?}", w[0]);
    }
    // The calls of the last seconds are all there: the kept span from the first kept
    // call to the last holds every call this thread made in it (one a seam would lose
    // shows as a hole above); the last call read is within 300 ms of the end of writing.
    let written_to = mine[mine.len() - 1];
    assert!(
        written_to / s >= 4,
        "the last call read at {written_to} ns: the writing ran 5.5 s"
    );
}
