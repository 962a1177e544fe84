//! Recordings made before the run-directory vocabulary became types (issue 24), kept as
//! fixtures in tests/fixtures/runs/: a 2 s traced `demo` and one cell of a small scenario
//! (js-pub, a probe beside it, the node SIGKILLed and started again). The files they hold
//! must read back through the format crate's types and be written again as the bytes
//! that were written (events.jsonl line by line, meta.json whole): every key, its place,
//! every string and integer the same; a float may differ in its last digit only, which
//! serde_json's default parser rounds (`same_json`). And `report` must write the summary.json
//! and rates.csv it wrote then, byte for byte (summary.json's `run` path aside: the copy
//! lives elsewhere).

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert!(v.len() >= 2, "fixtures missing under {}", root.display());
    v
}

/// A copy of the fixture's recording (not its expected/ outputs) in a fresh directory.
fn copy(fx: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for e in std::fs::read_dir(fx).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, d.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    d
}

/// The text cut into numbers and what lies between them.
fn tokens(s: &str) -> Vec<(bool, &str)> {
    let b = s.as_bytes();
    let (mut out, mut i, mut start) = (vec![], 0, 0);
    while i < b.len() {
        let num_start = (b[i] == b'-' && i + 1 < b.len() && b[i + 1].is_ascii_digit())
            || (b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()));
        if num_start && !in_string(&b[..i]) {
            if start < i {
                out.push((false, &s[start..i]));
            }
            let j = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_digit() || b".eE+-".contains(&b[i])) {
                i += 1;
            }
            out.push((true, &s[j..i]));
            start = i;
        } else {
            i += 1;
        }
    }
    if start < b.len() {
        out.push((false, &s[start..]));
    }
    out
}

/// Whether the end of `before` is inside a JSON string (an odd number of unescaped quotes).
fn in_string(before: &[u8]) -> bool {
    let mut inside = false;
    let mut k = 0;
    while k < before.len() {
        match before[k] {
            b'\\' => k += 1,
            b'"' => inside = !inside,
            _ => {}
        }
        k += 1;
    }
    inside
}

/// Two JSON texts that are the same text but for floats' last digits (relative 1e-12).
fn same_json(a: &str, b: &str) -> bool {
    let (ta, tb) = (tokens(a), tokens(b));
    ta.len() == tb.len()
        && ta.iter().zip(&tb).all(|((na, x), (nb, y))| {
            let float = |s: &str| s.contains(['.', 'e', 'E']);
            if !(*na && *nb && float(x) && float(y)) {
                return x == y;
            }
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => p == q || (p - q).abs() <= 1e-12 * p.abs().max(q.abs()),
                _ => false,
            }
        })
}

#[test]
fn same_json_tells_a_float_digit_from_a_changed_value() {
    assert!(same_json(
        r#"{"a":123.446458}"#,
        r#"{"a":123.44645799999999}"#
    ));
    assert!(!same_json(r#"{"a":123.4465}"#, r#"{"a":123.446458}"#));
    assert!(!same_json(r#"{"a":1}"#, r#"{"a":1.0}"#));
    assert!(!same_json(r#"{"b":1,"a":2}"#, r#"{"a":2,"b":1}"#));
    assert!(same_json(r#"{"s":"x1.5"}"#, r#"{"s":"x1.5"}"#));
    assert!(!same_json(
        r#"{"s":"x1.5"}"#,
        r#"{"s":"x1.50000000000001"}"#
    ));
}

#[test]
fn events_read_back_through_the_types_as_the_bytes_written() {
    for fx in fixtures() {
        let text = std::fs::read_to_string(fx.join("events.jsonl")).unwrap();
        let events = diskpulse::format::events::read(&fx).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(events.len(), lines.len(), "{}", fx.display());
        for (e, line) in events.iter().zip(&lines) {
            let again = serde_json::to_string(e).unwrap();
            assert!(
                same_json(&again, line),
                "{}:\n{again}\n{line}",
                fx.display()
            );
        }
    }
}

#[test]
fn meta_reads_back_through_its_type_as_the_bytes_written() {
    for fx in fixtures() {
        let bytes = std::fs::read(fx.join("meta.json")).unwrap();
        let meta = diskpulse::format::meta::Meta::read(&fx).unwrap();
        let again = serde_json::to_vec_pretty(&meta).unwrap();
        assert!(
            same_json(
                &String::from_utf8_lossy(&again),
                &String::from_utf8_lossy(&bytes)
            ),
            "{}: meta.json written again differs:\n{}",
            fx.display(),
            String::from_utf8_lossy(&again)
        );
    }
}

/// summary.json with its `run` (the directory's path) taken out.
fn without_run(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines() {
        if l.trim_start().starts_with("\"run\": ") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[test]
fn report_writes_the_summary_and_rates_it_wrote_before() {
    for fx in fixtures() {
        let d = copy(&fx);
        let out = Command::new(env!("CARGO_BIN_EXE_diskpulse"))
            .args(["report", "--no-charts", "--no-html"])
            .arg(d.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            fx.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let rates = std::fs::read(d.path().join("rates.csv")).unwrap();
        assert!(
            rates == std::fs::read(fx.join("expected/rates.csv")).unwrap(),
            "{}: rates.csv differs",
            fx.display()
        );
        let now = std::fs::read_to_string(d.path().join("summary.json")).unwrap();
        let then = std::fs::read_to_string(fx.join("expected/summary.json")).unwrap();
        let (now, then) = (without_run(&now), without_run(&then));
        if now != then {
            let first = now
                .lines()
                .zip(then.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{}: summary.json differs from line {}: now {:?}, then {:?}",
                fx.display(),
                first + 1,
                now.lines().nth(first),
                then.lines().nth(first)
            );
        }
    }
}
