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

use super::args::{resolve, ProbeArgs, Resolved};
pub(super) use super::jobkeys::JobSem;
use super::jobkeys::{
    engine_refusal, fio_alias, job_key, strip_comment, ENGINES_WE_RUN, FIO_SET_ONLY,
};
use format::cli::fmt_duration;
use format::usage;

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

pub(super) fn truthy(v: &str) -> Option<bool> {
    match v {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Reads a one-job file's job into the options it sets (nothing is opened or written).
#[cfg(test)]
fn load(path: &Path) -> anyhow::Result<ProbeArgs> {
    let set = load_set(path)?;
    if set.sections.len() > 1 {
        let b = &set.sections[1];
        return Err(usage!("a second job section [{}]", b.name));
    }
    Ok(set.sections.into_iter().next().expect("one job").args)
}

/// One job section as read: `[global]`'s options as they were when it started, then its own.
pub(super) struct Section {
    pub name: String,
    pub args: ProbeArgs,
    /// Where each option it sets is: (long name, FILE:LINE).
    pub placed: Vec<(String, String)>,
    /// The options its own lines set, as written (fio's JSON `job options`).
    pub shown: Vec<(String, String)>,
    pub sem: JobSem,
    /// Where a default of ours differs from fio's, or an option does nothing (stderr).
    pub notes: Vec<String>,
}

/// A job file: its job sections in order, and `[global]`'s options as written (fio's
/// JSON `global options`).
pub(super) struct JobFile {
    pub global_shown: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

/// What the lines of one scope (`[global]` or a job) set so far.
#[derive(Clone, Default)]
struct Scope {
    /// clap id -> (argv word, FILE:LINE); a later line replaces an earlier one.
    opts: BTreeMap<String, (Option<String>, String)>,
    placed: Vec<(String, String)>,
    shown: Vec<(String, String)>,
    sem: JobSem,
}

/// Reads a job file: every job section, each with `[global]` as it was when the section
/// began (fio allows several `[global]`s; a later one applies to the jobs after it).
/// Nothing is opened or written.
pub(super) fn load_set(path: &Path) -> anyhow::Result<JobFile> {
    // A regular file of at most 16 MiB: a FIFO or /dev/zero named by mistake hung.
    let text = format::regular::read_input(path, 16 << 20).map_err(|e| {
        usage!(
            "cannot read the job file {}: {e}; pass the path of a fio job file",
            path.display()
        )
    })?;
    let file = path.display().to_string();
    let mut global = Scope::default();
    // The job being read: (name, FILE:LINE of its header, its scope).
    let mut job: Option<(String, String, Scope)> = None;
    let mut in_section = false;
    let mut sections = vec![];
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{file}:{}", i + 1);
        let line = strip_comment(raw);
        // What a message echoes of the line (a 2 MB value is cut to its ends).
        let shown = format::cli::cut(line, format::cli::ECHO_MAX);
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[') {
            let Some(name) = name.strip_suffix(']') else {
                return Err(usage!("{at}: a section line is [name]; got '{shown}'"));
            };
            if let Some((n, a, sc)) = job.take() {
                sections.push(finish(&file, n, a, sc)?);
            }
            let name = name.trim().to_string();
            if name != "global" {
                let mut sc = global.clone();
                sc.shown.clear();
                job = Some((name, at, sc));
            }
            in_section = true;
            continue;
        }
        if !in_section {
            return Err(usage!(
                "{at}: '{shown}' is outside a section; put it under [global] or a [job]"
            ));
        }
        let scope = match job.as_mut() {
            Some((_, _, sc)) => sc,
            None => &mut global,
        };
        option_line(scope, line, &at)?;
    }
    if let Some((n, a, sc)) = job.take() {
        sections.push(finish(&file, n, a, sc)?);
    }
    if sections.is_empty() {
        return Err(usage!(
            "{file}: no job section: a fio job file has [name] sections with the jobs' options (and optionally [global])"
        ));
    }
    Ok(JobFile {
        global_shown: global.shown,
        sections,
    })
}

/// One `key=value` (or bare `key`) line into its scope.
fn option_line(sc: &mut Scope, line: &str, at: &str) -> anyhow::Result<()> {
    let shown = format::cli::cut(line, format::cli::ECHO_MAX);
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), Some(expand(v.trim(), at)?)),
        None => (line, None),
    };
    if !FIO_SET_ONLY.contains(&key) {
        // fio's JSON names an option by its own name, not the alias the line used.
        let name = super::jobkeys::fio_name(key);
        sc.shown.retain(|(k, _)| k != name);
        sc.shown
            .push((name.to_string(), value.clone().unwrap_or_default()));
    }
    // thread: diskpulse's jobs are threads already; openfiles: every file of a job stays
    // open (fio closes some when it is below nrfiles; the I/O is the same).
    if ["thread", "openfiles"].contains(&key) || job_key(&mut sc.sem, key, value.as_deref(), at)? {
        return Ok(());
    }
    if key == "ioengine" {
        if let Some(why) = value.as_deref().and_then(engine_refusal) {
            return Err(usage!(
                "{at}: ioengine={} is {why}; it runs {ENGINES_WE_RUN}",
                value.as_deref().unwrap_or("")
            ));
        }
    }
    if key == "zonemode" && value.as_deref() == Some("zbd") {
        return Err(usage!(
            "{at}: zonemode=zbd is for zoned block devices, which diskpulse probe does not run"
        ));
    }
    // fio's rwmixread and rwmixwrite each set both shares (the other is 100 minus it):
    // the later line wins, as in fio.
    let (key, value) = match (key, value) {
        ("rwmixwrite", Some(v)) => {
            let w: f64 = v
                .trim()
                .parse()
                .map_err(|_| usage!("{at}: rwmixwrite takes a percentage 0..100; got '{shown}'"))?;
            ("rwmixread", Some(format!("{}", 100.0 - w)))
        }
        // fio's buffered is the inverse of direct (a bare `buffered` is buffered=1).
        ("buffered", v) => match v.as_deref().map(truthy).unwrap_or(Some(true)) {
            Some(b) => ("direct", Some(if b { "0" } else { "1" }.to_string())),
            None => return Err(usage!("{at}: buffered takes 0 or 1; got '{shown}'")),
        },
        (k, v) => (fio_alias(k), v),
    };
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
            // fio's bare `direct` is direct=1 (P3: do_verify, log_max_value, per_job_logs
            // and log_offset too); other options need a value.
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
            return Err(usage!("{at}: {}", clap_line(&e)));
        }
    }
    sc.opts.insert(k.id, (word, at.to_string()));
    sc.placed.retain(|(l, _)| *l != k.long);
    sc.placed.push((k.long, at.to_string()));
    Ok(())
}

