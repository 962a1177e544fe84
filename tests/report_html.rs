//! `report.html` of a real recording, loaded in headless Chromium (Debian's `chromium`,
//! which scripts/setup installs): it renders (a screenshot that is not blank), every
//! chart is in the DOM (one `<svg>` per timeline and each panel's title), the browser
//! logs no console message (the only scripts are the zoomable timeline's, which log nothing, so any message is an error), the page
//! makes no network request, and text from the recording (argv, device names, check
//! messages, event details) stays text.
//!
//! How the browser is watched, without a DevTools client: `--enable-logging=stderr --v=0`
//! prints every console message as `INFO:CONSOLE` (uncaught exceptions too), and
//! `--log-net-log=FILE` records every URL request; a request the page made carries the
//! page's `file://` network isolation key, while Chromium's own background requests
//! (component updates, account checks) do not. A known-bad page is checked first, so a
//! change in Chromium's logging that would make these checks pass vacuously fails instead.
//!
//! Without chromium on PATH the Chromium test prints why and returns.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::chromium::{chromium, load};
use common::*;

use std::io::Read;
use std::path::{Path, PathBuf};

/// Width, height and the share of pixels that are not white, from a PNG (8-bit RGB or
/// RGBA, as Chromium writes screenshots).
fn png_coverage(png: &[u8]) -> (u32, u32, f64) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut w, mut h, mut bpp) = (0u32, 0u32, 0usize);
    let mut idat = vec![];
    let mut i = 8;
    while i + 8 <= png.len() {
        let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
        let kind = &png[i + 4..i + 8];
        let data = &png[i + 8..i + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap());
                h = u32::from_be_bytes(data[4..8].try_into().unwrap());
                assert_eq!(data[8], 8, "bit depth");
                bpp = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("PNG colour type {t}"),
                };
                assert_eq!(data[12], 0, "interlaced PNG");
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        i += 12 + len;
    }
    let mut raw = vec![];
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = w as usize * bpp;
    assert_eq!(raw.len(), (stride + 1) * h as usize, "PNG data size");
    let mut prev = vec![0u8; stride];
    let mut cur = vec![0u8; stride];
    let mut not_white = 0u64;
    for y in 0..h as usize {
        let row = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
        let filter = row[0];
        for x in 0..stride {
            let a = if x >= bpp { cur[x - bpp] as i16 } else { 0 };
            let b = prev[x] as i16;
            let c = if x >= bpp { prev[x - bpp] as i16 } else { 0 };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            cur[x] = row[1 + x].wrapping_add(pred as u8);
        }
        for px in cur.chunks(bpp) {
            if px[..3].iter().any(|&v| v < 0xf0) {
                not_white += 1;
            }
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    (w, h, not_white as f64 / (w as f64 * h as f64))
}

/// The tags of an HTML text (`<` in text is escaped, so every `<` opens one).
fn tags(html: &str) -> Vec<&str> {
    html.split('<')
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or(t))
        .collect()
}

/// The text with every `<script ...>...</script>` element cut out, and the opening tags
/// of those elements.
fn without_scripts(html: &str) -> (String, Vec<String>) {
    let mut rest = html;
    let mut out = String::with_capacity(html.len());
    let mut opens = vec![];
    while let Some(i) = rest.find("<script") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let open_end = after.find('>').expect("unclosed <script");
        opens.push(after[..open_end].to_string());
        let end = after.find("</script>").expect("a script without </script>");
        rest = &after[end + "</script>".len()..];
    }
    out.push_str(rest);
    (out, opens)
}

const ARGV_SCRIPT: &str = "<script>alert(\"argv\")</script>";
const DEVICE_TRAP: &str = "<svg onload=alert(3)>";

