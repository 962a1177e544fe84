//! How many agents one recorder takes before it falls behind (issue 15, "Done means" line
//! 2). `benches/agents.sh` runs real agents, but on this 2-core VM eight of them already
//! take a quarter of the machine sampling the same devices, so the recorder never reached
//! its limit there. This bench stands N agents in for real ones on the wire: N NATS
//! connections, each publishing what `diskpulse agent` publishes (the same `DP1` batches
//! on `diskpulse.<node>.{diskstats,meminfo,cpu}` every 100 ms, rows in the agent's own
//! format at the rate one real agent sent on 4 busy devices: 3,657 diskstats rows/s,
//! ~112 bytes a row; meminfo every 10 ms, cpu every 100 ms; a status heartbeat a second)
//! and answering clock requests on `diskpulse.<node>.clock` with its own receive and
//! send stamps, as the agent does. What it does not stand in for is the sampling itself
//! (that cost is `agents.sh`'s figure 1). Then the real recorder,
//! `diskpulse record --agents a0,...,aN-1`, records them for `SECS` seconds and its
//! meta.json says what came: rows written against rows expected, the longest a batch
//! waited to be written (`max_lag_ns`), lost and duplicate batches; nats-server's
//! `slow_consumers` says whether it had to cut the recorder off.
//!
//! Run: `cargo bench --bench agent_flood` (release; needs nats-server on PATH, no root).
//! `FLOOD_AGENTS=8,16,32,64,128,256` (default), `SECS=15`, `ROWS_PER_S=3657`. It goes up
//! the list and stops after the first N at which the recorder fell behind (rows written
//! short of those published in its window by more than half a second's, a batch lost, a lag over 2 s, or a slow
//! consumer). Prints figures; asserts nothing.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use diskpulse::agent::{answer_clock, encode_batch, subject, Status};

const BATCH_EVERY: Duration = Duration::from_millis(100);
const DEVICES: u64 = 4;

fn env_or(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on loopback")
}

/// CPU (user + system) of this process so far, seconds.
fn self_cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// One stand-in agent: clock replies and batches until `stop`.
async fn agent(
    client: async_nats::Client,
    name: String,
    rows_per_s: u64,
    stop: Arc<AtomicBool>,
    rows_sent: Arc<AtomicU64>,
    bytes_sent: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let zero = Instant::now();
    let base_ns = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    // Clock requests answered as the agent answers them.
    let clock_task = answer_clock(&client, &name, move || {
        base_ns + zero.elapsed().as_nanos() as u64
    })
    .await?;
    let mut seq = [0u64; 3];
    let mut counters = [[0u64; 17]; DEVICES as usize];
    let mut tick = tokio::time::interval(BATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_t = 0u64;
    let mut carry = 0u64; // row budget in thousandths, so rows_per_s need not divide by 10
    let mut last_status = Instant::now();
    let mut rows = Vec::with_capacity(64 * 1024);
    let mut ib = itoa::Buffer::new();
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let t_end = zero.elapsed().as_nanos() as u64;
        // diskstats: the rows since the last batch, spread evenly, devices in turn, each a
        // row whose write counters moved (as a device under 4k writes shows them).
        carry += rows_per_s * BATCH_EVERY.as_millis() as u64;
        let n = carry / 1000;
        carry %= 1000;
        rows.clear();
        for k in 0..n {
            let t = last_t + (t_end - last_t) * (k + 1) / n.max(1);
            let d = (k % DEVICES) as usize;
            let c = &mut counters[d];
            c[4] += 1; // writes completed
            c[6] += 8; // sectors written
            c[7] += 1 + (k & 3); // ms writing
            c[9] += 1; // io_ticks
            c[10] += 2; // time in queue
            rows.extend_from_slice(ib.format(t).as_bytes());
            rows.extend_from_slice(b",loop");
            rows.extend_from_slice(ib.format(d).as_bytes());
            rows.extend_from_slice(b",7,");
            rows.extend_from_slice(ib.format(d).as_bytes());
            for (i, v) in c.iter().enumerate() {
                rows.push(b',');
                // Counters of a device that has run a while: the write side's 8 digits,
                // some reads, in-flight 0 (rows of ~110 bytes, as the real agent's).
                let v = match i {
                    4 | 6 | 7 | 9 | 10 => v + 10_000_000,
                    0..=3 => 1234,
                    _ => 0,
                };
                rows.extend_from_slice(ib.format(v).as_bytes());
            }
            rows.push(b'\n');
        }
        send(
            &client,
            &name,
            "diskstats",
            &mut seq[0],
            base_ns,
            &rows,
            &bytes_sent,
        )
        .await;
        rows_sent.fetch_add(n, Ordering::Relaxed);
        // meminfo every 10 ms, cpu every 100 ms.
        rows.clear();
        let mut t = last_t - last_t % 10_000_000 + 10_000_000;
        while t <= t_end {
            rows.extend_from_slice(
                format!("{t},{},0,8123456,20123456\n", 4000 + (t / 1_000_000) % 5000).as_bytes(),
            );
            t += 10_000_000;
        }
        send(
            &client,
            &name,
            "meminfo",
            &mut seq[1],
            base_ns,
            &rows,
            &bytes_sent,
        )
        .await;
        let ticks = t_end / 10_000_000;
        let cpu = format!(
            "{t_end},{},0,{},{},{},0,{},0,1,0\n",
            ticks / 2,
            ticks / 8,
            ticks,
            ticks / 16,
            ticks / 32
        );
        send(
            &client,
            &name,
            "cpu",
            &mut seq[2],
            base_ns,
            cpu.as_bytes(),
            &bytes_sent,
        )
        .await;
        last_t = t_end;
        if last_status.elapsed() >= Duration::from_secs(1) {
            last_status = Instant::now();
            let st = Status {
                node: name.clone(),
                last_seq: [("diskstats", seq[0]), ("meminfo", seq[1]), ("cpu", seq[2])]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                devices: (0..DEVICES).map(|d| format!("loop{d}")).collect(),
                interval_us: 1000,
                ..Default::default()
            };
            let _ = client
                .publish(
                    subject(&name, "status"),
                    Bytes::from(serde_json::to_vec(&st)?),
                )
                .await;
        }
    }
    let _ = client.flush().await;
    clock_task.abort();
    Ok(())
}