/// clap's first line, without its `error: `.
fn clap_line(e: &clap::Error) -> String {
    let msg = e.to_string();
    let first = msg
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ");
    format::cli::cut(first, 2 * format::cli::ECHO_MAX).into_owned()
}

/// A job section's scope as probe's arguments, with fio's defaults where ours differ.
fn finish(file: &str, name: String, at: String, mut sc: Scope) -> anyhow::Result<Section> {
    let mut notes = vec![];
    // fio's default is buffered I/O (direct=0); probe's flags default to O_DIRECT.
    if !sc.opts.contains_key("direct") {
        sc.opts
            .insert("direct".into(), (Some("--direct=0".into()), at.clone()));
    }
    // fio takes log_offset without a log (it does nothing then); clap would refuse it.
    let has_log = sc
        .placed
        .iter()
        .any(|(l, _)| l.starts_with("write") && l.ends_with("log"));
    if !has_log {
        if let Some((_, a)) = sc.placed.iter().find(|(l, _)| l == "log-offset") {
            notes.push(format!(
                "{a}: log_offset changes nothing without write_lat_log, write_bw_log or write_iops_log (fio ignores it too)"
            ));
            sc.opts.remove("log_offset");
            sc.placed.retain(|(l, _)| l != "log-offset");
        }
    }
    if sc.opts.contains_key("iodepth") && !sc.opts.contains_key("ioengine") {
        notes.push(format!(
            "[{name}] sets iodepth without ioengine: fio's default engine, psync, runs it at depth 1; diskpulse runs io_uring at that depth (write ioengine=psync for fio's run, or ioengine=io_uring to say so)"
        ));
    }
    let mut argv: Vec<String> = sc.opts.values().filter_map(|(w, _)| w.clone()).collect();
    if !argv.iter().any(|w| w.starts_with("--name=")) {
        argv.push(format!("--name={name}"));
    }
    let args = One::try_parse_from(&argv).map(|o| o.a).map_err(|e| {
        let first = clap_line(&e);
        // The line of the last option the message names, else the section's.
        let line = sc
            .placed
            .iter()
            .rev()
            .find(|(l, _)| first.contains(&format!("--{l}")))
            .map(|(_, a)| a.clone());
        usage!(
            "{}: {first}",
            line.unwrap_or_else(|| format!("{file} [{name}]"))
        )
    })?;
    Ok(Section {
        name,
        args,
        placed: sc.placed,
        shown: sc.shown,
        sem: sc.sem,
        notes,
    })
}

