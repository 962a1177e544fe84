//! `diskpulse fsync -f FILE -s SECS`, pg_test_fsync's command line, prints pg_test_fsync's
//! sections, row names, order and units: checked against the real pg_test_fsync's output
//! on the same directory, read by one parser (a script written for pg's output reads ours).

use super::*;

/// pg_test_fsync 15's binary (postgresql-15): PG_TEST_FSYNC overrides.
fn pg_test_fsync() -> String {
    std::env::var("PG_TEST_FSYNC")
        .unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_test_fsync".to_string())
}

/// (section, row name, rest of the line) of each row, as a reader of pg_test_fsync's
/// output sees them: a section is an unindented line ending in ':'; a row is indented by
/// 8 with its name in the next 30 columns. Our own rows, after the line that says so,
/// and the sync-call sub-lines are left out.
fn pg_rows(text: &str) -> Vec<(String, String, String)> {
    let mut out = vec![];
    let mut section = String::new();
    let mut ours = false;
    for l in text.lines() {
        if !l.starts_with(' ') && l.trim_end().ends_with(':') {
            section = l.trim_end().to_string();
            ours = false;
        } else if l.trim_start().starts_with("diskpulse's rows") {
            ours = true;
        } else if !ours && !section.is_empty() && l.starts_with("        ") {
            let chars: Vec<char> = l.chars().collect();
            let name: String = chars[8..chars.len().min(38)].iter().collect();
            if name.trim_start().starts_with('└') {
                continue;
            }
            let rest: String = chars[chars.len().min(38)..].iter().collect();
            out.push((section.clone(), name.trim().to_string(), rest));
        }
    }
    out
}

#[test]
fn pg_test_fsyncs_command_line_gives_its_sections_rows_and_units() {
    let pg = pg_test_fsync();
    if !have_tool(&pg, "postgresql-15") {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let theirs = Command::new(&pg)
        .args(["-s", "1", "-f"])
        .arg(d.path().join("pg.out"))
        .output()
        .unwrap();
    assert!(theirs.status.success(), "{theirs:?}");
    let file = d.path().join("pg_test_fsync.out");
    let ours = diskpulse()
        .args(["fsync", "-s", "0.2", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ours.stdout);
    assert!(
        ours.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    assert!(!file.exists(), "the -f file is removed afterwards");
    let (a, b) = (
        pg_rows(&String::from_utf8_lossy(&theirs.stdout)),
        pg_rows(&text),
    );
    let names = |r: &[(String, String, String)]| -> Vec<(String, String)> {
        r.iter().map(|(s, n, _)| (s.clone(), n.clone())).collect()
    };
    // 5 + 5 (fsync_writethrough's n/a in each) + 5 + 2 + 1.
    assert_eq!(
        names(&a).len(),
        18,
        "pg_test_fsync 15 prints 18 rows: {a:#?}"
    );
    assert_eq!(names(&b), names(&a), "our rows against pg's\n{text}");
    // Units and layout: pg's `%13.3f ops/sec  %6.0f usecs/op`, or n/a where pg has n/a.
    for ((_, name, pg_rest), (_, _, rest)) in a.iter().zip(&b) {
        let cols = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        let (p, o) = (cols(pg_rest), cols(rest));
        if p[0] == "n/a" {
            assert_eq!(o[0], "n/a", "{name}: {rest}");
            continue;
        }
        assert_eq!(
            p[1..4],
            ["ops/sec", p[2].as_str(), "usecs/op"][..],
            "{name}"
        );
        assert_eq!(&o[1], "ops/sec", "{name}: {rest}");
        assert_eq!(&o[3], "usecs/op", "{name}: {rest}");
        let ops: f64 = o[0].parse().unwrap();
        let usecs: f64 = o[2].parse().unwrap();
        assert!(ops > 0.0, "{name}: {rest}");
        // usecs/op is the time over the ops, as pg's: 1e6 / ops/sec, to its rounding.
        // (ops/sec is printed to 0.0005, which moves 1e6 / ops by 1e6 / ops² of that.)
        let tol = 0.5 + 0.0005 * 1e6 / (ops * ops);
        assert!((usecs - 1e6 / ops).abs() <= tol, "{name}: {rest}");
        assert_eq!(
            rest.find("ops/sec"),
            pg_rest.find("ops/sec"),
            "{name}: ops/sec in pg's column\npg:   {pg_rest}\nours: {rest}"
        );
    }

    // An existing -f file is never taken (pg's would be overwritten and deleted): exit 2,
    // the file as it was.
    std::fs::write(&file, b"keep me").unwrap();
    let o = diskpulse()
        .args(["fsync", "-s", "1", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("exists"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
}
