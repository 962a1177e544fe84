//! Issue 25, "then sweep again yourself": a third sweep, as a hostile or careless user
//! would try, over every subcommand. The issue's classes (writes outside what was named,
//! secrets in names, hangs, signals that cut a recording, damaged run directories,
//! faults told wrong) with new cases, and classes of its own: odd file types given as
//! inputs (a FIFO, /dev/zero), odd names (not UTF-8, a newline, a quote, 300 bytes), a
//! read-only or full output file system (tmpfs mounts of a few KiB), clocks (meta.json
//! from the future, or beyond what a u64 of ns holds), two runs writing one directory,
//! huge and zero values, environment variables, closed or full stdio, a flag twice.
//!
//! Each case runs the real binary in a process group of its own with a deadline and
//! checks what must hold of every case (no panic, no hang, nothing left in its group)
//! and its own expectation (the exit code documented in README.md's exit codes, a
//! message naming the input, nothing written where it should not be). The test prints
//! `sweep3: N cases, M misbehave` and per class, and fails on any misbehaving case
//! that is not in [`KNOWN`] (a case whose fix is too big for this round, with why).
//! The tmpfs cases need root (CI is root; elsewhere they skip, and fail under CI=true).
//!
//! Before this round's fixes the first 73 cases gave 32 misbehaving: odd-files 12 of 13
//! (a FIFO or /dev/zero as --nkey, scenario or job file hung; --creds/--tls-* "no such
//! file"), env 4 of 9, values 1 of 14 (agent --buffer 2^64-1), names 6 of 11 (matrix
//! values with a newline, quote or backslash; a newline or tab in a scenario name; export
//! --out of 300 bytes exit 1), full-or-read-only 3 of 6, clocks 3 of 5 (a panic at a
//! clock zero of u64::MAX, a 2100 zero unsaid), concurrent 1 of 6 (two exports to one
//! name; the record pairs raced in some runs), signals 2 of 2, twice 0 of 3, stdio 0 of
//! 4. The 25 cases added after (damaged-runs, scenario-late, triggers, secrets, three
//! odd-files) were not run before; `view` of a FIFO report.html was seen wrong by hand.

mod common;
mod sweep3;
use common::*;
use sweep3::*;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Cases that misbehave and stay so this round, each with the reason (counted as
/// misbehaving in the printed figures).
const KNOWN: &[(&str, &str)] = &[];

/// One generated row: class, environment, argv, exit code, pieces of stderr.
type Row = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
    i32,
    &'static [&'static str],
);

const NO: &str = "nats://127.0.0.1:1";

