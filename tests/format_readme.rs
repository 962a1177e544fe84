//! The docs' description of the run directory and of summary.json (docs/files.md, and
//! study.csv's row in docs/commands/run.md; they were the README's until issue 24) against
//! the types of `diskpulse::format`: a column or field the docs name that the type lacks
//! fails, and so does one the type has that the docs do not name.
//!
//! How the docs are read (simple on purpose): in "## The run directory", the table row of
//! each CSV file must hold the file's header as one backticked comma list, and every other
//! backticked snake_case name with an underscore in that row must be one of its columns
//! (or a meta.json field it refers to). For meta.json and summary.json every backticked
//! name (`a_b`, `rows`, `1ms`; `[]` stripped) is compared with the keys of a populated
//! value serialized to JSON, both ways.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

use std::collections::{BTreeMap, BTreeSet};

use diskpulse::format::{self, meta, study, summary};

/// The pages that describe the files: `run`'s page (study.csv's row) and docs/files.md
/// (the run directory and summary.json), in that order, so files.md's last section runs
/// to the end of the text.
fn readme() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(format!("{}/{p}", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{p}: {e}"))
    };
    format!(
        "{}\n{}",
        read("docs/commands/run.md"),
        read("docs/files.md")
    )
}

/// The text from the heading line `start` to the next heading of the same level.
fn section<'a>(text: &'a str, start: &str) -> &'a str {
    let a = text
        .find(start)
        .unwrap_or_else(|| panic!("docs/files.md has no '{start}'"));
    let level = start.split(' ').next().unwrap();
    let rest = &text[a + start.len()..];
    let end = rest
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| {
            let l = &rest[i..];
            l.starts_with(&format!("{level} ")) || (level == "###" && l.starts_with("## "))
        })
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Everything between pairs of backticks.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, t)| t.trim_end_matches("[]").to_string())
        .collect()
}

/// A field-like name: lower case, digits and underscores (`t_ns`, `rows`, `1ms`).
fn is_name(t: &str) -> bool {
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The table row of `file` in the run-directory section.
fn row<'a>(table: &'a str, file: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| `{file}` |")))
        .unwrap_or_else(|| panic!("docs/files.md's run-directory table has no row for {file}"))
}

