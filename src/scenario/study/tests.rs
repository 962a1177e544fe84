//! The study report's tests: figures from run directories, cell order, invalid cells
//! named and left out, the page.

mod figures_tests {
    use super::super::*;
    use serde_json::json;

    /// An agents_diskstats.csv.gz row: sectors written `sw`, io_ms `busy`.
    fn ds_row(node: &str, dev: &str, t_ns: u64, sw: u64, busy: u64) -> String {
        let mut c = [0u64; format::diskstats::MAX_FIELDS];
        c[6] = sw;
        c[9] = busy;
        let c: Vec<String> = c.iter().map(u64::to_string).collect();
        format!("{node},{t_ns},{dev},7,1,{}\n", c.join(","))
    }

    #[test]
    fn node_columns_come_from_the_agents_files_of_the_devices_asked_for() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let meta = json!({"tool": "diskpulse", "format_version": format::FORMAT_VERSION, "duration_ns": 10_000_000_000u64, "agents": {"servers": [], "nodes": {
            "a": {"offset_ns": 1, "bound_ns": 1, "probes": 1, "max_bound_used_ns": 1, "sources": {},
                  "agent_dropped_batches": 0, "agent_reconnects": 0, "agent_cpu_ns": 0,
                  "agent_published_bytes": 0, "devices": ["loop1", "vda"],
                  "device_why": ["named", "backing file of loop1"]},
            "b": {"offset_ns": 1, "bound_ns": 1, "probes": 1, "max_bound_used_ns": 1, "sources": {},
                  "agent_dropped_batches": 0, "agent_reconnects": 0, "agent_cpu_ns": 0,
                  "agent_published_bytes": 0, "devices": ["loop2"]}}}});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let mut text = format::agents::header("diskstats") + "\n";
        // a/loop1: 20 MiB over the run; busy 2.5 s. Rows are written on change only, so a
        // row's growth happened since the sample before it (1 ms): the 16 MiB row is a
        // 16 MiB window, the 4 MiB two rows 4 ms apart share another.
        text += &ds_row("a", "loop1", 1_000_000_000, 100, 0);
        text += &ds_row("a", "loop1", 3_000_000_000, 100 + 16 * 2048, 1000);
        text += &ds_row("a", "loop1", 5_001_000_000, 100 + 18 * 2048, 1000);
        text += &ds_row("a", "loop1", 5_005_000_000, 100 + 20 * 2048, 2500);
        // a/vda (the loop device's backing disk): more bytes, not counted.
        text += &ds_row("a", "vda", 1_000_000_000, 0, 0);
        text += &ds_row("a", "vda", 9_000_000_000, 400 * 2048, 9000);
        // b: no why from its agent: every device counts.
        text += &ds_row("b", "loop2", 1_000_000_000, 0, 0);
        text += &ds_row("b", "loop2", 2_000_000_000, 10 * 2048, 500);
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(d.join("agents_diskstats.csv.gz")).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
        // b's broker: 6 MiB written over 2 s across a restart (a new pid).
        let mut p = format::agents::header("proc_io") + "\n";
        for (t, pid, w) in [
            (1u64, 10, 1u64 << 20),
            (2, 10, 4 << 20),
            (2, 11, 0),
            (3, 11, 3 << 20),
        ] {
            p += &format!(
                "b,{},{pid},nats-server,0,0,0,0,0,{w},0\n",
                t * 1_000_000_000
            );
        }
        std::fs::write(d.join("agents_proc_io.csv"), p).unwrap();
        let x = figures(d);
        let a = &x.nodes["a"];
        assert!((a.write_mib_s.unwrap() - 2.0).abs() < 1e-9, "{a:?}");
        assert!((a.write_peak_mib_s.unwrap() - 1600.0).abs() < 1e-9, "{a:?}");
        assert!((a.util_pct.unwrap() - 25.0).abs() < 1e-9, "{a:?}");
        assert_eq!(a.broker_write_mib_s, None);
        let b = &x.nodes["b"];
        assert!((b.write_mib_s.unwrap() - 1.0).abs() < 1e-9, "{b:?}");
        assert!((b.broker_write_mib_s.unwrap() - 3.0).abs() < 1e-9, "{b:?}");
        assert_eq!(b.broker_read_mib_s, Some(0.0));
        let cols = fmt::columns([&x]);
        let row = fmt::csv_row(&StudyRun::default(), &[], &cols, &x);
        let header = fmt::csv_header(&[], &cols);
        assert!(header.contains(",node_a_write_mib_s,node_a_write_peak_mib_s,node_a_util_pct,node_a_broker_write_mib_s,node_a_broker_read_mib_s,node_b_write_mib_s,"), "{header}");
        assert!(
            row.trim_end().ends_with(",2,1600,25,,,1,1000,5,3,0"),
            "{row}"
        );
    }

    #[test]
    fn interference_and_failures_reach_the_study_columns() {
        let dir = tempfile::tempdir().unwrap();
        let pct = |p99: f64| json!({"count": 10, "p50_us": 1.0, "p90_us": 1.0, "p99_us": p99, "p999_us": p99, "max_us": p99});
        let burst = |name: &str, co: bool, out: f64, inside: f64| {
            json!({"series": name, "source": "probe", "name": name, "phase": null, "co": co,
                   "device": "vdb", "window_ms": 100.0, "windows_inside": 1, "windows_outside": 9,
                   "inside": pct(inside), "outside": pct(out), "p99_ratio": inside / out,
                   "share_in_bursts": 0.1, "line": ""})
        };
        let restart = |name: &str, before: f64, during: f64| {
            json!({"node": "n2", "restart_s": 5.0, "series": name, "name": name, "phase": 1,
                   "co": false, "before_from_s": 0.0, "before_to_s": 5.0, "during_from_s": 5.1,
                   "during_to_s": 5.5, "before": pct(before), "during": pct(during),
                   "p99_ratio": during / before, "line": ""})
        };
        let s = json!({
            "format_version": format::FORMAT_VERSION, "run": "r", "duration_s": 10.0,
            "ui_window_s": 30.0, "headline": [], "devices": [], "memory": null, "cpu": null,
            "load": {}, "samplers": {}, "error_events": 0, "restarts": [],
            "interference": {"rule": "", "lines": [],
                "bursts": [burst("read", false, 5.0, 6.0), burst("write", true, 7.0, 700.0),
                           burst("write", false, 1200.0, 38000.0), burst("write", false, 1.0, 2.0)],
                "restarts": [restart("js-pub", 1000.0, 45000.0), restart("sub", 1.0, 1e6),
                             restart("js-pub", 2000.0, 4000.0)]},
            "failures": [{"role": "js-pub", "kind": "timeout", "count": 256},
                         {"role": "js-pub", "kind": "insufficient_resources", "count": 1000}]
        });
        std::fs::write(dir.path().join("summary.json"), s.to_string()).unwrap();
        let x = figures(dir.path());
        // The probe's writes, not the corrected twin, against the first device (the broker's).
        assert_eq!(x.probe_write_p99_outside_bursts_us, Some(1200.0));
        assert_eq!(x.probe_write_p99_inside_bursts_us, Some(38000.0));
        assert!((x.probe_write_p99_burst_ratio.unwrap() - 38000.0 / 1200.0).abs() < 1e-9);
        // Acked roles only, the worst restart.
        assert_eq!(x.ack_p99_before_restart_us, Some(2000.0));
        assert_eq!(x.ack_p99_during_reread_us, Some(45000.0));
        assert_eq!(x.ack_p99_reread_ratio, Some(45.0));
        // No meta.json here: failures come from summary.json.
        assert_eq!(x.failures, Some(1256.0));
        let row = fmt::csv_row(&StudyRun::default(), &[], &fmt::columns([&x]), &x);
        assert!(
            row.contains(",1256,") || row.trim_end().ends_with(",1256"),
            "{row}"
        );
    }
}

