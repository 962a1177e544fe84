//! Issue 10, scenarios and `diskpulse run`: bad input is refused before anything is
//! written or started (exit 2, one line `FILE:LINE:COLUMN: ...` naming the value and the
//! fix, the `--out` directory not created, nothing made outside it), `--dry-run` refuses
//! exactly what the real run refuses; and property tests: the duration and size parsers
//! and the scenario checks never panic, and their errors have a place inside the file.
//!
//! No nats-server, root or loop device is needed: every case is refused before any of
//! them would be used (a case that was not refused would try to start, and fail the test).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use diskpulse::cli::{fmt_duration, parse_duration, parse_size, MAX_DURATION_NS};
use diskpulse::scenario::validate::check_study;
use proptest::prelude::*;

struct Refused {
    line: String,
}

/// Runs `diskpulse run FILE` (with `--dry-run` or with `--out OUT`) in `cwd` and checks the
/// rule: exit 2, one line on stderr, nothing on stdout, OUT not created.
fn refused(cwd: &Path, file: &Path, dry_run: bool) -> Refused {
    let out = cwd.join("out");
    let mut c = diskpulse();
    c.current_dir(cwd).arg("run").arg(file);
    if dry_run {
        c.arg("--dry-run");
    } else {
        c.arg("--out")
            .arg(&out)
            .arg("--lab-root")
            .arg(cwd.join("lab"));
    }
    let o = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(2),
        "dry_run={dry_run}: exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        o.status.code()
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stdout.is_empty(), "nothing printed as if it ran: {stdout}");
    assert!(!out.exists(), "--out {} was created", out.display());
    assert!(!cwd.join("lab").exists(), "the lab root was created");
    assert!(
        !cwd.join("diskpulse-runs").exists(),
        "a default study directory was created"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    Refused {
        line: stderr.trim_end().to_string(),
    }
}

/// Writes `text` as `dir/NAME`, checks that the dry run and the real run both refuse it
/// with the same line, which starts with `NAME:LINE:COLUMN:` and contains each of `wants`.
fn case(name: &str, text: &str, line: usize, col: usize, wants: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    let dry = refused(dir.path(), &file, true);
    let real = refused(dir.path(), &file, false);
    assert_eq!(dry.line, real.line, "--dry-run refuses as the run does");
    let place = format!("Error: {}:{line}:{col}: ", file.display());
    assert!(
        dry.line.starts_with(&place),
        "want {place}...; got {}",
        dry.line
    );
    for w in wants {
        assert!(dry.line.contains(w), "want '{w}' in: {}", dry.line);
    }
    dry.line
}

#[test]
fn a_volume_path_that_does_not_exist_is_refused_not_created() {
    let root = PathBuf::from("/nonexistent-diskpulse-test");
    assert!(!root.exists(), "{} exists before the test", root.display());
    let text = format!(
        "name = \"x\"\n[[volumes]]\nname = \"v\"\npath = \"{}/dir/xyz\"\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n",
        root.display()
    );
    case(
        "vol.toml",
        &text,
        4,
        8,
        &["volume 'v'", "/dir/xyz", "No such file", "create it first"],
    );
    assert!(!root.exists(), "{} was created", root.display());

    // A file is not a directory; a relative path is refused too (it would depend on the cwd).
    let f = tempfile::NamedTempFile::new().unwrap();
    let text = format!(
        "name = \"x\"\n[[volumes]]\nname = \"v\"\npath = \"{}\"\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n",
        f.path().display()
    );
    case("file.toml", &text, 4, 8, &["is not a directory"]);
    let text = "name = \"x\"\n[[volumes]]\nname = \"v\"\npath = \"rel/dir\"\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n";
    case("rel.toml", text, 4, 8, &["'rel/dir' is not absolute"]);
}

