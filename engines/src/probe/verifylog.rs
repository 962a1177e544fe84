//! `probe`'s verify and log flags (fio's `verify*`, `write_bw_log`, `write_iops_log`,
//! `log_*`, `per_job_logs`): one flattened block of [`super::args::ProbeArgs`], resolved
//! into [`ProbeSpec`]'s verify and log fields, and written back by `--show-job`.
//! `write_lat_log` and `log_offset` are older and live in `ProbeArgs` itself.
//!
//! What must stay true: a bad value is one line naming the option and the fix (exit 2);
//! what fio accepts silently (`log_offset` or `log_avg_msec` without a log) we accept
//! too, with a note saying it changes nothing.

use std::path::{Path, PathBuf};

use clap::Args;
use collectors::probe::verify::{VerifyKind, VerifySpec};
use collectors::probe::{ProbeSpec, Rw};
use format::cli::parse_size;
use format::usage;

/// fio's verify and log options.
#[derive(Args, Debug, Default, Clone)]
pub struct VerifyLogArgs {
    /// fio's verify: md5, crc64, crc32c (crc32c-intel), sha256, meta or pattern. A writing
    /// job puts a header and checksum in every block and reads everything back after its
    /// writes (do_verify); a read-only job checks every block it reads.
    #[arg(long, value_name = "MODE")]
    pub verify: Option<String>,
    /// fio's verify_pattern: 0xHEX bytes or a "quoted string" filling each block after its
    /// header (verify=pattern when verify is not given).
    #[arg(long, alias = "verify_pattern", value_name = "PATTERN")]
    pub verify_pattern: Option<String>,
    /// fio's verify_interval: bytes per header (default: the smallest block size).
    #[arg(long, alias = "verify_interval", value_parser = parse_size, value_name = "SIZE")]
    pub verify_interval: Option<u64>,
    /// fio's do_verify: 1 (default) reads back what a verify job wrote; 0 only writes.
    #[arg(long, alias = "do_verify", value_name = "0|1", num_args = 0..=1, default_missing_value = "1")]
    pub do_verify: Option<String>,
    /// fio's verify_only: skip the workload; read back and check what it would write.
    #[arg(long, alias = "verify_only")]
    pub verify_only: bool,
    /// fio's verify_fatal: stop at the first bad block (we always do; accepted).
    #[arg(long, alias = "verify_fatal")]
    pub verify_fatal: bool,
    /// fio's write_bw_log: PREFIX_bw.N.log (per-I/O KB/s, or KiB/s per log_avg_msec).
    #[arg(long, alias = "write_bw_log", value_name = "PREFIX")]
    pub write_bw_log: Option<PathBuf>,
    /// fio's write_iops_log: PREFIX_iops.N.log (1 per I/O, or I/Os per second per
    /// log_avg_msec).
    #[arg(long, alias = "write_iops_log", value_name = "PREFIX")]
    pub write_iops_log: Option<PathBuf>,
    /// fio's log_avg_msec: one averaged line per window of this many ms and direction.
    #[arg(long, alias = "log_avg_msec", value_name = "MS")]
    pub log_avg_msec: Option<u64>,
    /// fio's log_max_value: averaged latency lines hold the window's largest value.
    #[arg(long, alias = "log_max_value", value_name = "0|1", num_args = 0..=1, default_missing_value = "1")]
    pub log_max_value: Option<String>,
    /// fio's per_job_logs: 1 (default) one file per job (.N), 0 one file for all jobs.
    #[arg(long, alias = "per_job_logs", value_name = "0|1", num_args = 0..=1, default_missing_value = "1")]
    pub per_job_logs: Option<String>,
}

impl VerifyLogArgs {
    /// The command line's values over the file's.
    pub(super) fn overlay(self, file: VerifyLogArgs) -> VerifyLogArgs {
        VerifyLogArgs {
            verify: self.verify.or(file.verify),
            verify_pattern: self.verify_pattern.or(file.verify_pattern),
            verify_interval: self.verify_interval.or(file.verify_interval),
            do_verify: self.do_verify.or(file.do_verify),
            verify_only: self.verify_only || file.verify_only,
            verify_fatal: self.verify_fatal || file.verify_fatal,
            write_bw_log: self.write_bw_log.or(file.write_bw_log),
            write_iops_log: self.write_iops_log.or(file.write_iops_log),
            log_avg_msec: self.log_avg_msec.or(file.log_avg_msec),
            log_max_value: self.log_max_value.or(file.log_max_value),
            per_job_logs: self.per_job_logs.or(file.per_job_logs),
        }
    }
}

