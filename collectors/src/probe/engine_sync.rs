//! The sync engine: `pread`/`pwrite` one I/O at a time (fio's `psync`), with
//! `fsync`/`fdatasync` system calls after every N writes.
//!
//! Per I/O: two `CLOCK_MONOTONIC` reads (vDSO, ~20 ns each) right around one system
//! call (fio's psync stamps the same two points), a few adds and two histogram
//! increments. No allocation, no formatting.

use std::sync::atomic::Ordering;

use super::stats::READ;
use super::{pace, verify, Ctx, ProbeError};
use crate::clock::monotonic_ns;
use crate::directio::AlignedBuf;

pub(super) fn run(c: &mut Ctx) -> Result<(), ProbeError> {
    let mut buf = AlignedBuf::new(c.gen.max_bs() as usize);
    let ptr = buf.as_mut_ptr();
    // The previous completion's time serves as "now" for the end and schedule checks,
    // so each I/O costs exactly two clock reads: right before and right after the call.
    let mut now = monotonic_ns();
    loop {
        if c.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let due = match c.sched.as_mut() {
            Some(s) => {
                let due = s.next_ns();
                // The run ends at its end even when the schedule is behind: what was
                // not issued by then is counted as missed (see `Ctx::missed`).
                if due >= c.end_ns || now >= c.end_ns {
                    return Ok(());
                }
                if now < due {
                    pace::wait_until(due);
                }
                s.advance(&mut c.sched_rng);
                Some(due)
            }
            None => {
                if now >= c.end_ns {
                    return Ok(());
                }
                None
            }
        };
        let Some(op) = c.gen.next_op() else {
            // --size reached: every I/O the job had was issued. The slot just taken was
            // for an I/O that does not exist, so nothing after it counts as missed.
            if let Some(d) = due {
                c.end_ns = c.end_ns.min(d);
            }
            return Ok(());
        };
        if c.timing.loop_invalidate && c.gen.take_wrapped() {
            super::drop_cached(c.fd);
        }
        c.issued_one();
        if op.dir != READ {
            // SAFETY: ptr is valid for max_bs >= op.len bytes; nothing else uses buf now.
            let b = unsafe { std::slice::from_raw_parts_mut(ptr, op.len as usize) };
            verify::before_write(&mut c.verify, b, op.offset);
        }
        let t0 = monotonic_ns();
        let intended = due.unwrap_or(t0);
        // SAFETY: ptr is valid for max_bs >= op.len bytes for the life of buf; fd is open.
        let r = unsafe {
            if op.dir == READ {
                libc::pread(c.fd, ptr.cast(), op.len as usize, op.offset as libc::off_t)
            } else {
                libc::pwrite(c.fd, ptr.cast(), op.len as usize, op.offset as libc::off_t)
            }
        };
        let t1 = monotonic_ns();
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                now = t1;
                continue;
            }
            if c.ends_at_enospc(&e, op.dir) {
                return Ok(());
            }
            let what = if op.dir == READ { "read" } else { "write" };
            return Err(c
                .target
                .io_error(e, "measuring", what, op.offset, op.len, c.direct));
        }
        // The I/O just completed was in flight at any window end since its start.
        c.win.at_with(t1, || intended.min(t0));
        c.win
            .stats
            .record_io(op.dir, op.len, r as u64, intended, t0, t0, t1, false);
        if let Some(l) = c.lat_log.as_mut() {
            l.io(op.dir, op.len, op.offset, t0, t0, t1, false);
        }
        if op.dir == READ {
            // SAFETY: the read filled r <= op.len bytes of buf.
            let b = unsafe { std::slice::from_raw_parts(ptr, r as usize) };
            verify::after_read(&c.verify, b, op.offset)?;
        }
        c.win.last_done_ns = t1;
        now = t1;
        c.completed_one(op.dir, r as u64, t1 - t0, t1);
        if let Some(e) = c.min_rate_check(t1) {
            return Err(e);
        }
        if c.think_pending() {
            c.think();
            now = monotonic_ns();
        }
        if op.sync_after {
            now = super::sync_now(c, op.offset)?;
        }
    }
}