mod order_tests {
    use super::super::*;
    use format::study::{StudyCell, StudyRun};

    /// The tables list cells and axis values in the order the matrix gave them (the
    /// order the runs ran), not sorted as text ("100ms" before "10ms").
    #[test]
    fn tables_keep_the_matrix_order() {
        let dir = tempfile::tempdir().unwrap();
        let lat = ["0ms", "10ms", "50ms", "100ms"];
        let mut sj = Study {
            scenario: "order".into(),
            status: "ok".into(),
            ..Default::default()
        };
        for l in lat {
            for m in ["call", "cast"] {
                let params = vec![("latency".into(), l.into()), ("mode".into(), m.into())];
                let id = format!("latency-{l}_mode-{m}");
                sj.cells.push(StudyCell {
                    id: id.clone(),
                    params: params.clone(),
                });
                std::fs::create_dir_all(dir.path().join(&id)).unwrap();
                sj.runs.push(StudyRun {
                    cell: id.clone(),
                    params,
                    repeat: 1,
                    dir: id,
                    status: "ok".into(),
                    ..Default::default()
                });
            }
        }
        std::fs::write(
            dir.path().join(format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(dir.path()).unwrap();
        let md = std::fs::read_to_string(dir.path().join("study.md")).unwrap();
        // A markdown table under heading `h`: the values of its column `col`.
        let column = |h: &str, col: &str| -> Vec<String> {
            let sec = md.split(h).nth(1).unwrap_or_else(|| panic!("{h}: {md}"));
            let lines: Vec<&str> = sec
                .lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .collect();
            let cells = |l: &str| -> Vec<String> {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            };
            let i = cells(lines[0]).iter().position(|c| c == col).unwrap();
            lines[2..].iter().map(|l| cells(l)[i].clone()).collect()
        };
        let twice: Vec<String> = lat
            .iter()
            .flat_map(|l| [l.to_string(), l.to_string()])
            .collect();
        assert_eq!(column("## Cells", "latency"), twice, "{md}");
        // By latency: within each mode (call first, as the matrix has it), the latencies
        // in the matrix's order.
        let by = column("## By latency, within each mode", "latency");
        let once: Vec<String> = lat.map(String::from).to_vec();
        assert_eq!(by, [once.clone(), once].concat(), "{md}");
        assert_eq!(
            column("## By latency, within each mode", "mode"),
            [["call"; 4], ["cast"; 4]].concat(),
            "{md}"
        );
        assert_eq!(
            column("## Cells: by mode, within each latency", "latency"),
            twice,
            "{md}"
        );
    }
}

mod invalid_tests {
    use super::super::*;
    use format::study::{StudyCell, StudyRun};
    use serde_json::json;

    /// A run directory with one probe phase that issued `issued` I/Os and left `missed`
    /// unissued at 15,000 IOPS asked, with write p99 `p99_ms`, and one load phase with
    /// `failed` timeouts (`expected` marks them expected).
    fn run_dir(d: &Path, issued: u64, missed: u64, p99_ms: f64, failed: u64, expected: bool) {
        std::fs::create_dir_all(d).unwrap();
        let failures = if failed > 0 {
            json!([{"role": "js-pub", "kind": "timeout", "count": failed}])
        } else {
            json!([])
        };
        let meta = json!({"tool": "diskpulse", "format_version": format::FORMAT_VERSION,
            "phases": [
                {"index": 1, "kind": "probe", "args": [], "stopped": false, "result": {}},
                {"index": 2, "kind": "load", "args": [], "stopped": false, "result": {
                    "failures_expected": expected,
                    "roles": [{"role": "js-pub", "ops": 100, "msgs_per_s": 10.0, "failures": failures}]}}]});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let probe = json!({"diskpulse": {"rate_iops_total": 15000.0, "rate_missed_ios": missed},
            "jobs": [{"write": {"total_ios": issued,
                "clat_ns": {"mean": 1e6, "percentile": {"99.000000": p99_ms * 1e6}}}}]});
        std::fs::write(d.join("probe-1.json"), probe.to_string()).unwrap();
    }

    #[test]
    fn a_probe_behind_its_rate_or_a_failed_load_makes_a_run_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        run_dir(&d.join("ok"), 10_000, 50, 1.0, 0, false);
        assert_eq!(invalid_reason(&d.join("ok")), None, "0.5% missed stands");
        run_dir(&d.join("behind"), 54_000, 76_000, 1.0, 0, false);
        let why = invalid_reason(&d.join("behind")).unwrap();
        assert!(why.contains("fell behind its rate of 15,000 IOPS"), "{why}");
        assert!(why.contains("76000 of 130000"), "{why}");
        run_dir(&d.join("failed"), 10_000, 0, 1.0, 256, false);
        let why = invalid_reason(&d.join("failed")).unwrap();
        assert!(why.contains("256 js-pub timeout"), "{why}");
        run_dir(&d.join("expected"), 10_000, 0, 1.0, 256, true);
        assert_eq!(invalid_reason(&d.join("expected")), None);
    }

    #[test]
    fn an_invalid_run_is_named_on_the_page_and_in_study_csv_and_left_out_of_its_cell() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut sj = Study {
            scenario: "raid".into(),
            status: "ok".into(),
            ..Default::default()
        };
        let params = vec![("raid".to_string(), "1".to_string())];
        sj.cells.push(StudyCell {
            id: "raid-1".into(),
            params: params.clone(),
        });
        // Two runs that kept their rate at 2 ms, one that fell behind at 80 ms.
        for (rep, missed, p99) in [(1u32, 0u64, 2.0), (2, 60_000, 80.0), (3, 0, 2.0)] {
            let dir_name = format!("raid-1/r{rep}");
            run_dir(&d.join(&dir_name), 75_000, missed, p99, 0, false);
            sj.runs.push(StudyRun {
                cell: "raid-1".into(),
                params: params.clone(),
                repeat: rep,
                dir: dir_name,
                status: "ok".into(),
                ..Default::default()
            });
        }
        std::fs::write(
            d.join(format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(d).unwrap();
        let md = std::fs::read_to_string(d.join("study.md")).unwrap();
        assert!(md.contains("1 invalid and left out"), "{md}");
        assert!(
            md.contains("- raid-1 r2: INVALID: phase 1 probe fell behind its rate"),
            "{md}"
        );
        // The cell's probe write p99 is the two valid runs' 2 ms (2000 us), not a mean with 80 ms.
        let cells = md.split("## Cells").nth(1).unwrap();
        let header = cells.lines().find(|l| l.starts_with("| raid |")).unwrap();
        assert!(
            header.starts_with("| raid | valid runs | probe write p99 (ms) |"),
            "{header}"
        );
        let row = cells.lines().find(|l| l.starts_with("| 1 |")).unwrap();
        assert!(
            row.starts_with("| 1 | 2 of 3 | 2.00 (2.00..2.00) |"),
            "2 runs counted, in ms: {row}"
        );
        assert!(!row.contains("80"), "{row}");
        let csv = std::fs::read_to_string(d.join("study.csv")).unwrap();
        let mut lines = csv.lines();
        assert!(lines
            .next()
            .unwrap()
            .starts_with("cell,repeat,status,invalid,raid,"));
        let rows: Vec<&str> = lines.collect();
        assert!(rows[0].starts_with("raid-1,1,ok,,1,"), "{csv}");
        // The reason holds a comma ("15,000 IOPS"): quoted, as CSV does.
        assert!(
            rows[1].starts_with("raid-1,2,ok,\"phase 1 probe fell behind"),
            "{csv}"
        );
        let html = std::fs::read_to_string(d.join("report.html")).unwrap();
        assert!(html.contains("INVALID"), "the page names it");
    }
}

mod page_tests {
    use super::super::*;
    use format::study::{StudyCell, StudyRun};
    use serde_json::{json, Value};

    /// A finished run: a load phase at a fixed 100 msgs/s with no failures (the
    /// scenario's input: the same in every run) and a probe phase whose write p99 is
    /// `p99_ms`, 0.2% of its I/Os missed (valid) or 40% (invalid).
    fn run_dir(d: &Path, p99_ms: f64, behind: bool) {
        std::fs::create_dir_all(d).unwrap();
        let meta = json!({"tool": "diskpulse", "format_version": format::FORMAT_VERSION,
            "phases": [
                {"index": 1, "kind": "load", "args": [], "stopped": false, "result": {
                    "roles": [{"role": "js-pub", "ops": 1500, "msgs_per_s": 100.0, "mib_per_s": 1.5,
                               "failures": []}]}},
                {"index": 2, "kind": "probe", "args": [], "stopped": false, "result": {}}]});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let missed = if behind { 40_000 } else { 100 };
        let probe = json!({"diskpulse": {"rate_iops_total": 4000.0, "rate_missed_ios": missed},
            "jobs": [{"write": {"total_ios": 60_000,
                "clat_ns": {"mean": 1e6, "percentile": {"99.000000": p99_ms * 1e6}}}}]});
        std::fs::write(d.join("probe-2.json"), probe.to_string()).unwrap();
    }

    /// sync x raid, 2 repeats a cell. raid 1 doubles the write p99 at sync 5s (4 vs 2 ms)
    /// and triples it at sync always (30 vs 10 ms); one raid-1/always run fell behind its
    /// rate at 900 ms. Averaged over sync, "by raid" would read 6 and 17 ms.
    fn study() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut sj = Study {
            scenario: "beside".into(),
            description: "sync x raid".into(),
            status: "done".into(),
            ..Default::default()
        };
        for (sync, raid, p99s) in [
            ("5s", "0", [(2.0, false), (2.02, false)]),
            ("5s", "1", [(4.0, false), (4.04, false)]),
            ("always", "0", [(10.0, false), (10.2, false)]),
            ("always", "1", [(30.0, false), (900.0, true)]),
        ] {
            let params = vec![
                ("sync".to_string(), sync.to_string()),
                ("raid".to_string(), raid.to_string()),
            ];
            let id = format!("sync-{sync}_raid-{raid}");
            sj.cells.push(StudyCell {
                id: id.clone(),
                params: params.clone(),
            });
            for (rep, (p99, behind)) in p99s.into_iter().enumerate() {
                let dir_name = format!("cells/{id}/r{}", rep + 1);
                run_dir(&d.join(&dir_name), p99, behind);
                sj.runs.push(StudyRun {
                    cell: id.clone(),
                    params: params.clone(),
                    repeat: rep as u32 + 1,
                    dir: dir_name,
                    status: "ok".into(),
                    ..Default::default()
                });
            }
        }
        std::fs::write(
            d.join(format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(d).unwrap();
        dir
    }

    #[test]
    fn the_html_page_opens_with_the_answers_and_charts_only_figures_that_vary() {
        let dir = study();
        let d = dir.path();
        let html = std::fs::read_to_string(d.join("report.html")).unwrap();
        let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("no {s} in the page"));
        // Answers first: before the invalid runs, any chart, any table and any run.
        let answers = at("<h2>Answers</h2>");
        for later in [
            "<h2>Invalid runs",
            "<h2>Charts</h2>",
            "<figure",
            "<table",
            "<h2>Cells",
            "<h2>Runs</h2>",
        ] {
            assert!(answers < at(later), "Answers after {later}");
        }
        assert!(
            !html[..answers].contains("<h2>"),
            "nothing comes before the answers"
        );
        // The first question (sync, the matrix's first parameter), with its noise and
        // the interval's method named.
        let first = &html[answers..at("<h2>Invalid runs")];
        assert!(
            first.contains("<h3>sync: always against 5s</h3>"),
            "{first}"
        );
        assert!(first.contains("<h3>raid: 1 against 0</h3>"), "{first}");
        assert!(
            first.contains("raid 1: probe write p99 2.00x raid 0 at sync 5s (4.02 vs 2.01 ms, 2 repeats each; Welch 95% interval"),
            "{first}"
        );
        // The invalid run is out of the verdict: 30 vs 10.1 ms with 1 repeat, said.
        assert!(
            first.contains("raid 1: probe write p99 2.97x raid 0 at sync always (30.0 vs 10.1 ms, 1 and 2 repeats, 1 invalid left out; too few repeats for a statement of noise)"),
            "{first}"
        );
        assert!(first.contains("Welch 95% interval of the ratio"), "{first}");
        assert!(html.contains(
            "sync-always_raid-1 r2: INVALID: phase 2 probe fell behind its rate of 4,000 IOPS"
        ));
        // Charts: the write p99 varies; msgs/s and MiB/s (the load's fixed rate), failed
        // ops (0 everywhere) and flushes/s (no run has it) do not.
        let charts = d.join("charts");
        assert!(charts.join("probe_write_lat_p99_us.svg").exists());
        for fixed in ["msgs_per_s", "mib_per_s", "failures", "flushes_per_s"] {
            assert!(!charts.join(format!("{fixed}.svg")).exists(), "{fixed}");
            assert!(!charts.join(format!("{fixed}.png")).exists(), "{fixed}");
        }
        let svgs: Vec<_> = std::fs::read_dir(&charts)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().unwrap() == "svg")
            .collect();
        assert_eq!(
            html.matches("<figure class=\"study-chart\">").count(),
            svgs.len()
        );
        for p in &svgs {
            let svg = std::fs::read_to_string(p).unwrap();
            assert!(
                svg.contains("<title>"),
                "{}: a chart with no bar",
                p.display()
            );
        }
        // In ms, 3 significant digits; never raw µs.
        let svg = std::fs::read_to_string(charts.join("probe_write_lat_p99_us.svg")).unwrap();
        assert!(svg.contains(">ms<"), "{svg}");
        assert!(svg.contains("mean 4.02 (min 4, max 4.04, n 2)"), "{svg}");
        assert!(!html.contains("2010") && !html.contains("4020"), "raw µs");
    }

    #[test]
    fn by_raid_never_averages_over_sync_and_the_tables_fit_a_screen() {
        let dir = study();
        let md = std::fs::read_to_string(dir.path().join("study.md")).unwrap();
        let table = |h: &str| -> Vec<Vec<String>> {
            let sec = md.split(h).nth(1).unwrap_or_else(|| panic!("{h}: {md}"));
            sec.lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .filter(|l| !l.starts_with("|---"))
                .map(|l| {
                    l.trim_matches('|')
                        .split('|')
                        .map(|c| c.trim().to_string())
                        .collect()
                })
                .collect()
        };
        let by = table("## Cells: by raid, within each sync\n");
        assert_eq!(
            by[0],
            ["sync", "raid", "valid runs", "probe write p99 (ms)"],
            "the answer figure only (msgs/s is a fixed input): {md}"
        );
        let rows: Vec<[&str; 4]> = by[1..]
            .iter()
            .map(|r| [&*r[0], &*r[1], &*r[2], r[3].split(' ').next().unwrap()])
            .collect();
        assert_eq!(
            rows,
            [
                ["5s", "0", "2", "2.01"],
                ["5s", "1", "2", "4.02"],
                ["always", "0", "2", "10.1"],
                ["always", "1", "1 of 2", "30.0"],
            ],
            "{md}"
        );
        // An average over sync (6 ms / 17 ms) is nowhere.
        for mixed in ["6.01", "6.05", "17.0", "6.03"] {
            assert!(!md.contains(&format!("| {mixed}")), "{mixed}: {md}");
        }
        let sync = table("## By sync, within each raid\n");
        assert_eq!(sync[0][..2], ["raid", "sync"]);
        assert_eq!(sync.len(), 5);
        // Every table fits a screen; the full one is study.csv, and the page says so.
        for t in [by, sync] {
            assert!(t[0].len() <= 8, "{:?}", t[0]);
        }
        assert!(md.contains("is in study.csv beside this page"), "{md}");
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("study.json")).unwrap())
                .unwrap();
        let axis = json["axes"]["raid"].as_array().unwrap();
        assert_eq!(axis.len(), 4, "one entry per cell, none averaged");
        assert_eq!(axis[0]["others"], json!([["sync", "5s"]]));
    }
}
