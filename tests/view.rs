//! `diskpulse view RUN` on a synthetic long recording (3 devices changing every ms for 8
//! minutes, more 1 ms values than report.html's 2 M budget, envelopes written by the
//! recorder's own `EnvelopeFeed`), in headless Chromium against the served page:
//! - a 50 ms span deep inside the run, away from every burst (so the page embeds no 1 ms
//!   data there), zoomed programmatically: the page fetches it from the server and the
//!   per-ms MiB/s read back from uPlot's data equal the ones recomputed here from the raw
//!   rows;
//! - a wide span shows envelope windows whose min and max equal the raw rows' (and the
//!   same page from file:// shows the embedded envelopes there, never fetching);
//! - a run without envelopes.csv.gz (an older recording): report.html embeds raw windows
//!   and says so; the served page and /span get 1 ms and wider windows from the raw rows;
//! - a path outside the run directory is refused (403), and a non-loopback --listen
//!   without --allow-remote exits 2.
//!
//! Needs chromium and uPlot (scripts/setup installs both); missing, the test skips, and
//! fails under the strict variable.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::chromium::{chromium, load, load_url};
use common::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};

use collectors::diskstats::DiskCounters;
use diskpulse::recording::envelopes::EnvelopeFeed;

const DEVICES: usize = 3;
const SECS: u64 = 480;
const BURST_PERIOD_MS: u64 = 5000;
const MIB: f64 = 1024.0 * 1024.0;

/// Sectors written and read by device `d` in ms `ms` (deterministic, changes every ms):
/// a 60 ms burst every 5 s (the devices' bursts 1.7 s apart), reads on two devices.
fn step(d: usize, ms: u64) -> (u64, u64) {
    let h = (ms.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (d as u64 * 0x5851_F42D)) >> 40;
    let burst = (ms + 1700 * d as u64) % BURST_PERIOD_MS < 60;
    let w = if burst { 1600 + h % 64 } else { 16 + h % 48 };
    let r = if d == 2 { 0 } else { 8 * (h % 3) };
    (w, r)
}

/// Writes the recording: meta.json, diskstats.csv.gz (a row per device per ms) and
/// envelopes.csv.gz (through the recorder's EnvelopeFeed: the same rows).
fn synth(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let devs: Vec<serde_json::Value> = (0..DEVICES)
        .map(|d| serde_json::json!({"name": format!("syn{d}"), "major": 250, "minor": d, "why": "named"}))
        .collect();
    let meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse",
        "duration_ns": SECS * 1_000_000_000, "devices": devs, "complete": true,
        "samplers": {"diskstats": {"interval_us": 1000}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(dir.join("diskstats.csv.gz")).unwrap();
    let mut gz = std::io::BufWriter::new(flate2::write::GzEncoder::new(
        f,
        flate2::Compression::fast(),
    ));
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let mut env = EnvelopeFeed::create(&dir.join(diskpulse::format::envelopes::FILE)).unwrap();
    for d in 0..DEVICES {
        env.device(d as u32, format!("syn{d}").as_bytes());
    }
    let mut c = [DiskCounters {
        f: [0; 17],
        nfields: 17,
    }; DEVICES];
    let mut line = String::with_capacity(256);
    for ms in 0..=SECS * 1000 {
        let t = ms * 1_000_000;
        for (d, k) in c.iter_mut().enumerate() {
            if ms > 0 {
                let (w, r) = step(d, ms);
                k.f[6] += w;
                k.f[4] += w / 8;
                k.f[2] += r;
                k.f[0] += r / 8;
                k.f[9] += 1;
                k.f[8] = w / 200;
            }
            line.clear();
            use std::fmt::Write as _;
            let _ = write!(line, "{t},syn{d},250,{d}");
            for v in k.f {
                let _ = write!(line, ",{v}");
            }
            writeln!(gz, "{line}").unwrap();
            env.push(d as u32, t, k);
        }
        env.done(t);
    }
    env.finish().unwrap();
    gz.into_inner().unwrap().finish().unwrap();
}

/// Write MiB/s of device `d` in ms window `[k, k+1)` (rows every ms: one interval each).
fn write_ms(d: usize, k: u64) -> f64 {
    step(d, k + 1).0 as f64 * 512.0 / MIB / 1e-3
}

/// (min, max) write MiB/s of device `d` over the rows whose interval ends in the window
/// `[t0, t0 + len)` ms: the envelope definition, from the raw intervals.
fn write_env(d: usize, t0_ms: u64, len_ms: u64) -> (f64, f64) {
    let mut mn = f64::INFINITY;
    let mut mx = f64::NEG_INFINITY;
    for end in t0_ms.max(1)..(t0_ms + len_ms).min(SECS * 1000 + 1) {
        let v = write_ms(d, end - 1);
        mn = mn.min(v);
        mx = mx.max(v);
    }
    (mn, mx)
}

/// `diskpulse view` as a child and its address (from the line it prints).
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        // Ctrl-C, as a user would; it must end by itself.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        for _ in 0..100 {
            if let Ok(Some(st)) = self.child.try_wait() {
                assert!(
                    st.success() || std::thread::panicking(),
                    "diskpulse view ended {st} on SIGINT, not 0"
                );
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("diskpulse view did not stop on SIGINT");
    }
}