/// Quick refusals: each must exit at once with the code and words given.
#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Odd file types as inputs: a FIFO blocks a plain read forever, /dev/zero never ends.
    ("odd-files", &[], &["load", "pub", "--server", NO, "--nkey", "/dev/zero", "--duration", "1s"], 2, &["--nkey", "/dev/zero", "a character device"]),
    ("odd-files", &[], &["load", "pub", "--server", NO, "--nkey", "{P}", "--duration", "1s"], 2, &["--nkey", "a FIFO"]),
    ("odd-files", &[], &["nats-bench", "pub", "foo", "--server", NO, "--nkey", "/dev/zero"], 2, &["--nkey", "a character device"]),
    ("odd-files", &[], &["agent", "--server", NO, "--nkey", "/dev/zero", "--duration", "1s"], 2, &["--nkey", "a character device"]),
    ("odd-files", &[], &["load", "pub", "--server", NO, "--creds", "/dev/zero", "--duration", "1s"], 2, &["--creds", "a character device"]),
    ("odd-files", &[], &["load", "pub", "--server", NO, "--creds", "{T}", "--duration", "1s"], 2, &["--creds", "a directory"]),
    ("odd-files", &[], &["load", "pub", "--server", "tls://127.0.0.1:1", "--tls-ca", "{P}", "--duration", "1s"], 2, &["--tls-ca", "a FIFO"]),
    ("odd-files", &[], &["record", "--agents", "a", "--server", NO, "--nkey", "/dev/zero", "--duration", "1s", "--out", "{T}/o"], 2, &["--nkey", "a character device"]),
    ("odd-files", &[], &["run", "/dev/zero", "--dry-run"], 2, &["/dev/zero", "a character device"]),
    ("odd-files", &[], &["run", "{P}", "--dry-run"], 2, &["a FIFO"]),
    ("odd-files", &[], &["probe", "/dev/zero"], 2, &["/dev/zero", "a character device"]),
    ("odd-files", &[], &["probe", "{P}"], 2, &["a FIFO"]),
    ("odd-files", &[], &["probe", "{T}"], 2, &["a directory"]),
    ("odd-files", &[], &["probe", "--filename", "{P}", "--size", "1M"], 2, &["neither a regular file nor a block device"]),
    ("odd-files", &[], &["export", "{R}", "--format", "influx", "--out", "{P}"], 2, &["--out", "exists"]),
    ("odd-files", &[], &["fsync", "-f", "{P}", "-s", "1"], 2, &["the file exists"]),
    // Triggers that can never fire, secrets that must not show (nor land in a file).
    ("triggers", &[], &["record", "--trigger", "kv-put:ack_p99_ms>5", "--duration", "1s", "--out", "{T}/o"], 2, &["can never fire"]),
    ("triggers", &[], &["demo", "--trigger", "zram9:write_mibps>1", "--duration", "1s", "--out", "{T}/o"], 2, &["can never fire", "zram9"]),
    ("secrets", &[], &["record", "--agents", "a", "--server", "nats://u:Sekr3tPw@127.0.0.1:1", "--duration", "1s", "--out", "{T}/o"], 1, &["127.0.0.1:1"]),
    ("secrets", &[], &["load", "pub", "--server", NO, "--user", "u", "--password", "Sekr3tPw", "--duration", "1s"], 1, &["127.0.0.1:1"]),
    ("secrets", &[], &["nats-bench", "pub", "foo", "--server", "nats://Sekr3tTok@127.0.0.1:1", "--msgs", "10"], 1, &["127.0.0.1:1"]),
    ("secrets", &[], &["agent", "--server", "nats://u:Sekr3tPw@127.0.0.1:1", "--duration", "1s"], 1, &["127.0.0.1:1"]),
    // Environment variables.
    ("env", &[("NATS_NKEY", "/dev/zero")], &["load", "pub", "--server", NO, "--duration", "1s"], 2, &["--nkey ($NATS_NKEY)", "a character device"]),
    ("env", &[("NATS_CREDS", "{P}")], &["load", "pub", "--server", NO, "--duration", "1s"], 2, &["$NATS_CREDS", "a FIFO"]),
    ("env", &[("NATS_URL", "garbage here")], &["load", "pub", "--duration", "1s"], 2, &["$NATS_URL 'garbage here'"]),
    ("env", &[("NATS_URL", "http://x")], &["nats-bench", "pub", "foo", "--msgs", "10"], 2, &["$NATS_URL 'http://x'"]),
    ("env", &[("NATS_URL", "nats://u:Sekr3tPw@127.0.0.1:1")], &["load", "pub", "--duration", "1s"], 1, &["nats://***@127.0.0.1:1"]),
    ("env", &[("NATS_USER", "u")], &["load", "pub", "--server", NO, "--duration", "1s"], 2, &["$NATS_PASSWORD"]),
    ("env", &[("PATH", "{T}")], &["demo", "--duration", "1s", "--out", "{T}/o"], 2, &["nats-server", "PATH"]),
    ("env", &[("DISKPULSE_RUN_DIR", "{T}/gone"), ("DISKPULSE_CLOCK_ZERO_NS", "abc"),], &["load", "pub", "--server", NO, "--duration", "1s"], 2, &["DISKPULSE_CLOCK_ZERO_NS 'abc'"]),
    ("env", &[("DISKPULSE_RUN_DIR", "{T}/gone"), ("DISKPULSE_CLOCK_ZERO_NS", "5"),], &["load", "pub", "--server", NO, "--duration", "1s"], 2, &["DISKPULSE_RUN_DIR", "{T}/gone"]),
    // Huge and zero values of flags the first sweep did not try.
    ("values", &[], &["agent", "--server", NO, "--buffer", "18446744073709551615", "--duration", "1s"], 2, &["--buffer 18446744073709551615"]),
    ("values", &[], &["agent", "--server", NO, "--buffer", "0", "--duration", "1s"], 2, &["--buffer 0"]),
    ("values", &[], &["agent", "--server", NO, "--interval", "50us", "--duration", "1s"], 2, &["--interval 50us", "100us"]),
    ("values", &[], &["agent", "--server", NO, "--mem-interval", "0s", "--duration", "1s"], 2, &["--mem-interval 0s"]),
    ("values", &[], &["agent", "--server", NO, "--duration", "0s"], 2, &["--duration"]),
    ("values", &[], &["agent", "--server", NO, "--broker-pid", "0", "--duration", "1s"], 2, &["--broker-pid 0"]),
    ("values", &[], &["export", "{R}", "--format", "influx", "--step", "99999999h"], 2, &["'99999999h'"]),
    ("values", &[], &["proxy", "--upstream", "127.0.0.1:4222", "--delay", "1ms", "--jitter", "99999999h"], 2, &["'99999999h'"]),
    ("values", &[], &["nats-bench", "pub", "foo", "--server", NO, "--msgs", "0"], 2, &["--msgs 0"]),
    ("values", &[], &["nats-bench", "foo", "--server", NO, "--pub", "0", "--sub", "0"], 2, &["--pub"]),
    ("values", &[], &["record", "--chunk", "18446744073709551615G", "--duration", "1s", "--out", "{T}/o"], 2, &["--chunk '18446744073709551615G'"]),
    ("values", &[], &["record", "--keep", "1ms", "--duration", "1s", "--out", "{T}/o"], 2, &["--keep 1ms"]),
    ("values", &[], &["record", "--trigger-window", "99999999h", "--duration", "1s", "--out", "{T}/o"], 2, &["'99999999h'"]),
    ("values", &[], &["report", "{R}", "--device", "", "--no-charts", "--no-html"], 2, &["--device ''"]),
    // A flag twice.
    ("twice", &[], &["report", "{R}", "--window", "1s", "--window", "2s"], 2, &["cannot be used multiple times"]),
    ("twice", &[], &["export", "{R}", "--format", "influx", "--format", "openmetrics"], 2, &["cannot be used multiple times"]),
    ("twice", &[], &["record", "--agents", "a,a", "--server", NO, "--duration", "1s", "--out", "{T}/o"], 2, &["'a'"]),
    // Odd names.
];

