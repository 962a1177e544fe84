//! Issue 25, classes 2, 4, 8 and 9: a matrix value used as a secret is in no name, no
//! file and no line (class 2); every check `record`, `demo` and `load` make on a value
//! holds when a scenario gives it, at `--dry-run` (class 4); a scenario whose run would
//! fail on its broker, volume, probe target or lab root is refused at `--dry-run` and
//! before anything is made (class 8); a trigger that can never fire is refused at start,
//! naming it and what exists (class 9). Every case drives the real binary.
//!
//! Most cases are refused before anything starts, so they need nothing. The secret
//! study runs a real nats-server that requires the password (started on a free
//! loopback port and killed on drop); `demo` cases need nats-server on PATH. Both skip
//! without it (and fail under CI=true).

mod common;
use common::*;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "Zq7SecretPw42";

/// A nats-server that requires user `u` with password [`SECRET`] (killed on drop).
struct AuthServer {
    child: Child,
    port: u16,
}

impl AuthServer {
    fn start() -> Option<AuthServer> {
        if !have_nats_server() {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(["--user", "u", "--pass", SECRET])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = AuthServer { child, port };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nats-server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(s)
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// Runs `diskpulse ARGS` in a fresh directory and checks the refusal: exit 2, one line on
/// stderr holding each of `wants`, nothing on stdout, nothing made in the directory but
/// the files the case wrote (`keep`). Returns the line.
fn refused_in(cwd: &Path, args: &[&str], keep: &[&str], wants: &[&str]) -> String {
    let o = diskpulse().current_dir(cwd).args(args).output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: exit {:?}\n{out}\n{err}",
        o.status.code()
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(out.is_empty(), "{args:?}: printed as if it ran: {out}");
    for w in wants {
        assert!(err.contains(w), "{args:?}: want '{w}' in: {err}");
    }
    let made: Vec<String> = std::fs::read_dir(cwd)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    assert!(made.is_empty(), "{args:?}: made {made:?}");
    err
}

/// A scenario refused alike by `run --dry-run` and by `run --out study`, the study
/// directory never made; returns the line.
fn scenario_refused(text: &str, extra: &[&str], wants: &[&str]) -> String {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.toml"), text).unwrap();
    let mut dry = vec!["run", "s.toml", "--dry-run"];
    dry.extend(extra);
    let a = refused_in(d.path(), &dry, &["s.toml"], wants);
    let mut real = vec!["run", "s.toml", "--out", "study", "--lab-root", "lab"];
    real.extend(extra);
    let lab_root_given = extra.contains(&"--lab-root");
    if lab_root_given {
        real.truncate(4);
        real.extend(extra);
    }
    let b = refused_in(d.path(), &real, &["s.toml"], wants);
    assert_eq!(a, b, "--dry-run refuses as the run does");
    a
}

/// A path volume on /var/tmp (a real disk here) and a sleep: a study that would run.
fn with_phase(phase: &str) -> String {
    format!("name = \"h2\"\n[[volumes]]\nname = \"v\"\npath = \"/var/tmp\"\n[[phases]]\n{phase}\n")
}

fn dry_run_ok(scenario: &str, extra: &[&str]) -> String {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.toml"), scenario).unwrap();
    let o = diskpulse()
        .current_dir(d.path())
        .args(["run", "s.toml", "--dry-run"])
        .args(extra)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    out
}

// ---- class 2: a secret in a name ----

#[test]
fn a_matrix_value_used_as_a_url_password_is_in_no_file_name_or_line_of_the_study() {
    let Some(srv) = AuthServer::start() else {
        return;
    };
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("sec.toml");
    std::fs::write(
        &sc,
        format!(
            "name = \"sec\"\n[matrix]\npw = [\"{SECRET}\"]\n[[phases]]\nkind = \"load\"\nargs = [\"pub\", \"--server\", \"nats://u:${{pw}}@127.0.0.1:{}\", \"--msgs\", \"200\", \"--rate\", \"400\"]\n",
            srv.port
        ),
    )
    .unwrap();
    let study = d.path().join("study");
    let o = diskpulse()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&study)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    // It ran with the password (a wrong one fails the load phase, exit 1).
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "{out}\n{err}"
    );
    let hits = files_containing(&study, SECRET, true, 6);
    assert!(hits.is_empty(), "the secret is in {hits:?}");
    assert!(
        study.join("cells/pw-secret1/r1/load.csv").is_file(),
        "{err}"
    );
    let copy = std::fs::read_to_string(study.join("scenario.toml")).unwrap();
    assert!(copy.contains("pw = [\"***\"]"), "{copy}");
}

#[test]
fn two_secret_values_get_cells_of_their_own_and_a_secret_in_a_bad_argument_stays_hidden() {
    // Own sweep: two passwords (they once shared the cell "pw----" and were refused), a
    // token flag, and an error message quoting an argument that holds the secret.
    let text = format!(
        "name = \"s\"\n[matrix]\npw = [\"{SECRET}\", \"Other9Pw\"]\ntk = [\"TokQ81\"]\n[[phases]]\nkind = \"load\"\nargs = [\"pub\", \"--server\", \"nats://u:${{pw}}@127.0.0.1:4\", \"--msgs\", \"1\"]\n[[phases]]\nkind = \"load\"\nargs = [\"pub\", \"--server\", \"nats://127.0.0.1:4\", \"--token=${{tk}}\", \"--msgs\", \"1\"]\n"
    );
    let out = dry_run_ok(&text, &[]);
    for s in [SECRET, "Other9Pw", "TokQ81"] {
        assert!(!out.contains(s), "{s} in: {out}");
    }
    assert!(
        out.contains("pw-secret1_tk-secret1") && out.contains("pw-secret2_tk-secret1"),
        "{out}"
    );
    let bad = text.replacen("\"--msgs\", \"1\"", "\"--rate\", \"x${pw}\"", 1);
    // `x${pw}` outside a secret place would show it: refused, the line without it.
    let line = scenario_refused(&bad, &[], &["matrix parameter 'pw' is a secret"]);
    assert!(!line.contains(SECRET), "{line}");
}

#[test]
fn a_secret_parameter_also_used_where_it_would_be_shown_is_refused() {
    // Own sweep: `name = "p-${pw}"` would put the password in events, meta.json, reports;
    // so would `--subject x.${pw}`.
    let t = format!(
        "name = \"s\"\n[matrix]\npw = [\"{SECRET}\"]\n[[phases]]\nkind = \"load\"\nname = \"p-${{pw}}\"\nargs = [\"pub\", \"--server\", \"nats://u:${{pw}}@127.0.0.1:4\", \"--msgs\", \"1\"]\n"
    );
    let line = scenario_refused(
        &t,
        &[],
        &["s.toml:3:1:", "matrix parameter 'pw' is a secret"],
    );
    assert!(!line.contains(SECRET), "{line}");
    let t = t
        .replace("name = \"p-${pw}\"\n", "")
        .replace("\"--msgs\"", "\"--subject\", \"x.${pw}\", \"--msgs\"");
    scenario_refused(&t, &[], &["matrix parameter 'pw' is a secret"]);
}

#[test]
fn a_matrix_value_in_the_agents_server_password_is_hidden_in_the_cell() {
    // Own sweep: [agents] server = "nats://u:${pw}@host".
    let text = format!(
        "name = \"s\"\n[matrix]\npw = [\"{SECRET}\"]\n[agents]\nnodes = [\"n1\"]\nserver = \"nats://u:${{pw}}@127.0.0.1:4\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n"
    );
    let out = dry_run_ok(&text, &[]);
    assert!(!out.contains(SECRET), "{out}");
    assert!(out.contains("pw-secret1"), "{out}");
}

// ---- class 4: a limit bypassed ----

#[test]
fn sampler_intervals_from_a_scenario_meet_the_limits_of_the_flags() {
    for (key, v, want) in [
        (
            "interval",
            "10us",
            "interval 10us is too short: the shortest is 100us",
        ),
        (
            "mem_interval",
            "100us",
            "interval 100us is too short: the shortest is 1ms",
        ),
        (
            "cpu_interval",
            "500us",
            "interval 500us is too short: the shortest is 1ms",
        ),
        ("monitor_interval", "0s", "interval must be more than 0s"),
    ] {
        let t = format!(
            "name = \"s\"\n[samplers]\n{key} = \"{v}\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n"
        );
        scenario_refused(&t, &[], &[&format!("samplers {key}"), want, "s.toml:3:"]);
    }
    // The limits themselves pass.
    dry_run_ok(
        "name = \"s\"\n[samplers]\ninterval = \"100us\"\nmem_interval = \"1ms\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n",
        &[],
    );
}

#[test]
fn a_load_phase_is_held_to_every_check_load_makes_on_its_flags() {
    let broker = "[broker]\nvolumes = [\"v\"]\n";
    for (extra, want) in [
        ("\"--cluster\", \"7\"", "--cluster takes 1, 3 or 5"),
        ("\"--sync-interval\", \"bogus\"", "--sync-interval"),
        ("\"--record\"", "the parent already records"),
        ("\"--interval\", \"10us\"", "needs --record"),
        ("\"--trace\"", "--trace needs --record"),
        (
            "\"--store-dir\", \"/var/tmp\"",
            "are for the embedded broker",
        ),
    ] {
        let t = with_phase(&format!(
            "kind = \"load\"\nargs = [\"pub\", \"--msgs\", \"10\", {extra}]"
        ))
        .replace("[[phases]]", &format!("{broker}[[phases]]"));
        scenario_refused(&t, &[], &["phase 1 (load)", want]);
    }
    dry_run_ok(
        &with_phase("kind = \"load\"\nargs = [\"pub\", \"--msgs\", \"10\"]")
            .replace("[[phases]]", &format!("{broker}[[phases]]")),
        &[],
    );
}

#[test]
fn demo_refuses_a_too_short_interval_before_it_makes_its_store() {
    let d = tempfile::tempdir().unwrap();
    refused_in(
        d.path(),
        &[
            "demo",
            "--interval",
            "10us",
            "--duration",
            "1s",
            "--store-dir",
            "store",
            "--out",
            "o",
        ],
        &[],
        &["--interval 10us is too short"],
    );
}

// ---- class 8: scenario checks that run too late ----

#[test]
fn a_rabbitmq_broker_refuses_sync_even_written_as_the_default() {
    let t = "name = \"s\"\n[[volumes]]\nname = \"v\"\npath = \"/var/tmp\"\n[broker]\nkind = \"rabbitmq\"\nvolumes = [\"v\"]\nsync = \"5s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n";
    scenario_refused(
        t,
        &[],
        &["s.toml:8:8:", "sync is nats-server's", "remove it"],
    );
}

#[test]
fn volumes_and_phase_targets_on_pseudo_file_systems_are_refused_at_the_dry_run() {
    let t = "name = \"s\"\n[[volumes]]\nname = \"v\"\npath = \"/proc\"\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n";
    scenario_refused(
        t,
        &[],
        &["s.toml:4:8:", "volume 'v'", "is on proc", "disk-backed"],
    );
    // Own: create = true under /sys; an fsync phase's own --dir on /sys.
    let t = "name = \"s\"\n[[volumes]]\nname = \"v\"\npath = \"/sys/diskpulse-x\"\ncreate = true\n[[phases]]\nkind = \"fsync\"\nvolume = \"v\"\n";
    scenario_refused(t, &[], &["volume 'v'", "is on sysfs"]);
    let t = "name = \"s\"\n[[phases]]\nkind = \"probe\"\nargs = [\"--filename\", \"/proc/x\", \"--size\", \"1M\", \"--runtime\", \"1s\"]\n";
    scenario_refused(
        t,
        &[],
        &["phase 1 (probe)", "/proc/x", "pseudo file system"],
    );
    let t = "name = \"s\"\n[[phases]]\nkind = \"fsync\"\nargs = [\"--dir\", \"/sys\"]\n";
    scenario_refused(t, &[], &["phase 1 (fsync)", "--dir /sys", "sysfs"]);
    // A probe of its own file on a real disk passes.
    dry_run_ok(
        "name = \"s\"\n[[phases]]\nkind = \"probe\"\nargs = [\"--filename\", \"/var/tmp/h2-probe.dat\", \"--size\", \"1M\", \"--runtime\", \"1s\"]\n",
        &[],
    );
}

/// The block device holding `/` (mounted), e.g. /dev/vda, when there is one.
fn mounted_root_device() -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 1 && f[1] == "/" && f[0].starts_with("/dev/"))
        .map(|f| f[0].to_string())
        .filter(|d| Path::new(d).exists())
}

