//! meta.json `phases[]`: one record per scenario phase that started, written by the
//! scenario's executor at the end of the run ([`PhasesSection`]) and read back by the
//! report and the study ([`Meta::phases`]).
//!
//! A record: `index` (the phase's place in the scenario file), `kind`, `name` (its
//! label), `args` (secrets as `***`), `start_s` (on the run clock, s since the zero),
//! `elapsed_s`, `stopped` (stopped before it ended on its own; absent on a skipped
//! phase), `skipped` (why it did not run: what it was to run `during` had ended),
//! `error` (why it failed) and `result`, which depends on the kind:
//! - `sleep`: `{"slept_s"}`;
//! - `restart`, `stop`, `start`, `kill`: `{"nodes"}`, the node names, or per node
//!   `{"current_ms", "healthy_ms", "node"}` once started again; `"interrupted": true`
//!   when the run ended while the nodes were down;
//! - `load`: the child's `diskpulse load --json` document ([`LoadDocument`]), with
//!   `"failures_expected": true` when its operations failed only with the kinds the phase
//!   expects;
//! - `probe`, `fsync`, `check`: the child's JSON document as it printed it
//!   ([`ChildDocument`]);
//! - a child's output that is not JSON: that text; nothing (a failed child that printed
//!   nothing, a skipped phase): `null`.
//!
//! What must stay true: the bytes are the ones the executor wrote when it built these
//! records as JSON values. meta.json goes through a `serde_json::Value` (sorted keys, see
//! [`super::meta`]), so field order does not matter there; a child's document is kept as
//! it parsed (every key, every number as serde_json read it), never re-derived from the
//! few fields diskpulse reads from it. Those fields are read by type: [`LoadDocument::load`]
//! and [`LoadDocument::stream_check`].

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::load::StreamCheck;
use super::meta::{LoadMeta, Meta, Section};

/// meta.json `phases`: each phase's record as the scenario executor builds it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(transparent)]
pub struct PhasesSection(pub Vec<PhaseRecord>);

impl Section for PhasesSection {
    const KEY: &'static str = "phases";
}

impl Meta {
    /// meta.json `phases`, read by type (none when absent or when it does not parse).
    pub fn phases(&self) -> Vec<PhaseRecord> {
        self.section(PhasesSection::KEY).unwrap_or_default()
    }
}

/// One phase of a run as meta.json `phases[]` holds it (fields in sorted order).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(from = "RawRecord")]
pub struct PhaseRecord {
    pub args: Vec<String>,
    pub elapsed_s: f64,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub index: usize,
    pub kind: String,
    pub name: String,
    pub result: PhaseResult,
    /// Why it did not run (what it was to run `during` had ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub start_s: f64,
    /// Stopped before it ended on its own (Ctrl-C, the end of the phase it ran `during`,
    /// another phase failing); absent on a skipped phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<bool>,
}

/// A record as read: its result still JSON until the kind says what it is.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawRecord {
    args: Vec<String>,
    elapsed_s: f64,
    error: Option<String>,
    index: usize,
    kind: String,
    name: String,
    result: Value,
    skipped: Option<String>,
    start_s: f64,
    stopped: Option<bool>,
}

impl From<RawRecord> for PhaseRecord {
    fn from(r: RawRecord) -> PhaseRecord {
        PhaseRecord {
            result: PhaseResult::of_value(&r.kind, r.result),
            args: r.args,
            elapsed_s: r.elapsed_s,
            error: r.error,
            index: r.index,
            kind: r.kind,
            name: r.name,
            skipped: r.skipped,
            start_s: r.start_s,
            stopped: r.stopped,
        }
    }
}

impl PhaseRecord {
    /// A load phase's result, typed (`None` for another kind or a result that is not a
    /// load's document).
    pub fn load(&self) -> Option<LoadMeta> {
        match &self.result {
            PhaseResult::Load(d) if self.kind == "load" => d.load(),
            _ => None,
        }
    }

    /// A load phase whose operations failed only with the kinds it expects.
    pub fn failures_expected(&self) -> bool {
        matches!(&self.result, PhaseResult::Load(d) if d.failures_expected)
    }
}

