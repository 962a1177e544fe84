//! The libaio engine (fio's `libaio`): Linux native AIO through the raw system calls
//! `io_setup`, `io_submit`, `io_getevents` and `io_destroy` (no libaio library: the
//! kernel ABI of `linux/aio_abi.h` is four calls and two structs).
//!
//! One AIO context per job thread with `iodepth` slots, one aligned buffer per slot.
//! Submitting and reaping follow fio's `iodepth_batch_*` rules (see [`super::spec::Timing`]):
//! I/Os are submitted `batch_submit` at a time, each submitted batch is stamped with the
//! time read right after `io_submit` returned (its issue time: slat = issue - start, as
//! fio's `fio_libaio_queued`), and completions are reaped only once every slot is busy
//! (or nothing more is to be issued now), `complete_min` waited for, at most
//! `complete_max` taken, stamped once per `io_getevents` (fio stamps once per reaped
//! batch too). With fio's defaults (1, 1, 1) a job keeps its queue full, one out and one
//! in, and clat includes the time a completed I/O waits to be reaped, as it does in fio.
//!
//! Buffered (no O_DIRECT): the kernel does the I/O inside `io_submit` (native AIO is only
//! asynchronous for O_DIRECT), so slat holds the I/O's time and clat the wait to be
//! reaped: that is what fio measures as well.
//!
//! `--fsync N`/`--fdatasync N`: after the Nth write has completed, the job waits for what
//! is in flight and calls `fsync`/`fdatasync` itself (fio 3.33's libaio does the same: a
//! sync waits for the queue to drain and runs synchronously).

use std::sync::atomic::Ordering;

use super::stats::{READ, TRIM};
use super::{pace, verify, Ctx, ProbeError};
use crate::clock::monotonic_ns;
use crate::directio::AlignedBuf;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;

/// `struct iocb` of `linux/aio_abi.h` (x86_64 and aarch64: little-endian, 64-bit).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: u32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// A job's AIO context and its slots' buffers.
pub(super) struct Aio {
    ctx: libc::c_ulong,
    bufs: Vec<AlignedBuf>,
}

impl Aio {
    pub(super) fn new(depth: u32, max_bs: u64) -> std::io::Result<Aio> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the new context id into ctx.
        let r =
            unsafe { libc::syscall(libc::SYS_io_setup, depth.max(1) as libc::c_long, &mut ctx) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let bufs = (0..depth.max(1))
            .map(|_| AlignedBuf::new(max_bs as usize))
            .collect();
        Ok(Aio { ctx, bufs })
    }
}

impl Drop for Aio {
    fn drop(&mut self) {
        // SAFETY: ctx came from io_setup; io_destroy waits for what is in flight, so the
        // buffers (dropped after this) are no longer the kernel's.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    dir: usize,
    len: u64,
    offset: u64,
    intended: u64,
    start: u64,
    issue: u64,
    sync_after: bool,
}

fn aio_error(c: &Ctx, op: &str, e: std::io::Error) -> ProbeError {
    ProbeError::Io {
        path: c.target.path.clone(),
        op: op.into(),
        source: e,
    }
}

/// Waits for `min` completions (at most `events.len()`), or until `due` when given.
fn getevents(
    ctx: libc::c_ulong,
    min: usize,
    events: &mut [IoEvent],
    due: Option<u64>,
) -> std::io::Result<usize> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let tsp = match due {
        Some(d) => {
            let left = d.saturating_sub(monotonic_ns());
            ts.tv_sec = (left / 1_000_000_000) as libc::time_t;
            ts.tv_nsec = (left % 1_000_000_000) as libc::c_long;
            &mut ts as *mut libc::timespec
        }
        None => std::ptr::null_mut(),
    };
    // SAFETY: events is valid for len entries; tsp is null or points at ts.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            min as libc::c_long,
            events.len() as libc::c_long,
            events.as_mut_ptr(),
            tsp,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINTR) => Ok(0),
            _ => Err(e),
        };
    }
    Ok(r as usize)
}