#[test]
fn a_probe_phase_writing_to_a_mounted_device_is_refused_at_the_dry_run() {
    let Some(dev) = mounted_root_device() else {
        skip("no block device is mounted on / here");
        return;
    };
    let t = format!(
        "name = \"s\"\n[[phases]]\nkind = \"probe\"\nargs = [\"--filename\", \"{dev}\", \"--rw\", \"write\", \"--allow-destructive\", \"--runtime\", \"1s\"]\n"
    );
    scenario_refused(
        &t,
        &[],
        &["phase 1 (probe)", "is mounted on /", "will not write"],
    );
}

#[test]
fn a_lab_root_on_a_pseudo_file_system_is_refused_before_anything_is_made() {
    let t = "name = \"s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n";
    scenario_refused(
        t,
        &["--lab-root", "/proc/x"],
        &["--lab-root /proc/x", "kernel's tree /proc"],
    );
    // Own: a lab root under a file; `lab up --root` the same.
    let f = tempfile::NamedTempFile::new().unwrap();
    let under = format!("{}/lab", f.path().display());
    scenario_refused(t, &["--lab-root", &under], &["is not a directory"]);
    let d = tempfile::tempdir().unwrap();
    refused_in(
        d.path(),
        &[
            "lab", "up", "v", "--size", "64M", "--fs", "ext4", "--root", "/proc/x",
        ],
        &[],
        &["--root /proc/x", "kernel's tree /proc"],
    );
}

