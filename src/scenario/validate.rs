//! Every check of a scenario that can be made without starting anything, shared by
//! `diskpulse run` and `diskpulse run --dry-run`, so a dry run that says OK is a run that
//! starts (issue 10). Each error is one line `FILE:LINE:COLUMN: message` naming the value
//! and the fix; the command turns it into a usage error (exit 2) before the study
//! directory is created.
//!
//! What must stay true:
//! - Nothing here writes, creates or starts anything: a volume `path` is looked at
//!   (`metadata`), never created; phase arguments go through the same clap parsers and
//!   `validate`/`resolve`/`check_args` functions the child command runs (load, probe,
//!   fsync, check), without running it.
//! - The matrix is counted from its value counts before it is expanded: at most
//!   [`MAX_RUNS`] runs (cells x repeat).
//! - Nothing a scenario names leaves the study directory: the scenario `name` (part of
//!   the default `diskpulse-runs/<time>-<name>`) has no '/', NUL or "..", and cell ids are
//!   sanitized ([`super::matrix`]) and must differ; a matrix value a phase uses as a
//!   secret shows as `***` in the cell's id and params ([`super::matrix::hide_secrets`]).
//! - Positions: a value written in the file is found in the file's text (a matrix value
//!   in its `[matrix]` list); otherwise the line of the substituted cell (lines are the
//!   same as the file's: substitution adds none).

use std::ops::Range;
use std::path::Path;

use clap::{Parser, Subcommand};

use super::run::{cell_text, lab_spec};
use super::spec::{self, err_at, key_span, Cell, Scenario, SpecError};
use engines::broker::SyncMode;
use engines::check::CheckArgs;
use engines::fsync::FsyncArgs;
use engines::load::LoadCmdArgs;
use engines::probe::ProbeArgs;
use format::cli::{parse_duration, parse_size};

/// The most runs (cells x repeat) one study may have. A run takes seconds to minutes and
/// writes a recording of megabytes, so 1000 runs are already days of machine time and
/// gigabytes; the matrix is refused before it is expanded (3 x 1000 values once took
/// 8 GB in 8 s to expand).
pub const MAX_RUNS: u64 = 1000;

/// A checked study: the scenario as written, its cells and each cell's scenario.
pub struct Checked {
    pub scenario: Scenario,
    pub cells: Vec<Cell>,
    pub concrete: Vec<Scenario>,
    /// Every secret the study's cells carry (secret flags' values and the matrix values
    /// hidden in the cells): what the scenario.toml copy hides.
    pub secrets: Vec<String>,
}

/// Parses and checks a whole study: the file, its matrix, and every cell as it will run.
pub fn check_study(path: &str, text: &str) -> Result<Checked, SpecError> {
    let scenario = spec::parse(path, text)?;
    let mut cells = spec::expand(&scenario.matrix);
    let mut concrete = vec![];
    let secret_params = super::matrix::secret_params(&scenario);
    if let Some(k) = super::matrix::secret_shown(&scenario, text, &secret_params) {
        return Err(err_at(
            path,
            text,
            key_span(text, "matrix", &k),
            format!(
                "matrix parameter '{k}' is a secret (a phase uses ${{{k}}} as a password, token or URL user info, hidden there) and ${{{k}}} is also used where it would be shown (a phase name, a subject, another argument); use it only where it is hidden"
            ),
        ));
    }
    let mut all_secrets = vec![];
    for c in &mut cells {
        let t = cell_text(text, c);
        let s = spec::parse_cell(&format!("{path} (cell {})", c.id), &t)?;
        // Before anything shows the cell (an error naming it included): its id and
        // params keep no secret.
        let secrets: Vec<String> = s
            .phases
            .iter()
            .flat_map(|p| format::redact::secrets(&p.get_ref().args))
            .collect();
        let hidden = super::matrix::hide_secrets(c, &secrets, &secret_params, &scenario.matrix);
        all_secrets.extend(secrets);
        all_secrets.extend(hidden);
        let cx = Cx {
            path,
            text,
            cell_text: &t,
            cell: if c.params.is_empty() {
                String::new()
            } else {
                format!(" (cell {})", c.id)
            },
            secrets: &all_secrets,
        };
        check_cell(&cx, &s)?;
        concrete.push(s);
    }
    for (i, c) in cells.iter().enumerate() {
        if let Some(d) = cells[..i].iter().find(|d| d.id == c.id) {
            return Err(err_at(
                path,
                text,
                key_span(text, "matrix", &c.params[0].0),
                format!(
                    "matrix cells {:?} and {:?} get the same directory cells/{}: values differ only in characters other than letters, digits, '.' and '-' (or only in secrets, shown as ***); make them differ in those",
                    d.params, c.params, c.id
                ),
            ));
        }
    }
    all_secrets.sort();
    all_secrets.dedup();
    Ok(Checked {
        scenario,
        cells,
        concrete,
        secrets: all_secrets,
    })
}

