//! The sync engine: `pread`/`pwrite` one I/O at a time (fio's `psync`), with
//! `fsync`/`fdatasync` system calls after every N writes.
//!
//! Per I/O: two `CLOCK_MONOTONIC` reads (vDSO, ~20 ns each) right around one system
//! call (fio's psync stamps the same two points), a few adds and two histogram
//! increments. No allocation, no formatting.
//!
//! A trim (fio's third direction) is one `ioctl(BLKDISCARD)` over the I/O's range, as
//! fio's `os_trim` does: on a regular file the kernel answers ENOTTY and the job fails
//! with that error (fio 3.33 fails the same way, error 25).

use std::sync::atomic::Ordering;

use super::stats::{READ, TRIM, WRITE};
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
            c.fds.iter().for_each(|fd| super::drop_cached(*fd));
        }
        let fd = c.fds[op.file as usize];
        c.issued_one();
        if op.dir == WRITE {
            // SAFETY: ptr is valid for max_bs >= op.len bytes; nothing else uses buf now.
            let b = unsafe { std::slice::from_raw_parts_mut(ptr, op.len as usize) };
            verify::before_write(&mut c.verify, b, op.offset);
        }
        let t0 = monotonic_ns();
        let intended = due.unwrap_or(t0);
        // SAFETY: ptr is valid for max_bs >= op.len bytes for the life of buf; fd is open.
        let r = unsafe {
            match op.dir {
                READ => libc::pread(fd, ptr.cast(), op.len as usize, op.offset as libc::off_t),
                TRIM => discard(fd, op.offset, op.len),
                _ => libc::pwrite(fd, ptr.cast(), op.len as usize, op.offset as libc::off_t),
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
            let what = ["read", "write", "trim"][op.dir];
            return Err(c.targets[op.file as usize].io_error(
                e,
                "measuring",
                what,
                op.offset,
                op.len,
                c.direct,
            ));
        }
        record_done(c, &op, op.dir, r as u64, intended, t0, t1);
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

/// A synchronous I/O of `dir` done between `t0` and `t1`, `bytes` of `op.len` moved: in
/// the window's figures (in flight at any window end since its start) and the latency log.
fn record_done(
    c: &mut Ctx,
    op: &super::workload::Op,
    dir: usize,
    bytes: u64,
    intended: u64,
    t0: u64,
    t1: u64,
) {
    c.win.at_with(t1, || intended.min(t0));
    c.win
        .stats
        .record_io(dir, op.len, bytes, intended, t0, t0, t1, false);
    if let Some(l) = c.lat_log.as_mut() {
        l.io(dir, op.len, op.offset, t0, t0, t1, false);
    }
}

/// One trim now, recorded as the sync engine records an I/O: the async engines' trims
/// (fio's libaio and io_uring engines discard synchronously too, in their submit path).
pub(super) fn trim_now(
    c: &mut Ctx,
    op: &super::workload::Op,
    intended: u64,
) -> Result<(), ProbeError> {
    c.issued_one();
    let fd = c.fds[op.file as usize];
    let t0 = monotonic_ns();
    // SAFETY: fd is open; the ioctl reads only the range on our stack.
    let r = unsafe { discard(fd, op.offset, op.len) };
    let t1 = monotonic_ns();
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(c.targets[op.file as usize].io_error(
            e,
            "measuring",
            "trim",
            op.offset,
            op.len,
            c.direct,
        ));
    }
    record_done(c, op, TRIM, op.len, intended, t0, t1);
    c.win.last_done_ns = c.win.last_done_ns.max(t1);
    c.completed_one(TRIM, op.len, t1 - t0, t1);
    Ok(())
}

/// Linux's `BLKDISCARD` (`_IO(0x12, 119)`, include/uapi/linux/fs.h).
const BLKDISCARD: libc::c_ulong = 0x1277;

/// Discards `len` bytes at `offset` (fio's `os_trim`): `len` on success, -1 with errno
/// set otherwise, as `pwrite` returns.
///
/// # Safety
/// `fd` must be an open descriptor (the ioctl reads only the range given here).
pub(super) unsafe fn discard(fd: libc::c_int, offset: u64, len: u64) -> libc::ssize_t {
    let range: [u64; 2] = [offset, len];
    // SAFETY: BLKDISCARD reads two u64s from the pointer; `range` lives across the call.
    match unsafe { libc::ioctl(fd, BLKDISCARD as _, range.as_ptr()) } {
        0 => len as libc::ssize_t,
        _ => -1,
    }
}