async fn send(
    c: &async_nats::Client,
    node: &str,
    source: &str,
    seq: &mut u64,
    base_ns: u64,
    rows: &[u8],
    bytes_sent: &AtomicU64,
) {
    if rows.is_empty() {
        return;
    }
    *seq += 1;
    let b = encode_batch(source, *seq, base_ns, rows);
    bytes_sent.fetch_add(b.len() as u64, Ordering::Relaxed);
    let _ = c.publish(subject(node, source), Bytes::from(b)).await;
}

/// GET `path` from nats-server's monitor port, the body as JSON.
fn monitor(port: u16, path: &str) -> Option<serde_json::Value> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    serde_json::from_str(body.split_once("\r\n\r\n")?.1).ok()
}

/// CPU of a child (user + system, s) and its exit status, by wait4.
fn wait_cpu(pid: u32) -> (f64, i32) {
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    (tv(ru.ru_utime) + tv(ru.ru_stime), status)
}

fn main() -> anyhow::Result<()> {
    let bin = env!("CARGO_BIN_EXE_diskpulse");
    let sizes: Vec<usize> = env_or("FLOOD_AGENTS", "8,16,32,64,128,256")
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let secs: u64 = env_or("SECS", "15").parse()?;
    let rows_per_s: u64 = env_or("ROWS_PER_S", "3657").parse()?;
    let work = tempfile::Builder::new()
        .prefix("dp-flood.")
        .tempdir_in("/var/tmp")?;
    let (port, mport) = (free_port(), free_port());
    let mut nats = Command::new("nats-server")
        .args([
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-m",
            &mport.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("nats-server: {e} (scripts/setup installs it)"))?;
    let url = format!("nats://127.0.0.1:{port}");
    let t0 = Instant::now();
    while monitor(mport, "/varz").is_none() {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!(
        "stand-in agents ({rows_per_s} diskstats rows/s each, 4 devices, batches every 100 ms) into one `diskpulse record --agents`, {secs} s each"
    );
    println!(
        "    N  wire MiB/s  recorder CPU  per agent  rows kept  max lag  lost  dup  resend  slow  stand-ins' CPU"
    );
    let r = (|| -> anyhow::Result<()> {
        for &n in &sizes {
            let stop = Arc::new(AtomicBool::new(false));
            let rows_sent = Arc::new(AtomicU64::new(0));
            let bytes_sent = Arc::new(AtomicU64::new(0));
            let names: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
            let mut tasks = vec![];
            for name in &names {
                let client = rt.block_on(async_nats::connect(&url))?;
                tasks.push(rt.spawn(agent(
                    client,
                    name.clone(),
                    rows_per_s,
                    stop.clone(),
                    rows_sent.clone(),
                    bytes_sent.clone(),
                )));
            }
            std::thread::sleep(Duration::from_secs(1));
            let slow0 = monitor(mport, "/varz").and_then(|v| v["slow_consumers"].as_u64());
            let out = work.path().join(format!("n{n}"));
            let cpu0 = self_cpu();
            let (b0, started) = (bytes_sent.load(Ordering::Relaxed), Instant::now());
            let mut child = Command::new(bin)
                .args(["record", "--agents", &names.join(","), "--server", &url])
                .args(["--interval", "10ms", "--duration", &format!("{secs}s")])
                .args(["--no-progress", "--out"])
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            let mut err = String::new();
            let mut stderr = child.stderr.take().expect("piped");
            let pid = child.id();
            let reader = std::thread::spawn(move || {
                let _ = stderr.read_to_string(&mut err);
                err
            });
            let (rec_cpu, status) = wait_cpu(pid);
            let err = reader.join().unwrap_or_default();
            let wall = started.elapsed().as_secs_f64();
            let wire = (bytes_sent.load(Ordering::Relaxed) - b0) as f64 / wall;
            let own_cpu = self_cpu() - cpu0;
            stop.store(true, Ordering::Relaxed);
            for t in tasks {
                let _ = rt.block_on(t);
            }
            let slow1 = monitor(mport, "/varz").and_then(|v| v["slow_consumers"].as_u64());
            let slow = slow1.unwrap_or(0) - slow0.unwrap_or(0);
            let st = std::process::ExitStatus::from_raw(status);
            if !st.success() {
                println!(
                    "  {n:>3}  the recorder failed ({st}): {}",
                    err.trim().lines().last().unwrap_or("")
                );
                break;
            }
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join("meta.json"))?)?;
            let dur = meta["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
            let nodes = meta["agents"]["nodes"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let (mut rows, mut lost, mut dup, mut resend, mut lag) = (0u64, 0u64, 0u64, 0u64, 0u64);
            for nd in nodes.values() {
                for (s, v) in nd["sources"].as_object().into_iter().flatten() {
                    let g = |k: &str| v[k].as_u64().unwrap_or(0);
                    if s == "diskstats" {
                        rows += g("rows");
                    }
                    lost += g("lost");
                    dup += g("duplicates");
                    resend += g("resend_requests");
                    lag = lag.max(g("max_lag_ns"));
                }
            }
            // What the stand-ins published within the run's span.
            let expected = (n as u64 * rows_per_s) as f64 * dur;
            let kept = rows as f64 / expected;
            // The last batches of the run's last ~0.3 s may come after it ended: half a
            // second of rows is not counted against it.
            let behind = kept < 1.0 - 0.5 / dur || lost > 0 || lag > 2_000_000_000 || slow > 0;
            println!(
                "  {n:>3}  {:>10.1}  {:>11.1}%  {:>8.2}%  {:>8.1}%  {:>5.2} s  {lost:>4} {dup:>4}  {resend:>6}  {slow:>4}  {:>6.0}%{}",
                wire / 1048576.0,
                rec_cpu / dur * 100.0,
                rec_cpu / dur / n as f64 * 100.0,
                kept * 100.0,
                lag as f64 / 1e9,
                own_cpu / wall * 100.0,
                if behind { "   <- fell behind" } else { "" }
            );
            let _ = std::fs::remove_dir_all(&out);
            if behind {
                break;
            }
        }
        Ok(())
    })();
    let _ = nats.kill();
    let _ = nats.wait();
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}
