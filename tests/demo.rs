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
    if !have_nats_server() {
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

/// Issue 9, "failure is loud": `demo --store-dir` on a volume that fills up (a 16 MiB ext4;
/// nats-server sizes JetStream's store from the free space, then answers
/// `insufficient_resources`) exits 1, and the last line says what, when and how many. The
/// same failure is in summary.json (`failures[]`) and at the top of report.html.
#[test]
fn a_store_that_fills_up_makes_demo_exit_1_saying_what_when_and_how_many() {
    if !can_use_loop_devices() {
        return;
    }
    if !have_nats_server() {
        return;
    }
    let mut lo = LoopDev::new("16M");
    let m = lo.mount_ext4();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let o = diskpulse()
        .args(["demo", "--duration", "5s", "--size", "1024", "--store-dir"])
        .arg(m.join("js"))
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let all = format!("{}\n{stderr}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(o.status.code(), Some(1), "{all}");
    let last = stderr.lines().last().unwrap_or("");
    // "the store filled up at 2.4 s into the load (insufficient resources): 1,590,189
    // publishes failed": on the load's clock, from its start (not the broker's start-up).
    let rest = last
        .strip_prefix("the store filled up at ")
        .unwrap_or_else(|| panic!("last line: {last:?}\n{all}"));
    let (at_s, rest) = rest
        .split_once(" s into the load (insufficient resources): ")
        .unwrap();
    // Then which node, which volume and how full (tests/hardening_faults.rs checks it).
    let (rest, store) = rest.split_once("; store of node n1 (").unwrap();
    assert!(
        store.contains(&format!("on {} (ext4) was ", lo.dev)),
        "{last}"
    );
    let count = rest.strip_suffix(" publishes failed").unwrap();
    let at_s: f64 = at_s.parse().unwrap();
    let count: u64 = count.replace(',', "").parse().unwrap();
    assert!(count > 0 && at_s > 0.0 && at_s < 5.5, "{last}");

    let s = read_json(&run.join("summary.json"));
    let f = s["failures"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(f["line"], last, "{f:#}");
    assert_eq!(f["kind"], "insufficient_resources");
    assert_eq!(f["role"], "js-pub");
    assert_eq!(f["count"].as_u64(), Some(count));
    assert_eq!(s["load"]["js-pub"]["errors"].as_u64(), Some(count), "{s:#}");
    assert!(f["first_s"].as_f64().unwrap() <= f["last_s"].as_f64().unwrap());
    // first_s is on the run clock; the line counts from the load_start event.
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let load_start_s = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "load_start")
        .and_then(|e| e["t_ns"].as_f64())
        .expect("a load_start event")
        / 1e9;
    let into_load = f["first_s"].as_f64().unwrap() - load_start_s;
    assert!(
        (into_load - at_s).abs() <= 0.051,
        "{at_s} vs {into_load}: {f:#}"
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains(&format!("<strong>{last}</strong>")));
}
