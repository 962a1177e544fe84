//! `diskpulse run SCENARIO.toml`: a whole study from one file.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;

use crate::scenario::{plan as srun_plan, run as srun, validate};
use ::format::usage;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see scenarios/ for examples).
    pub scenario: PathBuf,
    /// Study directory to create (must not exist or be empty). Default: diskpulse-runs/<time>-<name>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the cells and runs, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where lab volumes live (images, mounts, state).
    #[arg(long, default_value = "/var/tmp/diskpulse-lab", value_name = "DIR")]
    pub lab_root: PathBuf,
    /// Trace the broker nodes' sync calls and the volumes' block requests in every run
    /// (tracefs, root; as `[samplers] trace = true`). Without root or tracefs: one line,
    /// and the runs go on without it.
    #[arg(long)]
    pub trace: bool,
    /// `--chunk`, `--keep`, `--trigger`, `--trigger-window` for every run's recording, as
    /// for `record` (an `ack_p99_ms` trigger reads the load phases' load.csv).
    #[command(flatten)]
    pub flight: crate::commands::record::FlightArgs,
    #[command(flatten)]
    pub progress: super::ProgressArgs,
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let chunks = a.flight.setup()?;
    // The lab root is checked as `lab up --root` checks it, before anything is made.
    engines::lab::check_root(&a.lab_root)
        .map_err(|e| usage!("--lab-root {} {e}", a.lab_root.display()))?;
    let text = srun::read_scenario(&a.scenario)?;
    let path = a.scenario.display().to_string();
    // The same checks as the real run (sizes, durations, paths, phase arguments).
    let checked = validate::check_study(&path, &text).map_err(|e| usage!("{e}"))?;
    let (sc, cells) = (&checked.scenario, &checked.cells);
    let (roles, devices) = validate::trigger_sources(&checked);
    a.flight
        .check_sources(&engines::recording::chunks::TriggerSources {
            devices: devices.as_deref(),
            roles: Some(&roles),
        })?;
    if a.dry_run {
        println!(
            "{}: {} cell(s) x {} repeat(s) = {} run(s)",
            sc.name,
            cells.len(),
            sc.matrix.repeat,
            cells.len() * sc.matrix.repeat as usize
        );
        for (c, cs) in cells.iter().zip(&checked.concrete) {
            let schedule =
                crate::scenario::schedule::Schedule::of(&cs.phases).map_err(|e| usage!("{e:#}"))?;
            let labels: Vec<String> = cs
                .phases
                .iter()
                .map(|p| match &p.get_ref().name {
                    Some(n) => format!("'{}'", n.get_ref()),
                    None => p.get_ref().kind.get_ref().clone(),
                })
                .collect();
            let lines: Vec<String> = cs
                .phases
                .iter()
                .map(|p| {
                    let p = p.get_ref();
                    let mut s = p.kind.get_ref().clone();
                    if let Some(n) = &p.name {
                        s.push_str(&format!(" '{}'", n.get_ref()));
                    }
                    if let Some(n) = &p.nodes {
                        s.push_str(&format!(" nodes {n}"));
                    }
                    if let Some(d) = &p.down_for {
                        s.push_str(&format!(" down_for {d}"));
                    }
                    if !p.args.is_empty() {
                        s.push(' ');
                        s.push_str(&::format::redact::argv(&p.args).join(" "));
                    }
                    s
                })
                .collect();
            println!("  {}", c.id);
            if let Some(a) = &cs.agents {
                let p = crate::scenario::agents::AgentsPlan::of(a).map_err(|e| usage!("{e:#}"))?;
                println!(
                    "    agents {} through {}, waited for up to {:?}",
                    p.nodes.join(", "),
                    p.agent_url(),
                    p.wait
                );
            }
            for l in schedule.describe(&labels, &lines) {
                println!("    {l}");
            }
        }
        // What the study will take: time, space, root, what it creates.
        let out = match &a.out {
            Some(p) => srun_plan::Out::Given(p),
            None => srun_plan::Out::Default,
        };
        let plan = srun_plan::plan(&checked, out, &a.lab_root, a.trace);
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for l in srun_plan::lines(&plan, &a.lab_root, root) {
            println!("{l}");
        }
        return Ok(0);
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| engines::recording::session::default_run_dir(&sc.name));
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    clean_stale_lab(&a.lab_root)?;
    let o = srun::StudyOptions {
        out,
        lab_root: a.lab_root,
        exe: std::env::current_exe()?,
        stop,
        trace: a.trace,
        chunks,
        progress: crate::progress::Progress::start(
            a.progress.output(),
            Some(cells.len() * sc.matrix.repeat as usize),
        ),
    };
    srun::run_study(&a.scenario, &o)
}

/// Tears down what a killed run left in the lab (its creator is gone and it was not kept
/// by `lab up`), saying what was cleaned, before this run makes volumes of its own.
fn clean_stale_lab(root: &std::path::Path) -> anyhow::Result<()> {
    let lab = engines::lab::Lab::open(root);
    let done = lab.clean_stale().map_err(|e| {
        e.context(format!(
            "cleaning what a killed run left under {} (try `diskpulse lab down --all --root {}`)",
            root.display(),
            root.display()
        ))
    })?;
    for t in done {
        eprintln!(
            "diskpulse run: cleaned lab volume {} left by a run that was killed: {}",
            t.name,
            t.removed.join(", ")
        );
        for a in &t.left_alone {
            eprintln!(
                "diskpulse run: {}: left alone (not ours any more): {a}",
                t.name
            );
        }
    }
    Ok(())
}
