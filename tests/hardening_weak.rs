//! Issue 10 point 6: the tests that were missing. A 1 ms spike followed from a real
//! recording into `timeline.svg` (the envelope keeps its height and its time), and a
//! redaction test that greps every file of a real run and study directory, stdout and
//! stderr for each secret it was given.
//!
//! Needs root and loop devices (the spike) and nats-server (the redaction): each test
//! says why it skips, and fails instead under CI=true.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// /proc/diskstats sectors written (field 7) of `dev`.
fn sectors_written(dev: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/diskstats").unwrap();
    s.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&dev))
        .unwrap_or_else(|| panic!("{dev} not in /proc/diskstats"))[9]
        .parse()
        .unwrap()
}

/// One SVG element's attribute.
fn attr<'a>(el: &'a str, name: &str) -> Option<&'a str> {
    let k = format!(" {name}=\"");
    let i = el.find(&k)? + k.len();
    Some(&el[i..i + el[i..].find('"')?])
}

/// Every `<TAG ...>` element of `svg` (its text up to the closing `>`).
fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    svg.match_indices(&open)
        .map(|(i, _)| &svg[i..i + svg[i..].find('>').unwrap()])
        .collect()
}

/// Every `<text>`: (x, y, the text).
fn texts(svg: &str) -> Vec<(f64, f64, String)> {
    svg.match_indices("<text ")
        .map(|(i, _)| {
            let el = &svg[i..];
            let body_at = el.find('>').unwrap() + 1;
            let body = &el[body_at..body_at + el[body_at..].find("</text>").unwrap()];
            let n = |k| attr(el, k).unwrap().parse::<f64>().unwrap();
            (n("x"), n("y"), body.trim().to_string())
        })
        .collect()
}

