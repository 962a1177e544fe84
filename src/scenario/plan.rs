//! What a study will take, before it runs (`diskpulse run --dry-run`): the time, the disk
//! space its lab volumes and probe files need, whether it needs root and why, and what it
//! creates.
//!
//! Every figure comes from the scenario: a phase's time from its own keys (`duration`,
//! `down_for`) and its child's arguments, parsed by the parsers the child runs
//! ([`super::validate::child_command`]: presets and fio spellings included), placed on the
//! schedule ([`super::schedule`]: phases `with` each other overlap, `during` ends one with
//! another); sizes from the `lab` keys and the probe's `--size`. What only the run can know
//! (how long a file layout, a broker start or a restart's recovery takes, how big the
//! broker's store and the recordings grow) is named as unknown and never added in, except
//! the per-run setup, which is a stated estimate ([`SETUP_PER_RUN_S`] and friends).
//!
//! Units: seconds (`_s`, f64) and bytes (`_bytes`, u64).
//!
//! What must stay true: nothing here writes, creates or starts anything (it reads free
//! space and the effective uid, as `validate` reads a path's metadata).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::schedule::{Anchor, Schedule};
use super::spec::{PhaseDecl, Scenario};
use super::validate::{child_command, Checked, ChildCommand};
use format::cli::parse_duration;
use format::units::bytes_exact;

/// Setup and teardown of one run that no phase accounts for, an estimate: the recording's
/// start and close and the run's report.
///
/// The three estimates against a measurement (a 2-core VM, shared): scenarios/
/// raid0-vs-raid1.toml plans 9 s of phases and 3.5 s of setup a run; its runs took
/// 14.0-16.8 s, the rest being the 256 MiB probe file's layout (not counted: it depends
/// on the device) and a loaded machine. They are a floor, said as an estimate.
pub const SETUP_PER_RUN_S: f64 = 2.0;
/// A lab volume made and torn down for each run (images, loop devices, mkfs, mount).
pub const SETUP_PER_LAB_VOLUME_S: f64 = 1.5;
/// One embedded broker node started and stopped.
pub const SETUP_PER_BROKER_NODE_S: f64 = 1.0;

/// How long something takes: `s` seconds known, and whether that is all of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Time {
    pub s: f64,
    /// `false`: `s` is a lower bound (a part of it is not known before the run).
    pub complete: bool,
}

impl Time {
    fn exact(s: f64) -> Time {
        Time { s, complete: true }
    }
    fn at_least(s: f64) -> Time {
        Time { s, complete: false }
    }
}

/// One phase's own time and what it leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTime {
    pub time: Time,
    /// What is not counted in `time`, in words ("laying out its 256 MiB file").
    pub not_counted: Option<String>,
}

