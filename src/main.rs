//! The `diskpulse` binary: parse, run, print the whole error chain, exit.
//! Exit codes: 0 success, 1 failure, 2 bad usage (also for clap's own errors).

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`diskpulse run x --dry-run | head`), instead of panicking on EPIPE.
    // SAFETY: setting a signal disposition to its default has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let code = match diskpulse::commands::main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            if e.downcast_ref::<diskpulse::cli::UsageError>().is_some() {
                2
            } else {
                1
            }
        }
    };
    std::process::exit(code);
}
