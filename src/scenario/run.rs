//! Running a scenario: for every matrix cell and repeat, lab volumes up, a recording, the
//! broker, the phases on their schedule ([`super::executor`]), then everything down and the run reported; at the end the
//! study report.
//!
//! Layout of a study directory:
//! ```text
//! STUDY/scenario.toml          the file as given
//! STUDY/study.json             cells, their runs and status (rewritten after every run)
//! STUDY/cells/<cell>/r<k>/     one run directory per cell and repeat (see docs/commands/run.md)
//! STUDY/study.md|csv|json      the study tables (report)
//! STUDY/report.html            the study report
//! ```
//! Phases that run diskpulse commands (load, probe, fsync, check) run them as child
//! processes of this binary on the run's clock (`DISKPULSE_RUN_DIR`,
//! `DISKPULSE_CLOCK_ZERO_NS`), exactly as `diskpulse record -- diskpulse ...` would.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::devices::{self, Resolver};
use format::study::{Study, StudyCell, StudyRun};

use super::executor::run_schedule;
use super::phases::{PhaseCtx, SharedCluster, SharedRabbit};
use super::schedule::Schedule;
use super::spec::{self, Cell, Scenario};
use crate::session::{BrokerPlan, RecordTo, Session, Threads};
use engines::broker::{BrokerProcess, ClusterOptions};
use engines::lab::{Lab, Volume};
use engines::recording::session::SamplerSetup;
use format::cli::parse_duration;
use format::usage;

/// How a study runs.
pub struct StudyOptions {
    pub out: PathBuf,
    pub lab_root: PathBuf,
    /// The diskpulse binary for phase child processes.
    pub exe: PathBuf,
    pub stop: Arc<AtomicBool>,
    /// `run --trace`: trace every run (as `[samplers] trace = true`).
    pub trace: bool,
    /// `run --chunk/--keep/--trigger`: every run's recording (default: a chunk an hour).
    pub chunks: engines::recording::chunks::ChunkSetup,
    /// The progress line (a terminal, or `--progress`), started for this study's runs.
    pub progress: Option<crate::progress::Progress>,
}

/// Replaces every `${name}` in the file's text with the cell's value. The file was
/// checked by [`spec::parse`], so every name is known.
pub fn cell_text(text: &str, cell: &Cell) -> String {
    let mut t = text.to_string();
    for (k, v) in &cell.params {
        t = t.replace(&format!("${{{k}}}"), v);
    }
    t
}

/// A lab volume as the scenario declares it, checked.
pub fn lab_spec(name: &str, d: &spec::LabDecl) -> anyhow::Result<engines::lab::VolumeSpec> {
    use engines::lab::{Fs, Raid, Throttle, VolumeSpec, WriteCache};
    use format::cli::parse_size;
    let size = parse_size(&d.size).map_err(|e| anyhow::anyhow!("volume {name}: size {e}"))?;
    let fs = match d.fs.as_str() {
        "ext4" => Fs::Ext4,
        "xfs" => Fs::Xfs,
        "btrfs" => Fs::Btrfs,
        other => anyhow::bail!("volume {name}: fs '{other}' is not ext4, xfs or btrfs"),
    };
    let raid = match d.raid.as_str() {
        "single" | "none" => Raid::Single,
        "0" | "raid0" => Raid::Raid0,
        "1" | "raid1" => Raid::Raid1,
        "10" | "raid10" => Raid::Raid10,
        other => anyhow::bail!("volume {name}: raid '{other}' is not single, 0, 1 or 10"),
    };
    let num = |what: &str, v: &Option<String>, size_units: bool| -> anyhow::Result<Option<u64>> {
        v.as_ref()
            .map(|s| {
                if size_units {
                    parse_size(s).map_err(|e| anyhow::anyhow!("volume {name}: {what} {e}"))
                } else {
                    s.parse::<u64>()
                        .map_err(|_| anyhow::anyhow!("volume {name}: {what} '{s}' is not a number"))
                }
            })
            .transpose()
    };
    let throttle = Throttle {
        read_iops: num("read_iops", &d.read_iops, false)?,
        write_iops: num("write_iops", &d.write_iops, false)?,
        read_bps: num("read_bps", &d.read_bps, true)?,
        write_bps: num("write_bps", &d.write_bps, true)?,
    };
    let any_throttle = throttle.read_iops.is_some()
        || throttle.write_iops.is_some()
        || throttle.read_bps.is_some()
        || throttle.write_bps.is_some();
    let write_cache = match d.write_cache.as_deref() {
        None => None,
        Some("back") | Some("write back") => Some(WriteCache::WriteBack),
        Some("through") | Some("write through") => Some(WriteCache::WriteThrough),
        Some(other) => anyhow::bail!("volume {name}: write_cache '{other}' is not back or through"),
    };
    let spec = VolumeSpec {
        name: name.to_string(),
        size,
        fs,
        raid,
        devices: d.devices,
        mount_options: d.mount_options.clone(),
        throttle: any_throttle.then_some(throttle),
        write_cache,
    };
    spec.validate()?;
    Ok(spec)
}

