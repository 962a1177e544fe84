//! fio job files: `diskpulse probe JOB.fio` reads `[global]` and one job section into the
//! same [`ProbeArgs`] the flags fill, and `--show-job` writes a resolved job back as one.
//!
//! The syntax is fio's: `;` and `#` start comment lines, `key=value` or a bare `key` (a
//! flag), `${VAR}` from the environment, sizes base 2 (`8k` = 8192, as fio's default
//! `kb_base=1024`), times a bare number of seconds. Keys are `probe`'s flags in either
//! spelling (`ramp_time`, `ramp-time`); a key we do not run is refused as one line naming
//! it with FILE:LINE. A job section overrides `[global]`; flags given beside the file
//! override both. Several job sections are refused: fio runs them side by side (or one
//! after another with `stonewall`), and one probe runs one job (`numjobs=` copies it).

use std::collections::BTreeMap;
use std::path::Path;

use clap::{ArgAction, Args, Command, Parser};

use super::args::{ProbeArgs, Resolved};
use format::cli::fmt_duration;
use format::usage;

/// fio keys that change nothing in a one-job probe: `thread` (our jobs are threads
/// already), `stonewall`/`wait_for_previous` (nothing runs before the one job).
const NO_OPS: &[&str] = &["thread", "stonewall", "wait_for_previous"];

/// Flags that are about this invocation, not the job: not taken from a file.
const NOT_IN_FILES: &[&str] = &["show-job", "allow-destructive", "output-format", "preset"];

#[derive(Parser)]
#[command(no_binary_name = true)]
struct One {
    #[command(flatten)]
    a: ProbeArgs,
}

/// An option a file may set: its clap id, its long name, and whether it is a flag.
struct Known {
    id: String,
    long: String,
    flag: bool,
}

fn known(key: &str) -> Option<Known> {
    let cmd = ProbeArgs::augment_args(Command::new("probe"));
    let norm = |s: &str| s.replace('_', "-");
    let k = norm(key);
    let found = cmd.get_arguments().find_map(|a| {
        let long = a.get_long()?;
        if NOT_IN_FILES.contains(&long) || a.is_hide_set() {
            return None;
        }
        let names = std::iter::once(long).chain(a.get_all_aliases().unwrap_or_default());
        let hit = names.into_iter().any(|n| norm(n) == k);
        hit.then(|| Known {
            id: a.get_id().to_string(),
            long: long.to_string(),
            flag: matches!(a.get_action(), ArgAction::SetTrue),
        })
    });
    found
}