fn bool01(flag: &str, v: &Option<String>, default: bool) -> anyhow::Result<bool> {
    match v.as_deref().map(str::trim) {
        None => Ok(default),
        Some("1") | Some("true") => Ok(true),
        Some("0") | Some("false") => Ok(false),
        Some(o) => Err(usage!("--{flag} takes 0 or 1; got '{o}'")),
    }
}

/// fio's verify_pattern: `0xHEX` (bytes as written) or a quoted string.
fn parse_pattern(s: &str) -> anyhow::Result<Vec<u8>> {
    let t = s.trim();
    let bad = || {
        usage!("--verify_pattern takes 0x followed by hex bytes (0xdeadbeef) or a quoted string (\"abc\"); got '{s}'")
    };
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if h.is_empty() || !h.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let h = if h.len() % 2 == 1 {
            format!("0{h}")
        } else {
            h.to_string()
        };
        return Ok((0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex checked"))
            .collect());
    }
    for q in ['"', '\''] {
        if t.len() >= 3 && t.starts_with(q) && t.ends_with(q) {
            return Ok(t.as_bytes()[1..t.len() - 1].to_vec());
        }
    }
    Err(bad())
}

/// A log prefix: a file name in a directory that exists, not on a pseudo file system.
pub(super) fn check_prefix(flag: &str, prefix: &Path) -> anyhow::Result<()> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if prefix.file_name().is_none() || prefix.as_os_str().to_string_lossy().ends_with('/') {
        return Err(usage!(
            "--{flag} takes a file name prefix like /tmp/run/probe (files PREFIX_clat.1.log, ...); got '{}'",
            prefix.display()
        ));
    }
    if !dir.is_dir() {
        return Err(usage!(
            "--{flag} {}: the directory {} does not exist; create it or pass another prefix",
            prefix.display(),
            dir.display()
        ));
    }
    // Found only after the file was laid out (exit 1) before.
    if let Some(fs) = collectors::probe::target::pseudo_fs_name(dir) {
        return Err(usage!(
            "--{flag} {}: {} is on {fs}, a kernel pseudo file system; pass a prefix in a directory on a disk, like /tmp/run/probe",
            prefix.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// What the block resolves to: ProbeSpec's P3 fields.
pub(super) struct VerifyLog {
    pub verify: Option<VerifySpec>,
    pub bw_log: Option<PathBuf>,
    pub iops_log: Option<PathBuf>,
    pub log_avg_ms: u64,
    pub log_max_value: bool,
    pub per_job_logs: bool,
}

/// Validates the block for a job of `rw` with block sizes `bs` ([read, write]);
/// `lat_log`/`log_offset` are ProbeArgs' own.
pub(super) fn resolve(
    a: &VerifyLogArgs,
    rw: Rw,
    bs: [u64; 2],
    lat_log: Option<&Path>,
    log_offset: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<VerifyLog> {
    let pattern = a.verify_pattern.as_deref().map(parse_pattern).transpose()?;
    let kind = match (a.verify.as_deref().map(str::trim), &pattern) {
        (None | Some("0") | Some("none"), None) => None,
        (None, Some(_)) => Some(VerifyKind::Pattern),
        (Some(k), _) => Some(VerifyKind::parse(k).ok_or_else(|| {
            usage!("--verify={k}: diskpulse runs md5, crc64, crc32c (crc32c-intel), sha256, meta and pattern; use one of them")
        })?),
    };
    let verify = match kind {
        None => {
            if a.verify_only {
                return Err(usage!(
                    "--verify_only needs --verify (the mode the blocks were written with, e.g. --verify=crc32c)"
                ));
            }
            None
        }
        Some(kind) => {
            if kind == VerifyKind::Pattern && pattern.is_none() {
                return Err(usage!(
                    "--verify=pattern needs --verify_pattern (e.g. --verify_pattern=0xdeadbeef)"
                ));
            }
            let used: Vec<u64> = [(rw.reads(), bs[0]), (rw.writes(), bs[1])]
                .iter()
                .filter_map(|&(u, b)| u.then_some(b))
                .collect();
            let min_bs = used.iter().copied().min().unwrap_or(bs[0]);
            let interval = a.verify_interval.unwrap_or(min_bs);
            if interval as usize <= kind.hdr_bytes() || used.iter().any(|b| b % interval != 0) {
                return Err(usage!(
                    "--verify_interval {interval}: it must divide the block size ({min_bs}) and exceed verify={}'s {}-byte header; use --verify_interval={min_bs}",
                    kind.name(),
                    kind.hdr_bytes()
                ));
            }
            Some(VerifySpec {
                kind,
                pattern: pattern.unwrap_or_default(),
                interval,
                do_verify: bool01("do_verify", &a.do_verify, true)?,
                only: a.verify_only,
            })
        }
    };
    for (flag, p) in [
        ("write-bw-log", &a.write_bw_log),
        ("write-iops-log", &a.write_iops_log),
    ] {
        if let Some(p) = p {
            check_prefix(flag, p)?;
        }
    }
    let any_log = lat_log.is_some() || a.write_bw_log.is_some() || a.write_iops_log.is_some();
    if !any_log {
        for (set, name) in [
            (log_offset, "log_offset"),
            (a.log_avg_msec.is_some(), "log_avg_msec"),
        ] {
            if set {
                notes.push(format!(
                    "{name} changes nothing without write_lat_log, write_bw_log or write_iops_log (fio ignores it too)"
                ));
            }
        }
    }
    Ok(VerifyLog {
        verify,
        bw_log: a.write_bw_log.clone(),
        iops_log: a.write_iops_log.clone(),
        log_avg_ms: a.log_avg_msec.unwrap_or(0),
        log_max_value: bool01("log_max_value", &a.log_max_value, false)?,
        per_job_logs: bool01("per_job_logs", &a.per_job_logs, true)?,
    })
}

/// `--show-job`'s lines for the block (after write_lat_log).
pub(super) fn render(sp: &ProbeSpec, o: &mut String) {
    use std::fmt::Write;
    if let Some(v) = &sp.verify {
        let _ = writeln!(o, "verify={}", v.kind.name());
        if !v.pattern.is_empty() {
            let hex: String = v.pattern.iter().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(o, "verify_pattern=0x{hex}");
        }
        let _ = writeln!(o, "verify_interval={}", v.interval);
        if !v.do_verify {
            let _ = writeln!(o, "do_verify=0");
        }
        if v.only {
            let _ = writeln!(o, "verify_only");
        }
    }
    if let Some(p) = &sp.bw_log {
        let _ = writeln!(o, "write_bw_log={}", p.display());
    }
    if let Some(p) = &sp.iops_log {
        let _ = writeln!(o, "write_iops_log={}", p.display());
    }
    if sp.log_avg_ms > 0 {
        let _ = writeln!(o, "log_avg_msec={}", sp.log_avg_ms);
    }
    if sp.log_max_value {
        let _ = writeln!(o, "log_max_value=1");
    }
    if !sp.per_job_logs {
        let _ = writeln!(o, "per_job_logs=0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(a: VerifyLogArgs, rw: Rw, bs: u64) -> anyhow::Result<VerifyLog> {
        resolve(&a, rw, [bs, bs], None, false, &mut vec![])
    }

    #[test]
    fn verify_modes_patterns_and_intervals() {
        let v = |s: &str| VerifyLogArgs {
            verify: Some(s.into()),
            ..Default::default()
        };
        let r = res(v("crc32c-intel"), Rw::Write, 4096)
            .unwrap()
            .verify
            .unwrap();
        assert_eq!(
            (r.kind, r.interval, r.do_verify),
            (VerifyKind::Crc32c, 4096, true)
        );
        let e = res(v("crc16"), Rw::Write, 4096).err().unwrap().to_string();
        assert!(e.contains("--verify=crc16") && e.contains("crc32c"), "{e}");
        let e = res(v("pattern"), Rw::Write, 4096)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--verify_pattern"), "{e}");
        let p = VerifyLogArgs {
            verify_pattern: Some("0xdeadbeef".into()),
            ..Default::default()
        };
        let r = res(p, Rw::Write, 4096).unwrap().verify.unwrap();
        assert_eq!(
            (r.kind, r.pattern),
            (VerifyKind::Pattern, vec![0xde, 0xad, 0xbe, 0xef])
        );
        let small = VerifyLogArgs {
            verify_interval: Some(3000),
            ..v("md5")
        };
        let e = res(small, Rw::Write, 4096).err().unwrap().to_string();
        assert!(
            e.contains("--verify_interval 3000") && e.contains("4096"),
            "{e}"
        );
        let e = res(
            VerifyLogArgs {
                verify_only: true,
                ..Default::default()
            },
            Rw::Write,
            4096,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("--verify_only needs --verify"), "{e}");
    }

    #[test]
    fn log_offset_without_a_log_is_accepted_with_a_note() {
        let mut notes = vec![];
        resolve(
            &VerifyLogArgs::default(),
            Rw::Read,
            [4096; 2],
            None,
            true,
            &mut notes,
        )
        .unwrap();
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("log_offset changes nothing"),
            "{notes:?}"
        );
        let mut notes = vec![];
        resolve(
            &VerifyLogArgs::default(),
            Rw::Read,
            [4096; 2],
            Some(Path::new("/tmp/x")),
            true,
            &mut notes,
        )
        .unwrap();
        assert!(notes.is_empty());
    }
}