fn rows(s: &mut Sweep, fx: &Fx) {
    for (i, (class, env, args, code, needles)) in ROWS.iter().enumerate() {
        let t = fx.dir(&format!("row{i}"));
        let mut c = dp(&t, args.iter().map(|a| arg(a, fx, &t)));
        for (k, v) in *env {
            c.env(k, arg(v, fx, &t));
        }
        let o = go(&mut c, 6);
        let needles: Vec<String> = needles
            .iter()
            .map(|n| n.replace("{T}", t.to_str().unwrap()))
            .collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        let mut r = expect(&o, *code, &needles);
        if r.is_ok() && (o.err.contains("Sekr3t") || o.out.contains("Sekr3t")) {
            r = Err("printed the secret".into());
        }
        if r.is_ok() && !files_containing(&t, "Sekr3t", true, 0).is_empty() {
            r = Err("wrote the secret into a file".into());
        }
        s.case(class, format!("{args:?} {env:?}"), r);
    }
}

/// Names that are not UTF-8 or hold a newline: recorded, reported and exported there.
fn names(s: &mut Sweep, fx: &Fx) {
    let t = fx.dir("names");
    for (label, name) in [
        ("not UTF-8", b"r\xff\xfe".to_vec()),
        ("a newline", b"a\nb".to_vec()),
    ] {
        let out = t.join(OsString::from_vec(name.clone()));
        let o = go(
            dp(&t, ["record", "--duration", "100ms", "--no-progress"])
                .arg("--out")
                .arg(&out),
            20,
        );
        let r = expect(&o, 0, &[]).and_then(|_| {
            let o = go(dp(&t, ["report", "--no-charts"]).arg(&out), 20);
            expect(&o, 0, &[])?;
            out.join("summary.json")
                .is_file()
                .then_some(())
                .ok_or("no summary.json".to_string())
        });
        s.case(
            "names",
            format!("record and report a run named with {label}"),
            r,
        );
        let mut lp = name.clone();
        lp.extend_from_slice(b".lp");
        let o = go(
            dp(&t, ["export", "--format", "influx", "--out"])
                .arg(t.join(OsString::from_vec(lp)))
                .arg(&out),
            20,
        );
        s.case(
            "names",
            format!("export to a file named with {label}"),
            expect(&o, 0, &[]),
        );
    }
    // 300 bytes: longer than a file name may be (255).
    let long = "x".repeat(300);
    let o = go(
        &mut dp(&t, ["record", "--duration", "100ms", "--out", &long]),
        10,
    );
    s.case(
        "names",
        "record --out of 300 bytes",
        expect(&o, 2, &["--out", "File name too long"]),
    );
    let o = go(
        dp(
            &t,
            [
                "export",
                "--format",
                "influx",
                "--out",
                &format!("{long}.lp"),
            ],
        )
        .arg(&fx.run),
        10,
    );
    s.case(
        "names",
        "export --out of 300 bytes",
        expect(&o, 2, &["--out", "File name too long"]),
    );
    // A matrix value or a scenario name is put into the file's text and a directory name.
    for (label, toml, needles) in [
        (
            "a newline in a matrix value",
            "name = \"m\"\n[matrix]\nv = [\"p\\nq\"]\n",
            &["matrix", "'v'", "newline"][..],
        ),
        (
            "a quote in a matrix value",
            "name = \"m\"\n[matrix]\nv = ['x\", \"--evil']\n",
            &["matrix", "'v'", "quote"],
        ),
        (
            "a backslash in a matrix value",
            "name = \"m\"\n[matrix]\nv = ['x\\y']\n",
            &["matrix", "'v'", "backslash"],
        ),
        (
            "a newline in the scenario name",
            "name = \"a\\nb\"\n",
            &["name", "newline"],
        ),
        (
            "a tab in the scenario name",
            "name = \"a\\tb\"\n",
            &["name", "control character"],
        ),
    ] {
        let sc = t.join("m.toml");
        let body = format!(
            "{toml}[[phases]]\nkind = \"sleep\"\nname = \"s-${{v}}\"\nduration = \"10ms\"\n"
        );
        let body = if toml.contains("[matrix]") {
            body
        } else {
            body.replace("s-${v}", "s")
        };
        std::fs::write(&sc, body).unwrap();
        let o = go(dp(&t, ["run", "--dry-run"]).arg(&sc), 10);
        s.case("names", label, expect(&o, 2, needles));
    }
}

