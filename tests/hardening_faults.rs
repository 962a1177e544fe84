//! Faults the way they happen to a user (issue 10 point 4): diskpulse killed with SIGKILL
//! at random moments of `demo` and `run`, `record` ended by SIGTERM or SIGKILL, a recorded
//! loop device detached mid-run, a store volume or `--out` filling up mid-run. Real
//! binary, real nats-server, real loop devices; every test cleans up what it made, also
//! when it fails (guards that drop).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{can_use_loop_devices, diskpulse, have_nats_server, read_json, sh, LoopDev};

/// A tiny seeded generator (xorshift): the kill moments are random but the same on every
/// run, so a failure names a moment that can be tried again.
struct Seeded(u64);
impl Seeded {
    fn next_ms(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo)
    }
}

/// Pids of the nats-server processes whose command line mentions `needle` (the test's
/// own directory: parallel tests' servers are not ours to count).
fn nats_servers_under(needle: &Path) -> Vec<u32> {
    let needle = needle.display().to_string();
    let mut pids = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("nats-server") && cmd.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits up to 5 s for the servers under `needle` to be gone (a killed parent's child gets
/// its SIGKILL at once, but the kernel takes a moment to reap it).
fn assert_no_server_survives(needle: &Path, when: &str) {
    let t0 = Instant::now();
    loop {
        let left = nats_servers_under(needle);
        if left.is_empty() {
            return;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            for p in &left {
                // SAFETY: plain kill of a process this test's binary started.
                unsafe { libc::kill(*p as i32, libc::SIGKILL) };
            }
            panic!("{when}: nats-server {left:?} survived the kill of its diskpulse");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills a child that is still running when the test ends (also on a failed assert).
struct Killing(Option<Child>);
impl Drop for Killing {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sigkill_after(mut c: Child, after: Duration) -> std::process::ExitStatus {
    std::thread::sleep(after);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    c.wait().unwrap()
}

/// Run directories (a `meta.json` in them) under `dir`, at any depth.
fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.join("meta.json").is_file() {
                out.push(p.clone());
            }
            out.extend(run_dirs(&p));
        }
    }
    out
}

/// `report` on a cut recording: exit 0, and the incomplete recording said.
fn assert_cut_recording_reads(run: &Path, when: &str) {
    let meta = read_json(&run.join("meta.json"));
    let o = diskpulse().arg("report").arg(run).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{when}: report {}: {err}",
        run.display()
    );
    if meta["complete"] == false {
        assert!(err.contains("incomplete"), "{when}: {err}");
    }
    assert!(run.join("summary.json").is_file(), "{when}");
}

/// Loop devices whose backing file lies under `root`.
fn loops_under(root: &Path) -> Vec<String> {
    let all = Command::new("losetup").arg("-a").output().unwrap();
    String::from_utf8_lossy(&all.stdout)
        .lines()
        .filter(|l| l.contains(&root.display().to_string()))
        .map(str::to_string)
        .collect()
}

fn mounts_under(root: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&root.display().to_string()))
        .map(str::to_string)
        .collect()
}

fn cgroups_named(token: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    for base in [
        "/sys/fs/cgroup/blkio",
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
    ] {
        if let Ok(rd) = std::fs::read_dir(base) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with("diskpulse-") && n.contains(token) {
                    out.push(e.path());
                }
            }
        }
    }
    out
}

