//! `demo` end to end against a real nats-server, on ext4 over a loop device of its own
//! (so nothing else writes to the device): the report must find write bursts whose
//! period matches `--sync-interval` within 10%.

mod common;
use common::*;

#[test]
fn demo_finds_bursts_at_the_sync_interval() {
    if !can_use_loop_devices() {
        return;
    }
    if let Err(e) = diskpulse::broker::find_nats_server(None) {
        eprintln!("skipping: {e:#}");
        return;
    }
    let mut lo = LoopDev::new("2G");
    let m = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let o = diskpulse()
        .args([
            "demo",
            "--duration",
            "9s",
            "--sync-interval",
            "1500ms",
            "--store-dir",
        ])
        .arg(m.join("js"))
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_json(&run.join("summary.json"));
    let d = device(&s, lo.name());
    let b = &d["write"]["bursts"];
    let period = b["period_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("no period: {b:#}"));
    assert!(
        (period - 1.5).abs() / 1.5 < 0.10,
        "burst period {period} s, sync interval 1.5 s: {b:#}"
    );
    assert!(b["count"].as_u64().unwrap() >= 4, "{b:#}");
    assert!(d["write"]["hidden_factor"].as_f64().unwrap() > 2.0);
    // The table and the files the report promises.
    assert!(stdout.contains(lo.name()), "{stdout}");
    for f in [
        "meta.json",
        "events.jsonl",
        "diskstats.csv.gz",
        "meminfo.csv",
        "cpu.csv",
        "load.csv",
        "nats-server.log",
        "summary.json",
        "timeline.png",
        "timeline.svg",
    ] {
        assert!(run.join(f).exists(), "{f} missing");
    }
    let load = &s["load"]["js-pub"];
    assert!(load["ops"].as_f64().unwrap() > 1000.0, "{load:#}");
    assert_eq!(load["errors"].as_f64().unwrap(), 0.0);
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["complete"], true);
    assert!(meta["broker"]["version"].is_string());
    // No nats-server left behind.
    let pid = meta["broker"]["pid"].as_u64().unwrap() as i32;
    // SAFETY: signal 0 only checks existence.
    assert_ne!(
        unsafe { libc::kill(pid, 0) },
        0,
        "nats-server {pid} still running"
    );
}
