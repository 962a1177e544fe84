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
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`diskpulse report x | head`), instead of panicking on EPIPE. Not for the commands
    // that talk to brokers: a vectored write to the socket of a broker that was just
    // killed raises SIGPIPE, which would kill the load instead of giving it EPIPE to ride
    // through (seen in tests/ride). They ignore it, also when started by a `run` (a child
    // gets SIGPIPE back at its default).
    // args_os: an argument that is not UTF-8 (a path) must reach clap, not panic here.
    let talks_to_brokers = std::env::args_os()
        .nth(1)
        .is_some_and(|c| c == "load" || c == "nats-bench" || c == "demo" || c == "run")
        && !std::env::args_os().any(|a| a == "--dry-run");
    let disposition = if talks_to_brokers {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: setting a signal disposition has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, disposition) };
    let code = match diskpulse::commands::main() {
        Ok(code) => code,
        Err(e) => {
            let usage = e.downcast_ref::<diskpulse::cli::UsageError>().is_some();
            let text = format!("{e:#}");
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
                eprintln!("Error: {one}");
                2
            } else {
                eprintln!("Error: {text}");
                1
            }
        }
    };
    std::process::exit(code);
}
