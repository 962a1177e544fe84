//! Running an external program diskpulse waits for (`nats-server --version`, blkid,
//! losetup, mkfs.*, mount, a `check` child, ...): the one place a tool is waited for, so
//! no tool that never returns can hang a command (issue 25 class 3: a `--nats-server`
//! whose `--version` never returned hung `load` and `demo` forever).
//!
//! What must stay true: [`output_within`] returns within its [`Limit::timeout`] (plus the
//! 5 ms it looks every); a tool past it is killed with its whole process group (it runs
//! in a group of its own: a terminal's Ctrl-C reaches diskpulse alone, and diskpulse
//! decides) and the error names the tool, the limit and what to do; stdout and stderr are
//! read on threads, so a tool that writes more than a pipe holds never blocks; a killed
//! tool's readers are not waited for (a grandchild outside the group may hold its pipes).
//! Long-lived children (brokers, the recorded command, phase children) are not run here:
//! they have stop rules of their own.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a tool may run, what to call it and what to tell the user when it does not
/// finish in time.
#[derive(Debug, Clone, Copy)]
pub struct Limit<'a> {
    pub timeout: Duration,
    /// What the user asked for, in their words: `` `./fake --version` ``.
    pub what: &'a str,
    /// What to do about a tool that hangs: "is --nats-server a nats-server binary?".
    pub hint: &'a str,
    /// Set while the tool runs: the tool is killed and [`ExecError::Interrupted`] returned
    /// (a Ctrl-C during a long mkfs).
    pub stop: Option<&'a AtomicBool>,
}

impl<'a> Limit<'a> {
    pub fn new(timeout: Duration, what: &'a str, hint: &'a str) -> Limit<'a> {
        Limit {
            timeout,
            what,
            hint,
            stop: None,
        }
    }
}

/// A tool that finished: its exit status and everything it wrote.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a tool gave no [`Finished`].
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{program} not found")]
    NotFound { program: String },
    #[error("cannot start {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("{what} did not finish within {timeout_s} s and was killed; {hint}")]
    TimedOut {
        what: String,
        timeout_s: u64,
        hint: String,
    },
    #[error("{what} was stopped (interrupted)")]
    Interrupted { what: String },
    #[error("waiting for {what}: {source}")]
    Wait {
        what: String,
        source: std::io::Error,
    },
}

/// Runs `cmd` (stdin from /dev/null, stdout and stderr captured, its own process group)
/// and waits for it, up to `limit`; see the module.
pub fn output_within(cmd: &mut Command, limit: &Limit) -> Result<Finished, ExecError> {
    let program = cmd.get_program().to_string_lossy().to_string();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ExecError::NotFound {
            program: program.clone(),
        },
        _ => ExecError::Start {
            program: program.clone(),
            source: e,
        },
    })?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let t_out = reader(Box::new(child.stdout.take().expect("piped")));
    let t_err = reader(Box::new(child.stderr.take().expect("piped")));
    let t0 = Instant::now();
    let wait_err = |source| ExecError::Wait {
        what: limit.what.to_string(),
        source,
    };
    let kill_group = |child: &mut std::process::Child| {
        // SAFETY: kill(2) of the process group of a child we spawned and have not reaped
        // (its pid, the group's id, cannot have been reused).
        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = child.wait();
    };
    loop {
        if let Some(status) = child.try_wait().map_err(wait_err)? {
            return Ok(Finished {
                status,
                stdout: t_out.join().unwrap_or_default(),
                stderr: t_err.join().unwrap_or_default(),
            });
        }
        if limit.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            kill_group(&mut child);
            return Err(ExecError::Interrupted {
                what: limit.what.to_string(),
            });
        }
        if t0.elapsed() >= limit.timeout {
            kill_group(&mut child);
            return Err(ExecError::TimedOut {
                what: limit.what.to_string(),
                timeout_s: limit.timeout.as_secs().max(1),
                hint: limit.hint.to_string(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_that_finishes_gives_its_status_and_output() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let f = output_within(&mut c, &Limit::new(Duration::from_secs(10), "sh", "")).unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(f.stdout, b"out\n");
        assert_eq!(f.stderr, b"err\n");
    }

    #[test]
    fn a_tool_that_never_returns_is_killed_at_its_limit_with_its_children() {
        let mut c = Command::new("sh");
        // A child of the tool holding the pipes too: killed with the group.
        c.args(["-c", "sleep 30 & sleep 30"]);
        let t0 = Instant::now();
        let e = output_within(
            &mut c,
            &Limit::new(
                Duration::from_millis(300),
                "`sh --version`",
                "is it the right binary?",
            ),
        )
        .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let text = e.to_string();
        assert!(
            text.contains("`sh --version` did not finish within 1 s")
                && text.contains("is it the right binary?"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_tool_is_named() {
        let mut c = Command::new("/nonexistent/diskpulse-no-such-tool");
        let e = output_within(&mut c, &Limit::new(Duration::from_secs(1), "x", "")).unwrap_err();
        assert!(matches!(e, ExecError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("diskpulse-no-such-tool"), "{e}");
    }

    #[test]
    fn a_stop_kills_the_tool() {
        let stop = AtomicBool::new(true);
        let mut c = Command::new("sleep");
        c.arg("30");
        let mut l = Limit::new(Duration::from_secs(30), "sleep", "");
        l.stop = Some(&stop);
        let t0 = Instant::now();
        let e = output_within(&mut c, &l).unwrap_err();
        assert!(matches!(e, ExecError::Interrupted { .. }), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