fn dur_s(d: &Option<String>) -> f64 {
    d.as_deref()
        .and_then(|d| parse_duration(d).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A phase's own time, from its keys and its child's arguments.
pub fn phase_time(s: &Scenario, p: &PhaseDecl) -> PhaseTime {
    let kind = p.kind.get_ref().as_str();
    let known = |s: f64| PhaseTime {
        time: Time::exact(s),
        not_counted: None,
    };
    let partly = |s: f64, what: String| PhaseTime {
        time: Time::at_least(s),
        not_counted: Some(what),
    };
    match (kind, child_command(s, p)) {
        ("sleep", _) => known(dur_s(&p.duration)),
        ("restart", _) | ("start", _) => partly(
            dur_s(&p.down_for),
            "the nodes' start and store recovery".into(),
        ),
        ("kill", _) if p.down_for.is_some() => partly(
            dur_s(&p.down_for),
            "the nodes' start and store recovery".into(),
        ),
        ("stop", _) | ("kill", _) => known(0.0),
        (_, Some(ChildCommand::Load(a))) => {
            let l = &a.load;
            match (l.duration, l.total_ops(), l.rate) {
                (Some(d), None, _) => known(d.as_secs_f64()),
                (Some(d), Some(n), _) => PhaseTime {
                    time: Time::exact(d.as_secs_f64()),
                    not_counted: Some(format!(
                        "at most: it ends earlier if its {n} operations are done first"
                    )),
                },
                (None, Some(n), Some(r)) if r > 0.0 => PhaseTime {
                    time: Time::exact(n as f64 / r),
                    not_counted: Some(format!("{n} operations at {r}/s")),
                },
                (None, Some(n), _) => partly(
                    0.0,
                    format!("its {n} operations as fast as the broker takes them"),
                ),
                (None, None, _) => partly(0.0, "until it is stopped or drained".into()),
            }
        }
        (_, Some(ChildCommand::Probe(a))) => match engines::probe::planned(&a) {
            Ok(pl) => {
                let layout = format!("laying out its {} file", bytes_exact(pl.size_bytes));
                match pl.runtime {
                    Some(rt) if pl.time_based => partly((pl.ramp + rt).as_secs_f64(), layout),
                    Some(rt) => partly(
                        (pl.ramp + rt).as_secs_f64(),
                        format!("{layout}; at most: it ends after --size if that comes first"),
                    ),
                    None => partly(
                        0.0,
                        format!(
                            "{layout}; it runs until its {} are done",
                            bytes_exact(pl.size_bytes)
                        ),
                    ),
                }
            }
            Err(_) => partly(0.0, "its arguments".into()),
        },
        (_, Some(ChildCommand::Fsync(a))) => {
            let n = engines::fsync::planned_tests(&a).unwrap_or(0);
            partly(
                n as f64 * a.secs_per_test.as_secs_f64(),
                format!(
                    "creating its {} test file",
                    bytes_exact(engines::fsync::TEST_FILE_BYTES)
                ),
            )
        }
        (_, Some(ChildCommand::Check(a))) => {
            let modes = collectors::check::flush::Mode::ALL.len() as f64;
            let tests = if a.quick {
                Duration::ZERO
            } else {
                a.test_time.mul_f64(modes)
            };
            partly(
                (a.sample + tests).as_secs_f64(),
                "reading the devices' settings".into(),
            )
        }
        _ => partly(0.0, format!("a '{kind}' phase")),
    }
}

/// One run of a cell: when its last phase ends, and what is not counted.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTime {
    pub phases: Time,
    /// Each phase's `not_counted`, as "#i kind: what".
    pub not_counted: Vec<String>,
}

/// The phases of one cell on their schedule: each starts at its anchor plus `at`, ends
/// after its own time or when the phase it runs `during` ends, whichever is first.
pub fn run_time(s: &Scenario, schedule: &Schedule) -> RunTime {
    let own: Vec<PhaseTime> = s
        .phases
        .iter()
        .map(|p| phase_time(s, p.get_ref()))
        .collect();
    let n = own.len();
    // Memoized over the schedule, which `Schedule::build` checked has no cycle; `depth`
    // guards a `during` that points back.
    struct Walk<'a> {
        schedule: &'a Schedule,
        own: &'a [PhaseTime],
        start: Vec<Option<Time>>,
        end: Vec<Option<Time>>,
    }
    impl Walk<'_> {
        fn start(&mut self, i: usize, depth: usize) -> Time {
            if let Some(t) = self.start[i] {
                return t;
            }
            let slot = &self.schedule.slots[i];
            let base = match slot.anchor {
                _ if depth > self.own.len() * 2 => Time::at_least(0.0),
                Anchor::RunStart => Time::exact(0.0),
                Anchor::StartOf(k) => self.start(k, depth + 1),
                Anchor::EndOf(k) => self.end(k, depth + 1),
            };
            let t = Time {
                s: base.s + slot.offset.as_secs_f64(),
                complete: base.complete,
            };
            self.start[i] = Some(t);
            t
        }
        fn end(&mut self, i: usize, depth: usize) -> Time {
            if let Some(t) = self.end[i] {
                return t;
            }
            let st = self.start(i, depth + 1);
            let mine = Time {
                s: st.s + self.own[i].time.s,
                complete: st.complete && self.own[i].time.complete,
            };
            let t = match self.schedule.slots[i].during {
                Some(d) if depth <= self.own.len() * 2 => {
                    let theirs = self.end(d, depth + 1);
                    // The earlier of the two; a lower bound stays one unless the other,
                    // complete, ends first.
                    match (mine.complete, theirs.complete) {
                        (true, true) => Time::exact(mine.s.min(theirs.s)),
                        (true, false) if mine.s <= theirs.s => mine,
                        (false, true) if theirs.s <= mine.s => theirs,
                        (false, true) => Time::at_least(mine.s),
                        _ => Time::at_least(mine.s.min(theirs.s)),
                    }
                }
                _ => mine,
            };
            self.end[i] = Some(t);
            t
        }
    }
    let mut w = Walk {
        schedule,
        own: &own,
        start: vec![None; n],
        end: vec![None; n],
    };
    let mut last = Time::exact(0.0);
    for i in 0..n {
        let e = w.end(i, 0);
        last = Time {
            s: last.s.max(e.s),
            complete: last.complete && e.complete,
        };
    }
    let not_counted = own
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.not_counted
                .as_ref()
                .map(|w| format!("#{i} {}: {w}", s.phases[i].get_ref().kind.get_ref()))
        })
        .collect();
    RunTime {
        phases: last,
        not_counted,
    }
}