/// What a study's runs can trigger on (`run --trigger`): the load.csv roles its load
/// phases write, and the devices its runs record, `None` when a lab volume's devices
/// are only made by the run. A run records its volumes' devices, every device
/// without volumes.
pub fn trigger_sources(c: &Checked) -> (Vec<String>, Option<Vec<String>>) {
    let mut roles = vec![];
    let mut lists = vec![];
    let mut known = true;
    let r = collectors::devices::Resolver::default();
    for s in &c.concrete {
        for p in &s.phases {
            if let Some(ChildCommand::Load(a)) = child_command(s, p.get_ref()) {
                roles.extend(a.load.role_names());
            }
        }
        for v in &s.volumes {
            match &v.path {
                Some(p) if v.lab.is_none() => match r.for_path(Path::new(p)) {
                    Ok(d) => lists.push(d),
                    Err(_) => known = false,
                },
                _ => known = false,
            }
        }
    }
    roles.sort();
    roles.dedup();
    let devices = collectors::devices::merge(lists);
    let devices = known.then(|| engines::recording::recorded_names(&devices));
    (roles, devices)
}

/// The scenario name and the matrix's size: checked by [`spec::parse`] before anything is
/// expanded.
pub(super) fn check_top(path: &str, text: &str, sc: &Scenario) -> Result<(), SpecError> {
    let n = &sc.name;
    if n.is_empty() || n.contains('/') || n.contains('\0') || n.contains("..") {
        return Err(err_at(
            path,
            text,
            key_span(text, "", "name"),
            format!(
                "name {n:?} would make a path: the name is part of the study directory (diskpulse-runs/<time>-<name>); write it without '/', '..' or NUL, e.g. \"raid0-vs-raid1\""
            ),
        ));
    }
    if n.chars().any(char::is_control) {
        let what = if n.contains('\n') {
            "a newline"
        } else {
            "a control character"
        };
        return Err(err_at(
            path,
            text,
            key_span(text, "", "name"),
            format!(
                "name {n:?} holds {what} (a control character): the name is part of the study directory and of study.csv; write it on one line of printable characters, e.g. \"raid0-vs-raid1\""
            ),
        ));
    }
    // A value is put into the file's text as it is (`${v}` inside a quoted string): a
    // quote or backslash ends or escapes that string and a newline ends its line, so the
    // cell failed to parse at a place the user never wrote (or took other arguments).
    for (k, vals) in &sc.matrix.params {
        for v in vals.iter().filter_map(toml::Value::as_str) {
            let bad = v.chars().find_map(|c| match c {
                '\n' => Some("a newline"),
                '"' | '\'' => Some("a quote"),
                '\\' => Some("a backslash"),
                c if c.is_control() => Some("a control character"),
                _ => None,
            });
            if let Some(what) = bad {
                return Err(err_at(
                    path,
                    text,
                    key_span(text, "matrix", k),
                    format!(
                        "matrix value {v:?} of '{k}' holds {what}: a value is put into the file's text where ${{{k}}} is written (inside a quoted string), which it would end or escape; use values without quotes, backslashes or control characters"
                    ),
                ));
            }
        }
    }
    let too_many = |what: String| {
        err_at(
            path,
            text,
            key_span(text, "matrix", "repeat"),
            format!(
                "the matrix makes {what}; the limit is {MAX_RUNS} runs (cells x repeat): each run takes seconds to minutes and writes a recording, so more would take days and fill the disk. Split the study into several scenario files"
            ),
        )
    };
    match super::matrix::run_count(&sc.matrix) {
        None => Err(too_many("more runs than a u64 counts".into())),
        Some((cells, runs)) if runs > MAX_RUNS => Err(too_many(format!(
            "{cells} cell(s) x {} repeat(s) = {runs} runs",
            sc.matrix.repeat
        ))),
        _ => Ok(()),
    }
}

