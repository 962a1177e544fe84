//! `run` scenarios with agents (issue 15 item 2): a scenario's `[agents]` makes each run's
//! recording merge the named nodes' `diskpulse agent` samples. Two agents on this host
//! (`--name a`, `--name b`, each on its own loop device) publish through the scenario's
//! embedded nats-server (reached at the fixed `listen` address); a run waiting for a node
//! that never answers fails naming it; a bad `[agents]` section is a usage error with its
//! line and column and nothing written.

mod common;
use common::*;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills its processes on drop (also on panic).
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `diskpulse run SCENARIO --out OUT --lab-root LAB`.
fn run(scenario: &Path, out: &Path, lab: &Path) -> std::process::Command {
    let mut c = diskpulse();
    c.arg("run")
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .arg("--lab-root")
        .arg(lab);
    c
}

const BAD: [(&str, &str, &str); 9] = [
    (
        "nodes = [\"a\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\nnodez = 1\n",
        ":14:1:",
        "nodez",
    ),
    (
        "nodes = []\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\n",
        ":11:1:",
        "nodes is empty",
    ),
    (
        "nodes = [\"a\", \"b\", \"a\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\n",
        ":11:20:",
        "'a' is named twice",
    ),
    (
        "nodes = [\"a.b\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\n",
        ":11:10:",
        "not a node name",
    ),
    (
        "nodes = [\"a\"]\nserver = \"embedded\"\n",
        ":12:10:",
        "needs listen = ",
    ),
    (
        "nodes = [\"a\"]\nserver = \"embedded\"\nlisten = \"localhost\"\n",
        ":13:10:",
        "listen 'localhost'",
    ),
    (
        "nodes = [\"a\"]\nserver = \"ftp://u:secret@h:1\"\n",
        ":12:10:",
        "[agents] server",
    ),
    (
        "nodes = [\"a\"]\nserver = \"nats://10.0.0.1:4222\"\nlisten = \"127.0.0.1:14250\"\n",
        ":13:10:",
        "listen is for server = \"embedded\"",
    ),
    (
        "nodes = [\"a\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\nwait = \"0s\"\n",
        ":14:1:",
        "wait must be above 0",
    ),
];

#[test]
fn a_bad_agents_section_is_a_usage_error_with_its_place_and_nothing_written() {
    let d = tempfile::tempdir().unwrap();
    let head = "name = \"x\"\n[[volumes]]\nname = \"v\"\npath = \"/var/tmp\"\n[broker]\nvolumes = [\"v\"]\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n[agents]\n";
    for (body, place, want) in BAD {
        let f = d.path().join("bad.toml");
        std::fs::write(&f, format!("{head}{body}")).unwrap();
        let out = d.path().join("study");
        for dry in [true, false] {
            let mut c = diskpulse();
            c.arg("run").arg(&f).arg("--out").arg(&out);
            if dry {
                c.arg("--dry-run");
            }
            let o = c.output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{body}: {err}");
            assert!(err.contains(place), "{body}: wanted {place}: {err}");
            assert!(err.contains(want), "{body}: wanted {want}: {err}");
            assert!(!err.contains("secret"), "{body}: printed a password: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(!out.exists(), "{body}: wrote {}", out.display());
        }
    }
    // Embedded needs a broker.
    let f = d.path().join("nobroker.toml");
    std::fs::write(
        &f,
        "name = \"x\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n[agents]\nnodes = [\"a\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\n",
    )
    .unwrap();
    let o = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nobroker.toml:7:10:"), "{err}");
    assert!(err.contains("needs a [broker]"), "{err}");
    // A good one: the dry run names the agents and where they connect.
    let f = d.path().join("good.toml");
    std::fs::write(
        &f,
        format!(
            "{head}nodes = [\"a\", \"b\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:14250\"\n"
        ),
    )
    .unwrap();
    let o = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&f)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("agents a, b through nats://127.0.0.1:14250, waited for up to 30s"),
        "{out}"
    );
}

/// `node`'s rows in agents_diskstats.csv.gz: (device, t_ns).
fn node_rows(run: &Path, node: &str) -> Vec<(String, u64)> {
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(
        std::fs::File::open(run.join("agents_diskstats.csv.gz")).unwrap(),
    )
    .read_to_string(&mut s)
    .unwrap();
    s.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[0] == node)
        .map(|f| (f[2].to_string(), f[1].parse().unwrap()))
        .collect()
}

