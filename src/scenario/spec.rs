//! The scenario file: what a study runs, read from TOML with errors that carry line and
//! column.
//!
//! ```toml
//! name = "raid0-vs-raid1"
//! [matrix]                       # the cartesian product of these is run, each cell `repeat` times
//! layout = ["raid0", "raid1"]
//! repeat = 3
//! [[volumes]]                    # lab volumes diskpulse creates, or existing paths
//! name = "vol"
//! lab = { size = "1G", fs = "btrfs", raid = "${layout}", devices = 2 }
//! [broker]                       # optional: embedded nats-server(s) with stores on the volumes
//! kind = "nats"                  # nats | rabbitmq (one RabbitMQ node; AMQP loads use it)
//! nodes = 1
//! volumes = ["vol"]
//! sync = "always"
//! [[phases]]
//! kind = "probe"                 # check | probe | fsync | load | sleep | restart | stop | start | kill
//! volume = "vol"
//! args = ["--preset", "array-check", "--runtime", "10s"]
//! name = "array check"
//! [[phases]]                     # timing keys (see `schedule.rs`): with/after = "NAME",
//! kind = "kill"                  # at = "5s", during = "NAME"; none: after the previous
//! nodes = [1]
//! after = "array check"
//! ```
//! `${name}` in any string is replaced by the cell's value of matrix parameter `name`;
//! every matrix parameter must be used somewhere, and every `${..}` must name one.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

pub use super::matrix::{expand, substitute, Cell};

/// A scenario as written (before matrix substitution).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub matrix: Matrix,
    #[serde(default)]
    pub volumes: Vec<VolumeDecl>,
    pub broker: Option<BrokerDecl>,
    #[serde(default)]
    pub samplers: SamplersDecl,
    /// Agents on other hosts (or this one) whose samples each run's recording merges
    /// (`record --agents`, issue 15).
    pub agents: Option<AgentsDecl>,
    pub phases: Vec<Spanned<PhaseDecl>>,
}

/// `[agents]`: the nodes whose `diskpulse agent` each run records, and where they publish.
///
/// ```toml
/// [agents]
/// nodes = ["a", "b"]             # each `diskpulse agent --name NODE`, started by the user
/// server = "embedded"            # or "nats://10.0.0.1:4222,...": the servers they publish to
/// listen = "127.0.0.1:14250"     # embedded only: the address the agents connect to
/// wait = "30s"                   # how long a run waits for every node's first clock reply
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsDecl {
    pub nodes: Vec<Spanned<String>>,
    pub server: Spanned<String>,
    /// With `server = "embedded"`: where `run` listens for the agents (`--server
    /// nats://LISTEN`), forwarded to the embedded broker's first node in each run.
    pub listen: Option<Spanned<String>>,
    #[serde(default = "thirty_s")]
    pub wait: String,
}

/// `[agents] server = "embedded"`: the agents publish through the scenario's own broker.
pub const AGENTS_EMBEDDED: &str = "embedded";