/// The scenario file's text: a regular file of at most 16 MiB (a FIFO or /dev/zero given
/// as the scenario hung `run`, even `--dry-run`); a usage error naming it otherwise.
pub fn read_scenario(path: &Path) -> anyhow::Result<String> {
    format::regular::read_input(path, 16 << 20).map_err(|e| {
        usage!(
            "cannot read scenario {}: {e}; name a scenario file (see scenarios/)",
            path.display()
        )
    })
}

/// Runs the whole study; returns the exit code.
pub fn run_study(path: &Path, o: &StudyOptions) -> anyhow::Result<i32> {
    let text = read_scenario(path)?;
    // Every check the dry run makes, before anything is created or started.
    let super::validate::Checked {
        scenario: sc,
        cells,
        concrete,
        secrets,
    } = super::validate::check_study(&path.display().to_string(), &text)
        .map_err(|e| usage!("{e}"))?;
    let claim = engines::recording::session::create_run_dir(&o.out)?;
    // The copy keeps the file as written, without the secrets its phases' args carry
    // and the matrix values the cells hide.
    format::atomic::write(
        &o.out.join("scenario.toml"),
        format::redact::scrub(&text, &secrets).as_bytes(),
    )?;
    drop(claim);
    let mut records: Vec<StudyRun> = vec![];
    let write_study = |records: &[StudyRun], status: &str| -> anyhow::Result<()> {
        Study {
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            cells: cells
                .iter()
                .map(|c| StudyCell {
                    id: c.id.clone(),
                    params: c.params.clone(),
                })
                .collect(),
            runs: records.to_vec(),
            status: status.to_string(),
            file: Some(path.display().to_string()),
            format_version: Some(format::study::STUDY_FORMAT_VERSION),
            repeat: Some(sc.matrix.repeat),
            ..Default::default()
        }
        .write_running(&o.out)
    };
    write_study(&records, "running")?;
    let mut failed = 0;
    let mut warnings = vec![];
    // Lines above the progress bar, when there is one.
    let say = |l: &str| match &o.progress {
        Some(p) => p.println(l),
        None => eprintln!("{l}"),
    };
    let mut run_no = 0;
    'all: for (cell, s) in cells.iter().zip(&concrete) {
        // The plan's time of one run of this cell: its phases on their schedule and the
        // setup estimate (the ETA before a run has ended, and the bar's length).
        let planned_s = Schedule::of(&s.phases)
            .map(|sch| super::plan::run_time(s, &sch).phases.s)
            .unwrap_or(0.0)
            + super::plan::setup_estimate_s(s);
        for rep in 1..=sc.matrix.repeat {
            if o.stop.load(Ordering::Relaxed) {
                break 'all;
            }
            run_no += 1;
            let dir = o.out.join("cells").join(&cell.id).join(format!("r{rep}"));
            say(&format!("== {} r{rep}: {}", cell.id, dir.display()));
            if let Some(p) = &o.progress {
                p.begin_run(
                    run_no,
                    &format!("{} r{rep}", cell.id),
                    Some(planned_s),
                    true,
                );
            }
            let t0 = Instant::now();
            let r = run_one(s, cell, &dir, o, &mut warnings);
            if let Some(p) = &o.progress {
                p.end_run();
            }
            let (status, error) = match &r {
                Ok(()) if o.stop.load(Ordering::Relaxed) => ("interrupted".to_string(), None),
                Ok(()) => ("ok".to_string(), None),
                Err(e) => {
                    failed += 1;
                    say(&format!("   failed: {e:#}"));
                    ("failed".to_string(), Some(format!("{e:#}")))
                }
            };
            records.push(StudyRun {
                cell: cell.id.clone(),
                params: cell.params.clone(),
                repeat: rep,
                dir: dir
                    .strip_prefix(&o.out)
                    .unwrap_or(&dir)
                    .display()
                    .to_string(),
                status,
                error,
                elapsed_s: t0.elapsed().as_secs_f64(),
                invalid: None,
            });
            write_study(&records, "running")?;
        }
    }
    let interrupted = o.stop.load(Ordering::Relaxed);
    write_study(&records, if interrupted { "interrupted" } else { "done" })?;
    let answers = super::study::write_reports(&o.out);
    // The bar is cleared before the last lines (also when the report failed).
    if let Some(p) = &o.progress {
        p.finish();
    }
    let answers = answers?;
    eprintln!("{}", o.out.join("report.html").display());
    // The study's answers, as study.md opens with them; the directory last.
    for l in answer_lines(&answers) {
        println!("{l}");
    }
    println!("{}", o.out.display());
    // Failure is loud: a failed run's error is what the study prints last (a load phase's
    // error ends with its loud line: what failed, when, how many).
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // What reading the recordings back found (as `report` prints it), once per run.
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    for r in records.iter().filter(|r| r.status == "failed") {
        eprintln!(
            "{} r{} failed: {}",
            r.cell,
            r.repeat,
            r.error.as_deref().unwrap_or("")
        );
    }
    Ok(if interrupted {
        130
    } else if failed > 0 {
        1
    } else {
        0
    })
}