#[allow(
    clippy::too_many_lines,
    reason = "the submit-reap loop in one piece, as engine_uring's: every step touches the same in-flight slots"
)]
pub(super) fn run(c: &mut Ctx, a: &mut Aio) -> Result<(), ProbeError> {
    let depth = c.depth.max(1) as usize;
    let t = c.timing.clone();
    let batch = (t.batch_submit.max(1) as usize).min(depth);
    let cmin = (t.complete_min.max(1) as usize).min(depth);
    let cmax = (t.complete_max.max(t.complete_min).max(1) as usize).min(depth);
    let buf_ptrs: Vec<*mut u8> = a.bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let mut slots = vec![Slot::default(); depth];
    let mut iocbs = vec![Iocb::default(); depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut queued: Vec<*mut Iocb> = Vec::with_capacity(depth);
    let mut queued_slots: Vec<u32> = Vec::with_capacity(depth);
    let mut events = vec![IoEvent::default(); depth];
    let mut issuing = true;
    let mut err: Option<ProbeError> = None;
    let mut pending_sync = false;

    loop {
        let now = monotonic_ns();
        if issuing && c.stop.load(Ordering::Relaxed) {
            issuing = false;
        }
        let inflight = depth - free.len();
        // A sync (or think time) waits for the queue to drain, then runs here.
        if pending_sync && inflight == 0 {
            pending_sync = false;
            if let Err(e) = super::sync_now(c, 0) {
                err.get_or_insert(e);
                issuing = false;
            }
            continue;
        }
        if c.think_pending() && inflight == 0 {
            c.think();
            continue;
        }
        let mut wait_due: Option<u64> = None;
        while issuing
            && !pending_sync
            && !c.think_pending()
            && c.has_room(depth - free.len())
            && queued.len() < batch
        {
            let intended = match c.sched.as_mut() {
                Some(s) => {
                    let due = s.next_ns();
                    // Ends on time even when behind schedule (see `Ctx::missed`).
                    if due >= c.end_ns || now >= c.end_ns {
                        issuing = false;
                        break;
                    }
                    if due > now {
                        wait_due = Some(due);
                        break;
                    }
                    s.advance(&mut c.sched_rng);
                    due
                }
                None => {
                    if now >= c.end_ns {
                        issuing = false;
                        break;
                    }
                    now
                }
            };
            let Some(op) = c.gen.next_op() else {
                // --size reached: nothing after this slot counts as missed.
                if c.sched.is_some() {
                    c.end_ns = c.end_ns.min(intended);
                }
                issuing = false;
                break;
            };
            if c.timing.loop_invalidate && c.gen.take_wrapped() {
                c.fds.iter().for_each(|fd| super::drop_cached(*fd));
            }
            // A trim is synchronous here, as in fio's libaio engine (do_io_u_trim in its
            // submit path): one BLKDISCARD now, recorded at once, no slot taken.
            if op.dir == TRIM {
                if let Err(e) = super::engine_sync::trim_now(c, &op, intended) {
                    err.get_or_insert(e);
                    issuing = false;
                }
                // Out to the round's top: `now` (and the end) is read again there.
                break;
            }
            let si = free.pop().expect("a free slot") as usize;
            slots[si] = Slot {
                dir: op.dir,
                len: op.len,
                offset: op.offset,
                intended,
                start: now,
                issue: 0,
                sync_after: op.sync_after,
            };
            if op.dir != READ {
                // SAFETY: slot si's buffer (max_bs >= len bytes) is free until this iocb.
                let b = unsafe { std::slice::from_raw_parts_mut(buf_ptrs[si], op.len as usize) };
                verify::before_write(&mut c.verify, b, op.offset);
            }
            iocbs[si] = Iocb {
                aio_data: si as u64,
                aio_lio_opcode: if op.dir == READ {
                    IOCB_CMD_PREAD
                } else {
                    IOCB_CMD_PWRITE
                },
                aio_fildes: c.fds[op.file as usize] as u32,
                aio_buf: buf_ptrs[si] as u64,
                aio_nbytes: op.len,
                aio_offset: op.offset as i64,
                ..Iocb::default()
            };
            queued.push(&mut iocbs[si] as *mut Iocb);
            queued_slots.push(si as u32);
            c.issued_one();
        }
        // Submit what is queued; stamp each submitted I/O with the time after the call.
        let mut done_sub = 0;
        while done_sub < queued.len() {
            let rest = &mut queued[done_sub..];
            // SAFETY: the iocbs and their buffers belong to busy slots, which stay busy
            // (unmoved, untouched) until their events are reaped.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    a.ctx,
                    rest.len() as libc::c_long,
                    rest.as_mut_ptr(),
                )
            };
            let t_issue = monotonic_ns();
            if r < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Not taken now: reap, then submit the rest (fio does the same).
                    Some(libc::EAGAIN) if done_sub > 0 || depth > free.len() + queued.len() => {
                        break
                    }
                    _ => return Err(aio_error(c, "io_submit", e)),
                }
            }
            for &si in &queued_slots[done_sub..done_sub + r as usize] {
                slots[si as usize].issue = t_issue;
            }
            done_sub += r as usize;
        }
        queued.drain(..done_sub);
        queued_slots.drain(..done_sub);
        let inflight = depth - free.len() - queued.len();
        if inflight == 0 {
            if !issuing || err.is_some() {
                if !pending_sync && !c.think_pending() {
                    break;
                }
                continue;
            }
            // Paced, nothing in flight: wait for the next intended start.
            if let Some(d) = wait_due {
                pace::wait_until(d.min(c.end_ns));
            }
            continue;
        }
        // fio reaps only once the queue is full (or nothing more can go now).
        let can_issue =
            issuing && !pending_sync && !c.think_pending() && c.has_room(depth - free.len());
        if can_issue && wait_due.is_none() && queued.is_empty() {
            continue;
        }
        let (min, due) = match wait_due {
            Some(d) if can_issue => (1, Some(d.min(c.end_ns))),
            _ => (cmin.min(inflight), None),
        };
        let max = if issuing { cmax } else { inflight };
        let n = getevents(a.ctx, min, &mut events[..max.min(inflight)], due)
            .map_err(|e| aio_error(c, "io_getevents", e))?;
        let t_done = monotonic_ns();
        if n == 0 {
            continue;
        }
        c.win.at_with(t_done, || {
            slots
                .iter()
                .enumerate()
                .filter(|(i, _)| !free.contains(&(*i as u32)))
                .map(|(_, s)| s.intended.min(s.start))
                .min()
                .unwrap_or(u64::MAX)
        });
        c.win.last_done_ns = t_done;
        for ev in &events[..n] {
            let si = ev.data as usize;
            free.push(si as u32);
            let s = slots[si];
            if ev.res < 0 {
                let e = std::io::Error::from_raw_os_error(-ev.res as i32);
                if c.ends_at_enospc(&e, s.dir) {
                    issuing = false;
                    continue;
                }
                if err.is_none() {
                    let what = if s.dir == READ { "read" } else { "write" };
                    err = Some(
                        c.target
                            .io_error(e, "measuring", what, s.offset, s.len, c.direct),
                    );
                    c.stop.store(true, Ordering::SeqCst);
                }
                issuing = false;
                continue;
            }
            c.win.stats.record_io(
                s.dir,
                s.len,
                ev.res as u64,
                s.intended,
                s.start,
                s.issue,
                t_done,
                true,
            );
            if let Some(l) = c.lat_log.as_mut() {
                l.io(s.dir, s.len, s.offset, s.start, s.issue, t_done, true);
            }
            if s.dir == READ && err.is_none() {
                // SAFETY: the kernel is done with slot si's buffer (its event is here).
                let b = unsafe { std::slice::from_raw_parts(buf_ptrs[si], ev.res as usize) };
                if let Err(e) = verify::after_read(&c.verify, b, s.offset) {
                    err = Some(e);
                    c.stop.store(true, Ordering::SeqCst);
                    issuing = false;
                    continue;
                }
            }
            c.completed_one(s.dir, ev.res as u64, t_done - s.start, t_done);
            if s.sync_after && err.is_none() {
                pending_sync = true;
            }
        }
        if let Some(e) = c.min_rate_check(t_done) {
            err.get_or_insert(e);
            issuing = false;
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// verify's read-back through the AIO context (see `verify::back`): reads the blocks `b`
/// gives at the job's iodepth, submitting and reaping as the workload does (fio's
/// `iodepth_batch_*`), and hands each completion to `b`, which checks it. Every read in
/// flight is reaped before it returns, an error's included (`io_destroy` waits for the
/// rest on an early return); the blocks fit the slots' buffers (`read_back` checks).
pub(super) fn read_back(c: &Ctx, a: &mut Aio, b: &mut verify::Backlog) -> Result<(), ProbeError> {
    let depth = c.depth.max(1) as usize;
    let t = &c.timing;
    let batch = (t.batch_submit.max(1) as usize).min(depth);
    let cmin = (t.complete_min.max(1) as usize).min(depth);
    let cmax = (t.complete_max.max(t.complete_min).max(1) as usize).min(depth);
    let buf_ptrs: Vec<*mut u8> = a.bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let mut slots = vec![verify::ReadSlot::default(); depth];
    let mut iocbs = vec![Iocb::default(); depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut queued: Vec<*mut Iocb> = Vec::with_capacity(depth);
    let mut queued_slots: Vec<u32> = Vec::with_capacity(depth);
    let mut events = vec![IoEvent::default(); depth];
    let mut issuing = true;
    let mut err: Option<ProbeError> = None;
    loop {
        while issuing && !free.is_empty() && queued.len() < batch {
            let now = monotonic_ns();
            let next = if b.ended(c, now) { None } else { b.next() };
            let Some((off, len)) = next else {
                issuing = false;
                break;
            };
            let si = free.pop().expect("a free slot") as usize;
            slots[si] = verify::ReadSlot {
                off,
                len,
                start: now,
                issue: 0,
            };
            iocbs[si] = Iocb {
                aio_data: si as u64,
                aio_lio_opcode: IOCB_CMD_PREAD,
                aio_fildes: c.fd as u32,
                aio_buf: buf_ptrs[si] as u64,
                aio_nbytes: len,
                aio_offset: off as i64,
                ..Iocb::default()
            };
            queued.push(&mut iocbs[si] as *mut Iocb);
            queued_slots.push(si as u32);
        }
        let mut done_sub = 0;
        while done_sub < queued.len() {
            let rest = &mut queued[done_sub..];
            // SAFETY: the iocbs and their buffers belong to busy slots, untouched until
            // their events are reaped.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    a.ctx,
                    rest.len() as libc::c_long,
                    rest.as_mut_ptr(),
                )
            };
            let t_issue = monotonic_ns();
            if r < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Not taken now: reap, then submit the rest.
                    Some(libc::EAGAIN) if done_sub > 0 || depth > free.len() + queued.len() => {
                        break
                    }
                    _ => return Err(aio_error(c, "io_submit", e)),
                }
            }
            for &si in &queued_slots[done_sub..done_sub + r as usize] {
                slots[si as usize].issue = t_issue;
            }
            done_sub += r as usize;
        }
        queued.drain(..done_sub);
        queued_slots.drain(..done_sub);
        let inflight = depth - free.len() - queued.len();
        if inflight == 0 {
            break;
        }
        // Reap once the queue is full or nothing more is to go (fio's `queue_full`).
        if issuing && !free.is_empty() && queued.is_empty() {
            continue;
        }
        let max = if issuing { cmax } else { inflight };
        let n = getevents(
            a.ctx,
            cmin.min(inflight),
            &mut events[..max.min(inflight)],
            None,
        )
        .map_err(|e| aio_error(c, "io_getevents", e))?;
        let t_done = monotonic_ns();
        for ev in &events[..n] {
            let si = ev.data as usize;
            free.push(si as u32);
            if err.is_some() {
                continue;
            }
            // SAFETY: the kernel is done with slot si's buffer (its event is here).
            let buf = unsafe { std::slice::from_raw_parts(buf_ptrs[si], ev.res.max(0) as usize) };
            if let Err(e) = b.reaped(c, slots[si], ev.res, buf, t_done) {
                err = Some(e);
                issuing = false;
            }
        }
    }
    err.map_or(Ok(()), Err)
}