/// `${VAR}` from the environment; an unset one is an error naming it.
fn expand(v: &str, at: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(usage!(
                "{at}: '${{' without a closing '}}' in '{}'",
                format::cli::cut(v, format::cli::ECHO_MAX)
            ));
        };
        let name = &after[..j];
        match std::env::var(name) {
            Ok(val) => out.push_str(&val),
            Err(_) => {
                return Err(usage!(
                    "{at}: ${{{name}}} is not set in the environment; set it or write the value"
                ))
            }
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn truthy(v: &str) -> Option<bool> {
    match v {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Reads a job file into the options it sets (nothing is opened or written).
#[cfg(test)]
fn load(path: &Path) -> anyhow::Result<ProbeArgs> {
    load_placed(path).map(|(a, _)| a)
}

/// [`load`], and where each option the file sets is: (long name, FILE:LINE).
pub(super) fn load_placed(path: &Path) -> anyhow::Result<(ProbeArgs, Vec<(String, String)>)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage!(
            "cannot read the job file {}: {e}; pass the path of a fio job file",
            path.display()
        )
    })?;
    let file = path.display().to_string();
    // id -> (argv word, FILE:LINE); a job section's entry replaces [global]'s.
    let mut opts: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
    let mut placed: Vec<(String, String)> = vec![];
    let mut section: Option<(String, usize)> = None;
    let mut job: Option<(String, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let at = format!("{file}:{n}");
        let line = raw.trim();
        // What a message echoes of the line (a 2 MB value is cut to its ends).
        let shown = format::cli::cut(line, format::cli::ECHO_MAX);
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[') {
            let Some(name) = name.strip_suffix(']') else {
                return Err(usage!("{at}: a section line is [name]; got '{shown}'"));
            };
            let name = name.trim().to_string();
            if name != "global" {
                if let Some((first, fl)) = &job {
                    return Err(usage!(
                        "{at}: a second job section [{name}] (the first is [{first}] at line {fl}); diskpulse probe runs one job (numjobs= runs copies of it side by side): put each job in its own file"
                    ));
                }
                job = Some((name.clone(), n));
            }
            section = Some((name, n));
            continue;
        }
        if section.is_none() {
            return Err(usage!(
                "{at}: '{shown}' is outside a section; put it under [global] or a [job]"
            ));
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(expand(v.trim(), &at)?)),
            None => (line, None),
        };
        if NO_OPS.contains(&key) {
            continue;
        }
        let Some(k) = known(key) else {
            return Err(usage!(
                "{at}: fio option '{}' is not supported by diskpulse probe (see diskpulse probe --help for the options it runs)",
                format::cli::cut(key, format::cli::ECHO_MAX)
            ));
        };
        let word = if k.flag {
            match value.as_deref().map(truthy) {
                None => Some(format!("--{}", k.long)),
                Some(Some(true)) => Some(format!("--{}", k.long)),
                Some(Some(false)) => None,
                Some(None) => {
                    return Err(usage!(
                        "{at}: {key} is a flag: write '{key}' or '{key}=1' (or '{key}=0'); got '{shown}'"
                    ))
                }
            }
        } else {
            match &value {
                Some(v) => Some(format!("--{}={v}", k.long)),
                // fio's bare `direct` is direct=1 (P3: do_verify, log_max_value and
                // per_job_logs too); other options need a value.
                None if [
                    "direct",
                    "do-verify",
                    "log-max-value",
                    "per-job-logs",
                    "log-offset",
                ]
                .contains(&k.long.as_str()) =>
                {
                    Some(format!("--{}=1", k.long))
                }
                None => return Err(usage!("{at}: option '{key}' needs a value, like {key}=...")),
            }
        };
        // The value alone, to name the line that holds a bad one.
        if let Some(w) = word.as_ref().filter(|_| !k.flag) {
            if let Err(e) = One::try_parse_from([w.as_str()]) {
                let msg = e.to_string();
                let first = msg
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                return Err(usage!(
                    "{at}: {}",
                    format::cli::cut(first, 2 * format::cli::ECHO_MAX)
                ));
            }
        }
        opts.insert(k.id, (word, at.clone()));
        placed.retain(|(l, _)| *l != k.long);
        placed.push((k.long, at));
    }
    let Some((job_name, _)) = job else {
        return Err(usage!(
            "{file}: no job section: a fio job file has one [name] section with the job's options (and optionally [global])"
        ));
    };
    let mut argv: Vec<String> = opts.into_values().filter_map(|(w, _)| w).collect();
    if !argv.iter().any(|w| w.starts_with("--name=")) {
        argv.push(format!("--name={job_name}"));
    }
    One::try_parse_from(&argv)
        .map(|o| (o.a, placed))
        .map_err(|e| usage!("{file}: {}", e.to_string().lines().next().unwrap_or("")))
}

/// Where to point a usage error about a job file: the line of the option it is about
/// when the file alone gives the same error (not a flag beside it), else the file.
pub(super) fn place_error(
    file: &Path,
    msg: &str,
    alone: Option<&str>,
    placed: &[(String, String)],
) -> String {
    let at = (alone == Some(msg))
        .then(|| {
            placed
                .iter()
                .find(|(long, _)| {
                    msg.starts_with(&format!("--{long} "))
                        || msg.starts_with(&format!("--{long}:"))
                        || msg.starts_with(&format!("--{long}="))
                })
                .map(|(_, at)| at.clone())
        })
        .flatten();
    format!(
        "{}: {msg}",
        at.unwrap_or_else(|| file.display().to_string())
    )
}