/// What `run` prints at its end: study.md's "## Answers" and "## Invalid runs" lines, or
/// why there is no answer.
pub fn answer_lines(a: &super::study::Answers) -> Vec<String> {
    let mut v = vec![];
    if a.verdicts.is_empty() && a.questions.iter().all(|q| q.unanswered.is_empty()) {
        v.push(format!(
            "Answers: none: {}",
            if a.params.is_empty() {
                "the scenario has no [matrix] parameter to compare (the figures are in study.md)"
            } else if a.valid_runs == 0 {
                "no run is valid to compare (why below, or under \"Runs that did not finish\" in study.md)"
            } else {
                "no figure differs by more than 2% between a parameter's values with the others held (study.md has the figures)"
            }
        ));
    } else {
        // study.md's "## Answers": each question's heading, then its lines.
        v.push("Answers:".to_string());
        for q in &a.questions {
            v.push(format!("{}:", q.heading));
            v.extend(q.verdicts.iter().map(|x| format!("- {}", x.line)));
            v.extend(q.unanswered.iter().map(|u| format!("- {u}")));
        }
    }
    v.extend(a.invalid.iter().map(|l| format!("- {l}")));
    v
}

/// Runs one cell's repeat into `dir`; the warnings of reading its recording back are
/// added to `warnings` (the study prints them once, at its end).
fn run_one(
    s: &Scenario,
    _cell: &Cell,
    dir: &Path,
    o: &StudyOptions,
    warnings: &mut Vec<String>,
) -> anyhow::Result<()> {
    let lab = Lab::open(&o.lab_root).with_stop(o.stop.clone());
    // Volumes: lab ones are created for this run and torn down after it, whatever happens.
    let mut vols: Vec<(String, PathBuf, Option<Volume>)> = vec![];
    let result = (|| -> anyhow::Result<()> {
        for v in &s.volumes {
            let name = v.name.get_ref().clone();
            match (&v.path, &v.lab) {
                (Some(p), _) => {
                    // Checked before the study began; never a tree (issue 10: a typo
                    // must not make one on /), one directory with create = true.
                    if v.create && !Path::new(p).exists() {
                        // Only the last directory (validate checked its parent).
                        std::fs::create_dir(p).map_err(|e| {
                            anyhow::anyhow!("volume {name}: cannot create {p}: {e}")
                        })?;
                    }
                    if !Path::new(p).is_dir() {
                        anyhow::bail!("volume {name}: path {p} is no longer a directory");
                    }
                    vols.push((name, PathBuf::from(p), None));
                }
                (None, Some(l)) => {
                    let spec = lab_spec(&name, l)?;
                    let vol = lab.up(&spec)?;
                    vols.push((name, vol.mount.clone(), Some(vol)));
                }
                _ => unreachable!("checked by spec::parse"),
            }
        }
        run_recorded(s, dir, &vols, o, warnings)
    })();
    let mut down_err = None;
    for (_, _, v) in vols.iter_mut().rev() {
        if let Some(v) = v.take() {
            if let Err(e) = teardown(&lab, v) {
                eprintln!("   {e:#}");
                down_err.get_or_insert(e);
            }
        }
    }
    match (result, down_err) {
        (Err(e), _) | (Ok(()), Some(e)) => Err(e),
        (Ok(()), None) => Ok(()),
    }
}