fn serve(run: &Path) -> Served {
    let mut child = diskpulse()
        .arg("view")
        .arg(run)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    Served { child, addr }
}

/// (status code, body) of a GET.
fn get(addr: &str, target: &str) -> (u32, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (code, body)
}

/// Loads `url` with `js` run after the page's own script (it must end by calling
/// `done()`); returns what it put in `o`.
fn drive(bin: &Path, run: &Path, url_of: impl Fn(&Path) -> String, js: &str) -> serde_json::Value {
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let probe = run.join("view-probe.html");
    let script = format!(
        "<script>setTimeout(function () {{ var o = {{}}; function done() {{ \
         var p = document.createElement('pre'); p.id = 'dp-test-out'; \
         p.textContent = JSON.stringify(o); document.body.appendChild(p); }} \
         function fail(e) {{ o.error = String(e && e.stack || e); done(); }} \
         try {{ {js} }} catch (e) {{ fail(e); }} }}, 100);</script></body>"
    );
    std::fs::write(&probe, html.replacen("</body>", &script, 1)).unwrap();
    let url = url_of(&probe);
    let flags = [
        "--dump-dom".to_string(),
        "--virtual-time-budget=30000".to_string(),
        "--window-size=1200,900".to_string(),
    ];
    let l = if url.starts_with("file:") {
        let l = load(bin, &probe, &flags);
        assert!(
            l.page_requests.is_empty(),
            "requests: {:?}",
            l.page_requests
        );
        l
    } else {
        load_url(bin, &url, &flags)
    };
    assert!(l.console.is_empty(), "console: {:#?}", l.console);
    let out = l
        .stdout
        .split("<pre id=\"dp-test-out\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("the page script wrote nothing"));
    let out = out
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("error").is_none(), "page script: {v}");
    v
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-4 + 1e-6 * want.abs()
}

/// The page script: zoom to each span, wait for its data, keep level and visible points.
fn zoom_js(spans: &[(u64, u64)], title: &str) -> String {
    let list: Vec<String> = spans.iter().map(|(a, b)| format!("[{a},{b}]")).collect();
    format!(
        "var spans = [{}]; o.res = diskpulse.resolution_ms; o.served = diskpulse.served; o.out = []; \
         function next(i) {{ if (i === spans.length) {{ done(); return; }} \
           diskpulse.zoom(spans[i][0], spans[i][1]); \
           setTimeout(function () {{ diskpulse.settled().then(function () {{ \
             o.out.push({{ level: diskpulse.level(), vis: diskpulse.visible({title:?}) }}); next(i + 1); \
           }}).catch(fail); }}, 50); }} \
         next(0);",
        list.join(",")
    )
}