/// The file's options with the command line's on top: a flag given beside the file wins
/// (of an either-or pair, the command line's pair wins whole).
pub(super) fn overlay(file: ProbeArgs, cli: &ProbeArgs) -> ProbeArgs {
    let c = cli.clone();
    let mix = c.rwmixread.is_some() || c.rwmixwrite.is_some();
    let sync = c.fsync.is_some() || c.fdatasync.is_some();
    let rate = c.rate_iops.is_some() || c.rate_iops_total.is_some();
    ProbeArgs {
        job_file: None,
        filename: c.filename.or(file.filename),
        size: c.size.or(file.size),
        rw: c.rw.or(file.rw),
        rwmixread: if mix { c.rwmixread } else { file.rwmixread },
        rwmixwrite: if mix { c.rwmixwrite } else { file.rwmixwrite },
        bs: c.bs.or(file.bs),
        iodepth: c.iodepth.or(file.iodepth),
        numjobs: c.numjobs.or(file.numjobs),
        ioengine: c.ioengine.or(file.ioengine),
        direct: c.direct.or(file.direct),
        sync: c.sync.or(file.sync),
        fsync: if sync { c.fsync } else { file.fsync },
        fdatasync: if sync { c.fdatasync } else { file.fdatasync },
        rate_iops: if rate { c.rate_iops } else { file.rate_iops },
        rate_iops_total: if rate {
            c.rate_iops_total
        } else {
            file.rate_iops_total
        },
        rate_iops_old: c.rate_iops_old.or(file.rate_iops_old),
        rate_process: c.rate_process.or(file.rate_process),
        runtime: c.runtime.or(file.runtime),
        ramp: c.ramp.or(file.ramp),
        time_based: c.time_based || file.time_based,
        group_reporting: c.group_reporting || file.group_reporting,
        show_job: c.show_job,
        window: c.window.or(file.window),
        preset: c.preset,
        output_format: c.output_format,
        allow_destructive: c.allow_destructive,
        name: c.name.or(file.name),
        seed: c.seed.or(file.seed),
        write_lat_log: c.write_lat_log.or(file.write_lat_log),
        log_offset: c.log_offset || file.log_offset,
        // P2a: engines and timing
        timing: file.timing.overlay(&c.timing),
        // P3: verify and logs
        vl: c.vl.overlay(file.vl),
        // P2b: where I/Os go
        where_: c.where_.over(file.where_),
    }
}

fn num(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r.fract() == 0.0 {
        format!("{}", r as u64)
    } else {
        format!("{r}")
    }
}