/// Adds what other commands leave in a run directory: `check.json`, `probe.csv`,
/// `fsync.csv`, an error event; and a device entry in meta.json named like markup.
fn add_extras(run: &Path) {
    let check = serde_json::json!({
        "format_version": 1,
        "counts": {"fail": 1, "warn": 1, "pass": 1, "info": 1},
        "findings": [
            {"level": "FAIL", "code": "flushes-dropped", "target": "/mnt/x", "device": "vda",
             "message": "fsync never flushes <img src=x onerror=alert(1)>", "advice": "turn the cache off"},
            {"level": "WARN", "code": "device-busy", "target": "/mnt/x", "device": "vda",
             "message": "busy", "advice": "wait"},
            {"level": "PASS", "code": "write-cache-on", "target": "/mnt/x", "device": "vda",
             "message": "ok", "advice": "nothing"},
            {"level": "INFO", "code": "dirty-settings", "target": null, "device": null,
             "message": "dirty 10%", "advice": "none"},
        ],
    });
    std::fs::write(run.join("check.json"), check.to_string()).unwrap();
    let mut probe = format!("{}\n", diskpulse::format::probe::HEADER);
    for k in 1..=8u64 {
        let t = k * 100_000_000;
        probe += &format!(
            "{t},100000000,write,100,409600,0,80,70,90,{},300,400,70,{},300,400,0,100000000,,0\n",
            150 + k * 10,
            150 + k * 10
        );
        probe += &format!(
            "{t},100000000,sync,100,0,0,900,800,1000,{},2000,3000,,,,,0,100000000,,0\n",
            1500 + k * 50
        );
    }
    std::fs::write(run.join("probe.csv"), probe).unwrap();
    std::fs::write(
        run.join("fsync.csv"),
        "t_ns,t_end_ns,test,status,ops,secs,ops_per_s,lat_min_us,lat_mean_us,lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,sync_lat_min_us,sync_lat_mean_us,sync_lat_p50_us,sync_lat_p99_us,sync_lat_p999_us,sync_lat_max_us,reason\n\
         100000000,400000000,one_8k.fdatasync,ok,300,0.3,1000,500,900,950,1900,2500,2600,400,800,850,1800,2400,2500,\n\
         400000000,400000000,one_8k.open_direct,n/a,,,,,,,,,,,,,,,,\"O_DIRECT refused, <b>EINVAL</b>\"\n",
    )
    .unwrap();
    let mut ev = std::fs::OpenOptions::new()
        .append(true)
        .open(run.join("events.jsonl"))
        .unwrap();
    use std::io::Write;
    writeln!(
        ev,
        "{}",
        serde_json::json!({"t_ns": 500_000_000u64, "kind": "error",
            "detail": {"source": "test", "kind": "injected", "message": "</td><script>alert(2)</script>"}})
    )
    .unwrap();
    let p = run.join("meta.json");
    let mut meta = read_json(&p);
    meta["devices"].as_array_mut().unwrap().push(serde_json::json!({
        "name": DEVICE_TRAP, "major": 259, "minor": 9, "why": "named & <u>odd</u>", "parent": null,
        "queue": {"write_cache": "write through", "fua": "1", "rotational": "0",
                  "scheduler": "[none] mq-deadline", "model": "Model \"<X>\""},
    }));
    std::fs::write(&p, meta.to_string()).unwrap();
}