/// Every object key in `v`, recursively (map keys included).
fn keys(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

/// What a docs text names against what a type has: the problems, both ways.
fn compare(what: &str, named: &BTreeSet<String>, has: &BTreeSet<String>) -> Vec<String> {
    let mut out = vec![];
    for n in named.difference(has) {
        out.push(format!(
            "{what}: the docs name `{n}`, the type has no such field"
        ));
    }
    for h in has.difference(named) {
        out.push(format!(
            "{what}: the type has `{h}`, the docs do not name it"
        ));
    }
    out
}

fn meta_fields() -> BTreeSet<String> {
    let stats = meta::SamplerStats::default();
    let sampler = |file: &str| meta::SamplerMeta {
        file: file.into(),
        interval_us: 1000,
        source: Some("/proc/diskstats".into()),
        stats: Some(stats.clone()),
    };
    let m = meta::Meta {
        format_version: format::FORMAT_VERSION,
        end_wall: Some(String::new()),
        duration_ns: Some(1),
        clock: Some(meta::ClockMeta {
            source: Some(String::new()),
            ..Default::default()
        }),
        error_events: Some(0),
        manifest: Some(
            [(
                "load.csv".to_string(),
                format::meta::ManifestFile { bytes: 0 },
            )]
            .into_iter()
            .collect(),
        ),
        lost: vec![meta::Lost {
            after_t_ns: Some(0),
            ..Default::default()
        }],
        chunks: Some(meta::ChunksMeta {
            chunk_ns: Some(1),
            chunk_bytes: Some(1),
            keep_ns: Some(1),
            closed: vec![meta::ChunkFile::default()],
            dropped: vec![meta::ChunkFile {
                why: Some(String::new()),
                ..Default::default()
            }],
            kept_windows: vec![meta::KeptWindow::default()],
            files: [(
                "meminfo.csv".to_string(),
                meta::FileChunks {
                    closed: vec![meta::ChunkFile::default()],
                    dropped: vec![],
                },
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        }),
        devices: vec![meta::MetaDevice {
            queue: meta::queue_keys()
                .map(|k| (k.to_string(), String::new()))
                .collect(),
            ..Default::default()
        }],
        samplers: [
            ("diskstats", "diskstats.csv.gz"),
            ("meminfo", "meminfo.csv"),
            ("cpu", "cpu.csv"),
            ("proc_io", "proc_io.csv"),
        ]
        .iter()
        .map(|(k, f)| (k.to_string(), sampler(f)))
        .collect(),
        // The sections other commands add; of them docs/files.md names load's `mode`, the
        // one key the format fixes (`meta::LoadMeta`).
        sections: [
            ("broker", serde_json::json!(null)),
            ("broker_nodes", serde_json::json!(null)),
            ("load", serde_json::json!({"mode": "js-pub"})),
            ("phases", serde_json::json!(null)),
            ("agents", agents_meta()),
            (
                "trace",
                serde_json::to_value(meta::TraceMeta {
                    stats: Some(meta::TraceStats::default()),
                    ..Default::default()
                })
                .unwrap(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ..Default::default()
    };
    let mut out = BTreeSet::new();
    keys(&serde_json::to_value(&m).unwrap(), &mut out);
    // `chunks.files` is keyed by file name (`meminfo.csv`): a value, not a field.
    out.retain(|k| !k.contains('.'));
    out
}

/// meta.json `agents`, every field populated (the node named `node`).
fn agents_meta() -> serde_json::Value {
    use format::agents::{AgentsMeta, NodeMeta, SourceMeta};
    let src = SourceMeta {
        first_seq: Some(1),
        last_seq: Some(1),
        max_lag_ns: Some(1),
        ..Default::default()
    };
    let node = NodeMeta {
        offset_ns: Some(1),
        bound_ns: Some(1),
        max_bound_used_ns: Some(1),
        sources: diskpulse::agent::SOURCES
            .iter()
            .map(|s| (s.to_string(), src.clone()))
            .collect(),
        ..Default::default()
    };
    serde_json::to_value(AgentsMeta {
        servers: vec![],
        nodes: [("node".to_string(), node)].into(),
    })
    .unwrap()
}

fn summary_fields() -> BTreeSet<String> {
    let bursts = summary::Bursts {
        bin_ms: 10.0,
        threshold_mib_s: 1.0,
        count: 1,
        period_s: Some(1.0),
        period_cv: Some(0.0),
        regular: false,
        mean_bytes: Some(1.0),
        mean_duration_ms: Some(1.0),
        share_of_bytes: 1.0,
        list: vec![summary::Burst {
            start_s: 0.0,
            duration_ms: 1.0,
            bytes: 1.0,
            peak_mib_s: 1.0,
        }],
    };
    let dir = summary::Direction {
        bytes: 1.0,
        ios: 1.0,
        mean_mib_s: 1.0,
        peak_mib_s: summary::Peaks {
            p1ms: 1.0,
            p10ms: 1.0,
            p100ms: 1.0,
            p1s: 1.0,
        },
        peak_iops_10ms: 1.0,
        await_ms: Some(1.0),
        ui_average_mib_s: 1.0,
        hidden_factor: Some(1.0),
        bursts,
        service_peak_mib_s: Some(summary::Peaks {
            p1ms: 1.0,
            p10ms: 1.0,
            p100ms: 1.0,
            p1s: 1.0,
        }),
        bunched: vec!["1ms".into()],
        headline_peak_10ms_mib_s: Some(1.0),
    };
    let meta_samplers = meta_fields(); // only to be sure both share SamplerMeta
    assert!(meta_samplers.contains("interval_us"));
    let sampler = meta::SamplerMeta {
        file: String::new(),
        interval_us: 1,
        source: Some(String::new()),
        stats: Some(meta::SamplerStats::default()),
    };
    let s = summary::Summary {
        format_version: format::FORMAT_VERSION,
        run: String::new(),
        duration_s: 1.0,
        ui_window_s: 30.0,
        headline: vec![String::new()],
        devices: vec![summary::DeviceSummary {
            name: String::new(),
            why: Some(String::new()),
            write: dir.clone(),
            read: dir,
            flushes: Some(1.0),
            peak_flushes_per_s_100ms: Some(1.0),
            max_in_flight: 1.0,
            util_pct: 1.0,
            rows: 1,
        }],
        memory: Some(summary::MemorySummary::default()),
        cpu: Some(summary::CpuSummary::default()),
        load: BTreeMap::from([("js-pub".to_string(), summary::LoadRoleSummary::default())]),
        samplers: ["diskstats", "meminfo", "cpu"]
            .iter()
            .map(|k| (k.to_string(), sampler.clone()))
            .collect(),
        error_events: 0,
        restarts: vec![summary::RestartSummary {
            node: String::new(),
            t_s: 0.0,
            devices: vec![],
            current_ms: Some(1.0),
            healthy_ms: Some(1.0),
            window_s: 1.0,
            read_bytes: 1.0,
            read_peak_mib_s: 1.0,
            read_burst_s: 1.0,
            read_burst_start_s: Some(1.0),
        }],
        interference: Some(summary::Interference {
            rule: String::new(),
            bursts: vec![summary::BurstInterference {
                phase: Some(1),
                inside: summary::Percentiles {
                    p50_us: Some(1.0),
                    ..Default::default()
                },
                p99_ratio: Some(1.0),
                ..Default::default()
            }],
            restarts: vec![summary::RestartInterference {
                phase: Some(1),
                p99_ratio: Some(1.0),
                ..Default::default()
            }],
            lines: vec![],
            spikes: vec![summary::Spike::default()],
            episodes: vec![summary::EpisodeSummary {
                devices: vec![String::new()],
                victims: vec![String::new()],
                cause: Some(String::new()),
                ..Default::default()
            }],
            harm: vec![summary::HarmInterference {
                phase: Some(1),
                inside: summary::Percentiles {
                    p50_us: Some(1.0),
                    ..Default::default()
                },
                p99_ratio: Some(1.0),
                ..Default::default()
            }],
        }),
        failures: vec![summary::Failure::default()],
        faults: vec![summary::Fault::default()],
        broker_io: Some(summary::BrokerIo {
            processes: vec![summary::ProcessIo::default()],
            devices: vec![summary::DeviceShare {
                write_share_pct: Some(1.0),
                read_share_pct: Some(1.0),
                ..Default::default()
            }],
        }),
        trace: Some({
            let pct = summary::Percentiles {
                p50_us: Some(1.0),
                ..Default::default()
            };
            let at = summary::AtThatMs {
                in_write_burst: Some(String::new()),
                load: vec![summary::LoadAt {
                    lat_p99_us: Some(1.0),
                    ..Default::default()
                }],
                broker: vec![summary::BrokerAt {
                    cpu_pct: Some(1.0),
                    in_msgs_per_s: Some(1.0),
                    ..Default::default()
                }],
                probe: vec![summary::ProbeAt {
                    clat_p99_us: Some(1.0),
                    ..Default::default()
                }],
                line: String::new(),
            };
            summary::TraceSummary {
                lost_line: Some(String::new()),
                fsync: vec![summary::FsyncProcess {
                    latency: pct.clone(),
                    ..Default::default()
                }],
                requests_by_op: vec![summary::RequestGroup {
                    service: pct.clone(),
                    queue: pct,
                    service_hist_us: vec![summary::Log2Bucket::default()],
                    size_hist_bytes: vec![summary::Log2Bucket::default()],
                    ..Default::default()
                }],
                slowest_fsyncs: vec![summary::SlowFsync {
                    at: at.clone(),
                    ..Default::default()
                }],
                slowest_requests: vec![summary::SlowRequest {
                    queue_ms: Some(1.0),
                    at,
                    ..Default::default()
                }],
                fsyncs_in_bursts: vec![summary::FsyncsInBursts::default()],
                ..Default::default()
            }
        }),
    };
    let mut out = BTreeSet::new();
    keys(&serde_json::to_value(&s).unwrap(), &mut out);
    out.remove("js-pub"); // a role: a value, not a field
    out
}

/// The problems in the run-directory table for one CSV file.
fn csv_problems(table: &str, file: &str, header: &str, also: &BTreeSet<String>) -> Vec<String> {
    let r = row(table, file);
    let toks = backticked(r);
    let mut out = vec![];
    if !toks.iter().any(|t| t == header) {
        let found = toks
            .iter()
            .find(|t| t.starts_with("t_ns,"))
            .cloned()
            .unwrap_or_default();
        out.push(format!(
            "{file}: the docs' column list is `{found}`, the type's header is `{header}`"
        ));
    }
    let cols: BTreeSet<&str> = header.split(',').collect();
    for t in toks.iter().filter(|t| is_name(t) && t.contains('_')) {
        if !cols.contains(t.as_str()) && !also.contains(t) {
            out.push(format!(
                "{file}: the docs name `{t}`, which is no column of {file}"
            ));
        }
    }
    out
}

/// Everything the docs say that the types contradict.
fn problems(text: &str) -> Vec<String> {
    let table = section(text, "## The run directory");
    let meta_f = meta_fields();
    // Names a CSV row may mention besides its columns: meta.json fields it refers to and
    // values that look like names.
    let mut also = meta_f.clone();
    also.extend(
        [
            "not_run",
            "disk_io_wait_stats",
            "monitor_unreachable",
            "monitor_back",
            "sync_file_range",
            "io_uring_fsync",
            "write_zeroes",
        ]
        .map(String::from),
    );
    let mut out = vec![];
    // envelopes.csv.gz names its measures, values of its `measure` column.
    also.extend(format::envelopes::MEASURES.map(String::from));
    let csvs: [(&str, String); 14] = [
        (format::diskstats::FILE, format::diskstats::header()),
        (format::envelopes::FILE, format::envelopes::HEADER.into()),
        (
            format::procfs::MEMINFO_FILE,
            format::procfs::header(&format::procfs::MEM_COLUMNS),
        ),
        (
            format::procfs::CPU_FILE,
            format::procfs::header(&format::procfs::CPU_COLUMNS),
        ),
        (format::load::FILE, format::load::HEADER.into()),
        (
            format::monitor::VARZ_FILE,
            format::monitor::VARZ_CSV_HEADER.into(),
        ),
        (
            format::monitor::JSZ_FILE,
            format::monitor::JSZ_CSV_HEADER.into(),
        ),
        (
            format::monitor::RABBITMQ_FILE,
            format::monitor::RABBITMQ_CSV_HEADER.into(),
        ),
        (format::probe::FILE, format::probe::HEADER.into()),
        (format::fsync::FILE, format::fsync::HEADER.into()),
        (format::rates::FILE, format::rates::HEADER.into()),
        (format::proc_io::FILE, format::proc_io::HEADER.into()),
        (
            format::fsync_calls::FILE,
            format::fsync_calls::HEADER.into(),
        ),
        (
            format::block_requests::FILE,
            format::block_requests::HEADER.into(),
        ),
    ];
    for (file, header) in &csvs {
        out.extend(csv_problems(table, file, header, &also));
    }
    // record --agents' files (format::agents).
    for src in diskpulse::agent::SOURCES {
        out.extend(csv_problems(
            table,
            format::agents::file(src),
            &format::agents::header(src),
            &also,
        ));
    }
    out.extend(csv_problems(
        table,
        format::agents::CLOCK_FILE,
        format::agents::CLOCK_HEADER,
        &also,
    ));
    // meta.json: its row's names against the document's keys, both ways.
    let values: BTreeSet<&str> = ["diskpulse", "all", "listed"].into();
    let named: BTreeSet<String> = backticked(row(table, meta::FILE))
        .into_iter()
        .filter(|t| is_name(t) && !values.contains(t.as_str()))
        .collect();
    out.extend(compare("meta.json", &named, &meta_f));
    // summary.json: the section's names against the document's keys, both ways.
    let sec = section(text, "### summary.json");
    let sec = &sec[..sec.find("How figures are derived").unwrap_or(sec.len())];
    let named: BTreeSet<String> = backticked(sec).into_iter().filter(|t| is_name(t)).collect();
    out.extend(compare("summary.json", &named, &summary_fields()));
    // study.csv: every figure named, nothing else with an underscore.
    let study_row = text
        .lines()
        .find(|l| l.starts_with("| `study.csv` |"))
        .expect("docs/commands/run.md names study.csv");
    let names: BTreeSet<String> = backticked(study_row)
        .iter()
        .flat_map(|t| {
            t.split(',')
                .map(|x| x.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|t| is_name(t))
        .collect();
    let mut has: BTreeSet<String> = study::FIGURES.iter().map(|(k, _)| k.to_string()).collect();
    has.extend(study::CSV_KEY_COLUMNS.map(String::from));
    out.extend(compare("study.csv", &names, &has));
    out
}

#[test]
fn the_readme_names_exactly_the_fields_of_every_run_directory_file() {
    let p = problems(&readme());
    assert!(
        p.is_empty(),
        "docs/files.md and src/format disagree:\n{}",
        p.join("\n")
    );
}

#[test]
fn a_readme_that_names_a_field_no_type_has_fails() {
    let text = readme();
    // A summary.json field that no code writes (as the README once said of `bytes_acked`).
    let bad = text.replacen(
        "`ops_per_s` and `mib_per_s`",
        "`ops_per_s`, `bytes_acked` and `mib_per_s`",
        1,
    );
    assert_ne!(bad, text);
    assert!(
        problems(&bad).iter().any(|p| p.contains("`bytes_acked`")),
        "{:?}",
        problems(&bad)
    );
    // A column the type has that the docs leave out.
    let bad = text.replacen(",active_ns,phase,oldest_wait_us`", ",active_ns,phase`", 1);
    assert_ne!(bad, text);
    assert!(
        problems(&bad).iter().any(|p| p.starts_with("load.csv")),
        "{:?}",
        problems(&bad)
    );
    // A meta.json field left out.
    let bad = text.replacen("`clock_zero_unix_ns` (the run's zero", "(the run's zero", 1);
    assert_ne!(bad, text);
    assert!(
        problems(&bad)
            .iter()
            .any(|p| p.contains("`clock_zero_unix_ns`, the docs do not name it")),
        "{:?}",
        problems(&bad)
    );
}