/// Tears down whatever a failed test left under its lab root.
struct LabRoot(PathBuf);
impl Drop for LabRoot {
    fn drop(&mut self) {
        let _ = diskpulse()
            .args(["lab", "down", "--all", "--root"])
            .arg(&self.0)
            .output();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_for_text(file: &Path, text: &str, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if std::fs::read_to_string(file).is_ok_and(|s| s.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn run_killed_at_random_moments_leaves_nothing_after_the_next_start_and_its_recordings_read() {
    if !have_nats_server() || !can_use_loop_devices() {
        return;
    }
    let token = format!("fk{}", std::process::id());
    let lab = LabRoot(PathBuf::from(format!("/var/tmp/diskpulse-faults-{token}")));
    let d = tempfile::tempdir().unwrap();
    let sc = d.path().join("k.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "kill"
[[volumes]]
name = "{token}"
lab = {{ size = "256M", fs = "ext4", write_iops = "20000" }}
[broker]
volumes = ["{token}"]
[[phases]]
kind = "load"
args = ["js-pub", "--size", "1k", "--duration", "20s", "--stream", "K", "--subject", "k.x"]
"#
        ),
    )
    .unwrap();
    let mut rng = Seeded(0x5eed_0004);
    let kills: Vec<u64> = (0..4).map(|_| rng.next_ms(200, 8000)).collect();
    let mut left_before = false;
    for (i, ms) in kills.iter().enumerate() {
        let out = d.path().join(format!("study{i}"));
        let errf = d.path().join(format!("err{i}"));
        let c = diskpulse()
            .arg("run")
            .arg(&sc)
            .arg("--out")
            .arg(&out)
            .arg("--lab-root")
            .arg(&lab.0)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errf).unwrap())
            .spawn()
            .unwrap();
        let mut guard = Killing(Some(c));
        if left_before {
            // The next start cleans what the killed one left, and says so, before
            // anything of its own.
            assert!(
                wait_for_text(&errf, "cleaned lab volume", Duration::from_secs(20)),
                "kill {i}: the next run did not say it cleaned: {}",
                std::fs::read_to_string(&errf).unwrap_or_default()
            );
        }
        let st = sigkill_after(guard.0.take().unwrap(), Duration::from_millis(*ms));
        let when = format!("run killed {ms} ms after start");
        eprintln!("{when}: {st}");
        assert_no_server_survives(&out, &when);
        left_before = !loops_under(&lab.0).is_empty() || !mounts_under(&lab.0).is_empty();
        for r in run_dirs(&out) {
            assert_cut_recording_reads(&r, &when);
        }
    }
    // `lab down --all` cleans the last one's leftovers; then nothing of ours is left.
    let o = diskpulse()
        .args(["lab", "down", "--all", "--root"])
        .arg(&lab.0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(loops_under(&lab.0), Vec::<String>::new());
    assert_eq!(mounts_under(&lab.0), Vec::<String>::new());
    assert_eq!(cgroups_named(&token), Vec::<PathBuf>::new());
    let images: Vec<_> = std::fs::read_dir(lab.0.join("images"))
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(images, Vec::<PathBuf>::new());
}

#[test]
fn demo_killed_at_random_moments_leaves_no_server_and_the_next_demo_removes_its_store() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut rng = Seeded(0xde30_0004);
    let mut last_store: Option<PathBuf> = None;
    for i in 0..3 {
        let ms = rng.next_ms(200, 8000);
        let out = d.path().join(format!("demo{i}"));
        let errf = d.path().join(format!("err{i}"));
        let c = diskpulse()
            .args(["demo", "--duration", "20s", "--interval", "10ms", "--out"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errf).unwrap())
            .spawn()
            .unwrap();
        let store = PathBuf::from(format!("/var/tmp/diskpulse-demo-{}", c.id()));
        let mut guard = Killing(Some(c));
        if let Some(prev) = last_store.take().filter(|p| p.exists()) {
            assert!(
                wait_for_text(&errf, &prev.display().to_string(), Duration::from_secs(20)),
                "demo {i} did not say it removed {}: {}",
                prev.display(),
                std::fs::read_to_string(&errf).unwrap_or_default()
            );
            assert!(!prev.exists(), "{} is still there", prev.display());
        }
        let st = sigkill_after(guard.0.take().unwrap(), Duration::from_millis(ms));
        let when = format!("demo killed {ms} ms after start");
        eprintln!("{when}: {st}");
        // The server's command line names its config in the run directory.
        assert_no_server_survives(&out, &when);
        if out.join("meta.json").is_file() {
            assert_cut_recording_reads(&out, &when);
        }
        last_store = Some(store);
    }
    // A demo that ends by itself (Ctrl-C-free short run) removes the last one's store.
    let prev = last_store.unwrap();
    let o = diskpulse()
        .args(["demo", "--duration", "1s", "--interval", "10ms", "--out"])
        .arg(d.path().join("last"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    if prev.exists() {
        panic!("{} survived the next demo: {err}", prev.display());
    }
}

/// `t_ns` of every whole row of a recording's CSV (gzip members read as far as they go).
fn rows_of(file: &Path) -> Vec<(u64, String)> {
    use std::io::Read;
    let mut text = String::new();
    let f = std::fs::File::open(file).unwrap();
    if file.extension().is_some_and(|e| e == "gz") {
        let _ = flate2::read::MultiGzDecoder::new(f).read_to_string(&mut text);
    } else {
        let _ = std::io::BufReader::new(f).read_to_string(&mut text);
    }
    // Whole rows only: a line the full disk cut short (no newline, or fewer cells than
    // the header) is not a row, as the readers say.
    let cells = text.lines().next().map_or(0, |h| h.split(',').count());
    let whole = text.rfind('\n').map_or("", |i| &text[..i]);
    whole
        .lines()
        .skip(1)
        .filter(|l| l.split(',').count() == cells)
        .filter_map(|l| {
            let mut c = l.split(',');
            let t = c.next()?.parse().ok()?;
            Some((t, c.next().unwrap_or("").to_string()))
        })
        .collect()
}

fn events_of(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn wait_for_file(p: &Path) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no {}", p.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn record_ends_on_sigterm_like_ctrl_c_with_a_complete_meta_and_exit_130() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rec");
    let c = diskpulse()
        .args(["record", "--duration", "60s", "--interval", "1ms", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Killing(Some(c));
    wait_for_file(&out.join("meta.json"));
    std::thread::sleep(Duration::from_millis(1000));
    let c = guard.0.as_mut().unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let t_sig = Instant::now();
    let o = guard.0.take().unwrap().wait_with_output().unwrap();
    let took = t_sig.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(3), "SIGTERM took {took:?}");
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["complete"], true, "{meta:#}");
    let dur = meta["duration_ns"].as_u64().unwrap();
    assert!((1_000_000_000..10_000_000_000).contains(&dur), "{dur}");
    assert!(
        events_of(&out).iter().any(|e| e["kind"] == "interrupted"),
        "no interrupted event"
    );
    // The rows reach the end: the last meminfo row (every 10 ms) is within 0.3 s of it.
    let last = rows_of(&out.join("meminfo.csv")).last().unwrap().0;
    assert!(dur - last < 300_000_000, "last row {last} of {dur}");
}

#[test]
fn record_killed_with_sigkill_reads_to_its_last_whole_row_and_says_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rec");
    let c = diskpulse()
        .args(["record", "--duration", "60s", "--interval", "1ms", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = Killing(Some(c));
    wait_for_file(&out.join("meta.json"));
    let kill_after = Duration::from_millis(1500);
    let st = sigkill_after(guard.0.take().unwrap(), kill_after);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(9));
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["complete"], false, "{meta:#}");
    // At most 250 ms is lost: the last whole row of every file is close to the kill.
    let kill_ns = kill_after.as_nanos() as u64;
    for f in ["meminfo.csv", "diskstats.csv.gz"] {
        let rows = rows_of(&out.join(f));
        let last = rows.last().unwrap_or_else(|| panic!("{f}: no rows")).0;
        // diskstats writes an idle device once a second: allow that on top.
        let slack = if f.ends_with("gz") {
            1_300_000_000
        } else {
            400_000_000
        };
        assert!(
            kill_ns.saturating_sub(last) < slack,
            "{f}: last row {last} ns, killed ~{kill_ns} ns"
        );
    }
    let o = diskpulse().arg("report").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("the recording is incomplete"), "{err}");
    let s = read_json(&out.join("summary.json"));
    let rows: u64 = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rows"].as_u64().unwrap())
        .sum();
    assert!(rows > 0, "{s:#}");
}

