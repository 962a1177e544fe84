//! The layers, enforced. Two mechanisms (docs/ARCHITECTURE.md names them):
//! - **Crates**: Cargo refuses a dependency cycle between crates, and this test reads
//!   `cargo metadata` and fails on any edge between the workspace's crates that
//!   [`CRATE_EDGES`] does not allow (an import up a layer needs a new edge).
//! - **Modules**: inside each crate, every path that leaves a top-level module
//!   (`crate::x::...`, `super::x` from the top, `super::super::x` from one down) is an
//!   edge between top-level modules. The graph must have no circle in any crate, and in
//!   the crates with a layer table ([`MODULE_LAYERS`]) an edge must point to a lower layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which workspace crate may depend on which (bottom first).
const CRATE_EDGES: &[(&str, &[&str])] = &[
    ("collectors", &[]),
    ("charts", &[]),
    ("format", &["collectors"]),
    ("report", &["collectors", "charts", "format"]),
    ("engines", &["collectors", "charts", "format", "report"]),
    (
        "diskpulse",
        &["collectors", "charts", "format", "report", "engines"],
    ),
];

/// Top-level modules by layer, bottom first; a module may use only lower layers' modules.
const MODULE_LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "engines",
        &[
            &["signals", "proxy", "lab", "check"],
            &["export"],
            &["live"],
            &["recording"],
            &["load", "probe", "fsync"],
            &["broker"],
            &["agent"],
        ],
    ),
    (
        "diskpulse",
        &[
            &["session", "view", "progress"],
            &["scenario"],
            &["commands"],
        ],
    ),
];

/// Edges up a layer that are known and not yet mended, each with its reason. The test
/// fails on any other, and on an entry here that no longer exists (so the list only
/// shrinks).
const KNOWN_UP: &[(&str, &str, &str, &str)] = &[];

/// Edges that close a circle, known and not yet mended (the circle test leaves them out
/// and fails once one no longer exists, so the list only shrinks).
const KNOWN_CIRCLE_EDGES: &[(&str, &str, &str, &str)] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn crates_depend_only_down_the_layers() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let allowed: BTreeMap<&str, &[&str]> = CRATE_EDGES.iter().copied().collect();
    let members: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        members,
        allowed
            .keys()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        "every workspace crate has its line in CRATE_EDGES"
    );
    let mut bad = vec![];
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if d["kind"].is_null() && members.contains(dep) && !allowed[name].contains(&dep) {
                bad.push(format!("{name} -> {dep}"));
            }
        }
    }
    assert!(bad.is_empty(), "crate edges up a layer: {bad:?}");
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path inside its crate: src/a/b.rs and src/a/b/mod.rs are [a, b].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// The top-level modules a file's code names outside its own top-level module.
fn edges_of(src: &Path, file: &Path, tops: &BTreeSet<String>) -> BTreeSet<String> {
    let here = module_path(src, file);
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap();
        let words: Vec<&str> = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .collect();
        for w in words {
            let segs: Vec<&str> = w.split("::").collect();
            let target = if segs[0] == "crate" {
                segs.get(1).map(|s| s.to_string())
            } else if segs[0] == "super" {
                let ups = segs.iter().take_while(|s| **s == "super").count();
                // super from [a, b] names a's children; from [a] the crate's.
                let base_len = here.len().saturating_sub(ups);
                if base_len == 0 {
                    segs.get(ups).map(|s| s.to_string())
                } else {
                    None
                }
            } else {
                None
            };
            if let Some(t) = target {
                if tops.contains(&t) && here.first() != Some(&t) {
                    out.insert(t);
                }
            }
        }
    }
    out
}

/// Every crate's module graph: crate -> module -> the modules it uses.
fn graphs() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut all = BTreeMap::new();
    for (name, dir) in [
        ("collectors", "collectors/src"),
        ("charts", "charts/src"),
        ("format", "format/src"),
        ("report", "report/src"),
        ("engines", "engines/src"),
        ("diskpulse", "src"),
    ] {
        let src = root().join(dir);
        let mut files = vec![];
        rs_files(&src, &mut files);
        let tops: BTreeSet<String> = files
            .iter()
            .filter_map(|f| module_path(&src, f).first().cloned())
            .collect();
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            let Some(top) = module_path(&src, f).first().cloned() else {
                continue;
            };
            g.entry(top).or_default().extend(edges_of(&src, f, &tops));
        }
        all.insert(name.to_string(), g);
    }
    all
}

/// A circle through `start`, if there is one.
fn circle(
    g: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    at: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for n in g.get(at).into_iter().flatten() {
        if n == start {
            let mut c = path.clone();
            c.push(n.clone());
            return Some(c);
        }
        if !path.contains(n) {
            path.push(n.clone());
            if let Some(c) = circle(g, start, n, path) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let mut found = vec![];
    for (krate, mut g) in graphs() {
        // A known edge up a layer is its own test's business (it must go away there).
        for (k, a, b, why) in KNOWN_UP.iter().chain(KNOWN_CIRCLE_EDGES) {
            if *k == krate {
                let there = g.get_mut(*a).is_some_and(|uses| uses.remove(*b));
                assert!(
                    there,
                    "{k}: {a} -> {b} is mended: take it out of the list ({why})"
                );
            }
        }
        for m in g.keys() {
            if let Some(c) = circle(&g, m, m, &mut vec![m.clone()]) {
                found.push(format!("{krate}: {}", c.join(" -> ")));
            }
        }
    }
    // The graph is only as good as the scan: it must see the edges there are.
    let g = graphs();
    assert!(
        g["engines"]["agent"].contains("broker"),
        "the scan sees agent -> broker"
    );
    assert!(
        g["report"]["html"].contains("analysis"),
        "the scan sees html -> analysis"
    );
    assert!(found.is_empty(), "import circles: {found:#?}");
}

#[test]
fn modules_use_only_lower_layers() {
    let g = graphs();
    let mut bad = vec![];
    let mut known_seen = BTreeSet::new();
    for (krate, layers) in MODULE_LAYERS {
        let layer_of: BTreeMap<&str, usize> = layers
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.iter().map(move |m| (*m, i)))
            .collect();
        for m in g[*krate].keys() {
            assert!(
                layer_of.contains_key(m.as_str()),
                "{krate}: module {m} has no layer in MODULE_LAYERS"
            );
        }
        for (m, uses) in &g[*krate] {
            for u in uses {
                if layer_of[u.as_str()] >= layer_of[m.as_str()] {
                    let known = KNOWN_UP
                        .iter()
                        .any(|(k, a, b, _)| k == krate && a == m && b == u);
                    if known {
                        known_seen.insert((krate.to_string(), m.clone(), u.clone()));
                    } else {
                        bad.push(format!("{krate}: {m} -> {u}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "imports up (or across) a layer: {bad:?}");
    for (k, a, b, why) in KNOWN_UP {
        assert!(
            known_seen.contains(&(k.to_string(), a.to_string(), b.to_string())),
            "{k}: {a} -> {b} is mended: take it out of KNOWN_UP ({why})"
        );
    }
}