/// Read-only and full output file systems.
fn full_or_read_only(s: &mut Sweep, fx: &Fx) {
    if !need_root("mounting a tmpfs of a few KiB") {
        return;
    }
    let ro = Tmpfs::new(fx.root.path().join("ro"), 64, true);
    let o = go(
        &mut dp(&ro.0, ["record", "--duration", "100ms", "--out", "r"]),
        10,
    );
    let r = expect(&o, 2, &["--out r", "Read-only file system"]).and_then(|_| {
        (o.err.matches("os error 30").count() == 1)
            .then_some(())
            .ok_or("the OS error twice".into())
    });
    s.case(
        "full-or-read-only",
        "record into a read-only file system",
        r,
    );
    let o = go(
        dp(&ro.0, ["export", "--format", "influx", "--out", "x.lp"]).arg(&fx.run),
        10,
    );
    s.case(
        "full-or-read-only",
        "export into a read-only file system",
        expect(&o, 2, &["--out x.lp"]),
    );
    drop(ro);
    // Full at the start (4 KiB holds meta.json and little else) and mid-run (16 KiB).
    for kib in [4, 16] {
        let full = Tmpfs::new(fx.root.path().join(format!("full{kib}")), kib, false);
        let o = go(
            &mut dp(
                &full.0,
                ["record", "--duration", "3s", "--no-progress", "--out", "r"],
            ),
            20,
        );
        let last = o.err.lines().last().unwrap_or("").to_string();
        let r = expect(&o, 1, &["is full", "free space"]).and_then(|_| {
            if !last.contains("r/") {
                return Err(format!("the error names no file of the run: {last}"));
            }
            let twice = last.split(": ").collect::<Vec<_>>();
            if twice.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!("says the same thing twice: {last}"));
            }
            Ok(())
        });
        s.case(
            "full-or-read-only",
            format!("record into a {kib} KiB file system"),
            r,
        );
    }
    let full = Tmpfs::new(fx.root.path().join("full-report"), 96, false);
    let run = full.0.join("r");
    fx.copy_run(&run);
    // What is left is filled (the write fails part way, its bytes stay).
    let _ = std::fs::write(full.0.join("filler"), vec![0u8; 96 << 10]);
    let o = go(&mut dp(&full.0, ["report", "r"]), 30);
    let r = expect(&o, 1, &["is full", "unchanged"]).and_then(|_| {
        let t = temporaries(&run);
        t.is_empty().then_some(()).ok_or(format!("left {t:?}"))
    });
    s.case("full-or-read-only", "report on a full file system", r);
    let o = go(
        &mut dp(
            &full.0,
            ["export", "r", "--format", "openmetrics", "--out", "r.om"],
        ),
        30,
    );
    let r = match o.code {
        Some(0) => expect(&o, 0, &[]),
        _ => expect(&o, 1, &["r.om"]).and_then(|_| {
            let left = full.0.join("r.om").exists() || !temporaries(&full.0).is_empty();
            (!left).then_some(()).ok_or("left a partial export".into())
        }),
    };
    s.case("full-or-read-only", "export onto a full file system", r);
}