/// What a phase gave (see the module doc for each kind).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(untagged)]
pub enum PhaseResult {
    /// `null`: a skipped phase, a failed child that printed no JSON.
    #[default]
    None,
    /// A `sleep`: how long it slept (s; less than asked when stopped).
    Slept { slept_s: f64 },
    /// A node phase.
    Nodes(NodesResult),
    /// A load's `--json` document.
    Load(LoadDocument),
    /// A probe's, fsync's or check's JSON document.
    Document(ChildDocument),
    /// A child's output that is not JSON.
    Text(String),
}

impl PhaseResult {
    /// The result of a `kind` child that ended well: its stdout as JSON, else as text.
    pub fn of_stdout(kind: &str, stdout: &str) -> PhaseResult {
        match serde_json::from_str::<Value>(stdout) {
            Ok(v) => PhaseResult::of_value(kind, v),
            Err(_) => PhaseResult::Text(stdout.to_string()),
        }
    }

    /// The result a failed `kind` child printed before it exited: its stdout if JSON.
    pub fn of_failed_stdout(kind: &str, stdout: &str) -> PhaseResult {
        serde_json::from_str::<Value>(stdout)
            .map(|v| PhaseResult::of_value(kind, v))
            .unwrap_or_default()
    }

    /// `v` as the result of a `kind` phase: the type its kind writes when it reads as one,
    /// else the document as it is (nothing is dropped).
    fn of_value(kind: &str, v: Value) -> PhaseResult {
        match v {
            Value::Null => return PhaseResult::None,
            Value::String(s) => return PhaseResult::Text(s),
            _ => {}
        }
        match kind {
            "sleep" => {
                if let Ok(s) = Slept::deserialize(&v) {
                    return PhaseResult::Slept { slept_s: s.slept_s };
                }
            }
            "restart" | "stop" | "start" | "kill" => {
                if let Ok(n) = NodesResult::deserialize(&v) {
                    return PhaseResult::Nodes(n);
                }
            }
            "load" => {
                if let Value::Object(mut doc) = v {
                    let failures_expected =
                        doc.get("failures_expected") == Some(&Value::Bool(true));
                    if failures_expected {
                        doc.remove("failures_expected");
                    }
                    return PhaseResult::Load(LoadDocument {
                        doc,
                        failures_expected,
                    });
                }
            }
            _ => {}
        }
        PhaseResult::Document(ChildDocument(v))
    }
}

/// A sleep's result as read (every other key makes it a plain document).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Slept {
    slept_s: f64,
}

/// A node phase's result: the nodes it acted on and, once they were started again, how
/// long each took.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodesResult {
    /// The run ended while the nodes were down (they were not started again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub nodes: Vec<NodeOutcome>,
}

/// One node of a node phase: its name, or once started again its times.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum NodeOutcome {
    Name(String),
    Started(NodeStarted),
}

/// A node started again: ms from the start until it was current (answered) and until
/// its /healthz said ok (`None`: not within the limit). Fields in sorted order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeStarted {
    pub current_ms: f64,
    pub healthy_ms: Option<f64>,
    pub node: String,
}

/// A load child's `diskpulse load --json` document, kept whole as it was printed (the
/// load engine's `LoadReport`), and whether its failures were the ones its phase expects.
/// Read through [`LoadDocument::load`] and [`LoadDocument::stream_check`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadDocument {
    doc: serde_json::Map<String, Value>,
    /// Written as `"failures_expected": true` beside the document's own keys.
    pub failures_expected: bool,
}

impl Serialize for LoadDocument {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.failures_expected {
            return self.doc.serialize(s);
        }
        let mut doc = self.doc.clone();
        doc.insert("failures_expected".into(), Value::Bool(true));
        doc.serialize(s)
    }
}

impl LoadDocument {
    /// The mode and per-role figures (with their failures), typed; `None` when the
    /// document does not read as a load's.
    pub fn load(&self) -> Option<LoadMeta> {
        serde_json::from_value(Value::Object(self.doc.clone())).ok()
    }

    /// The JetStream stream's count before and after the load (`None`: the document has
    /// none, a core or AMQP load, or it does not read).
    pub fn stream_check(&self) -> Option<StreamCheck> {
        self.doc
            .get("stream_check")
            .and_then(|v| StreamCheck::deserialize(v).ok())
    }
}