/// The resolved job as a fio job file: every option, defaults filled in. Reading it back
/// (`diskpulse probe FILE`) gives the same job.
pub(super) fn render(r: &Resolved) -> String {
    use std::fmt::Write;
    let sp = &r.spec;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "; diskpulse probe's resolved job (diskpulse probe FILE runs it)"
    );
    let _ = writeln!(o, "[{}]", r.name);
    let _ = writeln!(o, "filename={}", r.filename.display());
    match r.size {
        Some(s) => {
            let _ = writeln!(o, "size={}", super::output::fmt_size(s));
        }
        None => {
            let _ = writeln!(
                o,
                "; size: an existing file's or device's, else {}",
                super::output::fmt_size(super::args::DEFAULT_SIZE)
            );
        }
    }
    let _ = writeln!(
        o,
        "rw={}{}",
        sp.rw.name(),
        super::args_where::rw_suffix(&sp.place, sp.rw)
    );
    if sp.rw.mixed() {
        let _ = writeln!(o, "rwmixread={}", num(sp.rwmixread));
    }
    let bs = if sp.bs[0] == sp.bs[1] {
        super::output::fmt_size(sp.bs[0])
    } else {
        format!(
            "{},{}",
            super::output::fmt_size(sp.bs[0]),
            super::output::fmt_size(sp.bs[1])
        )
    };
    let _ = writeln!(o, "bs={bs}");
    let _ = writeln!(o, "iodepth={}", sp.iodepth);
    let _ = writeln!(o, "numjobs={}", sp.numjobs);
    let _ = writeln!(o, "ioengine={}", sp.engine.name());
    let _ = writeln!(o, "direct={}", u8::from(sp.direct));
    match sp.sync {
        collectors::directio::SyncFlag::None => {}
        collectors::directio::SyncFlag::Dsync => {
            let _ = writeln!(o, "sync=dsync");
        }
        collectors::directio::SyncFlag::Sync => {
            let _ = writeln!(o, "sync=sync");
        }
    }
    if let Some((n, k)) = sp.fsync {
        let _ = writeln!(o, "{}={n}", k.name());
    }
    if let Some(total) = sp.rate_iops {
        let per_job = total / sp.numjobs as f64;
        let rate = if sp.rw.mixed() {
            let pct = sp.rwmixread / 100.0;
            format!("{},{}", num(per_job * pct), num(per_job * (1.0 - pct)))
        } else {
            num(per_job)
        };
        let _ = writeln!(
            o,
            "; per direction and per job, as fio; {} I/Os per second in total",
            num(total)
        );
        let _ = writeln!(o, "rate_iops={rate}");
        let _ = writeln!(
            o,
            "rate_process={}",
            match sp.rate_process {
                collectors::probe::pace::RateProcess::Linear => "linear",
                collectors::probe::pace::RateProcess::Poisson => "poisson",
            }
        );
    }
    if let Some(rt) = sp.runtime_ns {
        let _ = writeln!(
            o,
            "runtime={}",
            fmt_duration(std::time::Duration::from_nanos(rt))
        );
    }
    if sp.ramp_ns > 0 {
        let _ = writeln!(
            o,
            "ramp_time={}",
            fmt_duration(std::time::Duration::from_nanos(sp.ramp_ns))
        );
    }
    if sp.time_based {
        let _ = writeln!(o, "time_based");
    }
    if r.group_reporting {
        let _ = writeln!(o, "group_reporting");
    }
    let _ = writeln!(o, "randseed={}", sp.seed);
    let _ = writeln!(
        o,
        "; diskpulse's own: probe.csv's window\nwindow={}",
        fmt_duration(std::time::Duration::from_nanos(sp.window_ns))
    );
    if let Some(p) = &sp.lat_log {
        let _ = writeln!(o, "write_lat_log={}", p.display());
        if sp.log_offset {
            let _ = writeln!(o, "log_offset");
        }
    }
    // P2a: engines and timing
    super::timing::render(&sp.timing, &mut o);
    super::verifylog::render(sp, &mut o);
    o.push_str(&super::args_where::render(&sp.place));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::Builder::new().suffix(".fio").tempfile().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn err(text: &str) -> String {
        let f = file(text);
        let e = load(f.path()).expect_err("an error");
        assert!(e.downcast_ref::<format::cli::UsageError>().is_some(), "{e}");
        let s = e.to_string();
        assert!(!s.contains('\n'), "one line: {s}");
        s
    }

    #[test]
    fn global_then_job_with_comments_flags_and_fio_units() {
        std::env::set_var("FIOJOB_TEST_BS", "16k");
        let f = file(
            "; a comment\n# another\n[global]\nbs=4k\ntime_based\nruntime=30\nthread\n\n[mine]\n  bs = ${FIOJOB_TEST_BS}\nsize=1g\nramp_time=5\ndirect\nrate_iops=300,100\nrw=randrw\n",
        );
        let a = load(f.path()).unwrap();
        assert_eq!(
            a.bs.as_deref(),
            Some("16k"),
            "the job section beats [global]"
        );
        assert_eq!(
            a.size,
            Some(super::super::args_where::SizeArg::Bytes(1 << 30)),
            "base 2, as fio's default kb_base"
        );
        assert_eq!(a.runtime, Some(std::time::Duration::from_secs(30)));
        assert_eq!(a.ramp, Some(std::time::Duration::from_secs(5)));
        assert!(a.time_based);
        assert_eq!(a.direct.as_deref(), Some("1"));
        assert_eq!(a.name.as_deref(), Some("mine"));
        assert_eq!(a.rate_iops.as_deref(), Some("300,100"));
        // The command line beats the file.
        let cli = ProbeArgs {
            bs: Some("8k".into()),
            rate_iops_total: Some(50.0),
            ..Default::default()
        };
        let m = overlay(a, &cli);
        assert_eq!(m.bs.as_deref(), Some("8k"));
        assert_eq!((m.rate_iops, m.rate_iops_total), (None, Some(50.0)));
        assert!(m.time_based);
    }

    #[test]
    fn a_flag_set_to_0_in_the_job_undoes_global() {
        let f = file("[global]\ntime_based\n[j]\ntime_based=0\n");
        assert!(!load(f.path()).unwrap().time_based);
    }

    #[test]
    fn refusals_name_the_line() {
        let e = err("[global]\nbs=4k\n[j]\nrw=read\nverify_backlog=16\n");
        assert!(e.contains(":5:") && e.contains("'verify_backlog'"), "{e}");
        let e = err("[j]\nruntime=soon\n");
        assert!(e.contains(":2:") && e.contains("'soon'"), "{e}");
        let e = err("[a]\nrw=read\n[b]\nrw=write\n");
        assert!(e.contains(":3:") && e.contains("[a] at line 1"), "{e}");
        let e = err("bs=4k\n[a]\n");
        assert!(e.contains(":1:") && e.contains("outside a section"), "{e}");
        let e = err("[a]\nsize=${FIOJOB_SURELY_UNSET}\n");
        assert!(
            e.contains(":2:") && e.contains("FIOJOB_SURELY_UNSET"),
            "{e}"
        );
        let e = err("[a]\nbs\n");
        assert!(e.contains(":2:") && e.contains("needs a value"), "{e}");
        let e = err("[global]\nbs=4k\n");
        assert!(e.contains("no job section"), "{e}");
        let e = err("[a]\nshow-job\n");
        assert!(e.contains("'show-job'"), "{e}");
    }

    fn resolve_err(text: &str, cli: &[&str]) -> String {
        let f = file(text);
        let mut argv = vec![f.path().to_str().unwrap()];
        argv.extend_from_slice(cli);
        let e = super::super::args::resolve(&One::try_parse_from(argv).unwrap().a)
            .err()
            .expect("an error");
        assert!(e.downcast_ref::<format::cli::UsageError>().is_some(), "{e}");
        e.to_string()
    }

    #[test]
    fn a_bad_value_names_its_line_unless_a_flag_beside_the_file_is_at_fault() {
        let e = resolve_err("[global]\ndirect=1\n[j]\nioengine=posixaio\n", &[]);
        assert!(
            e.contains(":4: --ioengine") && e.contains("'posixaio'"),
            "{e}"
        );
        let e = resolve_err("[j]\nrw=randrw\nrate_iops=10,\n", &[]);
        assert!(e.contains(":3: --rate_iops=10,"), "{e}");
        // The file is fine; the flag beside it is not: no line of the file is blamed.
        let e = resolve_err("[j]\nrw=randrw\nbs=4k\n", &["--rate_iops=10,"]);
        assert!(e.contains(".fio: --rate_iops=10,"), "{e}");
    }
}