/// A copy of the recording whose meta.json `edit` changed; the report of it.
fn report_with_meta(fx: &Fx, name: &str, edit: impl Fn(&mut serde_json::Value)) -> (PathBuf, Out) {
    let run = fx.root.path().join(name);
    fx.copy_run(&run);
    let p = run.join("meta.json");
    let mut m = read_json(&p);
    edit(&mut m);
    std::fs::write(&p, serde_json::to_string(&m).unwrap()).unwrap();
    let o = go(
        dp(fx.root.path(), ["report", "--no-charts", "--no-html"]).arg(&run),
        20,
    );
    (run, o)
}

/// meta.json's clocks from the future, beyond a u64 of ns, or absent.
fn clocks(s: &mut Sweep, fx: &Fx) {
    let (run, o) = report_with_meta(fx, "clock-max", |m| {
        m["clock_zero_unix_ns"] = u64::MAX.into()
    });
    s.case(
        "clocks",
        "report: clock_zero_unix_ns u64::MAX",
        expect(&o, 0, &["clock_zero_unix_ns"]),
    );
    let o = go(
        dp(fx.root.path(), ["export", "--format", "influx", "--out"])
            .arg(run.join("x.lp"))
            .arg(&run),
        20,
    );
    s.case(
        "clocks",
        "export: clock_zero_unix_ns u64::MAX",
        expect(&o, 0, &[]),
    );
    // 2100-01-01: a host whose clock was ahead (or a damaged file).
    let (_, o) = report_with_meta(fx, "clock-2100", |m| {
        m["clock_zero_unix_ns"] = 4_102_444_800_000_000_000u64.into()
    });
    s.case(
        "clocks",
        "report: a clock zero in 2100 is told",
        expect(&o, 0, &["clock_zero_unix_ns", "future"]),
    );
    let (_, o) = report_with_meta(fx, "clock-none", |m| {
        m["clock_zero_unix_ns"] = 0.into();
        m["start_wall"] = "yesterday".into();
    });
    s.case(
        "clocks",
        "report: no clock zero nor start_wall",
        expect(&o, 0, &["1970"]),
    );
    let (_, o) = report_with_meta(fx, "end-before-start", |m| {
        m["end_wall"] = "1999-01-01T00:00:00Z".into()
    });
    s.case(
        "clocks",
        "report: end_wall before start_wall",
        expect(&o, 0, &[]),
    );
}