fn thirty_s() -> String {
    "30s".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct Matrix {
    #[serde(default = "one")]
    pub repeat: u32,
    /// Parameter -> values (sorted by name: cells are ordered by parameter name).
    #[serde(flatten)]
    pub params: BTreeMap<String, Vec<toml::Value>>,
}

impl Default for Matrix {
    fn default() -> Self {
        Matrix {
            repeat: 1,
            params: BTreeMap::new(),
        }
    }
}

/// Where `key = ` is written inside `[table]` (for errors about values serde has no span for).
pub(super) fn key_span(text: &str, table: &str, key: &str) -> Range<usize> {
    let start = text.find(&format!("[{table}]")).unwrap_or(0);
    let mut pos = start;
    for line in text[start..].split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with(key) && t[key.len()..].trim_start().starts_with('=') {
            let at = pos + (line.len() - t.len());
            return at..at + key.len();
        }
        pos += line.len();
    }
    start..start
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeDecl {
    pub name: Spanned<String>,
    /// An existing directory (never created, unless `create`).
    pub path: Option<String>,
    /// With `path`: create its last directory if missing (its parent must exist). Without
    /// it a missing path is refused: a typo must not make a tree on `/`.
    #[serde(default)]
    pub create: bool,
    /// A lab volume diskpulse creates and tears down.
    pub lab: Option<LabDecl>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabDecl {
    pub size: String,
    #[serde(default = "ext4")]
    pub fs: String,
    #[serde(default = "single")]
    pub raid: String,
    #[serde(default = "one_usize")]
    pub devices: usize,
    pub mount_options: Option<String>,
    pub write_iops: Option<String>,
    pub read_iops: Option<String>,
    pub write_bps: Option<String>,
    pub read_bps: Option<String>,
    pub write_cache: Option<String>,
}

fn ext4() -> String {
    "ext4".into()
}
fn single() -> String {
    "single".into()
}
fn one_usize() -> usize {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerDecl {
    /// `"nats"` (default: embedded nats-server nodes) or `"rabbitmq"` (one embedded
    /// RabbitMQ node, its store on the volume, for the AMQP load modes).
    pub kind: Option<Spanned<String>>,
    /// `kind = "rabbitmq"`: the `rabbitmq-server` script (default: Debian's path).
    pub rabbitmq_server: Option<String>,
    #[serde(default = "one_str")]
    pub nodes: String,
    /// Store volume per node, or one for all nodes.
    pub volumes: Vec<Spanned<String>>,
    /// nats-server's JetStream sync_interval (default [`DEFAULT_SYNC`]); `None` when not
    /// written, so `kind = "rabbitmq"` refuses it written in any spelling.
    pub sync: Option<String>,
    pub nats_server: Option<String>,
}

/// `[broker] sync` when not written: nats-server's own default.
pub const DEFAULT_SYNC: &str = "5s";

impl BrokerDecl {
    /// `kind = "rabbitmq"`: one embedded RabbitMQ node instead of nats-servers.
    pub fn is_rabbitmq(&self) -> bool {
        self.kind
            .as_ref()
            .is_some_and(|k| k.get_ref() == "rabbitmq")
    }

    /// `sync` as written, else [`DEFAULT_SYNC`].
    pub fn sync(&self) -> &str {
        self.sync.as_deref().unwrap_or(DEFAULT_SYNC)
    }
}

fn one_str() -> String {
    "1".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplersDecl {
    #[serde(default = "ms1")]
    pub interval: String,
    #[serde(default = "ms10")]
    pub mem_interval: String,
    #[serde(default = "ms100")]
    pub cpu_interval: String,
    #[serde(default = "ms250")]
    pub monitor_interval: String,
    /// Trace the broker nodes' sync calls and the volumes' block requests (tracefs, as
    /// `demo --trace`); `run --trace` turns it on for every scenario.
    #[serde(default)]
    pub trace: bool,
}

impl Default for SamplersDecl {
    fn default() -> Self {
        SamplersDecl {
            interval: ms1(),
            mem_interval: ms10(),
            cpu_interval: ms100(),
            monitor_interval: ms250(),
            trace: false,
        }
    }
}

fn ms1() -> String {
    "1ms".into()
}
fn ms10() -> String {
    "10ms".into()
}
fn ms100() -> String {
    "100ms".into()
}
fn ms250() -> String {
    "250ms".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseDecl {
    pub kind: Spanned<String>,
    /// Name shown on the timeline (default: the kind and its first argument); what
    /// `with`, `after` and `during` refer to.
    pub name: Option<Spanned<String>>,
    /// Starts when the phase of this name starts (plus `at`).
    pub with: Option<Spanned<String>>,
    /// Starts when the phase of this name ends (plus `at`).
    pub after: Option<Spanned<String>>,
    /// An offset like "10s": from `with`/`after`'s moment, alone from the start of the
    /// phases.
    pub at: Option<Spanned<String>>,
    /// Stopped (its child interrupted, a sleep ended) when the phase of this name ends;
    /// alone it also starts with that phase.
    pub during: Option<Spanned<String>>,
    /// Arguments of the `diskpulse` subcommand (load: mode first; probe/fsync/check: flags).
    #[serde(default)]
    pub args: Vec<String>,
    /// probe/fsync/check: the volume whose mount point is the target directory.
    pub volume: Option<Spanned<String>>,
    /// sleep: how long.
    pub duration: Option<String>,
    /// restart/stop/start/kill: node numbers (1-based) or "all".
    pub nodes: Option<toml::Value>,
    /// restart: drop the page cache between stop and start, so re-reads hit the device.
    #[serde(default)]
    pub drop_caches: bool,
    /// restart: pause between stop and start; kill: start the nodes again after this
    /// (without it a killed node stays down).
    pub down_for: Option<String>,
    /// load: error kinds the study provokes on purpose (e.g. `["timeout"]` beside a `kill`
    /// phase): a load whose failures are all of these kinds does not fail its run; its
    /// failures stay in the run's summary and report.
    #[serde(default)]
    pub expect_failures: Vec<Spanned<String>>,
}

pub const PHASE_KINDS: [&str; 9] = [
    "check", "probe", "fsync", "load", "sleep", "restart", "stop", "start", "kill",
];

/// The kinds that stop or start broker nodes: two of them on one node must be ordered.
pub const NODE_KINDS: [&str; 4] = ["restart", "stop", "start", "kill"];

/// An error in a scenario file, with its place.
#[derive(Debug)]
pub struct SpecError {
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for SpecError {}

/// 1-based line and column of byte offset `pos` in `text`.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(text.len());
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

pub(super) fn err_at(path: &str, text: &str, span: Range<usize>, message: String) -> SpecError {
    let (line, column) = line_col(text, span.start);
    SpecError {
        path: path.to_string(),
        line,
        column,
        message,
    }
}

/// Reads and checks a scenario: TOML syntax and types, phase kinds, volume references,
/// matrix parameters used and `${..}` names known, each with line and column.
pub fn parse(path: &str, text: &str) -> Result<Scenario, SpecError> {
    parse_inner(path, text, true)
}

/// Parses one cell's text (the `${..}` already replaced by [`cell_text`]-style
/// substitution): the same checks but for matrix parameters being used.
pub fn parse_cell(path: &str, text: &str) -> Result<Scenario, SpecError> {
    parse_inner(path, text, false)
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the scenario file's keys, each next to the error naming it"
)]
fn parse_inner(path: &str, text: &str, check_matrix: bool) -> Result<Scenario, SpecError> {
    let sc: Scenario = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        err_at(path, text, span, e.message().trim().to_string())
    })?;
    if sc.matrix.repeat == 0 {
        return Err(err_at(
            path,
            text,
            key_span(text, "matrix", "repeat"),
            "repeat must be at least 1".into(),
        ));
    }
    // The name and the matrix's size, before anything is expanded or made of them.
    super::validate::check_top(path, text, &sc)?;
    let vol_names: Vec<&str> = sc
        .volumes
        .iter()
        .map(|v| v.name.get_ref().as_str())
        .collect();
    for v in &sc.volumes {
        if v.path.is_some() == v.lab.is_some() {
            return Err(err_at(
                path,
                text,
                v.name.span(),
                format!(
                    "volume '{}' needs exactly one of path = \"/dir\" or lab = {{ size = .., fs = .. }}",
                    v.name.get_ref()
                ),
            ));
        }
        if vol_names.iter().filter(|n| **n == v.name.get_ref()).count() > 1 {
            return Err(err_at(
                path,
                text,
                v.name.span(),
                format!("volume '{}' is declared twice", v.name.get_ref()),
            ));
        }
    }
    let check_vol = |s: &Spanned<String>| -> Result<(), SpecError> {
        let n = s.get_ref();
        if n.contains("${") || vol_names.contains(&n.as_str()) {
            Ok(())
        } else {
            Err(err_at(
                path,
                text,
                s.span(),
                format!(
                    "no volume named '{n}' (declared: {})",
                    if vol_names.is_empty() {
                        "none".to_string()
                    } else {
                        vol_names.join(", ")
                    }
                ),
            ))
        }
    };
    if let Some(b) = &sc.broker {
        for v in &b.volumes {
            check_vol(v)?;
        }
        if b.volumes.is_empty() {
            let pos = text.find("[broker]").unwrap_or(0);
            return Err(err_at(
                path,
                text,
                pos..pos,
                "broker needs volumes = [\"name\", ..] for its stores".into(),
            ));
        }
    }
    if sc.phases.is_empty() {
        return Err(err_at(
            path,
            text,
            0..0,
            "a scenario needs at least one [[phases]]".into(),
        ));
    }
    for p in &sc.phases {
        let ph = p.get_ref();
        let kind = ph.kind.get_ref().as_str();
        if !PHASE_KINDS.contains(&kind) {
            return Err(err_at(
                path,
                text,
                ph.kind.span(),
                format!(
                    "unknown phase kind '{kind}'; kinds: {}",
                    PHASE_KINDS.join(", ")
                ),
            ));
        }
        if let Some(v) = &ph.volume {
            check_vol(v)?;
        }
        let needs_broker = NODE_KINDS.contains(&kind);
        if needs_broker && sc.broker.is_none() {
            return Err(err_at(
                path,
                text,
                ph.kind.span(),
                format!("a '{kind}' phase needs a [broker]"),
            ));
        }
        if matches!(kind, "probe" | "fsync")
            && ph.volume.is_none()
            && !ph
                .args
                .iter()
                .any(|a| a.starts_with("--dir") || a.starts_with("--filename"))
        {
            return Err(err_at(
                path,
                text,
                ph.kind.span(),
                format!("a '{kind}' phase needs volume = \"name\" (or --dir/--filename in args)"),
            ));
        }
        if let Some(k) = ph.expect_failures.first() {
            if kind != "load" {
                return Err(err_at(
                    path,
                    text,
                    k.span(),
                    format!("expect_failures is for a 'load' phase, not '{kind}'"),
                ));
            }
        }
        for k in &ph.expect_failures {
            let s = k.get_ref();
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return Err(err_at(
                    path,
                    text,
                    k.span(),
                    format!(
                        "expect_failures: '{s}' is not an error kind; write them as a load's failures[].kind spells them, e.g. \"timeout\", \"no_responders\""
                    ),
                ));
            }
        }
        if kind == "load" && ph.args.is_empty() {
            return Err(err_at(
                path,
                text,
                ph.kind.span(),
                "a 'load' phase needs args = [\"MODE\", ..]".into(),
            ));
        }
        if kind == "sleep" && ph.duration.is_none() {
            return Err(err_at(
                path,
                text,
                ph.kind.span(),
                "a 'sleep' phase needs duration = \"10s\"".into(),
            ));
        }
    }
    // Every parameter used, every ${..} known: check on the first cell's names.
    for (k, vals) in sc.matrix.params.iter().filter(|_| check_matrix) {
        if vals.is_empty() {
            return Err(err_at(
                path,
                text,
                key_span(text, "matrix", k),
                format!("matrix parameter '{k}' has no values"),
            ));
        }
        if !text.contains(&format!("${{{k}}}")) {
            return Err(err_at(
                path,
                text,
                key_span(text, "matrix", k),
                format!("matrix parameter '{k}' is not used: write ${{{k}}} where its value goes"),
            ));
        }
    }
    let first = super::matrix::first_cell(&sc.matrix).unwrap_or(Cell {
        params: vec![],
        id: String::new(),
    });
    let mut pos = 0;
    while let Some(i) = text[pos..].find("${") {
        let start = pos + i;
        let end = text[start..]
            .find('}')
            .map(|j| start + j + 1)
            .unwrap_or(text.len());
        if let Err(m) = substitute(&text[start..end], &first) {
            return Err(err_at(path, text, start..end, m));
        }
        pos = end;
    }
    super::validate::check_agents(path, text, &sc)?;
    super::schedule::Schedule::build(path, text, &sc.phases)?;
    Ok(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
name = "t"
[matrix]
sync = ["always", "5s"]
size = ["8k", "1024k"]
repeat = 2
[[volumes]]
name = "v"
lab = { size = "512M", fs = "ext4" }
[broker]
volumes = ["v"]
sync = "${sync}"
[[phases]]
kind = "load"
args = ["js-pub", "--size", "${size}"]
"#;

    #[test]
    fn matrix_expands_to_the_cartesian_product() {
        let sc = parse("t.toml", OK).unwrap();
        let cells = expand(&sc.matrix);
        assert_eq!(cells.len(), 4);
        assert_eq!(sc.matrix.repeat, 2);
        assert_eq!(cells[0].id, "size-8k_sync-always");
        assert_eq!(cells[3].id, "size-1024k_sync-5s");
        assert_eq!(
            substitute("--size ${size} ${sync}", &cells[1]).unwrap(),
            "--size 8k 5s"
        );
    }

    #[test]
    fn no_matrix_is_one_cell() {
        let t = "name = \"x\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n";
        let sc = parse("x.toml", t).unwrap();
        let c = expand(&sc.matrix);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].id, "base");
    }

    fn err(t: &str) -> SpecError {
        parse("s.toml", t).unwrap_err()
    }

    #[test]
    fn errors_carry_line_and_column() {
        let e = err("name = \"x\"\n[[phases]]\nkind = \"slep\"\n");
        assert_eq!((e.line, e.column), (3, 8), "{e}");
        assert!(e.message.contains("unknown phase kind 'slep'"), "{e}");

        let e = err("name = \"x\"\n[[phases]]\nkind = \"probe\"\nvolume = \"nope\"\n");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("no volume named 'nope'"), "{e}");

        let e = err("name = \"x\"\n[[phases]]\nkind = \"sleep\"\nduration = 5\n");
        assert_eq!(e.line, 4, "{e}");

        let e = err("name = \"x\"\n[[phases]]\nkind = \"sleep\"\nduraton = \"1s\"\n");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("duraton"), "{e}");

        let e = err("name = \"x\"\n[matrix]\nsize = [\"1k\"]\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n");
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("not used"), "{e}");

        let e =
            err("name = \"x\"\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\", \"${nope}\"]\n");
        assert_eq!((e.line, e.column), (4, 20), "{e}");

        let e = err("name = \"x\"\n[[phases]\n");
        assert_eq!(e.line, 2, "{e}");
        assert_eq!(e.to_string().split(':').next(), Some("s.toml"));
    }

    #[test]
    fn expect_failures_is_for_loads_and_names_kinds() {
        let e = err("name = \"x\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nexpect_failures = [\"timeout\"]\n");
        assert_eq!((e.line, e.column), (5, 20), "{e}");
        assert!(e.message.contains("for a 'load' phase"), "{e}");
        let e = err("name = \"x\"\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\"]\nexpect_failures = [\"Time out\"]\n");
        assert_eq!((e.line, e.column), (5, 20), "{e}");
        assert!(e.message.contains("not an error kind"), "{e}");
        let ok = "name = \"x\"\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\"]\nexpect_failures = [\"timeout\", \"stream_not_found\"]\n";
        let sc = parse("s.toml", ok).unwrap();
        assert_eq!(sc.phases[0].get_ref().expect_failures.len(), 2);
    }
}