/// Where a cell's errors are reported.
struct Cx<'a> {
    path: &'a str,
    text: &'a str,
    cell_text: &'a str,
    /// " (cell ID)" when the study has a matrix.
    cell: String,
    /// The secrets known so far: an error quoting a phase's argument hides them.
    secrets: &'a [String],
}

impl Cx<'_> {
    /// An error at `key = "value"`: in the file if the value is written there (or in the
    /// matrix), else on the cell's line, else at `fallback` (a span of the cell's text).
    fn at(&self, key: &str, value: &str, fallback: Range<usize>, message: String) -> SpecError {
        let message = format!("{message}{}", self.cell);
        if let Some(p) = locate(self.text, key, value) {
            return err_at(self.path, self.text, p..p, message);
        }
        let p = locate(self.cell_text, key, value).unwrap_or(fallback.start);
        err_at(self.path, self.cell_text, p..p, message)
    }
}

/// The byte offset of `"value"` in `text`, preferring one written as `key = "value"`.
fn locate(text: &str, key: &str, value: &str) -> Option<usize> {
    let quoted = format!("{value:?}");
    let mut first = None;
    for (i, _) in text.match_indices(&quoted) {
        let before = text[..i].trim_end();
        if let Some(b) = before.strip_suffix('=') {
            if b.trim_end().ends_with(key) {
                return Some(i);
            }
        }
        first.get_or_insert(i);
    }
    first
}