#[test]
fn a_loop_device_detached_mid_record_is_an_event_and_the_other_device_goes_on() {
    if !can_use_loop_devices() {
        return;
    }
    let a = LoopDev::new("64M");
    let b = LoopDev::new("64M");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("rec");
    let c = diskpulse()
        .args(["record", "--duration", "4s", "--interval", "1ms"])
        .args(["--device", a.name(), "--device", b.name(), "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Killing(Some(c));
    wait_for_file(&out.join("meta.json"));
    std::thread::sleep(Duration::from_millis(1500));
    common::sh("losetup", &["-d", &a.dev]);
    // Keep the other device busy after the detach: its rows must go on.
    common::write_direct(Path::new(&b.dev), 4 << 20, 64 << 10);
    let o = guard.0.take().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["complete"], true, "{meta:#}");
    let ev = events_of(&out);
    let gone: Vec<_> = ev.iter().filter(|e| e["kind"] == "device_gone").collect();
    assert_eq!(gone.len(), 1, "{ev:#?}");
    assert_eq!(gone[0]["detail"]["device"], a.name());
    let why = gone[0]["detail"]["why"].as_str().unwrap_or("");
    assert!(
        why.contains("detached") && why.contains(&a.image.display().to_string()),
        "{why}"
    );
    let t_gone = gone[0]["t_ns"].as_u64().unwrap();
    assert!(
        (1_000_000_000..3_000_000_000).contains(&t_gone),
        "gone at {t_gone}"
    );
    let rows = rows_of(&out.join("diskstats.csv.gz"));
    let last_of = |n: &str| {
        rows.iter()
            .filter(|r| r.1 == n)
            .map(|r| r.0)
            .max()
            .unwrap_or(0)
    };
    // The detached device's rows end at the detach (unless someone attached loopN again).
    if !ev.iter().any(|e| e["kind"] == "loop_attached") {
        assert!(
            last_of(a.name()) <= t_gone,
            "{} rows after {t_gone}",
            a.name()
        );
    }
    // The other one is sampled to the end, with its writes after the detach.
    assert!(
        last_of(b.name()) > 3_500_000_000,
        "{}: last row {}",
        b.name(),
        last_of(b.name())
    );
    let o = diskpulse().arg("report").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let said = format!(
        "device {} vanished at {:.3} s",
        a.name(),
        t_gone as f64 / 1e9
    );
    assert!(err.contains(&said), "{said}: {err}");
    let s = read_json(&out.join("summary.json"));
    assert!(
        common::device(&s, b.name())["write"]["bytes"]
            .as_f64()
            .unwrap()
            >= (4 << 20) as f64
    );
}

/// What a run whose store filled up must show: the failure in summary.json and
/// events.jsonl, a store_volume event for the node, a complete meta.json, and a report.
fn assert_store_full_recorded(run: &Path, dev: &str) {
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["complete"], true, "{meta:#}");
    let ev = events_of(run);
    assert!(
        ev.iter()
            .any(|e| e["kind"] == "error" && e["detail"]["kind"] == "insufficient_resources"),
        "no refusal in events"
    );
    let vol = ev
        .iter()
        .find(|e| e["kind"] == "store_volume")
        .unwrap_or_else(|| panic!("no store_volume event"));
    assert_eq!(vol["detail"]["device"], dev, "{vol}");
    assert!(vol["detail"]["used_pct"].as_f64().unwrap() > 50.0, "{vol}");
    let o = diskpulse().arg("report").arg(run).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_json(&run.join("summary.json"));
    let f = &s["failures"][0];
    assert_eq!(f["kind"], "insufficient_resources", "{s:#}");
    assert!(f["line"].as_str().unwrap().contains(dev), "{f}");
}

