//! The signals that end a run cleanly (SIGINT, SIGTERM, SIGHUP), for every command.

/// Installs SIGINT/SIGTERM/SIGHUP handlers that set `flag` (the run then ends cleanly:
/// a closed terminal or ssh session ends a run as Ctrl-C does, with its recording and
/// report written, instead of killing it midway). A SIGHUP the process was started
/// ignoring (`nohup diskpulse agent ...`) stays ignored.
pub fn stop_on_signals(flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> anyhow::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    if !signal_ignored(signal_hook::consts::SIGHUP) {
        signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone())?;
    }
    Ok(())
}

/// Whether `sig`'s disposition is SIG_IGN (as `nohup` leaves SIGHUP).
fn signal_ignored(sig: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}
