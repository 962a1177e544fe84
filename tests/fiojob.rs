//! fio as fio users write it: the shipped job file against the same job as flags (resolved
//! and run), fio's `--rate_iops` meaning against real fio on the same file, and a job
//! file's refusals.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::path::Path;
use std::process::Output;

const JOB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scenarios/jobs/8k-70-30-qd8.fio"
);

/// The same job as the shipped file, in flags (fio's spelling).
const FLAGS: &[&str] = &[
    "--name=array-check",
    "--ioengine=io_uring",
    "--direct=1",
    "--time_based",
    "--runtime=30",
    "--size=256m",
    "--rw=randrw",
    "--rwmixread=70",
    "--bs=8k",
    "--iodepth=8",
    "--rate_iops=10500,4500",
];

fn probe(args: &[&str]) -> Output {
    diskpulse().arg("probe").args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

fn json(o: Output) -> serde_json::Value {
    let out = ok(o);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn the_job_file_resolves_to_the_same_job_as_the_flags() {
    let f = ["--filename", "/var/tmp/fiojob-never-written.dat"];
    let from_file = ok(probe(&[&[JOB, "--show-job"][..], &f].concat()));
    let from_flags = ok(probe(&[FLAGS, &["--show-job"], &f].concat()));
    assert_eq!(from_file, from_flags);
    for line in [
        "[array-check]",
        "rw=randrw",
        "rwmixread=70",
        "bs=8k",
        "iodepth=8",
        "ioengine=io_uring",
        "direct=1",
        "rate_iops=10500,4500",
        "runtime=30s",
        "time_based",
        "size=256m",
    ] {
        assert!(
            from_file.lines().any(|l| l == line),
            "{line} in:\n{from_file}"
        );
    }
    // The preset is the same job; and the printed job read back is the job again.
    let preset = ok(probe(
        &[
            &[
                "--preset",
                "array-check",
                "--name",
                "array-check",
                "--size",
                "256m",
            ][..],
            &["--show-job"],
            &f,
        ]
        .concat(),
    ));
    assert_eq!(preset, from_file);
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let again = dir.path().join("again.fio");
    std::fs::write(&again, &from_file).unwrap();
    let back = ok(probe(&[again.to_str().unwrap(), "--show-job"]));
    assert_eq!(back, from_file);
    assert!(!Path::new(f[1]).exists(), "--show-job touches nothing");
    // A flag beside the file overrides it.
    let over = ok(probe(
        &[&[JOB, "--show-job", "--iodepth=4"][..], &f].concat(),
    ));
    assert!(over.lines().any(|l| l == "iodepth=4"), "{over}");
}

#[test]
fn the_job_file_runs_the_same_job_as_the_flags() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let a = dir.path().join("a.dat");
    let b = dir.path().join("b.dat");
    let short = ["--runtime=1", "--size=16m", "--output-format=json"];
    let fa = ["--filename", a.to_str().unwrap()];
    let fb = ["--filename", b.to_str().unwrap()];
    let ja = json(probe(&[&[JOB][..], &short, &fa].concat()));
    let flags: Vec<&str> = FLAGS
        .iter()
        .copied()
        .filter(|f| !f.starts_with("--runtime") && !f.starts_with("--size"))
        .collect();
    let jb = json(probe(&[&flags[..], &short, &fb].concat()));
    let opts = |j: &serde_json::Value| {
        let mut o = j["jobs"][0]["job options"].as_object().unwrap().clone();
        o.remove("filename");
        o
    };
    // The job file's `job options` are its own lines, as fio lists them; each is the
    // flags' resolved job's value (the same job).
    let (file, flags) = (opts(&ja), opts(&jb));
    assert!(file.len() >= 4, "{file:?}");
    for (k, v) in &file {
        assert_eq!(
            flags.get(k),
            Some(v),
            "{k}: the file's {v}, the flags' job {flags:?}"
        );
    }
    let o = file;
    assert_eq!(o["rate_iops"], "10500,4500");
    assert_eq!(o["rwmixread"], "70");
    assert_eq!(o["bs"], "8k");
    assert_eq!(o["iodepth"], "8");
    assert_eq!(ja["diskpulse"]["rate_iops_total"], 15000.0);
    for j in [&ja, &jb] {
        let reads = j["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
        let writes = j["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
        assert!(reads > 0 && writes > 0, "{reads} reads, {writes} writes");
    }
}

/// (read IOPS, write IOPS) of the first job entry of a fio-shaped JSON document.
fn iops(j: &serde_json::Value) -> (f64, f64) {
    let job = &j["jobs"][0];
    (
        job["read"]["iops"].as_f64().unwrap(),
        job["write"]["iops"].as_f64().unwrap(),
    )
}

#[test]
fn rate_iops_is_per_direction_as_fios() {
    if !have_tool("fio", "fio") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = dir.path().join("same.dat");
    let fname = format!("--filename={}", file.display());
    // A file both use as it is (ours keeps an existing file).
    write_direct(&file, 32 << 20, 1 << 20);
    // (extra flags, per-direction IOPS expected for the whole group)
    let cases: [(&[&str], f64); 3] = [
        (&["--rate_iops=200"], 200.0),
        // The mix gives way to the per-direction rate in fio; ours follows.
        (&["--rate_iops=200", "--rwmixread=70"], 200.0),
        // Per job: two jobs at 100 are 200 per direction, one entry with group_reporting.
        (
            &["--rate_iops=100", "--numjobs=2", "--group_reporting"],
            200.0,
        ),
    ];
    for (extra, want) in cases {
        let common_args = [
            &fname[..],
            "--rw=randrw",
            "--bs=4k",
            "--direct=1",
            "--ioengine=psync",
            "--time_based",
            "--runtime=3",
            "--output-format=json",
        ];
        let args: Vec<&str> = [&common_args[..], extra].concat();
        let theirs = {
            let o = std::process::Command::new("fio")
                .arg("--name=t")
                .args(&args)
                .output()
                .unwrap();
            json(o)
        };
        let ours = json(probe(&args));
        assert_eq!(
            ours["jobs"].as_array().unwrap().len(),
            theirs["jobs"].as_array().unwrap().len(),
            "{extra:?}: job entries"
        );
        let (fr, fw) = iops(&theirs);
        let (or, ow) = iops(&ours);
        eprintln!("{extra:?}: fio {fr:.1} r/s {fw:.1} w/s, diskpulse {or:.1} r/s {ow:.1} w/s");
        for (who, v) in [
            ("fio read", fr),
            ("fio write", fw),
            ("ours read", or),
            ("ours write", ow),
        ] {
            // fio itself did 189/s per direction at rwmixread 70 here: within 15%.
            assert!(
                (v / want - 1.0).abs() < 0.15,
                "{extra:?}: {who} {v:.1}/s, expected ~{want}"
            );
        }
        assert!(
            (or / fr - 1.0).abs() < 0.15,
            "{extra:?}: reads {or:.1} vs fio {fr:.1}"
        );
        assert!(
            (ow / fw - 1.0).abs() < 0.15,
            "{extra:?}: writes {ow:.1} vs fio {fw:.1}"
        );
    }
}

#[test]
fn a_bad_job_file_is_one_line_and_exit_2_with_nothing_written() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let target = dir.path().join("p.dat");
    let job = dir.path().join("bad.fio");
    std::fs::write(
        &job,
        format!(
            "[global]\nfilename={}\nsize=4m\n\n[j]\nrw=randwrite\nverify_backlog=16\n",
            target.display()
        ),
    )
    .unwrap();
    let o = probe(&[job.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("{}:7:", job.display()))
            && lines[0].contains("'verify_backlog'"),
        "{err}"
    );
    assert!(!target.exists(), "nothing written");
    // The old total's name is refused with the two that replace it.
    let o = probe(&["--filename", target.to_str().unwrap(), "--rate-iops", "500"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("--rate-iops-total 500") && err.contains("--rate_iops=500"),
        "{err}"
    );
    assert!(!target.exists(), "nothing written");
}

/// study.csv as (header, rows).
fn read_csv(p: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

#[test]
fn a_2x2_study_has_one_chart_per_figure_grouped_by_the_matrix() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let vol = d.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    let sc = d.path().join("tiny.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "tiny"
description = "2x2 probe study"
[matrix]
rw = ["randread", "randwrite"]
bs = ["4k", "16k"]
repeat = 2
[[volumes]]
name = "v"
path = "{}"
[[phases]]
kind = "probe"
volume = "v"
args = ["--rw", "${{rw}}", "--bs", "${{bs}}", "--size", "8m", "--time-based", "--runtime", "1s"]
"#,
            vol.display()
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (header, rows) = read_csv(&out.join("study.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    // A chart (PNG and SVG) for every figure whose cell means differ by more than 2%
    // (issue 23: no chart of a fixed input, none of a figure no run has), and only those:
    // worked out here from study.csv.
    let first_figure = col("bs").max(col("rw")) + 1;
    let cell_means = |i: usize| -> Vec<f64> {
        let mut cells: Vec<(String, Vec<f64>)> = vec![];
        for r in rows.iter().filter(|r| r[2] == "ok" && r[3].is_empty()) {
            let Ok(v) = r[i].parse::<f64>() else { continue };
            match cells.iter_mut().find(|(c, _)| *c == r[0]) {
                Some((_, vs)) => vs.push(v),
                None => cells.push((r[0].clone(), vec![v])),
            }
        }
        cells
            .iter()
            .map(|(_, v)| v.iter().sum::<f64>() / v.len() as f64)
            .collect()
    };
    let mut charted = 0;
    for (i, name) in header.iter().enumerate().skip(first_figure) {
        let m = cell_means(i);
        let (lo, hi) = m
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                (l.min(*v), h.max(*v))
            });
        let varies = m.len() >= 2 && hi > lo && (lo <= 0.0 || hi / lo > 1.02);
        let png = out.join("charts").join(format!("{name}.png"));
        assert_eq!(png.exists(), varies, "{name}: a chart iff it varies: {m:?}");
        if varies {
            charted += 1;
            let b = std::fs::read(&png).unwrap();
            assert_eq!(&b[1..4], b"PNG", "{}", png.display());
            let svg =
                std::fs::read_to_string(out.join("charts").join(format!("{name}.svg"))).unwrap();
            assert!(svg.contains("<title>"), "{name}: no empty chart");
        }
    }
    assert!(charted >= 2, "{charted} charts");
    // probe read p99: only the randread cells have it; colour by bs (the first parameter),
    // groups by rw, one bar per cell with its repeats' mean.
    let svg = std::fs::read_to_string(out.join("charts/probe_read_lat_p99_us.svg")).unwrap();
    for label in [
        "bs = 4k",
        "bs = 16k",
        ">randread<",
        ">randwrite<",
        ">rw<",
        ">ms<",
    ] {
        assert!(svg.contains(label), "{label} in {svg}");
    }
    let bars: Vec<&str> = svg
        .split("<title>")
        .skip(1)
        .map(|t| t.split("</title>").next().unwrap())
        .collect();
    assert_eq!(bars.len(), 2, "{bars:?}");
    let (p99, bs, rw) = (col("probe_read_lat_p99_us"), col("bs"), col("rw"));
    for size in ["4k", "16k"] {
        let vals: Vec<f64> = rows
            .iter()
            .filter(|r| r[bs] == size && r[rw] == "randread" && !r[p99].is_empty())
            .map(|r| r[p99].parse().unwrap())
            .collect();
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let bar = bars
            .iter()
            .find(|b| b.starts_with(&format!("randread {size}:")))
            .unwrap_or_else(|| panic!("no randread {size} bar in {bars:?}"));
        // In ms, rounded to 3 significant digits ("0.0891", "1.23").
        let text = bar
            .split("mean ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let shown: f64 = text.parse::<f64>().unwrap() * 1e3;
        assert!(
            (shown / mean - 1.0).abs() < 0.006,
            "{bar}: csv mean {mean} us"
        );
        let digits = text.trim_start_matches(['0', '.']).replace('.', "");
        assert!(digits.len() <= 3, "{bar}: 3 significant digits");
        assert!(bar.contains(&format!("n {})", vals.len())), "{bar}");
    }
    // The page opens with its answers (issue 23): bs 16k against 4k with rw held, as a
    // ratio of the 2 repeats' means with its interval, before any table.
    let md = std::fs::read_to_string(out.join("study.md")).unwrap();
    let (answers, rest) = md.split_once("## Cells").unwrap();
    assert!(answers.contains("## Answers\n\n### "), "{md}");
    assert!(
        answers.contains("### rw: randwrite against randread\n"),
        "{md}"
    );
    assert!(answers.contains("### bs: 16k against 4k\n"), "{md}");
    let line = answers
        .lines()
        .find(|l| l.starts_with("- bs 16k: probe read p99 "))
        .unwrap_or_else(|| panic!("no bs verdict at rw randread: {md}"));
    assert!(line.contains("x bs 4k at rw randread ("), "{line}");
    assert!(
        line.contains(" ms, 2 repeats each; Welch 95% interval")
            && (line.ends_with(": distinguishable)") || line.ends_with(": not distinguishable)")),
        "{line}"
    );
    assert!(!rest.contains("## Answers"));
    // By bs, within each rw: the randread rows have a read p99 and the randwrite rows
    // none ("-"): an average over rw would have mixed them. Each value is its cell's mean
    // from study.csv, in ms with 3 significant digits.
    let by = rest
        .split("## By bs, within each rw\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no by-bs table: {md}"));
    let table: Vec<Vec<&str>> = by
        .lines()
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(table[0][..3], ["rw", "bs", "valid runs"], "{by}");
    assert!(
        table[0].len() <= 8,
        "a table that fits a screen: {:?}",
        table[0]
    );
    let read = table[0]
        .iter()
        .position(|h| *h == "probe read p99 (ms)")
        .unwrap_or_else(|| panic!("{:?}", table[0]));
    assert_eq!(table.len(), 5, "one row per cell: {by}");
    for r in &table[1..] {
        let (rw_v, bs_v) = (r[0], r[1]);
        let want = if rw_v == "randread" {
            let vals: Vec<f64> = rows
                .iter()
                .filter(|c| c[rw] == rw_v && c[bs] == bs_v)
                .map(|c| c[p99].parse::<f64>().unwrap())
                .collect();
            sig3(vals.iter().sum::<f64>() / vals.len() as f64 / 1e3)
        } else {
            "-".to_string()
        };
        assert_eq!(r[read].split(' ').next().unwrap(), want, "{r:?}");
    }
    assert!(rest.contains("is in study.csv beside this page"));
    // report.html: the answers before any chart or table, then every chart inline.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("no {s}"));
    assert!(at("<h2>Answers</h2>") < at("<figure"));
    assert!(at("<h2>Answers</h2>") < at("<table"));
    assert!(at("<h2>Answers</h2>") < at("<h2>Charts</h2>"));
    assert!(html.contains("<h3>bs: 16k against 4k</h3>"));
    assert_eq!(
        html.matches("<figure class=\"study-chart\">").count(),
        charted
    );
    assert!(html.contains("charts/probe_read_lat_p99_us.png and charts/probe_read_lat_p99_us.svg"));
    // Self-contained like a run's report.html: nothing referred to.
    assert!(!html.contains("href=") && !html.contains("src="));
    assert!(html.contains("probe read p99 (mean of valid repeats"));
}

/// Three significant digits as the study page prints them ("0.0891", "1.23", "12.3").
fn sig3(v: f64) -> String {
    let d = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.d$}")
}

#[test]
fn fio_runs_the_shipped_job_file_as_we_do() {
    if !have_tool("fio", "fio") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let f = format!("--filename={}", dir.path().join("job.dat").display());
    let args = [JOB, &f[..], "--runtime=2", "--output-format=json"];
    let theirs = json(
        std::process::Command::new("fio")
            .args(args)
            .output()
            .unwrap(),
    );
    let ours = json(probe(&args));
    let (fr, fw) = iops(&theirs);
    let (or, ow) = iops(&ours);
    eprintln!("shipped job: fio {fr:.0} r/s {fw:.0} w/s, diskpulse {or:.0} r/s {ow:.0} w/s");
    // The file's rate_iops=10500,4500: both tools read it as per direction.
    for (who, v, want) in [
        ("fio read", fr, 10500.0),
        ("fio write", fw, 4500.0),
        ("ours read", or, 10500.0),
        ("ours write", ow, 4500.0),
    ] {
        assert!(
            (v / want - 1.0).abs() < 0.15,
            "{who} {v:.0}/s, expected ~{want}"
        );
    }
    assert_eq!(theirs["jobs"][0]["jobname"], ours["jobs"][0]["jobname"]);
}

/// A cell whose probe cannot keep its rate (issue 23): marked invalid with its reason in
/// study.csv and on the page, and left out of the cell's figures; the cell that kept its
/// rate stands.
#[test]
fn a_study_cell_whose_probe_falls_behind_its_rate_is_invalid_and_left_out() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let vol = d.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    let sc = d.path().join("rate.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "rate"
description = "a rate the probe keeps and one no disk here can"
[matrix]
rate = ["200", "5000000"]
[[volumes]]
name = "v"
path = "{}"
[[phases]]
kind = "probe"
volume = "v"
args = ["--rw", "randwrite", "--size", "8m", "--time-based", "--runtime", "1s", "--rate-iops-total", "${{rate}}"]
"#,
            vol.display()
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    let row = |rate: &str| {
        csv.lines()
            .find(|l| l.starts_with(&format!("rate-{rate},")))
            .unwrap_or_else(|| panic!("no row for rate {rate}: {csv}"))
            .to_string()
    };
    assert!(row("200").starts_with("rate-200,1,ok,,"), "{csv}");
    assert!(
        row("5000000").starts_with(
            "rate-5000000,1,ok,\"phase 0 probe fell behind its rate of 5,000,000 IOPS"
        ),
        "{csv}"
    );
    let md = std::fs::read_to_string(out.join("study.md")).unwrap();
    assert!(md.contains("1 invalid and left out"), "{md}");
    assert!(
        md.contains("- rate-5000000 r1: INVALID: phase 0 probe fell behind"),
        "{md}"
    );
    // The cells table has the valid cell, and the invalid one marked, with no figure.
    let cells = md
        .split("## Cells")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(cells.lines().any(|l| l.starts_with("| 200 | 1 |")), "{md}");
    let bad = cells
        .lines()
        .find(|l| l.starts_with("| 5000000 |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(bad.starts_with("| 5000000 | 0 of 1 |"), "{bad}");
    assert!(bad.trim_end_matches(" |").ends_with("invalid"), "{bad}");
    // No answer from it, and the page says why.
    assert!(
        md.contains("- rate 5000000 against rate 200: no answer: every run of rate 5000000 is invalid (see Invalid runs)"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("INVALID: phase 0 probe fell behind"),
        "the page names it"
    );
}