/// The one line that says the store filled: node, device and how full.
fn assert_store_full_line(err: &str, dev: &str) {
    let line = err
        .lines()
        .find(|l| l.contains("the store filled up"))
        .unwrap_or_else(|| panic!("no store-full line: {err}"));
    assert!(
        line.contains("; store of node n1 (") && line.contains(&format!("on {dev} (ext4) was ")),
        "{line}"
    );
    assert!(
        line.contains("% full (") && line.contains(" free)"),
        "{line}"
    );
}

#[test]
fn demo_whose_store_volume_fills_says_node_volume_and_how_full_and_keeps_its_recording() {
    if !have_nats_server() || !can_use_loop_devices() {
        return;
    }
    let mut vol = LoopDev::new("48M");
    let mnt = vol.mount_ext4();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("demo");
    let o = diskpulse()
        .args([
            "demo",
            "--duration",
            "5s",
            "--size",
            "64k",
            "--interval",
            "10ms",
        ])
        .arg("--store-dir")
        .arg(mnt.join("store"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_store_full_line(&err, &vol.dev);
    assert_store_full_recorded(&out, &vol.dev);
}

#[test]
fn run_whose_lab_store_volume_fills_says_node_volume_and_how_full_and_keeps_its_recording() {
    if !have_nats_server() || !can_use_loop_devices() {
        return;
    }
    let token = format!("sf{}", std::process::id());
    let lab = LabRoot(PathBuf::from(format!("/var/tmp/diskpulse-faults-{token}")));
    let d = tempfile::tempdir().unwrap();
    let sc = d.path().join("full.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "storefull"
[[volumes]]
name = "{token}"
lab = {{ size = "64M", fs = "ext4" }}
[broker]
volumes = ["{token}"]
[[phases]]
kind = "load"
args = ["js-pub", "--size", "64k", "--duration", "5s", "--stream", "S", "--subject", "s.x"]
"#
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .arg("--lab-root")
        .arg(&lab.0)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let run = out.join("cells/base/r1");
    let dev = events_of(&run)
        .iter()
        .find(|e| e["kind"] == "store_volume")
        .and_then(|e| e["detail"]["device"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no store_volume event: {err}"));
    assert!(dev.starts_with("/dev/loop"), "{dev}");
    assert_store_full_line(&err, &dev);
    assert_store_full_recorded(&run, &dev);
    // The lab volume is gone after the failed run.
    assert_eq!(loops_under(&lab.0), Vec::<String>::new());
}

#[test]
fn an_out_that_fills_during_record_keeps_what_was_written_and_meta_says_what_was_lost() {
    if !can_use_loop_devices() {
        return;
    }
    let mut vol = LoopDev::new("16M");
    let mnt = vol.mount_ext4();
    let out = mnt.join("rec");
    let c = diskpulse()
        .args([
            "record",
            "--duration",
            "4s",
            "--interval",
            "1ms",
            "--mem-interval",
            "1ms",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Killing(Some(c));
    wait_for_file(&out.join("meta.json"));
    // Rows reach the disk for a second, then the file system fills from outside.
    std::thread::sleep(Duration::from_millis(1000));
    let fill = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", mnt.join("fill").display()))
        .args(["bs=64k"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!fill.success(), "dd should have hit a full file system");
    let o = guard.0.take().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // The error names a file of the run and the full file system.
    assert!(
        err.contains(&out.display().to_string()) && err.contains("is full"),
        "{err}"
    );
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".tmp") || n.contains("reserve")),
        "{names:?}"
    );
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["complete"], false, "{meta:#}");
    assert!(meta["end_wall"].is_string(), "{meta:#}");
    let lost = meta["lost"]
        .as_array()
        .unwrap_or_else(|| panic!("no lost[]: {meta:#}"));
    assert!(!lost.is_empty(), "{meta:#}");
    for l in lost {
        let file = l["file"].as_str().unwrap();
        assert!(names.iter().any(|n| n == file), "{l}");
        assert!(
            l["error"].as_str().unwrap().contains("No space left"),
            "{l}"
        );
        // What was written before the fill is kept: the last whole row is from after
        // the first second, and it is the file's real last row.
        let after = l["after_t_ns"].as_u64().unwrap_or_else(|| panic!("{l}"));
        assert!(after >= 800_000_000, "{l}");
        let last = rows_of(&out.join(file)).iter().map(|r| r.0).max().unwrap();
        assert_eq!(after, last, "{l}");
    }
    // Reported on the full file system: one error naming it and the fix; the recording's
    // files are as they were.
    let sizes = |names: &[String]| -> Vec<u64> {
        names
            .iter()
            .map(|n| std::fs::metadata(out.join(n)).unwrap().len())
            .collect()
    };
    let before = sizes(&names);
    // What the recorder freed at its end (its reserve) is filled too, after the journal
    // committed the free.
    for i in 0..2 {
        sh("sync", &["-f", mnt.to_str().unwrap()]);
        let _ = Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", mnt.join(format!("fill{i}")).display()))
            .args(["bs=4k"])
            .stderr(Stdio::null())
            .status();
    }
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&out)
        .output()
        .unwrap();
    let rerr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{rerr}");
    assert!(
        rerr.contains(&format!("the file system of {} is full", out.display()))
            && rerr.contains("free space there"),
        "{rerr}"
    );
    assert_eq!(
        sizes(&names),
        before,
        "report changed the recording's files"
    );
    // The user frees space, then reports: the file system's freed blocks are usable once
    // its journal commits (`sync -f`), else report's own files may still not fit.
    for f in ["fill", "fill0", "fill1"] {
        let _ = std::fs::remove_file(mnt.join(f));
    }
    sh("sync", &["-f", mnt.to_str().unwrap()]);
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let rerr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{rerr}");
    assert!(rerr.contains("incomplete"), "{rerr}");
}

/// A `load` killed with its `run` (a scenario phase dies with its parent) leaves its
/// default store `/var/tmp/diskpulse-load-<pid>`; the next `load` with an embedded
/// broker removes the stores of loads that are gone, saying so, and keeps a live one's.
#[test]
fn the_next_load_removes_the_store_of_a_killed_load() {
    if !have_nats_server() {
        return;
    }
    // A pid that is surely gone: a child that ran and was reaped.
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let stale = PathBuf::from(format!("/var/tmp/diskpulse-load-{dead}"));
    std::fs::create_dir_all(stale.join("jetstream")).unwrap();
    std::fs::write(stale.join("jetstream/x"), b"left by a killed load").unwrap();
    let o = diskpulse()
        .args(["load", "js-pub", "--msgs", "20", "--size", "64", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!stale.exists(), "{} is still there: {err}", stale.display());
    assert!(
        err.contains(&format!("removed {}", stale.display()))
            && err.contains("a load that was killed"),
        "{err}"
    );
}
