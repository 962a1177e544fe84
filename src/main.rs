//! The `diskpulse` binary: parse, run, print the whole error chain, exit.
//! Exit codes: 0 success, 1 failure, 2 bad usage (also for clap's own errors).

fn main() {
    // An empty $NATS_* variable (`NATS_USER=` in a script) means unset, as for natscli
    // (Go's os.Getenv); clap would read it as an empty value and refuse it. Removed
    // before any thread starts.
    for v in [
        "NATS_URL",
        "NATS_USER",
        "NATS_PASSWORD",
        "NATS_CREDS",
        "NATS_NKEY",
    ] {
        if std::env::var_os(v).is_some_and(|x| x.is_empty()) {
            std::env::remove_var(v);
        }
    }
    // Like other Unix tools, the short commands end quietly when the reader of their
    // output goes away (`diskpulse report x | head`), instead of panicking on EPIPE. The
    // commands that run long or talk to brokers go on instead: a vectored write to the
    // socket of a broker that was just killed raises SIGPIPE, which would kill the load
    // instead of giving it EPIPE to ride through (seen in tests/ride), and a recording
    // must reach its end and close when `record --progress | head -c 1` or a closed ssh
    // session takes its stdout away (issue 25): they ignore SIGPIPE and a closed stdout
    // or stderr is replaced by /dev/null (engines::signals::survive_closed_output).
    // args_os: an argument that is not UTF-8 (a path) must reach clap, not panic here.
    const GO_ON: &[&str] = &[
        "record",
        "load",
        "nats-bench",
        "demo",
        "run",
        "agent",
        "proxy",
        "view",
        "bench",
        "probe",
        "fsync",
    ];
    let goes_on = std::env::args_os()
        .nth(1)
        .is_some_and(|c| GO_ON.iter().any(|g| c == *g))
        && !std::env::args_os().any(|a| a == "--dry-run" || a == "--help" || a == "-h");
    // `fsync` stays one thread, as pg_test_fsync is (decision 0095): SIGPIPE ignored, no
    // stdio watcher; its output goes through one writer that ends the run on EPIPE.
    let one_thread = std::env::args_os().nth(1).is_some_and(|c| c == "fsync");
    if goes_on && one_thread {
        ::engines::signals::ignore_sigpipe();
    } else if goes_on {
        ::engines::signals::survive_closed_output();
    } else {
        // SAFETY: setting a signal disposition has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let code = match run_catching_print_failures() {
        Ok(code) => code,
        Err(e) => {
            let usage = e.downcast_ref::<diskpulse::cli::UsageError>().is_some();
            // Each cause once (an error that embeds its source is not followed by it),
            // and a message that echoes a huge value cut to a line a terminal shows.
            let chain = ::format::cli::error_chain(&e);
            let text = ::format::cli::cut(&chain, 4096);
            if usage {
                // A usage error is one line, also when the input it quotes holds a
                // newline or another control character (`lab up $'a\nb'`): escaped.
                let one: String = text
                    .chars()
                    .map(|c| {
                        if c.is_control() {
                            c.escape_debug().to_string()
                        } else {
                            c.to_string()
                        }
                    })
                    .collect();
                say(&format!("Error: {one}"));
                2
            } else {
                say(&format!("Error: {text}"));
                1
            }
        }
    };
    std::process::exit(code);
}

/// The error line on stderr; a stderr that cannot take it (`2>/dev/full`) changes
/// nothing but the line (eprintln! would panic and exit 101).
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The prefix of std's panic when `println!`/`eprintln!` cannot write (a full or closed
/// stdout: `report --json > /dev/full`).
const PRINT_FAILED: &str = "failed printing to std";

/// Runs the command; a print that failed (std panics on it) becomes one line on stderr
/// and exit 1 instead of a panic, its backtrace and 101. Every other panic is left as it
/// is (the default hook prints it, and it still ends the process).
fn run_catching_print_failures() -> anyhow::Result<i32> {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !panic_text(info.payload()).is_some_and(|t| t.starts_with(PRINT_FAILED)) {
            default_hook(info);
        }
    }));
    match std::panic::catch_unwind(diskpulse::commands::main) {
        Ok(r) => r,
        Err(payload) => match panic_text(payload.as_ref()) {
            Some(t) if t.starts_with(PRINT_FAILED) => {
                // "failed printing to stdout: No space left on device (os error 28)"
                let why = t.trim_start_matches("failed printing to ");
                say(&format!(
                    "Error: cannot write to {why}; send the output to a file or pipe that takes it"
                ));
                Ok(1)
            }
            _ => std::panic::resume_unwind(payload),
        },
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> Option<&str> {
    p.downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| p.downcast_ref::<&str>().copied())
}