/// What only a concrete cell can tell: sizes, durations, volume paths, sync modes, node
/// counts and the phases' arguments.
#[allow(
    clippy::too_many_lines,
    reason = "one cell's checks, each next to the error naming the phase and the key"
)]
fn check_cell(cx: &Cx, s: &Scenario) -> Result<(), SpecError> {
    for v in &s.volumes {
        let name = v.name.get_ref();
        if let Some(p) = &v.path {
            if let Some(m) = super::volume_path::check(name, p, v.create) {
                return Err(cx.at("path", p, v.name.span(), m));
            }
        } else if v.create {
            return Err(err_at(
                cx.path,
                cx.cell_text,
                v.name.span(),
                format!("volume '{name}': create = true is for a path volume; a lab volume is always made{}", cx.cell),
            ));
        }
        let Some(l) = &v.lab else { continue };
        parse_size(&l.size).map_err(|e| {
            cx.at(
                "size",
                &l.size,
                v.name.span(),
                format!("volume '{name}': size {e}"),
            )
        })?;
        for (key, val) in [("write_bps", &l.write_bps), ("read_bps", &l.read_bps)] {
            if let Some(x) = val {
                parse_size(x).map_err(|e| {
                    cx.at(key, x, v.name.span(), format!("volume '{name}': {key} {e}"))
                })?;
            }
        }
        for (key, val) in [("write_iops", &l.write_iops), ("read_iops", &l.read_iops)] {
            if let Some(x) = val {
                x.parse::<u64>().map_err(|_| {
                    cx.at(
                        key,
                        x,
                        v.name.span(),
                        format!("volume '{name}': {key} takes a whole number of I/Os per second like \"100\"; got '{x}'"),
                    )
                })?;
            }
        }
        lab_spec(name, l).map_err(|e| {
            err_at(
                cx.path,
                cx.cell_text,
                v.name.span(),
                format!("{e:#}{}", cx.cell),
            )
        })?;
    }
    if let Some(b) = &s.broker {
        let broker_at = cx.text.find("[broker]").unwrap_or(0);
        if let Some(k) = &b.kind {
            if !["nats", "rabbitmq"].contains(&k.get_ref().as_str()) {
                return Err(err_at(
                    cx.path,
                    cx.cell_text,
                    k.span(),
                    format!(
                        "broker kind '{}': write \"nats\" (embedded nats-servers) or \"rabbitmq\" (one embedded RabbitMQ node){}",
                        k.get_ref(),
                        cx.cell
                    ),
                ));
            }
        }
        if b.is_rabbitmq() {
            // What only the nats-servers have.
            let not_rabbit = |key: &str, value: &str, why: &str| {
                let k = key_span(cx.cell_text, "broker", key);
                cx.at(key, value, k, format!("broker kind \"rabbitmq\": {why}"))
            };
            if b.nodes != "1" {
                return Err(not_rabbit(
                    "nodes",
                    &b.nodes,
                    &format!("nodes '{}': the embedded RabbitMQ is one node; remove nodes (or write \"1\")", b.nodes),
                ));
            }
            if b.volumes.len() != 1 {
                return Err(err_at(
                    cx.path,
                    cx.cell_text,
                    b.volumes[1].span(),
                    format!(
                        "broker kind \"rabbitmq\": one node, so one volume for its store{}",
                        cx.cell
                    ),
                ));
            }
            if let Some(ns) = &b.nats_server {
                return Err(not_rabbit(
                    "nats_server",
                    ns,
                    "nats_server is for kind = \"nats\"; remove it (rabbitmq_server = \"PATH\" names the rabbitmq-server script)",
                ));
            }
            if let Some(sync) = &b.sync {
                return Err(not_rabbit(
                    "sync",
                    sync,
                    "sync is nats-server's JetStream sync_interval; RabbitMQ's queues sync as their type does (quorum: before each confirm); remove it",
                ));
            }
            // Node phases: the one node is n1.
            for ph in &s.phases {
                let ph = ph.get_ref();
                let one = match &ph.nodes {
                    None => true,
                    Some(toml::Value::String(a)) => a == "all",
                    Some(toml::Value::Integer(1)) => true,
                    Some(toml::Value::Array(a)) => a.len() == 1 && a[0] == toml::Value::Integer(1),
                    Some(_) => false,
                };
                if spec::NODE_KINDS.contains(&ph.kind.get_ref().as_str()) && !one {
                    return Err(err_at(
                        cx.path,
                        cx.cell_text,
                        ph.kind.span(),
                        format!(
                            "a '{}' phase names nodes {}: the [broker] kind = \"rabbitmq\" is one node; remove nodes (or write 1){}",
                            ph.kind.get_ref(),
                            ph.nodes.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                            cx.cell
                        ),
                    ));
                }
            }
        } else if let Some(r) = &b.rabbitmq_server {
            return Err(cx.at(
                "rabbitmq_server",
                r,
                broker_at..broker_at,
                "rabbitmq_server is for [broker] kind = \"rabbitmq\"; add that or remove it".into(),
            ));
        }
        let n: usize = b.nodes.parse().unwrap_or(0);
        if ![1, 3, 5].contains(&n) {
            return Err(cx.at(
                "nodes",
                &b.nodes,
                broker_at..broker_at,
                format!("broker nodes '{}': write \"1\", \"3\" or \"5\"", b.nodes),
            ));
        }
        if b.volumes.len() != 1 && b.volumes.len() != n {
            return Err(err_at(
                cx.path,
                cx.cell_text,
                b.volumes[0].span(),
                format!(
                    "broker volumes: one for all nodes or one per node ({n}){}",
                    cx.cell
                ),
            ));
        }
        if let Err(e) = b.sync().parse::<SyncMode>() {
            return Err(cx.at(
                "sync",
                b.sync(),
                broker_at..broker_at,
                format!("broker sync: {e}"),
            ));
        }
        // Node phases name nodes of this broker (`nodes = 7` of 3 is refused here, not
        // when the phase runs).
        for ph in &s.phases {
            let ph = ph.get_ref();
            if !spec::NODE_KINDS.contains(&ph.kind.get_ref().as_str()) {
                continue;
            }
            if let Err(e) = super::phases::phase_nodes(ph, n) {
                return Err(err_at(
                    cx.path,
                    cx.cell_text,
                    ph.kind.span(),
                    format!(
                        "a '{}' phase: {e} (the [broker] has {n}){}",
                        ph.kind.get_ref(),
                        cx.cell
                    ),
                ));
            }
        }
    }
    check_samplers(cx, s)?;
    for (i, p) in s.phases.iter().enumerate() {
        let span = p.span();
        let p = p.get_ref();
        let kind = p.kind.get_ref();
        let label = format!("phase {} ({kind})", i + 1);
        for (key, d) in [("duration", &p.duration), ("down_for", &p.down_for)] {
            if let Some(d) = d {
                parse_duration(d)
                    .map_err(|e| cx.at(key, d, span.clone(), format!("{label}: {key} {e}")))?;
            }
        }
        check_args(cx, s, p, &label, span)?;
    }
    Ok(())
}