/// A probe's (fio-shaped), fsync's or check's JSON document, kept as the child printed
/// it; diskpulse reads these from their own files (`probe-N.json`, ...), not from here.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(transparent)]
pub struct ChildDocument(Value);

#[cfg(test)]
mod tests {
    use super::*;

    /// The record, written through a `Value` as meta.json writes its sections.
    fn written(r: &PhaseRecord) -> String {
        serde_json::to_value(r).unwrap().to_string()
    }

    #[test]
    fn each_kind_s_result_is_written_as_the_executor_wrote_it() {
        let mut r = PhaseRecord {
            args: vec![],
            elapsed_s: 2.0,
            index: 0,
            kind: "sleep".into(),
            name: "sleep".into(),
            result: PhaseResult::Slept { slept_s: 2.0 },
            start_s: 0.5,
            stopped: Some(false),
            ..Default::default()
        };
        assert_eq!(
            written(&r),
            r#"{"args":[],"elapsed_s":2.0,"index":0,"kind":"sleep","name":"sleep","result":{"slept_s":2.0},"start_s":0.5,"stopped":false}"#
        );
        r.kind = "kill".into();
        r.result = PhaseResult::Nodes(NodesResult {
            interrupted: true,
            nodes: vec![NodeOutcome::Name("n1".into())],
        });
        assert!(written(&r).contains(r#""result":{"interrupted":true,"nodes":["n1"]}"#));
        r.result = PhaseResult::Nodes(NodesResult {
            interrupted: false,
            nodes: vec![NodeOutcome::Started(NodeStarted {
                current_ms: 12.5,
                healthy_ms: None,
                node: "n1".into(),
            })],
        });
        assert!(written(&r)
            .contains(r#""result":{"nodes":[{"current_ms":12.5,"healthy_ms":null,"node":"n1"}]}"#));
        // A skipped phase: no `stopped`, a null result.
        r.stopped = None;
        r.skipped = Some("phase #0 load had ended before this one's start".into());
        r.result = PhaseResult::None;
        let w = written(&r);
        assert!(
            !w.contains("stopped") && w.contains(r#""result":null"#),
            "{w}"
        );
        assert_eq!(
            PhaseResult::of_stdout("probe", "not json"),
            PhaseResult::Text("not json".into())
        );
        assert_eq!(
            PhaseResult::of_failed_stdout("probe", "not json"),
            PhaseResult::None
        );
    }

    #[test]
    fn a_load_document_reads_by_type_and_keeps_every_key() {
        let out = r#"{"mode":"js-pub","zz":{"b":1,"a":[1.5,2]},"roles":[{"role":"js-pub","failures":[{"kind":"timeout","count":3}]}],"stream_check":{"acked":10,"msgs_after":8,"msgs_before":0,"stream":"S"}}"#;
        let PhaseResult::Load(mut d) = PhaseResult::of_stdout("load", out) else {
            panic!("not a load document")
        };
        let load = d.load().unwrap();
        assert_eq!(load.roles[0].failures[0].kind, "timeout");
        assert_eq!(d.stream_check().unwrap().missing(), Some(2));
        d.failures_expected = true;
        let v: Value = serde_json::from_str(out).unwrap();
        let mut want = v.as_object().unwrap().clone();
        want.insert("failures_expected".into(), Value::Bool(true));
        assert_eq!(serde_json::to_value(&d).unwrap(), Value::Object(want));
        // Read back from meta.json: the flag is the record's again, the bytes the same.
        let r = PhaseRecord {
            kind: "load".into(),
            result: PhaseResult::Load(d),
            ..Default::default()
        };
        let back: PhaseRecord = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert!(back.failures_expected());
        assert_eq!(written(&back), written(&r));
    }

    #[test]
    fn the_fixture_s_phases_read_and_write_back_as_they_were() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/runs/scenario-cell/meta.json"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let phases = v["phases"].clone();
        let recs: Vec<PhaseRecord> = serde_json::from_value(phases.clone()).unwrap();
        assert!(recs
            .iter()
            .any(|r| matches!(r.result, PhaseResult::Load(_))));
        assert!(recs
            .iter()
            .any(|r| matches!(r.result, PhaseResult::Nodes(_))));
        assert_eq!(serde_json::to_value(&recs).unwrap(), phases);
    }
}