/// Tears a lab volume down; a file system can stay busy for a moment after its last user
/// exits (btrfs workers, a child still closing), so the named teardown is retried for 5 s.
fn teardown(lab: &Lab, v: Volume) -> anyhow::Result<()> {
    let name = v.name.clone();
    let Err(mut last) = v.down() else {
        return Ok(());
    };
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(500));
        match lab.down(&name) {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last.context(format!("lab volume {name} was not torn down")))
}

pub(super) fn vol_dir<'a>(
    vols: &'a [(String, PathBuf, Option<Volume>)],
    name: &str,
) -> anyhow::Result<&'a Path> {
    vols.iter()
        .find(|v| v.0 == name)
        .map(|v| v.1.as_path())
        .ok_or_else(|| anyhow::anyhow!("no volume '{name}'"))
}

pub(super) fn vol_cgroup(
    vols: &[(String, PathBuf, Option<Volume>)],
    name: &str,
) -> Option<PathBuf> {
    vols.iter()
        .find(|v| v.0 == name)
        .and_then(|v| v.2.as_ref())
        .and_then(|v| v.cgroup.clone())
}

#[allow(
    clippy::too_many_lines,
    reason = "one cell's run in order (recording, phases, summary), each next to what it stops on an error"
)]
fn run_recorded(
    s: &Scenario,
    dir: &Path,
    vols: &[(String, PathBuf, Option<Volume>)],
    o: &StudyOptions,
    warnings: &mut Vec<String>,
) -> anyhow::Result<()> {
    let r = Resolver::default();
    let mut lists = vec![];
    for (_, p, _) in vols {
        lists.push(r.for_path(p)?);
    }
    let setup = SamplerSetup {
        devices: devices::merge(lists),
        disk_interval: parse_duration(&s.samplers.interval).map_err(anyhow::Error::msg)?,
        mem_interval: parse_duration(&s.samplers.mem_interval).map_err(anyhow::Error::msg)?,
        cpu_interval: parse_duration(&s.samplers.cpu_interval).map_err(anyhow::Error::msg)?,
        procfs: PathBuf::from("/proc"),
        // The nodes' pids are handed to the trace once they run (session.rs).
        trace: (s.samplers.trace || o.trace).then(engines::recording::TraceSetup::default),
        chunks: o.chunks.clone(),
    };
    let argv = vec!["diskpulse".to_string(), "run".to_string(), s.name.clone()];
    // The progress line: this run's load.csv/probe.csv, and the write bursts of the
    // volumes' own devices from the sampler's bins.
    let live = o.progress.as_ref().map(|p| {
        let l = engines::live::Live::new(setup.disk_interval.as_nanos() as u64);
        p.watch(
            dir,
            Some((l.clone(), crate::progress::own_devices(&setup.devices))),
        );
        l
    });
    let record = RecordTo::New {
        dir: dir.to_path_buf(),
        setup,
        argv,
    };
    let mut session = Session::open_with_live(record, Threads::All, o.stop.clone(), live)?;
    session.set(&format::meta::Volumes(
        vols.iter()
            .map(|(n, p, v)| format::meta::VolumeMeta {
                name: n.clone(),
                dir: p.clone(),
                lab: v.as_ref().map(|v| format::meta::VolumeLab {
                    loop_devices: v.loop_devices.clone(),
                    cgroup: v.cgroup.clone(),
                }),
            })
            .collect(),
    ))?;
    let monitor_interval =
        parse_duration(&s.samplers.monitor_interval).map_err(anyhow::Error::msg)?;
    let mut node_devices = vec![];
    let mut node_cgroups = vec![];
    let broker = match &s.broker {
        None => BrokerPlan::None,
        Some(b) => {
            let n: usize = b.nodes.parse()?;
            let mut stores = vec![];
            for i in 0..n {
                let v = &b.volumes[if b.volumes.len() == 1 { 0 } else { i }];
                let d = vol_dir(vols, v.get_ref())?
                    .join("js")
                    .join(format!("n{}", i + 1));
                // The devices that hold the store (a loop device's backing disk sees the
                // same bytes again: counting both would double a restart's reads).
                let holders: Vec<String> = r
                    .for_path(vol_dir(vols, v.get_ref())?)?
                    .iter()
                    .filter(|d| d.why.starts_with("holds") || d.why.starts_with("btrfs member"))
                    .map(|d| d.name.clone())
                    .collect();
                node_devices.push(format::meta::NodeDevices {
                    node: format!("n{}", i + 1),
                    volume: Some(v.get_ref().to_string()),
                    devices: holders,
                });
                node_cgroups.push(vol_cgroup(vols, v.get_ref()));
                stores.push(d);
            }
            if b.is_rabbitmq() {
                // One node (validated): its HOME and mnesia on the volume, VOL/rabbitmq/n1.
                let store = vol_dir(vols, b.volumes[0].get_ref())?
                    .join("rabbitmq")
                    .join("n1");
                let mut ro = engines::broker::RabbitOptions::new(store, dir.to_path_buf());
                ro.name = "n1".into();
                ro.binary = b.rabbitmq_server.as_ref().map(PathBuf::from);
                BrokerPlan::Rabbit(ro)
            } else {
                let mut co = ClusterOptions::new(n, stores, b.sync().parse()?, dir.to_path_buf());
                co.binary = b.nats_server.as_ref().map(PathBuf::from);
                BrokerPlan::Embedded(co)
            }
        }
    };
    let clock = session.clock();
    let schedule = Schedule::of(&s.phases)?;
    let agents_plan = s
        .agents
        .as_ref()
        .map(super::agents::AgentsPlan::of)
        .transpose()?;
    let agents_meta = std::sync::Mutex::new(None);
    // A scenario's restart phases stop nodes on purpose: no broker watch.
    let ran = session.run(broker, monitor_interval, false, async |live| {
        if let Some(c) = &live.cluster {
            // A throttled volume limits the broker's own I/O too.
            for (node, cg) in c.nodes().iter().zip(&node_cgroups) {
                if let Some(cg) = cg {
                    let _ = std::fs::write(cg.join("cgroup.procs"), node.pid().to_string());
                }
            }
        }
        if let (Some(n), Some(Some(cg))) = (&live.rabbit, node_cgroups.first()) {
            let _ = std::fs::write(cg.join("cgroup.procs"), n.pid().to_string());
        }
        // The agents' collector, once the broker is up; every node answered before the
        // phases start.
        let agents = match &agents_plan {
            Some(p) => Some(
                super::agents::start(
                    p,
                    live.cluster.as_ref(),
                    &engines::recording::chunks::RunFiles {
                        dir: dir.to_path_buf(),
                        flight: live.flight.clone(),
                    },
                    clock,
                    &live.events,
                    &o.stop,
                    &agents_meta,
                )
                .await?,
            ),
            None => None,
        };
        let cx = PhaseCtx {
            dir,
            vols,
            cluster: &SharedCluster::new(live.cluster.take()),
            rabbit: &SharedRabbit::new(live.rabbit.take()),
            events: &live.events.clone(),
            zero_ns: clock.zero_monotonic_ns(),
            exe: &o.exe,
            node_cgroups: &node_cgroups,
            process_hook: live.process_hook.clone(),
        };
        let (results, err) = run_schedule(&s.phases, &schedule, &cx, clock, &o.stop).await;
        if let Some(a) = agents {
            a.finish(&agents_meta).await;
        }
        // Back to the session, which stops the nodes.
        live.cluster = cx.cluster.lock().await.take();
        live.rabbit = cx.rabbit.lock().await.take();
        Ok((results, err))
    });
    if let Some(m) = agents_meta.into_inner().unwrap_or_else(|e| e.into_inner()) {
        for (n, nm) in &m.nodes {
            eprintln!(
                "   agent {n}: offset {} bound {}, {} lost, {} duplicates dropped",
                nm.offset_ns
                    .map_or("unknown".into(), |o| format!("{:+.3} ms", o as f64 / 1e6)),
                nm.bound_ns
                    .map_or("-".into(), |b| format!("{:.3} ms", b as f64 / 1e6)),
                nm.sources.values().map(|s| s.lost).sum::<u64>(),
                nm.sources.values().map(|s| s.duplicates).sum::<u64>(),
            );
        }
        session.set(&m)?;
    }
    // The phases that ran go into meta.json even when one failed.
    let res = match ran.result {
        Ok((phases, err)) => {
            if let Some(mut m) = ran.cluster_meta {
                // The cluster's meta, with the version at the top as for one server
                // (a RabbitMQ node's meta has it there already).
                if let format::meta::BrokerSection::Cluster(c) = &mut m {
                    c.version = c.servers.first().map(|s| s.version.clone());
                }
                session.set(&m)?;
                session.set(&format::meta::BrokerNodes(node_devices))?;
            }
            session.set(&format::phases::PhasesSection(phases))?;
            match err {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
        Err(e) => Err(e),
    };
    if let Some((d, _, w)) = session.close(Some(&report::ReportOptions::default()))? {
        warnings.extend(w.into_iter().map(|w| format!("{}: {w}", d.display())));
    }
    res.map_err(|e| with_store_usage(e, dir))
}

/// A load that failed because the broker's store filled up says which node, which volume
/// and how full (the `store_volume` events the session recorded when it stopped them).
fn with_store_usage(e: anyhow::Error, dir: &Path) -> anyhow::Error {
    let text = format!("{e:#}");
    if !text.contains(format::summary::kind_words("insufficient_resources").0) {
        return e;
    }
    let stores: Vec<String> = format::events::read(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|ev| match &ev.body {
            format::events::Body::StoreVolume(v) => Some(format::events::store_volume_line(v)),
            _ => None,
        })
        .collect();
    if stores.is_empty() {
        return e;
    }
    anyhow::anyhow!("{text}; {}", stores.join("; "))
}
