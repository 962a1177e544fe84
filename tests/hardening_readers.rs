//! Issue 10, the readers of a recording: `report` of a run whose files are garbage,
//! cut short or claim absurd spans. Each case drives the real binary on a copy of a small
//! real recording (made once by `diskpulse record`) and checks: the exit code (2 for a
//! file that is not what it should be, 0 with a warning for one that was cut short or has
//! a damaged line), one line naming the file (and line), no panic, and the recording's
//! files left as they were. A property test calls the library (`report::analyse`) on
//! random damage to every file and wants a report or an error naming the damaged file.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use proptest::prelude::*;

/// A small real recording (about 0.7 s, with some writes), made once for every test.
fn base() -> &'static Path {
    static BASE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, run) = BASE.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("base");
        let scratch = d.path().join("scratch");
        let o = diskpulse()
            .args(["record", "--duration", "2s", "--out"])
            .arg(&run)
            .arg("--")
            .args(["sh", "-c"])
            .arg(format!(
                "dd if=/dev/zero of={} bs=64k count=64 conv=fsync 2>/dev/null; sleep 0.3",
                scratch.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (d, run)
    });
    run
}

/// A copy of the base recording in a new temporary directory.
fn copy() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for e in std::fs::read_dir(base()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), run.join(e.file_name())).unwrap();
    }
    (d, run)
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn gunzip(p: &Path) -> String {
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

fn gzip(p: &Path, text: &str) {
    let mut gz =
        flate2::write::GzEncoder::new(std::fs::File::create(p).unwrap(), Default::default());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
}

/// Runs `report` on `run` after `damage`; checks no panic and that the files that were
/// there are still there, byte for byte (a refused run gets no new file either).
fn report_after(damage: impl FnOnce(&Path)) -> (Output, String) {
    let (_d, run) = copy();
    damage(&run);
    let before = files(&run);
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("memory allocation"), "{err}");
    let after = files(&run);
    for (name, bytes) in &before {
        assert!(after.get(name) == Some(bytes), "{name} changed: {err}");
    }
    if o.status.code() == Some(2) {
        assert_eq!(after.len(), before.len(), "a refused run got new files");
    }
    (o, err)
}

/// Refused: exit 2, one line naming `file` and containing `says`.
fn refused(damage: impl FnOnce(&Path), file: &str, says: &str) {
    let (o, err) = report_after(damage);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(file) && err.contains(says), "{err}");
}