/// The setup estimate of one run of a cell: [`SETUP_PER_RUN_S`], plus each lab volume
/// and each broker node.
pub fn setup_estimate_s(s: &Scenario) -> f64 {
    let labs = s.volumes.iter().filter(|v| v.lab.is_some()).count() as f64;
    let nodes = s
        .broker
        .as_ref()
        .map_or(0.0, |b| b.nodes.parse::<f64>().unwrap_or(1.0));
    SETUP_PER_RUN_S + labs * SETUP_PER_LAB_VOLUME_S + nodes * SETUP_PER_BROKER_NODE_S
}

/// A file a run creates that takes disk space.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub what: String,
    pub path: PathBuf,
    pub bytes: u64,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub runs: usize,
    /// The phases of every run, summed.
    pub phases: Time,
    /// The setup estimate, summed over the runs.
    pub setup_s: f64,
    /// What the phases leave out, each once.
    pub not_counted: Vec<String>,
    /// The lab images one run holds at once (the largest cell's): images are made for a
    /// run and removed after it.
    pub lab_images: Vec<Space>,
    /// Probe and test files outside the lab images (on a `path` volume).
    pub files_outside: Vec<Space>,
    /// Probe and test files inside a lab volume (counted in its images).
    pub files_inside: Vec<Space>,
    /// Why root is needed; empty: not needed.
    pub root: Vec<String>,
    /// What a run creates, in words.
    pub creates: Vec<String>,
}

/// Where the study directory goes: `--out`, else the default's pattern.
pub enum Out<'a> {
    Given(&'a Path),
    Default,
}