// ---- class 9: triggers that can never fire ----

/// A block device this host has (what `record` records without --device).
fn some_device() -> String {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/block")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.remove(0)
}

#[test]
fn record_refuses_a_trigger_on_a_device_it_does_not_record_or_a_load_it_never_runs() {
    let d = tempfile::tempdir().unwrap();
    let dev = some_device();
    let line = refused_in(
        d.path(),
        &[
            "record",
            "--duration",
            "1s",
            "--out",
            "r",
            "--trigger",
            "nosuchdev:await_ms>5",
        ],
        &[],
        &["'nosuchdev:await_ms>5' can never fire", "recorded:", &dev],
    );
    assert!(line.contains("--trigger"), "{line}");
    // Own: an ack trigger without a command runs no load; a device not among --device.
    refused_in(
        d.path(),
        &[
            "record",
            "--duration",
            "1s",
            "--out",
            "r",
            "--trigger",
            "ack_p99_ms>5",
        ],
        &[],
        &["runs no load"],
    );
    let line = refused_in(
        d.path(),
        &[
            "record",
            "--duration",
            "1s",
            "--out",
            "r",
            "--path",
            "/var/tmp",
            "--trigger",
            "zzz9:write_mibps>1",
        ],
        &[],
        &["no device 'zzz9'", "(recorded: "],
    );
    // A trigger on a device the message lists starts (and the recording ends).
    let listed = line
        .split("(recorded: ")
        .nth(1)
        .unwrap()
        .split([',', ')'])
        .next()
        .unwrap();
    let o = diskpulse()
        .current_dir(d.path())
        .args([
            "record",
            "--duration",
            "300ms",
            "--out",
            "r",
            "--path",
            "/var/tmp",
        ])
        .arg("--trigger")
        .arg(format!("{listed}:await_ms>5000"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{listed}: {:?}", text(&o));
    // With a command, an ack trigger may be fed by it: not refused.
    let o = diskpulse()
        .current_dir(d.path())
        .args([
            "record",
            "--out",
            "r2",
            "--trigger",
            "ack_p99_ms>5",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

#[test]
fn demo_refuses_a_trigger_on_another_device_or_an_amqp_role() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for (t, want) in [
        ("nosuchdev:await_ms>5", "no device 'nosuchdev' is recorded"),
        ("amqp-call:ack_p99_ms>5", "roles js-pub, not 'amqp-call'"),
        ("kv-put:ack_p99_ms>5", "roles js-pub, not 'kv-put'"),
    ] {
        refused_in(
            d.path(),
            &[
                "demo",
                "--duration",
                "1s",
                "--store-dir",
                "store",
                "--out",
                "o",
                "--trigger",
                t,
            ],
            &[],
            &[want, t],
        );
    }
}

#[test]
fn run_refuses_triggers_its_study_can_never_feed() {
    let plain = with_phase("kind = \"sleep\"\nduration = \"1s\"");
    scenario_refused(&plain, &["--trigger", "ack_p99_ms>5"], &["runs no load"]);
    scenario_refused(
        &plain,
        &["--trigger", "nosuchdev:await_ms>5"],
        &["no device 'nosuchdev'"],
    );
    // A load phase of `pub` writes no acked role; `sub:` is not among its roles.
    let pubs = with_phase(
        "kind = \"load\"\nargs = [\"pub\", \"--server\", \"nats://127.0.0.1:4\", \"--msgs\", \"1\"]",
    );
    scenario_refused(
        &pubs,
        &["--trigger", "ack_p99_ms>5"],
        &["a bare ack_p99_ms", "writes pub"],
    );
    scenario_refused(&pubs, &["--trigger", "sub:ack_p99_ms>5"], &["not 'sub'"]);
    dry_run_ok(&pubs, &["--trigger", "pub:ack_p99_ms>5"]);
}