/// A job section resolved with the flags beside the file on top, an error pointing at
/// the line of the option it is about (when the file alone gives it).
pub(super) fn resolve_section(
    path: &Path,
    sec: &Section,
    cli: &ProbeArgs,
) -> anyhow::Result<Resolved> {
    let mut file = sec.args.clone();
    file.job_file = None;
    let mut merged = overlay(file.clone(), cli);
    merged.job_file = None;
    let mut r =
        resolve(&merged).map_err(|e| match e.downcast_ref::<format::cli::UsageError>() {
            Some(u) => {
                // The file alone: does it give the same error (then name its line)?
                let alone = resolve(&file).err().map(|e| e.to_string());
                usage!("{}", place_error(path, &u.0, alone.as_deref(), &sec.placed))
            }
            None => e,
        })?;
    r.notes.extend(sec.notes.iter().cloned());
    Ok(r)
}

/// A job file's first job resolved, every job checked (for `resolve` and `--dry-run`).
pub(super) fn resolve_file(path: &Path, cli: &ProbeArgs) -> anyhow::Result<Resolved> {
    let set = load_set(path)?;
    let mut first = None;
    for sec in &set.sections {
        let r = resolve_section(path, sec, cli)?;
        first.get_or_insert(r);
    }
    Ok(first.expect("a job file has a job"))
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
    o.push_str(&super::args_files::render(r));
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
    use crate::probe::args_where::SizeArg;

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
    fn buffered_is_the_inverse_of_direct_and_thread_and_openfiles_are_taken() {
        let f = file("[j]\nbuffered=0\nthread\nopenfiles=2\n");
        let set = load_set(f.path()).unwrap();
        assert_eq!(set.sections[0].args.direct.as_deref(), Some("1"));
        assert_eq!(set.sections[0].shown[0], ("buffered".into(), "0".into()));
        let f = file("[j]\ndirect=1\nbuffered\n");
        assert_eq!(load(f.path()).unwrap().direct.as_deref(), Some("0"));
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
        let e = err("[a]\nioengine=rdma\n");
        assert!(
            e.contains(":2: ioengine=rdma") && e.contains("network"),
            "{e}"
        );
        let e = err("[a]\nrwmixwrite=lots\n");
        assert!(e.contains(":2:") && e.contains("'rwmixwrite=lots'"), "{e}");
        let e = err("[a]\nrw=write\nfsync=1\nfdatasync=1 ; both\n");
        assert!(e.contains(":4:") && e.contains("--fdatasync"), "{e}");
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
            e.contains(":4: ioengine=posixaio") && e.contains("libaio, io_uring"),
            "{e}"
        );
        let e = resolve_err("[j]\nrw=randrw\nrate_iops=10,\n", &[]);
        assert!(e.contains(":3: --rate_iops=10,"), "{e}");
        // The file is fine; the flag beside it is not: no line of the file is blamed.
        let e = resolve_err("[j]\nrw=randrw\nbs=4k\n", &["--rate_iops=10,"]);
        assert!(e.contains(".fio: --rate_iops=10,"), "{e}");
    }

    #[test]
    fn inline_comments_are_cut_as_fio_cuts_them() {
        assert_eq!(strip_comment("runtime=3600  # Max runtime"), "runtime=3600");
        assert_eq!(strip_comment("numjobs=4\t; four"), "numjobs=4");
        assert_eq!(strip_comment("  ; all comment"), "");
        assert_eq!(strip_comment("bs=4k"), "bs=4k");
        let f = file("[j]\nruntime=3600  # Max runtime\nnumjobs=4\t; four\n[k] ; the second\n");
        let set = load_set(f.path()).unwrap();
        let a = &set.sections[0].args;
        assert_eq!(a.runtime, Some(std::time::Duration::from_secs(3600)));
        assert_eq!(a.numjobs, Some(4));
        assert_eq!(set.sections[1].name, "k");
        assert_eq!(set.sections[0].shown[0], ("runtime".into(), "3600".into()));
    }

    #[test]
    fn each_job_takes_global_as_it_was_when_the_job_began() {
        let f = file("[global]\nbs=8k\n[a]\nrw=read\n[global]\nbs=16k\nsize=1m\n[b]\nstonewall\n[c]\nnew_group\nwait_for=a\nstartdelay=1\nexitall\ninvalidate=0\ndescription=third\n");
        let set = load_set(f.path()).unwrap();
        let s: Vec<&Section> = set.sections.iter().collect();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (
                s[0].args.bs.as_deref(),
                s[0].args.size.and_then(SizeArg::bytes)
            ),
            (Some("8k"), None)
        );
        assert_eq!(
            (
                s[1].args.bs.as_deref(),
                s[1].args.size.and_then(SizeArg::bytes)
            ),
            (Some("16k"), Some(1 << 20))
        );
        assert!(s[1].sem.stonewall && !s[0].sem.stonewall && !s[2].sem.stonewall);
        let c = &s[2].sem;
        assert!(c.new_group && c.exitall && !c.invalidate);
        assert!(s[0].sem.invalidate, "fio's invalidate=1 by default");
        assert_eq!(c.wait_for.as_ref().map(|w| w.0.as_str()), Some("a"));
        assert_eq!(c.startdelay, std::time::Duration::from_secs(1));
        assert_eq!(c.description.as_deref(), Some("third"));
        // fio's default is buffered; a job's direct= says otherwise.
        assert_eq!(s[0].args.direct.as_deref(), Some("0"));
        // fio lists neither bare flags nor [global]'s options among a job's options.
        assert!(s[1].shown.is_empty(), "{:?}", s[1].shown);
        assert_eq!(set.global_shown.len(), 2, "{:?}", set.global_shown);
    }

    #[test]
    fn rwmixread_and_rwmixwrite_each_set_both_and_the_later_wins() {
        let f = file("[j]\nrw=randrw\nrwmixread=60\nrwmixwrite=40\n");
        assert_eq!(load(f.path()).unwrap().rwmixread, Some(60.0));
        // fio: each sets the other to 100 minus it; the later line wins.
        let f = file("[j]\nrw=randrw\nrwmixread=60\nrwmixwrite=30\n");
        let a = load(f.path()).unwrap();
        assert_eq!((a.rwmixread, a.rwmixwrite), (Some(70.0), None));
    }

    #[test]
    fn log_offset_without_a_log_is_ignored_with_a_note_as_fio_ignores_it() {
        let f = file("[j]\nrw=read\nlog_offset=1\n");
        let set = load_set(f.path()).unwrap();
        assert!(!set.sections[0].args.log_offset);
        assert!(
            set.sections[0].notes[0].contains(":3: log_offset"),
            "{:?}",
            set.sections[0].notes
        );
    }
}
