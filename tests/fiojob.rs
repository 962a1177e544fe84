//! fio as fio users write it: the shipped job file against the same job as flags (resolved
//! and run), fio's `--rate_iops` meaning against real fio on the same file, and a job
//! file's refusals.

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
    assert_eq!(opts(&ja), opts(&jb));
    let o = opts(&ja);
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
            "[global]\nfilename={}\nsize=4m\n\n[j]\nrw=randwrite\nverify=md5\n",
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
        lines[0].contains(&format!("{}:7:", job.display())) && lines[0].contains("'verify'"),
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
    // Every figure some run has: one PNG (and SVG); none for the others.
    let first_figure = col("bs").max(col("rw")) + 1;
    for (i, name) in header.iter().enumerate().skip(first_figure) {
        let has = rows.iter().any(|r| !r[i].is_empty());
        let png = out.join("charts").join(format!("{name}.png"));
        assert_eq!(
            png.exists(),
            has,
            "{name}: a chart iff a run has the figure"
        );
        if has {
            let b = std::fs::read(&png).unwrap();
            assert_eq!(&b[1..4], b"PNG", "{}", png.display());
            assert!(out.join("charts").join(format!("{name}.svg")).exists());
        }
    }
    // probe read p99: only the randread cells have it; colour by bs (the first parameter),
    // groups by rw, one bar per cell with its repeats' mean.
    let svg = std::fs::read_to_string(out.join("charts/probe_read_lat_p99_us.svg")).unwrap();
    for label in [
        "bs = 4k",
        "bs = 16k",
        ">randread<",
        ">randwrite<",
        ">rw<",
        ">us<",
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
        // The title's numbers are compact: "812.5", or "1.234k" once p99 passes 1 ms.
        let text = bar
            .split("mean ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let (digits, scale) = match text.strip_suffix('k') {
            Some(d) => (d, 1e3),
            None => (text, 1.0),
        };
        let shown: f64 = digits.parse::<f64>().unwrap() * scale;
        assert!((shown / mean - 1.0).abs() < 0.01, "{bar}: csv mean {mean}");
        assert!(bar.contains(&format!("n {})", vals.len())), "{bar}");
    }
    // The page opens with its answers (issue 23): bs 16k against 4k with rw held, as a
    // ratio of the 2 repeats' means with its interval, before any table.
    let md = std::fs::read_to_string(out.join("study.md")).unwrap();
    let (answers, rest) = md.split_once("## Cells").unwrap();
    assert!(answers.contains("## Answers"), "{md}");
    let line = answers
        .lines()
        .find(|l| l.starts_with("- bs 16k vs bs 4k at rw randread: probe read p99 "))
        .unwrap_or_else(|| panic!("no bs verdict at rw randread: {md}"));
    assert!(
        line.contains("2 repeats each; Welch 95% interval")
            && (line.ends_with(": distinguishable)") || line.ends_with(": not distinguishable)")),
        "{line}"
    );
    assert!(!rest.contains("## Answers"));
    // report.html embeds every chart and links its files.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h2>Charts</h2>"));
    assert!(html.contains("Answers"));
    let charts = std::fs::read_dir(out.join("charts"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "png")
        .count();
    assert!(charts >= 2, "{charts} charts");
    assert_eq!(
        html.matches("<figure class=\"study-chart\">").count(),
        charts
    );
    assert!(html.contains("charts/probe_read_lat_p99_us.png and charts/probe_read_lat_p99_us.svg"));
    // Self-contained like a run's report.html: nothing referred to.
    assert!(!html.contains("href=") && !html.contains("src="));
    assert!(html.contains("probe read p99 us (mean of repeats"));
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
    // The cells table has the valid cell and no row for the invalid one.
    let cells = md
        .split("## Cells")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(cells.lines().any(|l| l.starts_with("| 200 | 1 |")), "{md}");
    assert!(!cells.lines().any(|l| l.starts_with("| 5000000 |")), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("INVALID: phase 0 probe fell behind"),
        "the page names it"
    );
}