/// The plan of a checked study.
#[allow(
    clippy::too_many_lines,
    reason = "one pass over a phase list, each phase kind's plan next to the others' so their shared checks are seen together"
)]
pub fn plan(c: &Checked, out: Out, lab_root: &Path, trace: bool) -> Plan {
    let sc = &c.scenario;
    let repeat = sc.matrix.repeat as usize;
    let runs = c.cells.len() * repeat;
    let mut phases = Time::exact(0.0);
    let mut setup_s = 0.0;
    let mut not_counted: Vec<String> = vec![];
    let mut lab_images: Vec<Space> = vec![];
    let mut files_outside: Vec<Space> = vec![];
    let mut files_inside: Vec<Space> = vec![];
    let mut root: Vec<String> = vec![];
    let mut creates: Vec<String> = vec![];
    let push = |v: &mut Vec<String>, s: String| {
        if !v.contains(&s) {
            v.push(s);
        }
    };
    let study = match out {
        Out::Given(p) => p.display().to_string(),
        Out::Default => format!(
            "diskpulse-runs/<time>-{} (under the current directory)",
            sc.name
        ),
    };
    push(
        &mut creates,
        format!(
            "the study directory {study}: study.json, study.md, study.csv, report.html, and one run directory cells/<cell>/r<k> for each of the {runs} run(s) (first: cells/{}/r1)",
            c.cells.first().map_or("", |c| c.id.as_str())
        ),
    );
    if trace || sc.samplers.trace {
        push(
            &mut root,
            "the trace (tracefs; without root the runs go on untraced)".into(),
        );
    }
    for cs in &c.concrete {
        let schedule = match Schedule::of(&cs.phases) {
            Ok(s) => s,
            Err(_) => continue,
        };
        let rt = run_time(cs, &schedule);
        phases = Time {
            s: phases.s + rt.phases.s * repeat as f64,
            complete: phases.complete && rt.phases.complete,
        };
        for w in rt.not_counted {
            push(&mut not_counted, w);
        }
        let cell_setup = setup_estimate_s(cs);
        let mut images = vec![];
        for v in &cs.volumes {
            let name = v.name.get_ref();
            match (&v.path, &v.lab) {
                (Some(p), _) if v.create && !Path::new(p).exists() => {
                    push(
                        &mut creates,
                        format!("directory {p} for volume {name} (create = true; left in place)"),
                    );
                }
                (None, Some(l)) => {
                    let Ok(spec) = super::run::lab_spec(name, l) else {
                        continue;
                    };
                    let img_dir = lab_root.join("images");
                    let paths: Vec<PathBuf> = (0..spec.devices)
                        .map(|i| img_dir.join(format!("{name}-{i}.img")))
                        .collect();
                    for p in &paths {
                        images.push(Space {
                            what: format!("lab volume {name} image"),
                            path: p.clone(),
                            bytes: spec.size,
                        });
                    }
                    push(
                        &mut root,
                        format!("lab volume {name} (loop devices, mkfs, mount)"),
                    );
                    let mut made = format!(
                        "lab volume {name} ({}) for each run, torn down after it: images {}, {} loop device(s) (free ones, picked when the run starts), mounted at {}",
                        spec.describe(),
                        paths
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        spec.devices,
                        lab_root.join("mnt").join(name).display()
                    );
                    if spec.throttle.is_some() {
                        push(
                            &mut root,
                            format!(
                                "lab volume {name}'s throttle (a cgroup with blk-throttle rules)"
                            ),
                        );
                        made.push_str(&format!(", cgroup diskpulse-{name}"));
                    }
                    push(&mut creates, made);
                }
                _ => {}
            }
        }
        if !images.is_empty() {
            push(
                &mut creates,
                format!(
                    "{} (what each lab volume is made of, by which process)",
                    lab_root.join("state.json").display()
                ),
            );
        }
        let vol_dir = |name: &str| -> Option<(PathBuf, bool)> {
            let v = cs.volumes.iter().find(|v| v.name.get_ref() == name)?;
            match (&v.path, &v.lab) {
                (Some(p), _) => Some((PathBuf::from(p), false)),
                (None, Some(_)) => Some((lab_root.join("mnt").join(name), true)),
                _ => None,
            }
        };
        if let Some(b) = &cs.broker {
            let n: usize = b.nodes.parse().unwrap_or(1);
            let stores: Vec<String> = (0..n)
                .filter_map(|i| {
                    let v = &b.volumes[if b.volumes.len() == 1 { 0 } else { i }];
                    let (d, _) = vol_dir(v.get_ref())?;
                    Some(if b.is_rabbitmq() {
                        d.join("rabbitmq").join("n1").display().to_string()
                    } else {
                        d.join("js")
                            .join(format!("n{}", i + 1))
                            .display()
                            .to_string()
                    })
                })
                .collect();
            let what = if b.is_rabbitmq() {
                "an embedded RabbitMQ node".to_string()
            } else {
                format!("{n} embedded nats-server node(s) on loopback ports")
            };
            push(
                &mut creates,
                format!("{what}, stores {}", stores.join(", ")),
            );
        }
        for (i, p) in cs.phases.iter().enumerate() {
            let p = p.get_ref();
            let kind = p.kind.get_ref().as_str();
            if kind == "restart" && p.drop_caches {
                push(
                    &mut root,
                    format!("phase #{i} restart's drop_caches (/proc/sys/vm/drop_caches)"),
                );
            }
            let target = p.volume.as_ref().and_then(|v| vol_dir(v.get_ref()));
            let file = match (kind, child_command(cs, p)) {
                (_, Some(ChildCommand::Probe(a))) => {
                    let pl = engines::probe::planned(&a).ok();
                    let path = match (&target, &a.filename) {
                        (Some((d, _)), _) => Some(d.join(format!("diskpulse-probe-{i}.dat"))),
                        (None, Some(f)) if !f.starts_with("/diskpulse-dry-run") => {
                            if f.starts_with("/dev") {
                                push(
                                    &mut root,
                                    format!("phase #{i} probe on the block device {}", f.display()),
                                );
                            }
                            Some(f.clone())
                        }
                        _ => None,
                    };
                    match (path, pl) {
                        (Some(path), Some(pl)) if !path.starts_with("/dev") => Some(Space {
                            what: format!(
                                "phase #{i} probe file ({})",
                                if pl.default_size {
                                    "the probe's default size, no --size"
                                } else {
                                    "its --size"
                                }
                            ),
                            path,
                            bytes: pl.size_bytes,
                        }),
                        _ => None,
                    }
                }
                (_, Some(ChildCommand::Fsync(_))) => target.as_ref().map(|(d, _)| Space {
                    what: format!("phase #{i} fsync test file (removed after it)"),
                    path: d.join(".diskpulse-fsync.<pid>"),
                    bytes: engines::fsync::TEST_FILE_BYTES,
                }),
                _ => None,
            };
            if let Some(f) = file {
                let inside = target.as_ref().is_some_and(|(_, lab)| *lab);
                push(&mut creates, format!("{} {}", f.what, f.path.display()));
                let list = if inside {
                    &mut files_inside
                } else {
                    &mut files_outside
                };
                if !list.contains(&f) {
                    list.push(f);
                }
            }
        }
        setup_s += cell_setup * repeat as f64;
        let total = |v: &[Space]| v.iter().map(|s| s.bytes).sum::<u64>();
        if total(&images) > total(&lab_images) {
            lab_images = images;
        }
    }
    Plan {
        runs,
        phases,
        setup_s,
        not_counted,
        lab_images,
        files_outside,
        files_inside,
        root,
        creates,
    }
}