#[test]
fn a_scenario_name_that_makes_a_path_is_refused() {
    for (name, shown) in [
        ("../../../../x", "\"../../../../x\""),
        ("a/b", "\"a/b\""),
        ("..", "\"..\""),
        ("", "\"\""),
        ("nul\\u0000x", "\"nul\\0x\""),
    ] {
        let text = format!("name = \"{name}\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n");
        case(
            "name.toml",
            &text,
            1,
            1,
            &[shown, "without '/', '..' or NUL"],
        );
    }
}

#[test]
fn matrix_keys_and_values_never_make_a_path() {
    // A key with '/' and a value of "..": the cell id keeps neither as a path element.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    std::fs::write(
        &file,
        "name = \"m\"\n[matrix]\n\"../../k\" = [\"../..\", \"1s\"]\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nname = \"${../../k}\"\n",
    )
    .unwrap();
    let o = diskpulse()
        .current_dir(dir.path())
        .args(["run", "m.toml", "--dry-run"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ids: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .map(str::trim)
        .collect();
    assert_eq!(ids, ["..-..-k-..-..", "..-..-k-1s"], "{stdout}");

    // Two values that would share one directory are refused, not run into each other.
    case(
        "same.toml",
        "name = \"m\"\n[matrix]\nk = [\"a/b\", \"a b\"]\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nname = \"${k}\"\n",
        3,
        1,
        &["the same directory cells/k-a-b"],
    );
}

#[test]
fn a_matrix_too_big_is_refused_before_it_is_expanded() {
    let vals: Vec<String> = (0..1000).map(|i| format!("\"{i}\"")).collect();
    let vals = vals.join(", ");
    let text = format!(
        "name = \"m\"\n[matrix]\na = [{vals}]\nb = [{vals}]\nc = [{vals}]\n[[phases]]\nkind = \"sleep\"\nduration = \"${{a}}${{b}}${{c}}ms\"\n"
    );
    let t0 = std::time::Instant::now();
    case(
        "big.toml",
        &text,
        2,
        1,
        &[
            "1000000000 runs",
            "the limit is 1000 runs",
            "Split the study",
        ],
    );
    // Counting, not expanding: the old expansion took 8 GB and 8 s; both runs together
    // (dry and real, debug build) stay far below that.
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    // repeat counts too, and is pointed at.
    case(
        "repeat.toml",
        "name = \"m\"\n[matrix]\nrepeat = 1001\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
        3,
        1,
        &["1 cell(s) x 1001 repeat(s) = 1001 runs"],
    );
}

#[test]
fn bad_durations_and_sizes_anywhere_name_file_line_column() {
    // A lab volume's size (inline table), an overflowing throttle, a sampler interval, a
    // sleep, a kill's down_for, a matrix value used as a load's --duration.
    case(
        "size.toml",
        "name = \"s\"\n[[volumes]]\nname = \"v\"\nlab = { size = \"1e30G\", fs = \"ext4\" }\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
        4,
        16,
        &["volume 'v': size", "'1e30G'", "like 128, 4k or 1MiB"],
    );
    case(
        "bps.toml",
        "name = \"s\"\n[[volumes]]\nname = \"v\"\nlab = { size = \"1G\", write_bps = \"99999999999999999999\" }\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
        4,
        34,
        &["write_bps", "up to 16 EiB"],
    );
    case(
        "samplers.toml",
        "name = \"s\"\n[samplers]\ncpu_interval = \"100 ms\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
        3,
        16,
        &["samplers cpu_interval", "'100 ms'"],
    );
    case(
        "sleep.toml",
        "name = \"s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"99999999999999999999h\"\n",
        4,
        12,
        &["phase 1 (sleep): duration", "31 years"],
    );
    case(
        "down.toml",
        "name = \"s\"\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n[broker]\nvolumes = [\"v\"]\n[[phases]]\nkind = \"kill\"\nnodes = [1]\ndown_for = \"5 s\"\n",
        10,
        12,
        &["phase 1 (kill): down_for", "'5 s'"],
    );
    case(
        "matrix-dur.toml",
        "name = \"d\"\n[matrix]\nrt = [\"1s\", \"10x\"]\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\", \"--duration\", \"${rt}\", \"--server\", \"nats://127.0.0.1:4222\"]\n",
        3,
        13,
        &["invalid value '10x' for '--duration", "(cell rt-10x)"],
    );
}

#[test]
fn dry_run_checks_phase_arguments_as_the_child_would() {
    // Each was "OK" under --dry-run before, and the real run then failed in the child.
    let load = |args: &str| {
        format!(
            "name = \"a\"\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n[broker]\nvolumes = [\"v\"]\n[[phases]]\nkind = \"load\"\nargs = {args}\n"
        )
    };
    // An unknown flag, an unknown mode, a value the load's own validate refuses.
    case(
        "l1.toml",
        &load("[\"js-pub\", \"--sise\", \"4k\"]"),
        9,
        19,
        &["unexpected argument '--sise'"],
    );
    case(
        "l2.toml",
        &load("[\"js-pubb\"]"),
        9,
        9,
        &["invalid value 'js-pubb'", "possible values: pub"],
    );
    case(
        "l3.toml",
        &load("[\"js-pub\", \"--clients\", \"0\"]"),
        9,
        19,
        &["--clients must be at least 1"],
    );
    // A probe's own checks (resolve): a mix beyond 100 %, a bad block size.
    let probe = |args: &str| {
        format!(
            "name = \"p\"\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n[[phases]]\nkind = \"probe\"\nvolume = \"v\"\nargs = {args}\n"
        )
    };
    case(
        "p1.toml",
        &probe("[\"--rwmixread\", \"170\"]"),
        8,
        9,
        &["--rwmixread takes a percentage"],
    );
    case(
        "p2.toml",
        &probe("[\"--runtime\", \"1 s\"]"),
        8,
        22,
        &["invalid value '1 s' for '--runtime"],
    );
    // A load without a broker or --server; args on a phase that takes none.
    case(
        "nobroker.toml",
        "name = \"a\"\n[[phases]]\nkind = \"load\"\nargs = [\"js-pub\"]\n",
        3,
        8,
        &["needs a [broker]"],
    );
    case(
        "sleepargs.toml",
        "name = \"a\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nargs = [\"--x\"]\n",
        5,
        9,
        &["takes no args"],
    );
}

#[test]
fn a_node_phase_naming_a_node_the_broker_does_not_have_is_refused_before_the_run() {
    let text = |nodes: &str| {
        format!(
            "name = \"n\"\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n[broker]\nnodes = \"3\"\nvolumes = [\"v\"]\n[[phases]]\nkind = \"kill\"\nnodes = {nodes}\n"
        )
    };
    case(
        "n7.toml",
        &text("7"),
        9,
        8,
        &["'kill' phase", "7 is not a node number 1..3"],
    );
    case(
        "n04.toml",
        &text("[1, 4]"),
        9,
        8,
        &["4 is not a node number 1..3"],
    );
}

#[test]
fn the_shipped_scenarios_pass_the_dry_run() {
    for f in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")).unwrap() {
        let f = f.unwrap().path();
        // scenarios/jobs/ holds fio job files (tests/fiojob.rs reads them).
        if f.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let o = diskpulse()
            .arg("run")
            .arg(&f)
            .arg("--dry-run")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

// ---- property tests ----

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const UNITS_NS: [(&str, u64); 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const UNITS_B: [(&str, u64); 8] = [
    ("", 1),
    ("B", 1),
    ("k", 1 << 10),
    ("KiB", 1 << 10),
    ("m", 1 << 20),
    ("MB", 1 << 20),
    ("G", 1 << 30),
    ("gib", 1 << 30),
];

proptest! {
    #![proptest_config(config(4000))]

    #[test]
    fn parsers_never_panic_on_any_string(s in "\\PC{0,24}", t in "[0-9.eE+-]{0,24}(ns|us|ms|s|m|h|k|KiB|G|x|)") {
        let _ = parse_duration(&s);
        let _ = parse_size(&s);
        let _ = parse_duration(&t);
        let _ = parse_size(&t);
    }

    #[test]
    fn durations_round_trip(ns in 0..=MAX_DURATION_NS) {
        let d = Duration::from_nanos(ns);
        prop_assert_eq!(parse_duration(&fmt_duration(d)), Ok(d));
    }

    #[test]
    fn a_value_and_unit_read_as_written_or_refused_as_too_long(v in 0u64..=u64::MAX, u in 0..UNITS_NS.len(), small in any::<bool>()) {
        // Small values (the usual) and any u64 (mostly too long).
        let v = if small { v % 100_000 } else { v };
        let (unit, per) = UNITS_NS[u];
        let s = format!("{v}{unit}");
        match u128::from(v) * u128::from(per) {
            ns if ns <= u128::from(MAX_DURATION_NS) => {
                prop_assert_eq!(parse_duration(&s), Ok(Duration::from_nanos(ns as u64)));
            }
            _ => {
                let e = parse_duration(&s).unwrap_err();
                prop_assert!(e.contains("31 years") && e.contains(&s), "{}", e);
            }
        }
    }

    #[test]
    fn fractions_read_to_the_nearest_nanosecond(whole in 0u64..1000, milli in 0u64..1000) {
        let s = format!("{whole}.{milli:03}s");
        prop_assert_eq!(parse_duration(&s), Ok(Duration::from_millis(whole * 1000 + milli)));
    }

    #[test]
    fn sizes_read_as_written_or_refused_as_too_large(v in 0u64..=u64::MAX, u in 0..UNITS_B.len(), small in any::<bool>()) {
        let v = if small { v % 100_000 } else { v };
        let (unit, mul) = UNITS_B[u];
        let s = format!("{v}{unit}");
        match v.checked_mul(mul) {
            Some(b) => prop_assert_eq!(parse_size(&s), Ok(b)),
            None => {
                let e = parse_size(&s).unwrap_err();
                prop_assert!(e.contains("16 EiB") && e.contains(&s), "{}", e);
            }
        }
    }
}

fn shipped() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Ok, or an error whose place is inside `text`: the line exists and the column is at most
/// one past its end.
fn placed_inside(path: &str, text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = check_study(path, text) {
        let lines: Vec<&str> = text.split('\n').collect();
        prop_assert!(
            e.line >= 1 && e.line <= lines.len(),
            "{e} (file has {} lines)",
            lines.len()
        );
        let width = lines[e.line - 1].chars().count();
        prop_assert!(
            e.column >= 1 && e.column <= width + 1,
            "{e} (line {} has {width} chars)",
            e.line
        );
        prop_assert!(e.to_string().starts_with(path), "{e}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn mutated_scenarios_give_ok_or_a_place_inside_the_file(
        which in 0usize..64,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let files = shipped();
        let (path, text) = &files[which % files.len()];
        let mut bytes = text.clone().into_bytes();
        for (i, b) in &edits {
            // Mostly printable bytes and TOML's own punctuation, some of anything.
            let b = match b % 4 {
                0 => *b,
                _ => b"[]{}=\"',.#$\n 0123456789abcdefghijklmnopqrstuvwxyz"[*b as usize % 49],
            };
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        if truncate {
            let n = cut.index(bytes.len() + 1);
            bytes.truncate(n);
        }
        let mutated = String::from_utf8_lossy(&bytes).to_string();
        placed_inside(path, &mutated)?;
    }
}

#[test]
fn the_shipped_scenarios_check_ok() {
    for (path, text) in shipped() {
        if let Err(e) = check_study(&path, &text) {
            panic!("{e}");
        }
    }
}
