//! The `diskpulse` binary: parse, run, print the whole error chain, exit.
//! Exit codes: 0 success, 1 failure, 2 bad usage (also for clap's own errors).

fn main() {
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