/// A time in seconds: "4.5 s", "45 s", "75 s (1:15)" past a minute.
pub fn secs_words(s: f64) -> String {
    if s < 10.0 {
        let t = format!("{s:.1}");
        format!("{} s", t.trim_end_matches(".0"))
    } else if s < 60.0 {
        format!("{} s", s.round() as u64)
    } else {
        format!("{} s ({})", s.round() as u64, format::units::clock(s))
    }
}

/// The dry run's lines: `time:`, `space:`, `root:`, `creates:`, in that order.
pub fn lines(p: &Plan, lab_root: &Path, euid_root: bool) -> Vec<String> {
    let mut v = vec![];
    let at_least = if p.phases.complete { "" } else { "at least " };
    v.push(format!(
        "time: {at_least}{} of phases over {} run(s), plus about {} of setup (an estimate: each run's recording and report, lab volumes made and torn down, broker nodes started); {at_least}about {} in all",
        secs_words(p.phases.s),
        p.runs,
        secs_words(p.setup_s),
        secs_words(p.phases.s + p.setup_s),
    ));
    for w in &p.not_counted {
        v.push(format!("time: not counted (not known before the run): {w}"));
    }
    let sum = |l: &[Space]| l.iter().map(|s| s.bytes).sum::<u64>();
    if p.lab_images.is_empty() {
        v.push("space: no lab volume, no image files".into());
    } else {
        let free = engines::lab::os::free_bytes(lab_root)
            .or_else(|| lab_root.parent().and_then(engines::lab::os::free_bytes))
            .map(|f| format!("; {} free there now", bytes_exact(f)))
            .unwrap_or_default();
        v.push(format!(
            "space: {} for lab images at once, {} (sparse: blocks are taken as the run writes them; removed after each run{free})",
            bytes_exact(sum(&p.lab_images)),
            p.lab_images
                .iter()
                .map(|s| format!("{} {}", s.path.display(), bytes_exact(s.bytes)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for s in &p.files_inside {
        v.push(format!(
            "space: {} inside its lab volume: {} {}",
            s.what,
            s.path.display(),
            bytes_exact(s.bytes)
        ));
    }
    for s in &p.files_outside {
        v.push(format!(
            "space: {} {} {}",
            s.what,
            s.path.display(),
            bytes_exact(s.bytes)
        ));
    }
    v.push(
        "space: not known before the run: the broker's store (it grows with what the load publishes) and each run's recording in the study directory".into(),
    );
    if p.root.is_empty() {
        v.push("root: not needed".into());
    } else {
        v.push(format!(
            "root: needed for {}{}",
            p.root.join("; "),
            if euid_root {
                " (running as root)"
            } else {
                " (not running as root: run it with sudo)"
            }
        ));
    }
    for c in &p.creates {
        v.push(format!("creates: {c}"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(t: &str) -> Checked {
        super::super::validate::check_study("s.toml", t).unwrap()
    }

    #[test]
    fn phases_with_each_other_overlap_and_after_adds_up() {
        let c = checked(
            "name = \"t\"\n[[phases]]\nkind = \"sleep\"\nname = \"a\"\nduration = \"10s\"\n[[phases]]\nkind = \"sleep\"\nwith = \"a\"\nduration = \"4s\"\n[[phases]]\nkind = \"sleep\"\nafter = \"a\"\nat = \"1s\"\nduration = \"2s\"\n",
        );
        let s = &c.concrete[0];
        let rt = run_time(s, &Schedule::of(&s.phases).unwrap());
        assert_eq!(rt.phases, Time::exact(13.0));
        assert!(rt.not_counted.is_empty());
    }

    #[test]
    fn during_ends_a_phase_with_another_and_an_unknown_time_is_a_lower_bound() {
        let c = checked(
            "name = \"t\"\n[[phases]]\nkind = \"sleep\"\nname = \"a\"\nduration = \"5s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"60s\"\nduring = \"a\"\n",
        );
        let s = &c.concrete[0];
        let rt = run_time(s, &Schedule::of(&s.phases).unwrap());
        assert_eq!(rt.phases, Time::exact(5.0));
        let c = checked(
            "name = \"t\"\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n[[phases]]\nkind = \"probe\"\nvolume = \"v\"\nargs = [\"--runtime\", \"3s\", \"--time-based\"]\n",
        );
        let s = &c.concrete[0];
        let rt = run_time(s, &Schedule::of(&s.phases).unwrap());
        assert_eq!(rt.phases, Time::at_least(3.0));
        assert_eq!(
            rt.not_counted,
            vec!["#0 probe: laying out its 256 MiB file".to_string()]
        );
    }

    #[test]
    fn a_load_s_duration_or_its_count_at_its_rate_is_its_time() {
        let c = checked(
            "name = \"t\"\n[[volumes]]\nname = \"s\"\npath = \"/tmp\"\n[broker]\nvolumes = [\"s\"]\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\", \"--msgs\", \"5000\", \"--rate\", \"500\"]\n",
        );
        let s = &c.concrete[0];
        assert_eq!(phase_time(s, s.phases[0].get_ref()).time, Time::exact(10.0));
        let p = plan(&c, Out::Default, Path::new("/var/tmp/l"), false);
        assert_eq!(p.runs, 1);
        assert!(p.root.is_empty(), "{:?}", p.root);
        assert!(p.lab_images.is_empty());
        assert!(
            (p.setup_s - (SETUP_PER_RUN_S + SETUP_PER_BROKER_NODE_S)).abs() < 1e-9,
            "{}",
            p.setup_s
        );
    }
}
