//! report.html's zoomable timeline (uPlot, inlined by `report`) in headless Chromium: a
//! real recording of the disk under /var/tmp with a direct-I/O write burst the test
//! causes; the page is zoomed programmatically (`window.diskpulse.zoom`) into the 50 ms
//! around the busiest millisecond; every chart follows; the per-ms write MiB/s read back
//! from uPlot's own data inside the zoomed scale equal the ones this test recomputes from
//! the raw rows of diskstats.csv.gz. Without uPlot the page and stderr say so in one line
//! and the static timeline stays.
//!
//! Needs chromium and uPlot (scripts/setup installs both); missing, the test skips, and
//! fails under the strict variable.

mod common;
use common::chromium::{chromium, load};
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A 2 s recording of the disk under /var/tmp while `dd` writes 32 MiB with O_DIRECT
/// from 0.6 s on (so the writes reach the device while dd runs, not at a later flush).
fn record() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("diskpulse-zoom-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let run = d.path().join("run");
    let o = diskpulse()
        .args(["record", "--duration", "2s", "--path"])
        .arg(d.path())
        .arg("--out")
        .arg(&run)
        .args([
            "--",
            "sh",
            "-c",
            "sleep 0.6; dd if=/dev/zero of=\"$1\" bs=1M count=32 oflag=direct conv=fsync 2>/dev/null; sleep 0.6",
            "burst",
        ])
        .arg(d.path().join("f"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "record: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (d, run)
}

/// Per device, (t_ns, sectors_written) of every row of diskstats.csv.gz, read here
/// independently of diskpulse's reader (gzip members, header by name).
fn raw_rows(run: &Path) -> BTreeMap<String, Vec<(u64, u64)>> {
    let f = std::fs::File::open(run.join("diskstats.csv.gz")).unwrap();
    let r = BufReader::new(flate2::read::MultiGzDecoder::new(f));
    let mut lines = r.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .unwrap()
        .split(',')
        .map(String::from)
        .collect();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (ct, cd, cw) = (col("t_ns"), col("device"), col("sectors_written"));
    let mut out: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for l in lines {
        let l = l.unwrap();
        let c: Vec<&str> = l.split(',').collect();
        if c.len() != header.len() {
            continue;
        }
        let (Ok(t), Ok(w)) = (c[ct].parse::<u64>(), c[cw].parse::<u64>()) else {
            continue;
        };
        out.entry(c[cd].to_string()).or_default().push((t, w));
    }
    out
}

/// Write MiB/s in each 1 ms window `[k ms, k+1 ms)`: every interval between two
/// consecutive rows spread over the windows it overlaps, in proportion to the overlap.
fn per_ms_write(rows: &[(u64, u64)], duration_ns: u64) -> Vec<f64> {
    let n = duration_ns.div_ceil(1_000_000) as usize;
    let mut bytes = vec![0.0; n];
    for p in rows.windows(2) {
        let ((t0, a), (t1, b)) = (p[0], p[1]);
        if b < a || t1 <= t0 {
            continue;
        }
        let v = (b - a) as f64 * 512.0;
        for (k, slot) in bytes.iter_mut().enumerate() {
            let (w0, w1) = (k as u64 * 1_000_000, (k as u64 + 1) * 1_000_000);
            if w1 <= t0 {
                continue;
            }
            if w0 >= t1 {
                break;
            }
            let o = t1.min(w1) - t0.max(w0);
            *slot += v * o as f64 / (t1 - t0) as f64;
        }
    }
    bytes
        .iter()
        .enumerate()
        .map(|(k, b)| {
            let w0 = k as u64 * 1_000_000;
            let len = (w0 + 1_000_000).min(duration_ns) - w0;
            b / (len as f64 / 1e9) / (1024.0 * 1024.0)
        })
        .collect()
}

/// Runs `js` (which must end by filling `#dp-test-out`) after the page loaded and
/// returns what it wrote, as JSON.
fn drive(bin: &Path, page: &Path, js: &str) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = page.with_file_name("zoom-probe.html");
    let script = format!(
        "<script>setTimeout(function () {{ var o = {{}}; function done() {{ \
         var p = document.createElement('pre'); p.id = 'dp-test-out'; \
         p.textContent = JSON.stringify(o); document.body.appendChild(p); }} \
         try {{ {js} }} catch (e) {{ o.error = String(e); done(); }} }}, 200);</script></body>"
    );
    std::fs::write(&probe, html.replacen("</body>", &script, 1)).unwrap();
    let l = load(
        bin,
        &probe,
        &["--dump-dom".into(), "--virtual-time-budget=10000".into()],
    );
    assert!(l.console.is_empty(), "console: {:#?}", l.console);
    assert!(
        l.page_requests.is_empty(),
        "requests: {:?}",
        l.page_requests
    );
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

#[test]
fn zoom_into_a_burst_reads_back_the_raw_per_ms_values() {
    let uplot = diskpulse::report::html::zoom::find_uplot();
    if let Err(why) = &uplot {
        skip(why);
        return;
    }
    let Some(bin) = chromium() else { return };
    let (_d, run) = record();
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("no interactive timeline"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = run.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"dp-zoom-data\"") && !html.contains("dp-zoom-missing"));
    assert!(html.contains("<svg"), "the static timeline stays");
    for tag in html.split("<script").skip(1) {
        let open = tag.split('>').next().unwrap();
        assert!(
            !open.contains("src="),
            "a script that loads something: {open}"
        );
    }

    // The busiest millisecond of the busiest device, from the raw rows.
    let meta = read_json(&run.join("meta.json"));
    let duration_ns = meta["duration_ns"].as_u64().unwrap();
    let raw = raw_rows(&run);
    let (dev, ms) = raw
        .iter()
        .map(|(d, rows)| (d.clone(), per_ms_write(rows, duration_ns)))
        .max_by(|a, b| {
            let s = |v: &Vec<f64>| v.iter().sum::<f64>();
            s(&a.1).total_cmp(&s(&b.1))
        })
        .unwrap();
    let peak = (0..ms.len())
        .max_by(|&a, &b| ms[a].total_cmp(&ms[b]))
        .unwrap();
    assert!(
        ms[peak] > 1.0,
        "no write burst recorded: {} MiB/s",
        ms[peak]
    );
    let t0 = peak.saturating_sub(25).min(ms.len().saturating_sub(51));
    let t1 = t0 + 50;
    let title = format!("{dev} throughput MiB/s");

    let js = format!(
        "o.res = diskpulse.resolution_ms; o.titles = diskpulse.titles(); \
         diskpulse.zoom({t0}, {t1}); \
         setTimeout(function () {{ try {{ \
           o.scales = o.titles.map(function (_, i) {{ return diskpulse.scale(i); }}); \
           o.vis = diskpulse.visible({title:?}); \
           o.at = diskpulse.valuesAt({title:?}, {peak}.5); \
           diskpulse.reset(); \
           setTimeout(function () {{ o.reset = diskpulse.scale(o.titles.length - 1); done(); }}, 100); \
         }} catch (e) {{ o.error = String(e); done(); }} }}, 100);"
    );
    let v = drive(&bin, &page, &js);
    assert_eq!(v["res"].as_f64(), Some(1.0), "{v}");
    let titles: Vec<&str> = v["titles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(titles.contains(&title.as_str()), "{titles:?}");
    // Every chart follows the zoom.
    for (i, s) in v["scales"].as_array().unwrap().iter().enumerate() {
        let (a, b) = (s[0].as_f64().unwrap(), s[1].as_f64().unwrap());
        assert!(
            (a - t0 as f64).abs() < 1e-6 && (b - t1 as f64).abs() < 1e-6,
            "chart {} ({}) shows {a}..{b} ms, not {t0}..{t1}",
            i,
            titles[i]
        );
    }
    // One value per ms of the span, each the raw rows' value.
    let pts = v["vis"]["write MiB/s"].as_array().unwrap();
    assert_eq!(pts.len(), 51, "{pts:?}");
    let mut max_seen: f64 = 0.0;
    for (j, p) in pts.iter().enumerate() {
        let t = p[0].as_f64().unwrap();
        let k = t0 + j;
        assert!((t - k as f64).abs() < 1e-6, "point {j} at {t} ms, not {k}");
        let got = p[1].as_f64().unwrap_or(f64::NAN);
        let want = ms[k];
        assert!(
            (got - want).abs() <= 1e-5 + 1e-6 * want.abs(),
            "{dev} at {k} ms: page {got} MiB/s, raw rows {want} MiB/s"
        );
        max_seen = max_seen.max(got);
    }
    assert!(
        (max_seen - ms[peak]).abs() < 1e-5,
        "the span's peak {max_seen}"
    );
    let at = v["at"]["write MiB/s"].as_f64().unwrap();
    assert!(
        (at - ms[peak]).abs() < 1e-5,
        "valuesAt {at} vs {}",
        ms[peak]
    );
    let r = &v["reset"];
    assert!(
        r[0].as_f64().unwrap().abs() < 1e-6
            && (r[1].as_f64().unwrap() - duration_ns as f64 / 1e6).abs() < 1e-3,
        "reset shows {r}"
    );
    eprintln!(
        "{dev}: zoomed {t0}..{t1} ms, peak {:.1} MiB/s at {peak} ms, 51 per-ms values equal to the raw rows'",
        ms[peak]
    );

    // Without uPlot: one line on stderr, one in the page, the static chart, no script.
    let empty = tempfile::tempdir().unwrap();
    let o = diskpulse()
        .arg("report")
        .arg(&run)
        .env("DISKPULSE_UPLOT_DIR", empty.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no interactive timeline"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("DISKPULSE_UPLOT_DIR") && lines[0].contains("scripts/setup"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"dp-zoom-missing\"") && html.contains("<svg"));
    assert!(!html.contains("<script"));
}