/// Two runs writing one directory at the same moment.
fn concurrent(s: &mut Sweep, fx: &Fx) {
    let t = fx.dir("concurrent");
    for i in 0..4 {
        let out = t.join(format!("d{i}"));
        let spawn = || {
            let out = out.clone();
            let t = t.clone();
            std::thread::spawn(move || {
                go(
                    dp(&t, ["record", "--duration", "200ms", "--no-progress"])
                        .arg("--out")
                        .arg(out),
                    20,
                )
            })
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        let mut codes = [a.code, b.code];
        codes.sort();
        let loser = if a.code == Some(2) { &a } else { &b };
        let r = if codes != [Some(0), Some(2)] {
            Err(format!("exits {codes:?}: both wrote into one directory"))
        } else {
            expect(loser, 2, &["--out"])
        };
        s.case(
            "concurrent",
            format!("two records into one new --out (pair {i})"),
            r,
        );
    }
    let spawn = |n: &str| {
        let (t, run, lp) = (t.clone(), fx.run.clone(), t.join(n));
        std::thread::spawn(move || {
            go(
                dp(&t, ["export", "--format", "influx", "--out"])
                    .arg(lp)
                    .arg(run),
                20,
            )
        })
    };
    let (a, b) = (spawn("same.lp"), spawn("same.lp"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let mut codes = [a.code, b.code];
    codes.sort();
    let whole = std::fs::read_to_string(t.join("same.lp")).unwrap_or_default();
    let r = match codes {
        [Some(0), Some(0)] => Err("both exported to one file".to_string()),
        [Some(0), Some(2)] if whole.ends_with('\n') => Ok(()),
        _ => Err(format!("exits {codes:?}")),
    };
    s.case("concurrent", "two exports to one --out", r);
    let run = t.join("rep");
    fx.copy_run(&run);
    let spawn = || {
        let (t, run) = (t.clone(), run.clone());
        std::thread::spawn(move || go(dp(&t, ["report", "--no-html"]).arg(run), 30))
    };
    let (a, b) = (spawn(), spawn());
    let r = expect(&a.join().unwrap(), 0, &[])
        .and(expect(&b.join().unwrap(), 0, &[]))
        .and_then(|_| {
            serde_json::from_str::<serde_json::Value>(
                &std::fs::read_to_string(run.join("summary.json")).unwrap_or_default(),
            )
            .map(|_| ())
            .map_err(|e| format!("summary.json: {e}"))
        })
        .and_then(|_| {
            let left = temporaries(&run);
            left.is_empty()
                .then_some(())
                .ok_or(format!("left {left:?}"))
        });
    s.case("concurrent", "two reports of one run at once", r);
}

/// stdin closed, stdout full or closed.
fn stdio(s: &mut Sweep, fx: &Fx) {
    let t = fx.dir("stdio");
    let complete = |d: &Path| {
        let m = read_json(&d.join("meta.json"));
        (m["complete"] == true)
            .then_some(())
            .ok_or("complete is not true".to_string())
    };
    let o = go(
        dp(
            &t,
            [
                "record",
                "--duration",
                "200ms",
                "--out",
                "a",
                "--",
                "sh",
                "-c",
                "readlink /proc/self/fd/0 > fd0",
            ],
        )
        .stdin(Stdio::null()),
        20,
    );
    let r = expect(&o, 0, &[])
        .and_then(|_| complete(&t.join("a")))
        .and_then(|_| {
            let fd0 = std::fs::read_to_string(t.join("fd0")).unwrap_or_default();
            (fd0.trim() == "/dev/null")
                .then_some(())
                .ok_or(format!("the command's stdin: {fd0}"))
        });
    s.case("stdio", "record -- CMD with stdin closed", r);
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let o = go(
        dp(&t, ["record", "--duration", "200ms", "--out", "b"]).stdout(full()),
        20,
    );
    let r = match complete(&t.join("b")) {
        Ok(()) => expect(&o, 1, &["stdout"]),
        e => e,
    };
    s.case(
        "stdio",
        "record with stdout on /dev/full keeps its recording",
        r,
    );
    let mut c = dp(&t, ["report", "--no-charts", "--no-html", "--json"]);
    let o = go(c.arg(&fx.run).stdout(full()), 20);
    s.case(
        "stdio",
        "report --json to /dev/full",
        expect(&o, 1, &["stdout"]),
    );
    let mut c = dp(&t, ["--help"]);
    let o = go(c.stdout(full()), 10);
    s.case("stdio", "--help to /dev/full", expect(&o, 1, &[]));
}

/// Signals the first rounds did not send: SIGUSR1 to a command that does not keep a
/// window, SIGUSR2 to a recording.
fn signals(s: &mut Sweep, fx: &Fx) {
    let t = fx.dir("signals");
    let mut c = dp(
        &t,
        ["record", "--duration", "2s", "--no-progress", "--out", "u2"],
    );
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
    let o = child.wait_with_output().unwrap();
    let m = read_json(&t.join("u2/meta.json"));
    let r = if o.status.code() == Some(0) && m["complete"] == true {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}, complete {}",
            o.status.code(),
            m["complete"]
        ))
    };
    s.case("signals", "SIGUSR2 to record", r);
    if !have_nats_server() {
        return;
    }
    let mut c = dp(&t, ["load", "pub", "--duration", "3s", "--rate", "100"]);
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    let o = child.wait_with_output().unwrap();
    let store = PathBuf::from(format!("/var/tmp/diskpulse-load-{pid}"));
    let r = if store.exists() {
        let _ = std::fs::remove_dir_all(&store);
        Err(format!(
            "exit {:?}, left {}",
            o.status.code(),
            store.display()
        ))
    } else if o.status.code() != Some(0) {
        Err(format!("exit {:?}", o.status.code()))
    } else {
        Ok(())
    };
    s.case("signals", "SIGUSR1 to load with an embedded broker", r);
}