/// `[samplers]`: each interval read and checked by the function that checks the flag
/// of `record`/`load` it stands for (issue 25 point 4), so a scenario is held to the
/// same limits.
fn check_samplers(cx: &Cx, s: &Scenario) -> Result<(), SpecError> {
    use engines::recording::Sampler;
    let d = &s.samplers;
    let samplers = [
        ("interval", &d.interval, Some(Sampler::Disk)),
        ("mem_interval", &d.mem_interval, Some(Sampler::Mem)),
        ("cpu_interval", &d.cpu_interval, Some(Sampler::Cpu)),
        ("monitor_interval", &d.monitor_interval, None),
    ];
    for (key, text, which) in samplers {
        let checked = parse_duration(text).and_then(|v| match which {
            Some(w) => w.check(v),
            None => engines::broker::monitor::check_interval(v),
        });
        checked.map_err(|e| {
            let k = key_span(cx.cell_text, "samplers", key);
            cx.at(key, text, k, format!("samplers {key} {e}"))
        })?;
    }
    Ok(())
}

/// A phase's child command line (`diskpulse load|probe|fsync|check ...`), parsed with
/// the argument types the commands themselves flatten (engines' [`LoadCmdArgs`],
/// [`ProbeArgs`], [`FsyncArgs`], [`CheckArgs`]), so a phase's arguments are read exactly
/// as the child will read them. Only the kinds a phase runs as a child.
#[derive(Parser, Debug)]
#[command(name = "diskpulse")]
struct ChildCli {
    #[command(subcommand)]
    command: ChildCommand,
}

/// The parsed arguments of a phase's child, one variant per kind that runs one.
#[derive(Subcommand, Debug)]
pub(super) enum ChildCommand {
    Load(Box<LoadCmdArgs>),
    Probe(Box<ProbeArgs>),
    Fsync(FsyncArgs),
    Check(CheckArgs),
}