#[test]
fn view_serves_1ms_deep_inside_a_long_run_and_envelopes_for_wide_spans() {
    let uplot = diskpulse::report::html::zoom::find_uplot();
    if let Err(why) = &uplot {
        skip(why);
        return;
    }
    let Some(bin) = chromium() else { return };
    let d = tempfile::Builder::new()
        .prefix("diskpulse-view-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let run = d.path().join("run");
    let t = std::time::Instant::now();
    synth(&run);
    eprintln!(
        "synthetic {SECS} s x {DEVICES} devices written in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Refused before anything is served: not loopback, not a run with a report.
    let o = diskpulse()
        .arg("view")
        .arg(&run)
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("0.0.0.0:0") && err.contains("--allow-remote"),
        "{err}"
    );
    let o = diskpulse().arg("view").arg(&run).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("diskpulse report"));

    let t = std::time::Instant::now();
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("report in {:.1} s", t.elapsed().as_secs_f64());
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    // Bounded: 1 ms of all of it would be 2.9 M values.
    assert!(html.len() < 40 << 20, "report.html is {} bytes", html.len());
    assert!(
        html.contains("windows from envelopes.csv.gz"),
        "the page says what it embeds"
    );

    let notice = html
        .split("id=\"dp-zoom-res\">")
        .nth(1)
        .and_then(|x| x.split("</p>").next())
        .unwrap();
    eprintln!("report.html: {} bytes; {notice}", html.len());
    // The 1 ms layers the page embeds (around bursts): the deep span must lie outside
    // them, so only the server can give its 1 ms values.
    let data: serde_json::Value = serde_json::from_str(
        html.split("id=\"dp-zoom-data\">")
            .nth(1)
            .and_then(|x| x.split("</script>").next())
            .unwrap(),
    )
    .unwrap();
    let layers = data["layers"].as_array().unwrap();
    // Within the page's budget: every value (number or null) in the layers and panels;
    // the envelope windows' start times (`t`) are the x axis, not counted.
    fn values(v: &serde_json::Value, with_t: bool) -> usize {
        match v {
            serde_json::Value::Array(a) => a
                .iter()
                .map(|x| {
                    if x.is_number() || x.is_null() {
                        1
                    } else {
                        values(x, with_t)
                    }
                })
                .sum(),
            serde_json::Value::Object(o) => o
                .iter()
                .filter(|(k, _)| with_t || k.as_str() != "t")
                .map(|(_, x)| values(x, with_t))
                .sum(),
            _ => 0,
        }
    }
    let held = values(&data["layers"], false) + values(&data["panels"], true);
    assert!(held <= 2_000_000, "the page holds {held} values");
    eprintln!("the page holds {held} values in {} layers", layers.len());
    assert_eq!(layers[0]["source"], "envelopes");
    let fine: Vec<(f64, f64)> = layers[1..]
        .iter()
        .map(|l| {
            assert_eq!(l["level_ms"], 1);
            (
                l["t0_s"].as_f64().unwrap() * 1e3,
                l["t1_s"].as_f64().unwrap() * 1e3,
            )
        })
        .collect();
    assert!(!fine.is_empty(), "no 1 ms data around any burst");
    // 50 ms deep inside (after 6 minutes), clear of the embedded 1 ms layers by 100 ms.
    let deep = (360_000u64..)
        .step_by(50)
        .map(|a| (a, a + 50))
        .find(|&(a, b)| {
            fine.iter()
                .all(|&(f0, f1)| b as f64 + 100.0 < f0 || a as f64 > f1 + 100.0)
        })
        .unwrap();
    assert!(
        deep.1 < SECS * 1000 - 1000,
        "no span clear of the bursts: {fine:?}"
    );
    // 60 s wide, and 3 s wide (fetched: embedded 10 ms is too coarse for the width).
    let wide = (300_000u64, 360_000u64);
    let mid = (400_500u64, 403_500u64);
    for (a, b) in [wide, mid] {
        assert!(
            fine.iter()
                .all(|&(f0, f1)| (b as f64) < f0 || a as f64 > f1),
            "{a}..{b} ms overlaps the embedded 1 ms layers {fine:?}"
        );
    }
    let title = "syn0 throughput MiB/s";
    let js = zoom_js(&[deep, wide, mid], title);

    let served = serve(&run);
    let v = drive(
        &bin,
        &run,
        |p| {
            format!(
                "http://{}/{}",
                served.addr,
                p.file_name().unwrap().to_string_lossy()
            )
        },
        &js,
    );
    assert_eq!(v["served"], true, "{v}");
    assert_eq!(
        v["res"], 10.0,
        "the whole run embedded at 10 ms: {}",
        v["res"]
    );
    let out = v["out"].as_array().unwrap();

    // Deep: raw 1 ms from the server, 51 points equal to the raw rows'.
    let (lv, vis) = (&out[0]["level"], &out[0]["vis"]);
    assert_eq!(
        (lv["source"].as_str(), lv["level_ms"].as_f64()),
        (Some("raw"), Some(1.0)),
        "{lv}"
    );
    let pts = vis["write MiB/s"].as_array().unwrap();
    assert_eq!(pts.len(), 51, "{pts:?}");
    for (j, p) in pts.iter().enumerate() {
        let k = deep.0 + j as u64;
        assert!(
            (p[0].as_f64().unwrap() - k as f64).abs() < 1e-6,
            "point {j} at {}",
            p[0]
        );
        let (got, want) = (p[1].as_f64().unwrap_or(f64::NAN), write_ms(0, k));
        assert!(close(got, want), "syn0 at {k} ms: page {got}, raw {want}");
    }

    // Wide and middle: envelope windows, min and max equal the raw intervals'.
    for (i, span) in [(1usize, wide), (2, mid)] {
        let (lv, vis) = (&out[i]["level"], &out[i]["vis"]);
        assert_eq!(lv["source"], "envelopes", "span {span:?}: {lv}");
        let len = lv["level_ms"].as_f64().unwrap() as u64;
        let (mx, mn) = (
            vis["write max"].as_array().unwrap(),
            vis["write min"].as_array().unwrap(),
        );
        assert!(
            mx.len() as u64 >= (span.1 - span.0) / len,
            "span {span:?}: {} points",
            mx.len()
        );
        for (a, b) in mx.iter().zip(mn) {
            let t = a[0].as_f64().unwrap().round() as u64;
            let (want_min, want_max) = write_env(0, t, len);
            let (gmax, gmin) = (a[1].as_f64().unwrap(), b[1].as_f64().unwrap());
            assert!(close(gmax, want_max) && close(gmin, want_min),
                "span {span:?} window {t} ms ({len} ms): page {gmin}..{gmax}, raw {want_min}..{want_max}");
        }
        eprintln!(
            "span {span:?}: {} envelope windows of {len} ms, min/max equal the raw rows'",
            mx.len()
        );
    }

    // The same page from file://: no request, the embedded envelopes at the deep span.
    let v = drive(
        &bin,
        &run,
        |p| p.display().to_string(),
        &zoom_js(&[deep], title),
    );
    assert_eq!(v["served"], false);
    let lv = &v["out"][0]["level"];
    assert_eq!(
        (lv["source"].as_str(), lv["level_ms"].as_f64()),
        (Some("envelopes"), Some(10.0)),
        "{lv}"
    );

    // Paths that leave the run directory: refused, never read.
    std::os::unix::fs::symlink("/etc/hostname", run.join("escape")).unwrap();
    for target in [
        "/../meta.json",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/escape",
        "/./report.html",
    ] {
        let (code, body) = get(&served.addr, target);
        assert_eq!(code, 403, "{target}: {code} {body}");
        assert!(
            body.contains("outside the run directory"),
            "{target}: {body}"
        );
    }
    let (code, body) = get(&served.addr, "//etc/passwd");
    assert!(code == 404 && !body.contains("root:"), "{code} {body}");
    assert_eq!(get(&served.addr, "/meta.json").0, 200);
    assert_eq!(get(&served.addr, "/nope.csv").0, 404);
    let (code, body) = get(&served.addr, "/span?t0_ms=5&t1_ms=1");
    assert_eq!(code, 400, "{body}");

    for (what, (a, b)) in [("deep 50 ms", deep), ("wide 60 s", wide)] {
        let t = std::time::Instant::now();
        let (code, body) = get(&served.addr, &format!("/span?t0_ms={a}&t1_ms={b}&px=1000"));
        assert_eq!(code, 200);
        eprintln!(
            "GET /span {what} ({a}..{b} ms): {} bytes in {:.2} s (debug build)",
            body.len(),
            t.elapsed().as_secs_f64()
        );
    }
    drop(served);

    // Without envelopes.csv.gz (an older run): report embeds raw windows, and the page
    // and /span get every span from the raw rows.
    std::fs::remove_file(run.join(diskpulse::format::envelopes::FILE)).unwrap();
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("this run has no envelopes.csv.gz"),
        "the page says so"
    );
    assert!(html.len() < 40 << 20, "report.html is {} bytes", html.len());
    let served = serve(&run);
    let v = drive(
        &bin,
        &run,
        |p| {
            format!(
                "http://{}/{}",
                served.addr,
                p.file_name().unwrap().to_string_lossy()
            )
        },
        &zoom_js(&[deep, mid], title),
    );
    let out = v["out"].as_array().unwrap();
    let lv = &out[0]["level"];
    assert_eq!(
        (lv["source"].as_str(), lv["level_ms"].as_f64()),
        (Some("raw"), Some(1.0)),
        "{lv}"
    );
    let pts = out[0]["vis"]["write MiB/s"].as_array().unwrap();
    assert_eq!(pts.len(), 51);
    for (j, p) in pts.iter().enumerate() {
        let (got, want) = (
            p[1].as_f64().unwrap_or(f64::NAN),
            write_ms(0, deep.0 + j as u64),
        );
        assert!(
            close(got, want),
            "no envelopes, {} ms: {got} vs {want}",
            deep.0 + j as u64
        );
    }
    let lv = &out[1]["level"];
    assert_eq!(lv["source"], "raw", "{lv}");
    let len = lv["level_ms"].as_f64().unwrap() as u64;
    assert!(len > 1, "{lv}");
    let pts = out[1]["vis"]["write MiB/s"].as_array().unwrap();
    assert!(pts.len() as u64 >= (mid.1 - mid.0) / len);
    for p in pts {
        let k0 = p[0].as_f64().unwrap().round() as u64;
        let want = (k0..k0 + len).map(|k| write_ms(0, k)).sum::<f64>() / len as f64;
        let got = p[1].as_f64().unwrap();
        assert!(
            close(got, want),
            "no envelopes, {len} ms window {k0}: {got} vs {want}"
        );
    }
    let (code, body) = get(
        &served.addr,
        &format!("/span?t0_ms={}&t1_ms={}&px=1000", wide.0, wide.1),
    );
    assert_eq!(code, 200, "{body}");
    let s: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (s["source"].as_str(), s["level_ms"].as_f64()),
        (Some("raw"), Some(100.0)),
        "{}",
        &body[..200.min(body.len())]
    );
    let dev = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "syn0")
        .unwrap();
    let w = dev["write"].as_array().unwrap();
    assert_eq!(w.len(), 600);
    for (j, x) in w.iter().enumerate() {
        let k0 = wide.0 + 100 * j as u64;
        let want: f64 = (k0..k0 + 100).map(|k| write_ms(0, k)).sum::<f64>() / 100.0;
        let got = x.as_f64().unwrap();
        assert!(close(got, want), "window {k0} ms: {got} vs {want}");
    }
    let (code, body) = get(
        &served.addr,
        &format!("/span?t0_ms={}&t1_ms={}&px=1000", deep.0, deep.1),
    );
    assert_eq!(code, 200);
    let s: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(s["level_ms"], 1);
    let w: Vec<f64> = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "syn0")
        .unwrap()["write"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(w.len(), 50);
    for (j, got) in w.iter().enumerate() {
        assert!(close(*got, write_ms(0, deep.0 + j as u64)));
    }
    drop(served);
}