/// A damage done to a copy of the recording: what, how, the command (the run's path is
/// added), its exit code and a piece of its stderr.
type Edit = (
    &'static str,
    fn(&Path),
    &'static [&'static str],
    i32,
    &'static str,
);

/// Damaged run directories: refused (exit 2) or read with a warning, naming the file.
fn damaged(s: &mut Sweep, fx: &Fx) {
    let metas = ["null", "[]", "{}", "", "{\"format_version\":3}"];
    for (i, m) in metas.iter().enumerate() {
        let run = fx.root.path().join(format!("meta{i}"));
        fx.copy_run(&run);
        std::fs::write(run.join("meta.json"), m).unwrap();
        let o = go(
            dp(fx.root.path(), ["report", "--no-charts", "--no-html"]).arg(&run),
            10,
        );
        let r = expect(&o, 2, &["not a diskpulse recording", "meta.json"]);
        s.case("damaged-runs", format!("report: meta.json {m:?}"), r);
    }
    let edits: [Edit; 4] = [
        (
            "diskstats.csv.gz a directory",
            |d| {
                std::fs::remove_file(d.join("diskstats.csv.gz")).unwrap();
                std::fs::create_dir(d.join("diskstats.csv.gz")).unwrap();
            },
            &["report"],
            2,
            "is a directory",
        ),
        (
            "diskstats.csv.gz cut to 10 bytes",
            |d| {
                let p = d.join("diskstats.csv.gz");
                let b = std::fs::read(&p).unwrap();
                std::fs::write(&p, &b[..10]).unwrap();
            },
            &["report"],
            2,
            "does not decode",
        ),
        (
            "a garbled line in events.jsonl",
            |d| {
                let p = d.join("events.jsonl");
                let t = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, format!("{t}garbage{{\n")).unwrap();
            },
            &["report"],
            0,
            "not an event",
        ),
        (
            "report.html a FIFO",
            |d| {
                let c = std::ffi::CString::new(d.join("report.html").to_str().unwrap()).unwrap();
                // SAFETY: a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            },
            &["view", "--listen", "127.0.0.1:0"],
            2,
            "a FIFO",
        ),
    ];
    for (i, (label, edit, cmd, code, needle)) in edits.iter().enumerate() {
        let run = fx.root.path().join(format!("damaged{i}"));
        fx.copy_run(&run);
        edit(&run);
        let mut c = dp(fx.root.path(), cmd.iter().copied());
        let o = go(
            c.arg(&run).args(
                ["--no-charts", "--no-html"]
                    .iter()
                    .filter(|_| cmd[0] == "report"),
            ),
            10,
        );
        s.case(
            "damaged-runs",
            format!("{}: {label}", cmd[0]),
            expect(&o, *code, &[needle]),
        );
    }
}