#[test]
fn a_scenario_with_two_agents_records_both_nodes_and_names_a_missing_one() {
    if !have_nats_server() || !can_use_loop_devices() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (la, lb) = (LoopDev::new("64M"), LoopDev::new("64M"));
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut procs = Procs(vec![]);
    for (name, dev) in [("a", la.name()), ("b", lb.name())] {
        procs.0.push(
            diskpulse()
                .args(["agent", "--server", &url, "--name", name, "--device", dev])
                .args(["--duration", "120s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    // Node b's device takes twice node a's writes while the runs go.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (da, db, stop) = (la.dev.clone(), lb.dev.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                write_direct(Path::new(&da), 256 << 10, 64 << 10);
                write_direct(Path::new(&db), 512 << 10, 64 << 10);
                // Often enough that each device's io_ms (util) moves in every run: at a
                // 50 ms pace its page-cache requests of tens of us left util at 0.0-0.6%,
                // and 0 now and then.
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let store = d.path().join("store");
    let scenario = |nodes: &str, wait: &str| {
        format!(
            "name = \"agents\"\n[[volumes]]\nname = \"v\"\npath = \"{}\"\ncreate = true\n[broker]\nvolumes = [\"v\"]\n[agents]\nnodes = [{nodes}]\nserver = \"embedded\"\nlisten = \"127.0.0.1:{port}\"\nwait = \"{wait}\"\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\", \"--msgs\", \"5000\", \"--size\", \"1024\"]\n[[phases]]\nkind = \"sleep\"\nduration = \"2s\"\n",
            store.display()
        )
    };
    // A node whose agent never runs: the run fails, naming it and how to start it.
    let f = d.path().join("ghost.toml");
    std::fs::write(&f, scenario("\"a\", \"ghost\"", "4s")).unwrap();
    let out = d.path().join("ghost");
    let o = run(&f, &out, &d.path().join("lab")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("node(s) ghost did not answer")
            && err.contains(&format!("`diskpulse agent --name ghost --server {url}`")),
        "{err}"
    );
    let study = read_json(&out.join("study.json"));
    assert_eq!(study["runs"][0]["status"], "failed", "{study:#}");
    // Both agents, through the embedded broker of the next run.
    let f = d.path().join("two.toml");
    std::fs::write(&f, scenario("\"a\", \"b\"", "30s")).unwrap();
    let out = d.path().join("two");
    let o = run(&f, &out, &d.path().join("lab")).output().unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "run failed: {err}");
    let run = out.join("cells/base/r1");
    let meta = read_json(&run.join("meta.json"));
    for (node, dev) in [("a", la.name()), ("b", lb.name())] {
        let n = &meta["agents"]["nodes"][node];
        assert!(n["offset_ns"].is_i64(), "{node}: {n:#}");
        assert!(
            n["bound_ns"].as_u64().unwrap() < 20_000_000,
            "{node}: bound {n:#}"
        );
        let ds = &n["sources"]["diskstats"];
        assert_eq!(ds["lost"], 0, "{node}: {ds:#}");
        let rows = node_rows(&run, node);
        let on_dev: Vec<u64> = rows
            .iter()
            .filter(|(d, _)| d == dev)
            .map(|(_, t)| *t)
            .collect();
        assert!(
            on_dev.len() >= 20,
            "{node}: {} rows of {dev} in agents_diskstats.csv.gz",
            on_dev.len()
        );
        assert!(
            on_dev.windows(2).all(|w| w[1] > w[0]),
            "{node}: rows out of time order"
        );
        assert!(
            n["devices"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d.as_str() == Some(dev)),
            "{node}: {dev} not among the node's devices: {n:#}"
        );
    }
    // The run's report: each node's devices' panel, and no broker panel (no broker
    // sampled: no empty panel).
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    for n in ["a", "b"] {
        assert!(
            html.contains(&format!("{n} MiB/s (offset ")),
            "report.html lacks node {n}'s panel"
        );
        assert!(
            !html.contains(&format!("{n} broker")),
            "report.html draws a broker panel for {n}, whose agent sampled none"
        );
    }
    // The study table: each node's columns, b's device written twice as fast as a's.
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| -> f64 {
        let i = head
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("study.csv has no column {name}: {head:?}"));
        row[i]
            .parse()
            .unwrap_or_else(|_| panic!("{name} = '{}'", row[i]))
    };
    let (wa, wb) = (col("node_a_write_mib_s"), col("node_b_write_mib_s"));
    for n in ["a", "b"] {
        println!(
            "node {n}: write {:.2} MiB/s, peak {:.1} MiB/s (10 ms), util {:.1} %",
            col(&format!("node_{n}_write_mib_s")),
            col(&format!("node_{n}_write_peak_mib_s")),
            col(&format!("node_{n}_util_pct"))
        );
    }
    assert!(
        wa > 0.5 && (1.5..2.5).contains(&(wb / wa)),
        "write MiB/s a {wa:.2}, b {wb:.2}: b's device took twice a's writes"
    );
    for n in ["a", "b"] {
        let peak = col(&format!("node_{n}_write_peak_mib_s"));
        let mean = col(&format!("node_{n}_write_mib_s"));
        let util = col(&format!("node_{n}_util_pct"));
        assert!(peak > mean, "{n}: peak {peak} <= mean {mean}");
        assert!(util > 0.0 && util <= 100.0, "{n}: util {util}");
    }
    // The agents sample no broker here (several nats-servers run): no broker column value.
    let i = head
        .iter()
        .position(|c| *c == "node_a_broker_write_mib_s")
        .unwrap();
    assert_eq!(row[i], "", "{csv}");
    // study.md shows the few figures that answer; the nodes' are in study.csv, and the
    // page says where.
    let md = std::fs::read_to_string(out.join("study.md")).unwrap();
    assert!(md.contains("is in study.csv beside this page"), "{md}");
    drop(procs);
}

/// A nats-server of its own on a free port and one `diskpulse agent --name x` sampling
/// `dir`'s device every 5 ms through it: the processes (killed on drop) and the URL.
fn external_agent(dir: &Path) -> (Procs, String) {
    let d = dir;
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut procs = Procs(vec![]);
    procs.0.push(
        std::process::Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    procs.0.push(
        diskpulse()
            .args(["agent", "--server", &url, "--name", "x", "--path"])
            .arg(d)
            .args(["--duration", "60s", "--interval", "5ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (procs, url)
}

#[test]
fn a_scenario_records_agents_through_servers_of_their_own() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_procs, url) = external_agent(d.path());
    let f = d.path().join("ext.toml");
    std::fs::write(
        &f,
        format!("name = \"ext\"\n[agents]\nnodes = [\"x\"]\nserver = \"{url}\"\nwait = \"20s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"2s\"\n"),
    )
    .unwrap();
    let out = d.path().join("study");
    let o = run(&f, &out, &d.path().join("lab")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "run failed: {err}");
    let run = out.join("cells/base/r1");
    let meta = read_json(&run.join("meta.json"));
    let x = &meta["agents"]["nodes"]["x"];
    assert!(x["offset_ns"].is_i64(), "{x:#}");
    assert_eq!(meta["agents"]["servers"][0], url.as_str(), "{meta:#}");
    assert!(
        x["sources"]["cpu"]["batches"].as_u64().unwrap() >= 10,
        "2 s of cpu batches every 100 ms: {x:#}"
    );
    assert!(!node_rows(&run, "x").is_empty(), "no diskstats rows of x");
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains(",node_x_write_mib_s,"),
        "{csv}"
    );
}

/// `record --agents x --chunk 1s --keep 2s`: the agents' files are cut into chunks of one
/// aligned second of their `t_ns` (their second cell, after `node`) and dropped by
/// `--keep` as the recorder's own; their readers read the kept chunks, then the file,
/// as one: every kept row once, each device's rows in order with no hole at a seam.
#[test]
fn record_agents_files_are_chunked_and_dropped_by_the_same_rules_and_read_as_one() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_procs, url) = external_agent(d.path());
    let run = d.path().join("run");
    let o = diskpulse()
        .args(["record", "--no-progress", "--agents", "x", "--server", &url])
        .args([
            "--path",
            "/var/tmp",
            "--duration",
            "6500ms",
            "--chunk",
            "1s",
        ])
        .args(["--keep", "2s", "--trigger-window", "1s", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let meta = read_json(&run.join("meta.json"));
    let mut kept_of = std::collections::BTreeMap::new();
    for file in [
        "agents_diskstats.csv.gz",
        "agents_cpu.csv",
        "agents_meminfo.csv",
    ] {
        let c = check_chunk_list(&run, &meta, file, 4, true);
        kept_of.insert(file, (c.kept_rows, c.dropped_to));
    }
    let disks = diskpulse::format::agents::read_diskstats(&run)
        .unwrap()
        .unwrap();
    let (kept, dropped_to) = kept_of["agents_diskstats.csv.gz"];
    assert_eq!(
        disks.iter().map(|n| n.t_ns.len() as u64).sum::<u64>(),
        kept,
        "diskstats rows read"
    );
    for n in &disks {
        assert_eq!(n.node, "x");
        assert!(
            n.t_ns[0] > dropped_to,
            "{}: starts in a dropped chunk",
            n.device
        );
        // (A diskstats row is written when the device's counters moved: no hole check.)
        assert!(
            n.t_ns.windows(2).all(|w| w[1] > w[0]),
            "{}: rows out of order",
            n.device
        );
    }
    let cpu = diskpulse::format::agents::read_source(&run, "cpu", &["user_ticks"]).unwrap();
    assert_eq!(
        cpu["x"].t_ns.len() as u64,
        kept_of["agents_cpu.csv"].0,
        "cpu rows read"
    );
    // meminfo has a row every 10 ms: read across the seams, no hole, none twice.
    let mem = diskpulse::format::agents::read_source(&run, "meminfo", &["dirty_kib"]).unwrap();
    let (kept, dropped_to) = kept_of["agents_meminfo.csv"];
    let t = &mem["x"].t_ns;
    assert_eq!(t.len() as u64, kept, "meminfo rows read");
    assert!(t[0] > dropped_to, "meminfo starts in a dropped chunk");
    for w in t.windows(2) {
        assert!(w[1] > w[0], "meminfo rows out of order: {w:?}");
        assert!(w[1] - w[0] < 300_000_000, "meminfo: a hole at {} ns", w[0]);
    }
}

/// Ctrl-C while a run waits for an agent that never answers: the run ends at once (not at
/// the end of `wait`), says why, closes its recording, stops its nats-server and tears
/// down its lab volume.
#[test]
fn ctrl_c_while_a_run_waits_for_its_agents_ends_it_cleanly() {
    if !have_nats_server() || !can_use_loop_devices() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let lab = d.path().join("lab");
    let f = d.path().join("ghost.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"ghost\"\n[[volumes]]\nname = \"v\"\nlab = {{ size = \"64M\", fs = \"ext4\" }}\n[broker]\nvolumes = [\"v\"]\n[agents]\nnodes = [\"ghost\"]\nserver = \"embedded\"\nlisten = \"127.0.0.1:{}\"\nwait = \"60s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
            free_port()
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    let child = run(&f, &out, &lab)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut procs = Procs(vec![child]);
    // Waiting: the run's nats-server is up (its broker_start event is written).
    let events = || {
        std::fs::read_dir(out.join("cells"))
            .ok()
            .and_then(|mut c| c.next())
            .and_then(|c| c.ok())
            .and_then(|c| std::fs::read_to_string(c.path().join("r1/events.jsonl")).ok())
            .unwrap_or_default()
    };
    let t0 = std::time::Instant::now();
    while !events().contains("broker_start") {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no broker_start in 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let server_pid = events()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "broker_start")
        .and_then(|e| e["detail"]["pid"].as_u64())
        .expect("broker_start names the server's pid") as i32;
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(procs.0[0].id() as i32, libc::SIGINT) };
    let t_int = std::time::Instant::now();
    let status = procs.0[0].wait().unwrap();
    let took = t_int.elapsed();
    let mut err = String::new();
    procs.0[0]
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        took < Duration::from_secs(10),
        "ended {took:?} after Ctrl-C: {err}"
    );
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("interrupted while waiting for the agents"),
        "{err}"
    );
    // SAFETY: signal 0 only checks that the pid exists.
    assert!(
        unsafe { libc::kill(server_pid, 0) } != 0,
        "the run's nats-server {server_pid} still runs"
    );
    let losetup = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let lab_s = lab.display().to_string();
    assert!(
        !String::from_utf8_lossy(&losetup.stdout).contains(&lab_s),
        "a loop device over {lab_s} is left"
    );
    let cell = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let meta = read_json(&cell.join("r1/meta.json"));
    assert_eq!(meta["complete"], true, "the run's recording was not closed");
}