/// The command line of the child a phase runs (`diskpulse load|probe|fsync|check ...`),
/// with the arguments the phase adds (target, output format, server) filled in as
/// [`super::phases`] does, placeholders where only the run knows the value; `None` for
/// a phase that runs no child (sleep and the node phases).
fn child_argv(s: &Scenario, p: &spec::PhaseDecl) -> Option<Vec<String>> {
    let kind = p.kind.get_ref().as_str();
    let has = |flag: &str| {
        p.args
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut argv = vec!["diskpulse".to_string(), kind.to_string()];
    match kind {
        "load" => {
            argv.extend(p.args.iter().cloned());
            let amqp = p.args.first().is_some_and(|m| m.starts_with("amqp-"));
            let rabbit = s.broker.as_ref().is_some_and(|b| b.is_rabbitmq());
            if amqp && !has("--server") && rabbit {
                argv.extend(["--server".into(), "amqp://127.0.0.1:5672/%2f".into()]);
            }
            if !amqp && !has("--server") {
                argv.extend(["--server".into(), "nats://127.0.0.1:4222".into()]);
            }
            argv.extend(["--quiet".into(), "--json".into()]);
        }
        "probe" => {
            if p.volume.is_some() {
                argv.extend(["--filename".into(), "/diskpulse-dry-run.dat".into()]);
            }
            argv.extend(p.args.iter().cloned());
            argv.extend(["--output-format".into(), "json".into()]);
        }
        "fsync" => {
            if p.volume.is_some() {
                argv.extend(["--dir".into(), "/".into()]);
            }
            argv.extend(p.args.iter().cloned());
            argv.push("--json".into());
        }
        "check" => {
            argv.push("/".into());
            argv.extend(p.args.iter().cloned());
            argv.push("--json".into());
        }
        _ => return None,
    }
    Some(argv)
}

/// The parsed command of a phase's child, for a phase of a checked scenario
/// ([`check_study`] passed): what `run --dry-run` reads durations and sizes from. `None`
/// for a phase that runs no child.
pub(super) fn child_command(s: &Scenario, p: &spec::PhaseDecl) -> Option<ChildCommand> {
    ChildCli::try_parse_from(child_argv(s, p)?)
        .ok()
        .map(|c| c.command)
}

/// Runs a phase's arguments through the clap parser and the checks of the subcommand the
/// phase runs as a child, with the arguments the phase adds (target, output format,
/// server) filled in as [`super::phases`] does.
fn check_args(
    cx: &Cx,
    s: &Scenario,
    p: &spec::PhaseDecl,
    label: &str,
    span: Range<usize>,
) -> Result<(), SpecError> {
    let kind = p.kind.get_ref().as_str();
    if kind == "load" {
        let has = |flag: &str| {
            p.args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
        };
        // An AMQP mode without --server starts a RabbitMQ node of its own.
        let amqp = p.args.first().is_some_and(|m| m.starts_with("amqp-"));
        let rabbit = s.broker.as_ref().is_some_and(|b| b.is_rabbitmq());
        if !amqp && !has("--server") && rabbit {
            return Err(cx.at(
                "kind",
                "load",
                span,
                format!("{label}: '{}' is a NATS load mode and the [broker] is kind = \"rabbitmq\"; use an amqp-* mode or give \"--server\", \"nats://HOST:4222\"", p.args.first().map(String::as_str).unwrap_or("")),
            ));
        }
        if !amqp && !has("--server") && s.broker.is_none() {
            return Err(cx.at(
                "kind",
                "load",
                span,
                format!("{label}: a load phase needs a [broker] (or \"--server\", \"nats://HOST:4222\" in its args)"),
            ));
        }
    }
    let Some(argv) = child_argv(s, p) else {
        if !p.args.is_empty() {
            return Err(cx.at(
                "args",
                &p.args[0],
                span,
                format!("{label}: a '{kind}' phase takes no args (they are for load, probe, fsync and check)"),
            ));
        }
        return Ok(());
    };
    let checked = match ChildCli::try_parse_from(&argv) {
        // `--help` parses as a request to print the help, which a phase cannot do.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Err(
            "--help prints the command's help and runs nothing; remove it from the phase's args (`diskpulse KIND --help` shows it)"
                .replace("KIND", kind),
        ),
        // clap's message on one line: the error and its hints, not its usage block.
        Err(e) => Err(e
            .to_string()
            .lines()
            .map(str::trim)
            .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
            .trim_start_matches("error: ")
            .to_string()),
        Ok(cli) => match cli.command {
            // A phase runs inside the run's recording.
            ChildCommand::Load(a) => engines::broker::check_load_flags(&a, true).map_err(|e| format!("{e:#}")),
            // The user's own --filename is inspected as the child will (a volume's file
            // is made in a directory only the run has).
            ChildCommand::Probe(a) if p.volume.is_none() => {
                engines::probe::check_target(&a).map_err(|e| format!("{e:#}"))
            }
            ChildCommand::Probe(a) => engines::probe::check_args(&a).map_err(|e| format!("{e:#}")),
            ChildCommand::Fsync(a) if p.volume.is_none() => {
                engines::fsync::check_target(&a).map_err(|e| format!("{e:#}"))
            }
            ChildCommand::Fsync(a) => engines::fsync::check_args(&a).map_err(|e| format!("{e:#}")),
            ChildCommand::Check(a) => engines::check::check_args(&a).map_err(|e| format!("{e:#}")),
        },
    };
    checked.map_err(|e| {
        // Point at the argument the message quotes, else the flag it names, else the first.
        let arg = p
            .args
            .iter()
            .find(|a| e.contains(&format!("'{a}'")))
            .or_else(|| {
                p.args
                    .iter()
                    .find(|a| a.starts_with("--") && e.contains(a.as_str()))
            })
            .or(p.args.first());
        // The message quotes arguments: none of them shows a secret.
        let mut m = format::redact::text(&format!(
            "{label}: `diskpulse {kind} {}`: {e}",
            format::redact::argv(&p.args).join(" ")
        ));
        for x in cx.secrets.iter().chain(&format::redact::secrets(&p.args)) {
            m = m.replace(x.as_str(), format::redact::HIDDEN);
        }
        match arg {
            Some(a) => cx.at("args", a, span, m),
            None => err_at(cx.path, cx.cell_text, span, format!("{m}{}", cx.cell)),
        }
    })
}

