//! The signals that end a run cleanly (SIGINT, SIGTERM, SIGHUP), and the two that must
//! not end it (SIGUSR1, SIGUSR2), for every command.

/// Installs SIGINT/SIGTERM/SIGHUP handlers that set `flag` (the run then ends cleanly: a
/// closed terminal or ssh session ends a run as Ctrl-C does, with its recording and
/// report written, instead of killing it midway), and SIGUSR1/SIGUSR2 ones that do
/// nothing. A SIGHUP the process was started
/// ignoring (`nohup diskpulse agent ...`) stays ignored.
pub fn stop_on_signals(flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> anyhow::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    if !signal_ignored(signal_hook::consts::SIGHUP) {
        signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone())?;
    }
    // SIGUSR1 keeps a window in a chunked recording (`kill -USR1`, which its own handler
    // does); elsewhere, and SIGUSR2 everywhere, their default action killed the command
    // midway (a recording left incomplete, an embedded broker's store left in /var/tmp).
    // A handler that does nothing (unlike SIG_IGN, not inherited by the programs started).
    let unused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2] {
        signal_hook::flag::register(sig, unused.clone())?;
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

/// Keeps a run going when the reader of its stdout or stderr goes away (`record
/// --progress | head -c 1`, a closed ssh session's terminal): SIGPIPE is ignored, and a
/// thread waits (poll(2), no timeout) for either stream to break (POLLERR: the pipe's
/// reader is gone; POLLHUP: the terminal hung up) and then puts /dev/null in its place,
/// so every later print, `println!` included, succeeds unseen instead of panicking, and
/// the run goes on to its end and closes its recording. Regular files and /dev/null never
/// break, and the thread just waits. For the commands that run long or talk to brokers;
/// the short ones keep SIGPIPE's default and end quietly (`report x | head`).
pub fn survive_closed_output() {
    ignore_sigpipe();
    let _ = std::thread::Builder::new()
        .name("stdio-watch".into())
        .spawn(watch_stdio);
}

/// SIGPIPE ignored, no watcher thread: for a command that must stay single-threaded and
/// handles its own write errors (`fsync`: pg_test_fsync is one thread, and a second one
/// makes every read/write/sync do atomic fdget/fput and glibc cancellation bookkeeping
/// that pg's loop does not; decision 0095). A broken stdout there is an error the command
/// sees (EPIPE), not a signal that kills it.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal disposition has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

fn watch_stdio() {
    let mut fds: Vec<libc::pollfd> = [1, 2]
        .into_iter()
        .map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        })
        .collect();
    while !fds.is_empty() {
        // SAFETY: `fds` is a valid array of pollfd of the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        fds.retain(|p| {
            if p.revents & libc::POLLNVAL != 0 {
                return false; // closed at start: std already treats EBADF as success
            }
            if p.revents & (libc::POLLERR | libc::POLLHUP) == 0 {
                return true;
            }
            // SAFETY: open and dup2 on a path and descriptors we name; the new
            // descriptor is closed once duplicated.
            unsafe {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if null >= 0 {
                    libc::dup2(null, p.fd);
                    libc::close(null);
                }
            }
            false
        });
    }
}