/// `1.5k` -> 1500 (the chart's compact numbers); `None` for anything else.
fn compact(s: &str) -> Option<f64> {
    let (num, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// A linear map from two (pixel, value) pairs.
fn linear(a: (f64, f64), b: (f64, f64)) -> impl Fn(f64) -> f64 {
    move |px| a.1 + (px - a.0) * (b.1 - a.1) / (b.0 - a.0)
}

/// The points of the write series of panel `title` in `svg`: the top of its envelope
/// band (polygons) and its line (polylines), with pixel->seconds and pixel->value maps
/// read from the time axis and the panel's y ticks.
struct Panel {
    /// (x px, y px) of every point the write series draws in the panel.
    points: Vec<(f64, f64)>,
    x_to_s: Box<dyn Fn(f64) -> f64>,
    y_to_v: Box<dyn Fn(f64) -> f64>,
}

fn write_panel(svg: &str, title: &str) -> Panel {
    let t = texts(svg);
    let title_y = t
        .iter()
        .find(|x| x.2 == title)
        .unwrap_or_else(|| {
            panic!(
                "no panel '{title}' in {:?}",
                t.iter().map(|x| &x.2).collect::<Vec<_>>()
            )
        })
        .1;
    // The plot's frame: the first unfilled rect below the title.
    let frame = elements(svg, "rect")
        .into_iter()
        .find(|r| {
            attr(r, "fill") == Some("none")
                && attr(r, "y").unwrap().parse::<f64>().unwrap() > title_y
        })
        .unwrap();
    let f = |k| attr(frame, k).unwrap().parse::<f64>().unwrap();
    let (top, bottom) = (f("y"), f("y") + f("height"));
    // y ticks: numbers left of the frame, between its top and bottom.
    let mut yt: Vec<(f64, f64)> = t
        .iter()
        .filter(|x| x.0 < f("x") && x.1 >= top - 1.0 && x.1 <= bottom + 1.0)
        .filter_map(|x| compact(&x.2).map(|v| (x.1, v)))
        .collect();
    yt.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(yt.len() >= 2, "y ticks of '{title}': {yt:?}");
    // Time ticks: the numbers on the bottom row of the image (s, or m:ss).
    let max_y = t.iter().map(|x| x.1).fold(0.0, f64::max);
    let secs = |s: &str| match s.split_once(':') {
        Some((m, s)) => Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?),
        None => s.parse::<f64>().ok(),
    };
    let mut xt: Vec<(f64, f64)> = t
        .iter()
        .filter(|x| x.1 > max_y - 60.0 && x.0 >= f("x") - 1.0)
        .filter_map(|x| secs(&x.2).map(|v| (x.0, v)))
        .collect();
    xt.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(xt.len() >= 2, "time ticks: {xt:?}");
    // The write series' colour: the legend swatch left of the `write` label in the title strip.
    let label = t
        .iter()
        .find(|x| x.2 == "write" && (x.1 - title_y).abs() < 1.0)
        .expect("a write legend entry");
    let swatch = elements(svg, "rect")
        .into_iter()
        .filter(|r| {
            let n = |k| attr(r, k).unwrap().parse::<f64>().unwrap();
            (n("y") - title_y).abs() < 10.0
                && n("x") + n("width") <= label.0
                && attr(r, "fill") != Some("none")
        })
        .max_by(|a, b| {
            let x = |r| attr(r, "x").unwrap().parse::<f64>().unwrap();
            x(a).total_cmp(&x(b))
        })
        .expect("a legend swatch");
    let colour = attr(swatch, "fill").unwrap();
    let mut points = vec![];
    for (tag, key) in [("polygon", "fill"), ("polyline", "stroke")] {
        for el in elements(svg, tag) {
            if attr(el, key) != Some(colour) {
                continue;
            }
            // The UI average is drawn dashed, 2 px: not the series.
            if tag == "polyline" && attr(el, "stroke-width") != Some("1") {
                continue;
            }
            let pts: Vec<(f64, f64)> = attr(el, "points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            if pts.iter().all(|p| p.1 >= top - 1.0 && p.1 <= bottom + 1.0) {
                points.extend(pts);
            }
        }
    }
    assert!(!points.is_empty(), "no {colour} series in '{title}'");
    Panel {
        points,
        x_to_s: Box::new(linear(xt[0], xt[xt.len() - 1])),
        y_to_v: Box::new(linear(yt[0], yt[yt.len() - 1])),
    }
}

/// (t_ns, sectors written) of `dev` from a recording's diskstats.csv.gz.
fn recorded_sectors(run: &Path, dev: &str) -> Vec<(u64, u64)> {
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(run.join("diskstats.csv.gz")).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    let mut lines = s.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| header.iter().position(|h| *h == k).unwrap();
    let (t, name, sec) = (col("t_ns"), col("device"), col("sectors_written"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[name] == dev)
        .map(|f| (f[t].parse().unwrap(), f[sec].parse().unwrap()))
        .collect()
}

/// A child killed and reaped when dropped (a failed test leaves no recorder running).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// [`trickle_writes`] on a thread, stopped and joined when finished or dropped (before
/// the loop device goes).
struct Trickle {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Trickle {
    fn start(dev: &str) -> Trickle {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, dev) = (stop.clone(), dev.to_string());
        let thread = Some(std::thread::spawn(move || trickle_writes(&dev, &s)));
        Trickle { stop, thread }
    }

    /// Stops the writes; the bytes written.
    fn finish(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// 4 KiB O_DIRECT writes to the last MiB of `dev`, one every ~0.3 ms until `stop`; the
/// bytes written.
fn trickle_writes(dev: &str, stop: &std::sync::atomic::AtomicBool) -> u64 {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
    // SAFETY: non-zero size; freed below.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    let mut bytes = 0u64;
    let mut k = 0i64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let off = (63 << 20) + (k % 256) * 4096;
        // SAFETY: buf is valid for 4096 bytes and aligned as O_DIRECT needs.
        let n = unsafe { libc::pwrite(f.as_raw_fd(), buf as *const libc::c_void, 4096, off) };
        assert_eq!(n, 4096, "trickle write to {dev}");
        bytes += 4096;
        k += 1;
        std::thread::sleep(Duration::from_micros(300));
    }
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buf, layout) };
    bytes
}

/// One O_DIRECT write of a few MiB (a few ms) into an 8 s recording at 1 ms: the run's
/// timeline.svg draws the throughput 1,517 px wide, so ~5 samples share a pixel column;
/// the write panel's highest point is the burst's peak 1 ms rate (the envelope's max, not
/// a column's mean: that would be a fifth of it or less) at the write's time.
#[test]
fn a_1ms_spike_reaches_timeline_svg_at_its_height_and_time() {
    if !can_use_loop_devices() {
        return;
    }
    let lo = LoopDev::new("64M");
    let out = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = out.path().join("run");
    let mut rec = KillOnDrop(
        diskpulse()
            .args([
                "record",
                "--device",
                lo.name(),
                "--interval",
                "1ms",
                "--duration",
                "8s",
            ])
            .args(["--mem-interval", "1s", "--cpu-interval", "1s", "--out"])
            .arg(&run)
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !run.join("meta.json").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "record did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let zero_ns = read_json(&run.join("meta.json"))["clock_zero_monotonic_ns"]
        .as_u64()
        .unwrap();
    // A steady trickle keeps a row in every sample (rows are written only when counters
    // change), so the series has more points than pixels and the envelope draws it.
    let trickle = Trickle::start(&lo.dev);
    std::thread::sleep(Duration::from_millis(4000));
    const BYTES: usize = 2 << 20;
    let before = sectors_written(lo.name());
    let w0 = collectors::clock::monotonic_ns();
    write_direct(Path::new(&lo.dev), BYTES, BYTES);
    let w1 = collectors::clock::monotonic_ns();
    let delta_bytes = (sectors_written(lo.name()) - before) * 512;
    let st = rec.0.wait().unwrap();
    let trickled = trickle.finish();
    assert!(st.success());
    // The write, and the trickle's few 4 KiB writes meanwhile.
    assert!(
        (BYTES as u64..BYTES as u64 + (256 << 10)).contains(&delta_bytes),
        "{delta_bytes} bytes written during the spike"
    );
    let (w0_s, w1_s) = ((w0 - zero_ns) as f64 / 1e9, (w1 - zero_ns) as f64 / 1e9);

    // The recording's 1 ms rows hold the whole write, and its peak 1 ms rate.
    let rows = recorded_sectors(&run, lo.name());
    let mut peak = (0.0f64, 0.0f64); // (rate B/s, end of its interval s)
    let mut in_rows = 0u64;
    for w in rows.windows(2) {
        let bytes = (w[1].1 - w[0].1) * 512;
        in_rows += bytes;
        let rate = bytes as f64 / ((w[1].0 - w[0].0) as f64 / 1e9);
        if rate > peak.0 {
            peak = (rate, w[1].0 as f64 / 1e9);
        }
    }
    assert!(
        in_rows >= delta_bytes + trickled / 2,
        "{in_rows} bytes recorded"
    );
    assert!(
        rows.len() > 3 * 1517,
        "a row per sample, more than the plot's pixel columns: {}",
        rows.len()
    );
    let peak_mib_s = peak.0 / (1 << 20) as f64;

    let o = diskpulse()
        .args(["report", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(run.join("timeline.svg")).unwrap();
    let p = write_panel(&svg, &format!("{} throughput MiB/s", lo.name()));
    let top_y = p.points.iter().map(|q| q.1).fold(f64::MAX, f64::min);
    let top_x: Vec<f64> = p
        .points
        .iter()
        .filter(|q| q.1 == top_y)
        .map(|q| q.0)
        .collect();
    let svg_peak = (p.y_to_v)(top_y);
    let svg_t = (p.x_to_s)(top_x.iter().sum::<f64>() / top_x.len() as f64);
    let px_mib_s = ((p.y_to_v)(0.0) - (p.y_to_v)(1.0)).abs();
    let px_s = (p.x_to_s)(1.0) - (p.x_to_s)(0.0);
    eprintln!(
        "write {} MiB at {w0_s:.4}..{w1_s:.4} s; recorded peak {peak_mib_s:.0} MiB/s ending {:.4} s; \
         timeline.svg peak {svg_peak:.0} MiB/s at {svg_t:.4} s (1 px = {px_mib_s:.1} MiB/s, {:.2} ms)",
        BYTES >> 20,
        peak.1,
        px_s * 1e3
    );
    assert!(
        px_s > 0.002,
        "~5 samples per pixel column: the envelope is in use ({px_s} s/px)"
    );
    // Height: the recorded 1 ms peak to two pixels (the band's top is rounded to one).
    assert!(
        (svg_peak - peak_mib_s).abs() <= 2.0 * px_mib_s,
        "timeline.svg peaks at {svg_peak:.0} MiB/s, the recording at {peak_mib_s:.0} MiB/s"
    );
    // Time: the recorded peak's 1 ms interval, to a pixel column.
    assert!(
        svg_t >= peak.1 - 0.001 - px_s && svg_t <= peak.1 + px_s,
        "timeline.svg peaks at {svg_t:.4} s, the recording's peak interval ends at {:.4} s",
        peak.1
    );
    // And within the write's span, give or take a pixel column and two samples.
    let slack = px_s + 0.002;
    assert!(
        svg_t >= w0_s - slack && svg_t <= w1_s + slack,
        "timeline.svg peaks at {svg_t:.4} s, the write ran {w0_s:.4}..{w1_s:.4} s"
    );
}

// ---- Redaction: every secret, every file ----

const PASSWORD: &str = "Pw7xSECRETa1";
const TOKEN: &str = "Tk9xSECRETb2";
/// A creds file's secrets: an operator, account and user made for this test (nkeys 0.4,
/// JWTs signed by hand as `nsc` would) so a nats-server in operator mode accepts the
/// user; its seed and JWT are the secrets.
const OPERATOR_JWT: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJPUEpUSSIsImlhdCI6MTc2NDUwMDAwMCwiaXNzIjoiT0FKS0xCQUFSQkhDWEVORzVOMlFYVkhHNUZYSVRDWFYyVVJVQkJSTFBTTVFLVFJISUlBWTZDUkgiLCJuYW1lIjoiZHAtdGVzdC1vcCIsInN1YiI6Ik9BSktMQkFBUkJIQ1hFTkc1TjJRWFZIRzVGWElUQ1hWMlVSVUJCUkxQU01RS1RSSElJQVk2Q1JIIiwibmF0cyI6eyJ0eXBlIjoib3BlcmF0b3IiLCJ2ZXJzaW9uIjoyfX0.aVJHPCgH7XMOiCPtQhAN8cVVtG3m2x8ndOgtLNv5aXriuX8KkyzhgaRe1MheqO3FeYzbhEVbtAiMc8ds4Z-hDQ";
const ACCOUNT_PUBLIC: &str = "AB5KO6D3FW3QJ7CO5O45574BWQU2DXZY7QBB7NRZB74KZWWATMB7WCRG";
const ACCOUNT_JWT: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJBQ0NKVEkiLCJpYXQiOjE3NjQ1MDAwMDAsImlzcyI6Ik9BSktMQkFBUkJIQ1hFTkc1TjJRWFZIRzVGWElUQ1hWMlVSVUJCUkxQU01RS1RSSElJQVk2Q1JIIiwibmFtZSI6ImRwLXRlc3QtYWNjIiwic3ViIjoiQUI1S082RDNGVzNRSjdDTzVPNDU1NzRCV1FVMkRYWlk3UUJCN05SWkI3NEtaV1dBVE1CN1dDUkciLCJuYXRzIjp7ImxpbWl0cyI6eyJzdWJzIjotMSwiZGF0YSI6LTEsInBheWxvYWQiOi0xLCJpbXBvcnRzIjotMSwiZXhwb3J0cyI6LTEsIndpbGRjYXJkcyI6dHJ1ZSwiY29ubiI6LTEsImxlYWYiOi0xfSwiZGVmYXVsdF9wZXJtaXNzaW9ucyI6eyJwdWIiOnt9LCJzdWIiOnt9fSwidHlwZSI6ImFjY291bnQiLCJ2ZXJzaW9uIjoyfX0.vnrOQQu7r3LVy0IAX6z4EOnBJ9_d_c1wfBxPRAoZsotiLefr-Eed9sv54MBMMvi4HDDNb2FO6_YqfajVnjL8Aw";
const USER_JWT: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJVU1JKVEkiLCJpYXQiOjE3NjQ1MDAwMDAsImlzcyI6IkFCNUtPNkQzRlczUUo3Q081TzQ1NTc0QldRVTJEWFpZN1FCQjdOUlpCNzRLWldXQVRNQjdXQ1JHIiwibmFtZSI6ImRwLXRlc3QtdXNlciIsInN1YiI6IlVCUjIyR0pYTVBaQzdSRFhOR0VJNkhRUkhQM1VYVUYyWTJQTkZXQ09JR0xETFNRQkU3M0FEWEFFIiwibmF0cyI6eyJwdWIiOnt9LCJzdWIiOnt9LCJzdWJzIjotMSwiZGF0YSI6LTEsInBheWxvYWQiOi0xLCJ0eXBlIjoidXNlciIsInZlcnNpb24iOjJ9fQ._gdp3npTU8Adnn7QndsQ868-PdYGvPdkI50LTni6EXxFcOTWjzq9DqdwBx63uhnLs_NRl_W_nvZSgJAgoZZJDg";
const USER_SEED: &str = "SUACAEG4HXP4PEKHQKCZ7PXXYRDI2EESPUCEMGGYQUEQ34UBSBXIHBO4YU";
/// A user nkey made for this test (nkeys 0.4 `KeyPair::new_user()`): its seed is the
/// secret, the public key is what the server's config names.
const NKEY_SEED: &str = "SUAJKXFWOUCUPZXM3QMTVSPW2YC6V5GFKU6YPVQP7OY6XA5OZHAAT4HXUI";
const NKEY_PUBLIC: &str = "UCBJKWN3JWDKZX3H6HZSNK34G5LKV6MEHZDSR6KTOSHR2IHE5C6VUICO";

/// A nats-server started from a config file (`listen` added; killed and reaped on drop).
struct ConfServer {
    child: std::process::Child,
    port: u16,
}

impl ConfServer {
    fn start(dir: &Path, name: &str, config: &str) -> ConfServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(&conf, format!("listen: 127.0.0.1:{port}\n{config}\n")).unwrap();
        let child = std::process::Command::new("nats-server")
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let s = ConfServer { child, port };
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nats-server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }
}

impl Drop for ConfServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` (recursively; `.gz` read through) whose bytes hold `needle`,
/// and every file or directory whose name does; panics on an empty tree.
fn leaks(dir: &Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut hits = vec![];
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_string_lossy().contains(needle) {
                hits.push(p.clone());
            }
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let mut bytes = std::fs::read(&p).unwrap();
            if p.extension().is_some_and(|x| x == "gz") {
                let mut out = vec![];
                flate2::read::MultiGzDecoder::new(&bytes[..])
                    .read_to_end(&mut out)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                bytes = out;
            }
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                hits.push(p);
            }
        }
    }
    assert!(files > 0, "{} holds no files", dir.display());
    hits
}

/// stdout, stderr and every file of `dirs` hold none of `secrets`.
fn assert_no_secret(what: &str, o: &std::process::Output, dirs: &[&Path], secrets: &[&str]) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    for s in secrets {
        assert!(!out.contains(s), "{what}: stdout shows {s}:\n{out}");
        assert!(!err.contains(s), "{what}: stderr shows {s}:\n{err}");
        for d in dirs {
            let hits = leaks(d, s);
            assert!(hits.is_empty(), "{what}: {s} is in {hits:?}");
        }
    }
}

/// A study whose inputs carry every kind of secret, against three nats-servers configured
/// from files (a user/password and an nkey user; a token; operator mode for a creds
/// file), plus a recorded command and a recorded load: no secret in any file of the study or run
/// directories (names included, gzip read through), stdout or stderr; every phase
/// authenticated. The password also comes through a matrix value: the cell's id and
/// `study.json`'s params show it as `***`.
#[test]
fn every_secret_is_absent_from_every_file_stdout_and_stderr() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let users = ConfServer::start(
        d.path(),
        "users",
        &format!(
            "authorization {{ users = [\n {{ user: alice, password: \"{PASSWORD}\" }}\n {{ nkey: {NKEY_PUBLIC} }}\n] }}"
        ),
    );
    let tok = ConfServer::start(
        d.path(),
        "token",
        &format!("authorization {{ token: \"{TOKEN}\" }}"),
    );
    let op = ConfServer::start(
        d.path(),
        "operator",
        &format!(
            "operator: {OPERATOR_JWT}\nresolver: MEMORY\nresolver_preload: {{ {ACCOUNT_PUBLIC}: {ACCOUNT_JWT} }}"
        ),
    );
    let seed = d.path().join("user.nk");
    std::fs::write(&seed, format!("{NKEY_SEED}\n")).unwrap();
    let creds = d.path().join("user.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{USER_JWT}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{USER_SEED}\n------END USER NKEY SEED------\n"
        ),
    )
    .unwrap();
    let secrets = [PASSWORD, TOKEN, NKEY_SEED, USER_SEED, USER_JWT];
    let (pu, pt, po) = (users.port, tok.port, op.port);
    let vol = d.path().join("vol");
    std::fs::create_dir(&vol).unwrap();

    // 1. A study: the password in a matrix value (in a URL and after --password), the
    // token in a load arg, the nkey seed and the creds in files load args name.
    let sc = d.path().join("secrets.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "secrets"
[matrix]
pw = ["{PASSWORD}"]
[[volumes]]
name = "v"
path = "{vol}"
[[phases]]
name = "url"
kind = "load"
args = ["pub", "--msgs", "100", "--server", "nats://alice:${{pw}}@127.0.0.1:{pu}"]
[[phases]]
name = "flags"
kind = "load"
args = ["pub", "--msgs", "100", "--server", "nats://127.0.0.1:{pu}", "--user", "alice", "--password", "${{pw}}"]
[[phases]]
name = "token"
kind = "load"
args = ["pub", "--msgs", "100", "--server", "nats://127.0.0.1:{pt}", "--token", "{TOKEN}"]
[[phases]]
name = "nkey"
kind = "load"
args = ["pub", "--msgs", "100", "--server", "nats://127.0.0.1:{pu}", "--nkey", "{seed}"]
[[phases]]
name = "creds"
kind = "load"
args = ["pub", "--msgs", "100", "--server", "nats://127.0.0.1:{po}", "--creds", "{creds}"]
"#,
            vol = vol.display(),
            seed = seed.display(),
            creds = creds.display()
        ),
    )
    .unwrap();
    let dry = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&sc)
        .output()
        .unwrap();
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert_no_secret("run --dry-run", &dry, &[], &secrets);
    let study = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&study)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_no_secret("run", &o, &[&study], &secrets);
    let sj = read_json(&study.join("study.json"));
    // Decision 0087: a secret value is its place in the list (`***1`, id `pw-secret1`).
    assert_eq!(sj["cells"][0]["id"], "pw-secret1", "{sj:#}");
    assert_eq!(sj["cells"][0]["params"][0][1], "***1", "{sj:#}");
    let runs = sj["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "ok", "{sj:#}");
    let meta = read_json(
        &study
            .join(runs[0]["dir"].as_str().unwrap())
            .join("meta.json"),
    );
    let phases = meta["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 5, "{phases:?}");
    for p in phases {
        let ops: u64 = p["result"]["clients"]
            .as_array()
            .unwrap_or_else(|| panic!("no load result (not authenticated?): {p}"))
            .iter()
            .map(|c| c["ops"].as_u64().unwrap())
            .sum();
        assert_eq!(ops, 100, "{p}");
    }

    // 2. `record -- diskpulse load` with the password in the URL.
    let rec = d.path().join("rec");
    let o = diskpulse()
        .args(["record", "--path"])
        .arg(&vol)
        .arg("--out")
        .arg(&rec)
        .args([
            "--",
            env!("CARGO_BIN_EXE_diskpulse"),
            "load",
            "pub",
            "--msgs",
            "100",
            "--server",
        ])
        .arg(format!("nats://alice:{PASSWORD}@127.0.0.1:{pu}"))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = diskpulse().arg("report").arg(&rec).output().unwrap();
    assert!(r.status.success());
    assert_no_secret("record", &o, &[&rec], &secrets);
    assert_no_secret("report", &r, &[&rec], &secrets);

    // 3. `load --record` with the creds file.
    let cr = d.path().join("creds");
    let o = diskpulse()
        .args(["load", "pub", "--msgs", "100", "--record", "--path"])
        .arg(&vol)
        .arg("--out")
        .arg(&cr)
        .arg("--server")
        .arg(format!("nats://127.0.0.1:{po}"))
        .arg("--creds")
        .arg(&creds)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_no_secret("load --creds --record", &o, &[&cr], &secrets);
}