/// A 1 s recording of the disk under a fresh directory in /var/tmp, with a command that
/// writes and fsyncs and whose argv holds markup.
fn record() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("diskpulse-html-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let run = d.path().join("run");
    let o = diskpulse()
        .args(["record", "--duration", "1s", "--path"])
        .arg(d.path())
        .arg("--out")
        .arg(&run)
        .args([
            "--",
            "sh",
            "-c",
            "dd if=/dev/zero of=\"$1\" bs=64k count=64 conv=fsync 2>/dev/null; sleep 0.3",
            ARGV_SCRIPT,
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

#[test]
fn report_html_is_self_contained_escaped_and_renders_in_chromium() {
    let (_d, run) = record();
    add_extras(&run);
    let o = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = run.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let summary = read_json(&run.join("summary.json"));

    // Self-contained: no tag refers to anything (no src, href, srcset, external CSS);
    // the only URL in a tag is the SVG namespace. The only scripts are the zoomable
    // timeline's, inline (tests/report_zoom.rs drives them): their bodies are code, not
    // tags, so they are cut out here before the tags are read.
    let (html_tags, scripts) = without_scripts(&html);
    for open in &scripts {
        assert!(
            !open.contains("src"),
            "a script that loads something: <{open}>"
        );
    }
    for tag in tags(&html_tags) {
        let lower = tag.to_ascii_lowercase();
        for bad in ["src=", "href=", "srcset=", "url(", "@import"] {
            assert!(!lower.contains(bad), "tag refers to something: <{tag}>");
        }
        let without_ns = lower.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(
            !without_ns.contains("http://") && !without_ns.contains("https://"),
            "<{tag}>"
        );
        assert!(
            !lower.starts_with("script"),
            "a script tag outside the zoomable timeline"
        );
        assert!(!lower.starts_with("link"), "a link tag");
        assert!(
            !lower.contains(" on"),
            "an event handler attribute: <{tag}>"
        );
    }
    let style = html
        .split("<style>")
        .nth(1)
        .and_then(|s| s.split("</style>").next())
        .unwrap();
    assert!(!style.contains("url(") && !style.contains("@import"));
    // Text from the recording is text.
    assert!(
        html.contains("&lt;script&gt;alert(&quot;argv&quot;)&lt;/script&gt;"),
        "argv not shown escaped"
    );
    assert!(html.contains("&lt;svg onload=alert(3)&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("O_DIRECT refused, &lt;b&gt;EINVAL&lt;/b&gt;"));
    assert!(html.contains("&lt;/td&gt;&lt;script&gt;alert(2)&lt;/script&gt;"));
    // The run's figures are in it.
    for h in summary["headline"].as_array().unwrap() {
        let h = h.as_str().unwrap();
        assert!(html.contains(&diskpulse::report::html::escape(h)), "{h}");
    }

    let Some(bin) = chromium() else { return };

    // First a page that does everything report.html must not: the checks must see it.
    let bad = run.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><p>x</p><img src=\"https://example.invalid/x.png\"><script>nosuchfn()</script>",
    )
    .unwrap();
    let b = load(&bin, &bad, &["--dump-dom".into()]);
    assert!(
        b.console.iter().any(|l| l.contains("nosuchfn")),
        "console errors are not seen: {:?}",
        b.console
    );
    assert!(
        b.page_requests
            .iter()
            .any(|u| u.contains("example.invalid")),
        "the page's requests are not seen"
    );

    let l = load(&bin, &page, &["--dump-dom".into()]);
    assert!(l.console.is_empty(), "console: {:#?}", l.console);
    assert!(
        l.page_requests.is_empty(),
        "requests: {:?}",
        l.page_requests
    );
    let dom = &l.stdout;
    assert_eq!(dom.matches("<svg").count(), 1, "one timeline, one <svg>");
    let (dom_tags, dom_scripts) = without_scripts(dom);
    assert!(dom_scripts.len() <= 3, "scripts: {dom_scripts:?}");
    assert!(!dom_tags.contains("<script"), "a script element in the DOM");
    assert!(!dom.contains("<img"), "an img element in the DOM");
    assert!(!dom.contains("<u>") && !dom.contains("<b>"));
    assert!(dom.contains("&lt;script&gt;alert(\"argv\")&lt;/script&gt;"));
    let busy: Vec<&str> = summary["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["write"]["bytes"].as_f64().unwrap() + d["read"]["bytes"].as_f64().unwrap() > 0.0
        })
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(!busy.is_empty(), "the recording saw no I/O: {summary:#}");
    let mut titles = vec![
        "page cache: Dirty and Writeback MiB".to_string(),
        "CPU % (all cores)".into(),
        "direct-I/O probe latency per window".into(),
        "fsync tests: latency per op".into(),
    ];
    for n in &busy {
        titles.push(format!("{n} throughput MiB/s"));
        titles.push(format!("{n} IOPS"));
        titles.push(format!("{n} in flight"));
    }
    for t in &titles {
        assert!(dom.contains(t.as_str()), "panel '{t}' not in the DOM");
    }
    for section in [
        "Check findings",
        "Devices",
        "Per-window figures",
        "Bursts",
        "fsync tests",
        "Direct-I/O probe",
        "Events",
        "Sampler health",
    ] {
        assert!(dom.contains(&format!("<h3>{section}</h3>")), "{section}");
    }
    for class in ["lvl-fail", "lvl-warn", "lvl-pass", "lvl-info"] {
        assert!(dom.contains(&format!("<tr class=\"{class}\">")), "{class}");
    }

    let shot = run.join("report.png");
    load(
        &bin,
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,2000".into(),
        ],
    );
    let (w, h, coverage) = png_coverage(&std::fs::read(&shot).unwrap());
    assert_eq!((w, h), (1400, 2000));
    // Text, tables and chart lines: a blank or unstyled page covers far less.
    assert!(coverage > 0.02, "screenshot nearly blank: {coverage:.4}");
    eprintln!(
        "screenshot: {} ({:.1} % not white)",
        shot.display(),
        100.0 * coverage
    );

    // --no-html writes none.
    std::fs::remove_file(&page).unwrap();
    let o = diskpulse()
        .args(["report", "--no-html", "--no-charts"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(!page.exists());
}

/// What the study report does: several runs' sections on one page, each with its own
/// timeline; no ids but the sections' own, and those differ.
#[test]
fn several_run_sections_make_one_page() {
    use diskpulse::report::{self, html, ReportOptions, Run};
    let d = tempfile::tempdir().unwrap();
    let o = ReportOptions {
        charts: false,
        html: false,
        ..Default::default()
    };
    let mut sections = vec![];
    for name in ["cell-a r1", "cell-b r1"] {
        let dir = d.path().join(name);
        synth(&dir);
        let s = report::report(&dir, &o).unwrap();
        let run = Run::read(&dir).unwrap();
        let tl = html::timeline(&run, &o);
        sections.push(html::run_section(&run, &s, &tl));
    }
    let p = html::page("study <x>", &sections);
    assert_eq!(p.matches("<svg").count(), 2);
    assert_eq!(p.matches("<section class=\"run\"").count(), 2);
    assert!(p.contains("id=\"run-cell-a-r1\"") && p.contains("id=\"run-cell-b-r1\""));
    assert_eq!(p.matches(" id=").count(), 2, "ids other than the sections'");
    assert!(p.contains("<title>study &lt;x&gt;</title>"));
    assert!(p.contains("syn0 throughput MiB/s"));
}

/// A 2 s recording of `syn0` with one 50 ms write burst at 800 MiB/s.
fn synth(dir: &Path) {
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap();
    let meta = serde_json::json!({
        "format_version": diskpulse::format::FORMAT_VERSION, "tool": "diskpulse", "duration_ns": 2_000_000_000u64,
        "devices": [{"name": "syn0", "major": 250, "minor": 0, "why": "named"}],
        "samplers": {"diskstats": {"interval_us": 1000, "samples": 2000, "expected": 2000}},
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let f = std::fs::File::create(dir.join("diskstats.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{}", diskpulse::recording::samplers::diskstats_header()).unwrap();
    let mut sectors = 0u64;
    for ms in 0..=2000u64 {
        if (500..550).contains(&ms) {
            sectors += 800 * 1024 * 1024 / 1000 / 512;
        }
        writeln!(
            gz,
            "{},syn0,250,0,0,0,0,0,{},0,{sectors},0,0,0,0,0,0,0,0,0,0",
            ms * 1_000_000,
            sectors / 8
        )
        .unwrap();
    }
    gz.finish().unwrap();
}