/// Read with a warning: exit 0, a `warning:` line naming `file` and containing `says`.
fn warned(damage: impl FnOnce(&Path), file: &str, says: &str) -> String {
    let (o, err) = report_after(damage);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning: ") && l.contains(file) && l.contains(says)),
        "{err}"
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const DS: &str = "diskstats.csv.gz";

#[test]
fn diskstats_of_random_bytes_is_refused_naming_the_file() {
    refused(
        |r| {
            let junk: Vec<u8> = (0..4000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect();
            std::fs::write(r.join(DS), junk).unwrap();
        },
        DS,
        "not a gzip stream",
    );
}

#[test]
fn diskstats_of_plain_text_is_refused() {
    refused(
        |r| std::fs::write(r.join(DS), gunzip(&r.join(DS))).unwrap(),
        DS,
        "not a gzip stream",
    );
}

#[test]
fn an_empty_diskstats_is_refused() {
    refused(|r| std::fs::write(r.join(DS), b"").unwrap(), DS, "is empty");
}

#[test]
fn diskstats_with_a_column_removed_is_refused_naming_line_1() {
    refused(
        |r| {
            let text: String = gunzip(&r.join(DS))
                .lines()
                .map(|l| {
                    let mut c: Vec<&str> = l.split(',').collect();
                    c.remove(10); // sectors_written
                    c.join(",") + "\n"
                })
                .collect();
            gzip(&r.join(DS), &text);
        },
        &format!("{DS} line 1"),
        "not the diskstats header",
    );
}

#[test]
fn diskstats_with_a_header_only_is_refused() {
    refused(
        |r| {
            let text = gunzip(&r.join(DS));
            gzip(
                &r.join(DS),
                &(text.lines().next().unwrap().to_string() + "\n"),
            );
        },
        DS,
        "no whole row",
    );
}

#[test]
fn a_newer_format_version_is_refused_naming_both() {
    refused(
        |r| {
            let p = r.join("meta.json");
            let mut m = read_json(&p);
            m["format_version"] = 99.into();
            std::fs::write(&p, m.to_string()).unwrap();
        },
        "format_version 99",
        "reads version 3",
    );
}

fn set_duration(r: &Path, v: serde_json::Value) {
    let p = r.join("meta.json");
    let mut m = read_json(&p);
    m["duration_ns"] = v;
    std::fs::write(&p, m.to_string()).unwrap();
}

#[test]
fn a_meta_duration_of_1e18_ns_is_refused_not_allocated() {
    refused(
        |r| set_duration(r, 1_000_000_000_000_000_000u64.into()),
        "meta.json duration_ns",
        "at most 400 days",
    );
    refused(
        |r| set_duration(r, serde_json::json!(1e18)),
        "meta.json",
        "does not parse",
    );
}

#[test]
fn a_meta_duration_longer_than_the_rows_is_cut_to_the_rows() {
    // 20 h is within the bound but the rows end after a second or two: the report bins
    // what the rows hold (and says so), so duration_s is the rows' span.
    let (o, err) = report_after(|r| set_duration(r, 72_000_000_000_000u64.into()));
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("past the last recorded row"), "{err}");
    let (_d, run) = copy();
    set_duration(&run, 72_000_000_000_000u64.into());
    let o = diskpulse()
        .args(["report", "--json", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dur = s["duration_s"].as_f64().unwrap();
    assert!(dur > 0.1 && dur < 5.0, "duration_s {dur}");
}

#[test]
fn a_diskstats_row_with_a_huge_t_ns_is_skipped_naming_its_line() {
    let last_line = gunzip(&base().join(DS)).lines().count() + 1;
    warned(
        |r| {
            let mut text = gunzip(&r.join(DS));
            let first = text.lines().nth(1).unwrap().to_string();
            let rest = first.split_once(',').unwrap().1;
            text.push_str(&format!("999999999999999999,{rest}\n"));
            gzip(&r.join(DS), &text);
        },
        &format!("{DS}:{last_line}"),
        "past the 400 days",
    );
}

#[test]
fn a_torn_last_row_reads_up_to_the_last_whole_row_with_a_warning() {
    warned(
        |r| {
            let mut text = gunzip(&r.join(DS));
            text.push_str("123,loop0,7");
            gzip(&r.join(DS), &text);
        },
        DS,
        "is cut off",
    );
}

#[test]
fn a_gzip_stream_cut_short_reads_with_a_warning() {
    warned(
        |r| {
            let bytes = std::fs::read(r.join(DS)).unwrap();
            std::fs::write(r.join(DS), &bytes[..bytes.len() * 2 / 3]).unwrap();
        },
        DS,
        "does not decode",
    );
}

#[test]
fn a_garbage_line_in_events_jsonl_is_skipped_naming_file_and_line() {
    let n = std::fs::read_to_string(base().join("events.jsonl"))
        .unwrap()
        .lines()
        .count()
        + 1;
    warned(
        |r| {
            let p = r.join("events.jsonl");
            let mut text = std::fs::read_to_string(&p).unwrap();
            text.push_str("garbage{\n");
            std::fs::write(&p, text).unwrap();
        },
        &format!("events.jsonl:{n}"),
        "not an event",
    );
}

#[test]
fn meminfo_of_random_bytes_is_refused() {
    refused(
        |r| std::fs::write(r.join("meminfo.csv"), [0xffu8, 0xfe, 0x00, 0x80, b'\n']).unwrap(),
        "meminfo.csv line 1",
        "not its header",
    );
}

#[test]
fn a_load_csv_without_its_role_column_is_refused() {
    refused(
        |r| std::fs::write(r.join("load.csv"), "t_ns,window_ns,ops\n0,100000000,5\n").unwrap(),
        "load.csv line 1",
        "no column 'role'",
    );
}

#[test]
fn a_damaged_probe_csv_leaves_the_probe_out_with_a_warning() {
    warned(
        |r| std::fs::write(r.join("probe.csv"), "hello\nworld\n").unwrap(),
        "probe.csv line 1",
        "leaves out the probe",
    );
}

#[test]
fn an_incomplete_recording_reads_with_a_warning() {
    warned(
        |r| {
            let p = r.join("meta.json");
            let mut m = read_json(&p);
            m["complete"] = false.into();
            std::fs::write(&p, m.to_string()).unwrap();
        },
        "meta.json",
        "incomplete",
    );
}

#[test]
fn a_recording_killed_with_sigkill_reports_exit_0_saying_it_is_incomplete() {
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let mut rec = diskpulse()
        .args(["record", "--duration", "60s", "--out"])
        .arg(&run)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let gz = run.join(DS);
    let t0 = std::time::Instant::now();
    while !gz.exists() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    rec.kill().unwrap(); // SIGKILL
    rec.wait().unwrap();
    let o = diskpulse()
        .args(["report", "--no-charts", "--no-html"])
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("warning: ")
            && l.contains("meta.json")
            && l.contains("incomplete")),
        "{err}"
    );
    let s = read_json(&run.join("summary.json"));
    assert!(s["duration_s"].as_f64().unwrap() >= 1.0, "{s:#}");
}

/// One way to damage a file.
#[derive(Debug, Clone)]
enum Damage {
    /// Replace the whole file with these bytes.
    Random(Vec<u8>),
    /// Keep only this share (per mille) of its bytes.
    Truncate(u16),
    /// Remove this column (modulo the header's count) from every line of a CSV.
    DropColumn(usize),
    /// Overwrite one byte (position per mille of the length) with this value.
    Flip(u16, u8),
}

fn damage(p: &Path, d: &Damage) {
    let gz = p.extension().is_some_and(|e| e == "gz");
    let bytes = std::fs::read(p).unwrap();
    match d {
        Damage::Random(b) => std::fs::write(p, b).unwrap(),
        Damage::Truncate(pm) => {
            std::fs::write(p, &bytes[..bytes.len() * *pm as usize / 1000]).unwrap()
        }
        Damage::Flip(pm, v) => {
            let mut b = bytes;
            if !b.is_empty() {
                let i = (b.len() - 1) * *pm as usize / 1000;
                b[i] = *v;
            }
            std::fs::write(p, b).unwrap();
        }
        Damage::DropColumn(k) => {
            let text = if gz {
                gunzip(p)
            } else {
                String::from_utf8_lossy(&bytes).into_owned()
            };
            let ncols = text.lines().next().map_or(1, |h| h.split(',').count());
            let k = k % ncols.max(1);
            let out: String = text
                .lines()
                .map(|l| {
                    let mut c: Vec<&str> = l.split(',').collect();
                    if k < c.len() {
                        c.remove(k);
                    }
                    c.join(",") + "\n"
                })
                .collect();
            if gz {
                gzip(p, &out)
            } else {
                std::fs::write(p, out).unwrap()
            }
        }
    }
}

fn any_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600).prop_map(Damage::Random),
        (0u16..1000).prop_map(Damage::Truncate),
        (0usize..24).prop_map(Damage::DropColumn),
        (0u16..1000, any::<u8>()).prop_map(|(p, v)| Damage::Flip(p, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the damage to whichever file, `report`'s reading and analysis neither
    /// panics nor allocates without bound: it gives a report or an error naming the file.
    #[test]
    fn damaged_files_give_a_report_or_an_error_naming_the_file(
        file_i in 0usize..5,
        d in any_damage(),
    ) {
        let names = [DS, "meta.json", "meminfo.csv", "cpu.csv", "events.jsonl"];
        let name = names[file_i];
        let (_dir, run) = copy();
        damage(&run.join(name), &d);
        let o = diskpulse::report::ReportOptions { charts: false, html: false, ..Default::default() };
        let got = std::panic::catch_unwind(|| diskpulse::report::analyse(&run, &o).map(|_| ()));
        match got {
            Err(_) => prop_assert!(false, "report panicked on {name} after {d:?}"),
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.contains(name), "{name} after {d:?}: {msg}");
            }
        }
    }
}