/// Scenario checks at `--dry-run` (exit 2, the study directory not made), for values the
/// first rounds did not try.
fn scenario_late(s: &mut Sweep, fx: &Fx) {
    let t = fx.dir("scenario");
    let vol = fx.dir("scenario/vol");
    let load = |a: &str| {
        format!("[[phases]]\nkind = \"load\"\nargs = [\"pub\", \"--server\", \"{NO}\", {a}, \"--duration\", \"1s\"]\n")
    };
    let probe = |a: &str| {
        format!("[[volumes]]\nname = \"v\"\npath = {:?}\n[[phases]]\nkind = \"probe\"\nvolume = \"v\"\nargs = [{a}]\n", vol.display().to_string())
    };
    let sleep = "[[phases]]\nkind = \"sleep\"\nduration = \"10ms\"\n";
    let cases = [
        ("a load phase's --nkey /dev/zero", load("\"--nkey\", \"/dev/zero\""), "a character device"),
        ("a load phase's --creds a directory", load("\"--creds\", \"/tmp\""), "a directory"),
        ("a load phase's --tls-ca a FIFO", load(&format!("\"--tls-ca\", {:?}", fx.fifo.display().to_string())), "a FIFO"),
        ("a probe phase's job file /dev/zero", probe("\"/dev/zero\""), "a character device"),
        ("samplers interval 50us", format!("[samplers]\ninterval = \"50us\"\n{sleep}"), "100us"),
        ("samplers mem_interval 0s", format!("[samplers]\nmem_interval = \"0s\"\n{sleep}"), "mem_interval 0s"),
        ("a volume on /sys/kernel", "[[volumes]]\nname = \"v\"\npath = \"/sys/kernel\"\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n".to_string(), "sysfs"),
    ];
    for (label, body, needle) in cases {
        let sc = t.join("s.toml");
        std::fs::write(&sc, format!("name = \"s\"\n{body}")).unwrap();
        let out = t.join("study");
        let o = go(dp(&t, ["run", "--dry-run", "--out"]).arg(&out).arg(&sc), 10);
        let r = expect(&o, 2, &[needle]).and_then(|_| {
            (!out.exists())
                .then_some(())
                .ok_or("made the study directory".into())
        });
        s.case("scenario-late", label, r);
    }
}

#[test]
fn the_third_sweep_misbehaves_nowhere() {
    let fx = Fx::new();
    let mut s = Sweep::default();
    let started = Instant::now();
    rows(&mut s, &fx);
    names(&mut s, &fx);
    full_or_read_only(&mut s, &fx);
    clocks(&mut s, &fx);
    concurrent(&mut s, &fx);
    stdio(&mut s, &fx);
    signals(&mut s, &fx);
    damaged(&mut s, &fx);
    scenario_late(&mut s, &fx);
    let bad: Vec<_> = s.cases.iter().filter(|c| c.2.is_some()).collect();
    let mut classes: Vec<&str> = s.cases.iter().map(|c| c.0).collect();
    classes.dedup();
    eprintln!(
        "sweep3: {} cases, {} misbehave ({:.1} s)",
        s.cases.len(),
        bad.len(),
        started.elapsed().as_secs_f64()
    );
    for k in classes {
        let n = s.cases.iter().filter(|c| c.0 == k).count();
        let b = bad.iter().filter(|c| c.0 == k).count();
        eprintln!("  {k}: {n} cases, {b} misbehave");
    }
    let mut unknown = vec![];
    for (class, name, why) in &bad {
        let known = KNOWN.iter().find(|k| k.0 == name);
        eprintln!(
            "  {} {class}: {name}: {}",
            if known.is_some() { "KNOWN" } else { "BAD" },
            why.as_deref().unwrap_or("")
        );
        if known.is_none() {
            unknown.push(name.clone());
        }
    }
    assert!(
        unknown.is_empty(),
        "{} cases misbehave: {unknown:?}",
        unknown.len()
    );
}