/// `[agents]`: node names (non-empty, valid, each once), the server (URLs, or
/// "embedded" with a [broker] and a `listen` address) and `wait`. Values still holding a
/// `${..}` are checked in each cell.
pub(super) fn check_agents(path: &str, text: &str, sc: &Scenario) -> Result<(), SpecError> {
    let Some(a) = &sc.agents else {
        return Ok(());
    };
    if a.nodes.is_empty() {
        return Err(err_at(
            path,
            text,
            key_span(text, "agents", "nodes"),
            "[agents] nodes is empty: name each agent's node as its `diskpulse agent --name NODE` does, e.g. nodes = [\"n1\", \"n2\"] (or remove [agents])".into(),
        ));
    }
    for (i, n) in a.nodes.iter().enumerate() {
        let name = n.get_ref();
        if name.contains("${") {
            continue;
        }
        engines::agent::check_node_name(name)
            .map_err(|e| err_at(path, text, n.span(), format!("[agents] nodes: {e}")))?;
        if a.nodes[..i].iter().any(|m| m.get_ref() == name) {
            return Err(err_at(
                path,
                text,
                n.span(),
                format!("[agents] nodes: {}", engines::agent::named_twice(name)),
            ));
        }
    }
    let server = a.server.get_ref();
    let listen = a.listen.as_ref();
    if server == spec::AGENTS_EMBEDDED {
        if sc.broker.as_ref().is_some_and(|b| b.is_rabbitmq()) {
            return Err(err_at(
                path,
                text,
                a.server.span(),
                "[agents] server = \"embedded\" needs a nats [broker]; this one is kind = \"rabbitmq\": give the agents' servers, e.g. server = \"nats://10.0.0.1:4222\"".into(),
            ));
        }
        if sc.broker.is_none() {
            return Err(err_at(
                path,
                text,
                a.server.span(),
                "[agents] server = \"embedded\" needs a [broker] (the scenario's embedded nats-server); or give the agents' servers, e.g. server = \"nats://10.0.0.1:4222\"".into(),
            ));
        }
        let Some(l) = listen else {
            return Err(err_at(
                path,
                text,
                a.server.span(),
                "[agents] server = \"embedded\" needs listen = \"127.0.0.1:14250\": the address the agents connect to (start each with --server nats://127.0.0.1:14250); each run forwards it to its broker".into(),
            ));
        };
        let l_text = l.get_ref();
        if !l_text.contains("${") {
            match l_text.parse::<std::net::SocketAddr>() {
                Ok(sa) if sa.port() != 0 => {}
                _ => {
                    return Err(err_at(
                        path,
                        text,
                        l.span(),
                        format!("[agents] listen '{l_text}': give an IP address and a port other than 0, e.g. \"127.0.0.1:14250\" (the agents must know it before the run starts)"),
                    ))
                }
            }
        }
    } else if !server.contains("${") {
        if server.trim().is_empty() {
            return Err(err_at(
                path,
                text,
                a.server.span(),
                "[agents] server is empty: give the NATS servers the agents publish to, e.g. \"nats://10.0.0.1:4222\", or \"embedded\"".into(),
            ));
        }
        for u in server.split(',') {
            engines::load::connect::parse_server(u).map_err(|why| {
                err_at(
                    path,
                    text,
                    a.server.span(),
                    format!(
                        "[agents] server '{}': {why}; expected {} or \"embedded\"",
                        format::redact::text(u.trim()),
                        engines::load::connect::SERVER_URL_FORM
                    ),
                )
            })?;
        }
        if let Some(l) = listen {
            return Err(err_at(
                path,
                text,
                l.span(),
                "[agents] listen is for server = \"embedded\"; with the agents' own servers, remove it".into(),
            ));
        }
    }
    if !a.wait.contains("${") {
        let bad = |m: String| err_at(path, text, key_span(text, "agents", "wait"), m);
        match parse_duration(&a.wait) {
            Ok(d) if !d.is_zero() => {}
            Ok(_) => return Err(bad("[agents] wait must be above 0, e.g. \"30s\"".into())),
            Err(e) => return Err(bad(format!("[agents] wait {e}"))),
        }
    }
    Ok(())
}
