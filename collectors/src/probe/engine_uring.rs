//! The io_uring engine: one ring per job thread, queue depth `iodepth`.
//!
//! What keeps it cheap (fio's io_uring engine does most of these too):
//! - the job's files are registered (`IORING_REGISTER_FILES`, fixed files 0..N) and so are the
//!   buffers, one per queue slot (`IORING_REGISTER_BUFFERS`, `READ_FIXED`/`WRITE_FIXED`):
//!   no per-I/O file lookup or page pinning;
//! - the ring fd is registered too (`IORING_REGISTER_RING_FDS`), and the ring is
//!   `SINGLE_ISSUER | DEFER_TASKRUN` where the kernel has it (6.1+): completions are
//!   posted when this thread waits, not by interrupting it;
//! - submitting and reaping follow fio's `iodepth_batch_submit` (default 1),
//!   `iodepth_batch_complete_min` (1) and `_max` (the min) (decision 0090): a round
//!   queues up to `batch_submit` I/Os that are due and submits them with one
//!   `io_uring_enter`; only once every slot is busy (or nothing more can go now) does the
//!   job wait, for `complete_min` completions (with a rate: or for the next intended
//!   start), and reap at most `complete_max`. With fio's defaults a job runs one out, one
//!   in, as fio does; `iodepth_batch_submit=0 iodepth_batch_complete_max=<iodepth>` gives
//!   the cheaper whole-round submit and reap.
//!
//! Why not submit and wait in one `io_uring_enter` (one call fewer per round): then the
//! only issue time we could stamp is before the call, and the kernel's submission work
//! (5-15 us per I/O here: the file system's direct-I/O path, the block layer) would land
//! in clat. fio stamps the issue time after its submit call returns and counts that work
//! as slat; so do we, and our clat means what fio's means (a buffered page-cache hit is
//! done inside the submit call: its clat is the wait to be reaped, as in fio).
//!
//! Timing: all I/Os submitted by one call share the time read just after it
//! (their issue time; the time their slot was filled is their start, so slat = issue -
//! start), and all completions reaped in a round share the time read just after the
//! wait (fio also stamps once per reaped batch).
//!
//! `--fsync N`/`--fdatasync N`: after every Nth write has completed, an `IORING_OP_FSYNC`
//! (with `IORING_FSYNC_DATASYNC` for fdatasync) is queued in the next round, so the sync
//! covers that write. Syncs do not take a data slot.

use std::os::unix::io::RawFd;
use std::sync::atomic::Ordering;

use io_uring::{opcode, types, IoUring};

use super::stats::{READ, TRIM};
use super::{pace, verify, Ctx, ProbeError, SyncKind};
use crate::clock::monotonic_ns;
use crate::directio::AlignedBuf;

const SYNC_TAG: u64 = 1 << 63;

/// A job's ring with its registered file and buffers.
pub(super) struct Ring {
    // Dropped first: the kernel is done with the buffers once the ring is gone.
    ring: IoUring,
    bufs: Vec<AlignedBuf>,
    fixed_bufs: bool,
}

impl Ring {
    pub(super) fn new(depth: u32, fds: &[RawFd], max_bs: u64) -> std::io::Result<Ring> {
        let entries = (depth.max(1) * 2).next_power_of_two().max(8);
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
            .or_else(|_| IoUring::new(entries))?;
        ring.submitter().register_files(fds)?;
        let mut bufs: Vec<AlignedBuf> = (0..depth.max(1))
            .map(|_| AlignedBuf::new(max_bs as usize))
            .collect();
        let iovecs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: the buffers live as long as the ring (field order drops the ring first)
        // and never move (heap allocations owned by AlignedBuf).
        let fixed_bufs = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(Ring {
            ring,
            bufs,
            fixed_bufs,
        })
    }
}

impl Drop for Ring {
    /// Unregisters the file before the ring goes: a ring's registered files are released
    /// by the kernel's deferred ring-exit work, after close() returned, so a block device
    /// opened with O_EXCL stayed claimed for a moment after the probe ended and the next
    /// exclusive open (the next probe on that device) got EBUSY. Unregistering waits.
    fn drop(&mut self) {
        let _ = self.ring.submitter().unregister_files();
        if self.fixed_bufs {
            let _ = self.ring.submitter().unregister_buffers();
        }
    }
}

/// Submits what is queued and waits for one completion or until `due` (CLOCK_MONOTONIC
/// ns). An absolute deadline (`IORING_ENTER_ABS_TIMER`, 6.12+) does not lose the time
/// between reading the clock and entering the kernel; older kernels refuse the flag with
/// EINVAL before doing anything, and then get a relative timeout from `now`.
fn wait_until(
    submitter: &io_uring::Submitter,
    due: u64,
    now: u64,
    abs_timer: &mut bool,
) -> std::io::Result<usize> {
    let ts = |ns: u64| {
        types::Timespec::new()
            .sec(ns / 1_000_000_000)
            .nsec((ns % 1_000_000_000) as u32)
    };
    if *abs_timer {
        let t = ts(due);
        let r = submitter.submit_with_args_and_flags(
            1,
            &types::SubmitArgs::new().timespec(&t),
            io_uring::EnterFlags::ABS_TIMER,
        );
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => *abs_timer = false,
            r => return r,
        }
    }
    let t = ts(due.saturating_sub(now));
    submitter.submit_with_args(1, &types::SubmitArgs::new().timespec(&t))
}

/// Errors of io_uring_enter that only mean "try again": a timeout that expired, a signal,
/// a full completion queue.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}

fn enter_error(c: &Ctx, e: std::io::Error) -> ProbeError {
    ProbeError::Io {
        path: c.target.path.clone(),
        op: "io_uring_enter".into(),
        source: e,
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

#[allow(
    clippy::too_many_lines,
    reason = "the ring's submit-reap loop in one piece: every step touches the same in-flight slots, and the per-I/O path stays free of calls through a state struct"
)]
pub(super) fn run(c: &mut Ctx, r: &mut Ring) -> Result<(), ProbeError> {
    let depth = c.depth.max(1) as usize;
    let fixed_bufs = r.fixed_bufs;
    let buf_ptrs: Vec<*mut u8> = r.bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let (mut submitter, mut sq, mut cq) = r.ring.split();
    // Optional (5.18+): saves a file lookup per io_uring_enter.
    let _ = submitter.register_ring_fd();
    let file = types::Fixed(0);
    let sync_flags = match c.sync_kind {
        SyncKind::Fdatasync => types::FsyncFlags::DATASYNC,
        SyncKind::Fsync => types::FsyncFlags::empty(),
    };

    // A free slot's `start` is u64::MAX: the oldest in flight is the least of the others.
    let free_slot = Slot {
        start: u64::MAX,
        ..Slot::default()
    };
    let mut slots = vec![free_slot; depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut queued: Vec<u32> = Vec::with_capacity(depth);
    // u64::MAX while a sync slot is free (as `start` for the I/O slots).
    let mut sync_issue = vec![u64::MAX; depth];
    let mut sync_free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut queued_syncs: Vec<u32> = Vec::with_capacity(depth);
    let mut pending_syncs = 0usize;
    let mut syncs_inflight = 0usize;
    let mut issuing = true;
    let mut err: Option<ProbeError> = None;
    let mut abs_timer = true;
    // P2a: fio's iodepth_batch_submit / iodepth_batch_complete_min / _max (spec::Timing).
    let batch = (c.timing.batch_submit.max(1) as usize).min(depth);
    let cmin = c.timing.complete_min.max(1) as usize;
    let cmax = c.timing.complete_max.max(c.timing.complete_min).max(1) as usize;

    loop {
        let now = monotonic_ns();
        if c.think_pending() && depth == free.len() && syncs_inflight == 0 && pending_syncs == 0 {
            c.think();
            continue;
        }
        let mut wait_due = None;
        if issuing && c.stop.load(Ordering::Relaxed) {
            issuing = false;
            pending_syncs = 0;
        }
        while pending_syncs > 0 && err.is_none() {
            let Some(k) = sync_free.pop() else { break };
            let sqe = opcode::Fsync::new(file)
                .flags(sync_flags)
                .build()
                .user_data(SYNC_TAG | k as u64);
            // SAFETY: the SQE refers to no memory.
            if unsafe { sq.push(&sqe) }.is_err() {
                sync_free.push(k);
                break;
            }
            queued_syncs.push(k);
            pending_syncs -= 1;
            syncs_inflight += 1;
        }
        while issuing
            && c.has_room(depth - free.len())
            && !sq.is_full()
            && queued.len() < batch
            && !c.think_pending()
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
                // --size reached: nothing after this slot counts as missed (as in the
                // sync engine).
                if c.sched.is_some() {
                    c.end_ns = c.end_ns.min(intended);
                }
                issuing = false;
                break;
            };
            if c.timing.loop_invalidate && c.gen.take_wrapped() {
                c.fds.iter().for_each(|fd| super::drop_cached(*fd));
            }
            // A trim is synchronous here, as in fio's io_uring engine (do_io_u_trim in its
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
            let p = buf_ptrs[si];
            let len = op.len as u32;
            if op.dir != READ {
                // SAFETY: slot si's buffer (max_bs >= len bytes) is free until this SQE.
                let b = unsafe { std::slice::from_raw_parts_mut(p, op.len as usize) };
                verify::before_write(&mut c.verify, b, op.offset);
            }
            let file = types::Fixed(op.file);
            let sqe = match (op.dir == READ, fixed_bufs) {
                (true, true) => opcode::ReadFixed::new(file, p, len, si as u16)
                    .offset(op.offset)
                    .build(),
                (false, true) => opcode::WriteFixed::new(file, p, len, si as u16)
                    .offset(op.offset)
                    .build(),
                (true, false) => opcode::Read::new(file, p, len).offset(op.offset).build(),
                (false, false) => opcode::Write::new(file, p, len).offset(op.offset).build(),
            }
            .user_data(si as u64);
            // SAFETY: the buffer belongs to slot si, which stays busy until its CQE.
            unsafe { sq.push(&sqe) }.expect("room checked with is_full");
            queued.push(si as u32);
            c.issued_one();
        }
        sq.sync();
        let inflight = (depth - free.len()) + syncs_inflight;
        if inflight == 0 {
            if !issuing || err.is_some() {
                if c.think_pending() && err.is_none() {
                    continue;
                }
                break;
            }
            if c.think_pending() {
                continue;
            }
            // Paced, nothing in flight: wait for the next intended start.
            if let Some(s) = &c.sched {
                pace::wait_until(s.next_ns().min(c.end_ns));
            }
            continue;
        }
        // Submit, then stamp: like fio, an I/O's clat starts once the kernel has taken it
        // (its submission work is slat). Folding the submit into the wait below would save
        // one io_uring_enter per round but put that work (5-15 us here) into clat, and
        // clat would no longer mean what it means in fio.
        if !queued.is_empty() || !queued_syncs.is_empty() {
            if let Err(e) = submitter.submit() {
                if !transient(&e) {
                    return Err(enter_error(c, e));
                }
            }
            let t_issue = monotonic_ns();
            for &si in &queued {
                slots[si as usize].issue = t_issue;
            }
            queued.clear();
            for &k in &queued_syncs {
                sync_issue[k as usize] = t_issue;
            }
            queued_syncs.clear();
        }
        // Like fio, reap only once the queue is full or nothing more can go now: a
        // completion waits to be reaped while the queue fills, and that wait is in clat
        // as in fio's. Then wait for iodepth_batch_complete_min completions (with a rate
        // and a free slot: or for the next intended start) and reap up to _max of them.
        let can_issue =
            issuing && c.has_room(depth - free.len()) && !c.think_pending() && err.is_none();
        if can_issue && wait_due.is_none() && !sq.is_full() {
            continue;
        }
        let max = if issuing && !c.think_pending() {
            cmax
        } else {
            usize::MAX
        };
        let res = match &c.sched {
            Some(s) if can_issue => {
                let due = s.next_ns().min(c.end_ns);
                let now = monotonic_ns();
                if due <= now {
                    Ok(0)
                } else {
                    wait_until(&submitter, due, now, &mut abs_timer)
                }
            }
            _ => submitter.submit_and_wait(cmin.min(inflight).max(1)),
        };
        if let Err(e) = res {
            if !transient(&e) {
                return Err(enter_error(c, e));
            }
        }
        let t_done = monotonic_ns();
        cq.sync();
        if cq.is_empty() {
            continue;
        }
        // At a window's end (rare): the oldest I/O or sync in flight, the ones completing
        // now included, since they were still in flight at the window's end.
        c.win.at_with(t_done, || {
            let io = slots
                .iter()
                .filter(|s| s.start != u64::MAX)
                .map(|s| s.intended.min(s.start))
                .min();
            let sync = sync_issue.iter().copied().min();
            io.into_iter().chain(sync).min().unwrap_or(u64::MAX)
        });
        c.win.last_done_ns = t_done;
        for cqe in (&mut cq).take(max) {
            let ud = cqe.user_data();
            let res = cqe.result();
            if ud & SYNC_TAG != 0 {
                let k = (ud & !SYNC_TAG) as usize;
                sync_free.push(k as u32);
                let issued = std::mem::replace(&mut sync_issue[k], u64::MAX);
                syncs_inflight -= 1;
                if res < 0 {
                    if err.is_none() {
                        err = Some(c.target.io_error(
                            std::io::Error::from_raw_os_error(-res),
                            "measuring",
                            c.sync_kind.name(),
                            0,
                            0,
                            c.direct,
                        ));
                        c.stop.store(true, Ordering::SeqCst);
                    }
                    issuing = false;
                } else {
                    c.win.stats.record_sync(t_done - issued);
                }
                continue;
            }
            let si = ud as usize;
            free.push(si as u32);
            let s = std::mem::replace(&mut slots[si], free_slot);
            if res < 0 {
                let e = std::io::Error::from_raw_os_error(-res);
                if c.ends_at_enospc(&e, s.dir) {
                    issuing = false;
                    pending_syncs = 0;
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
                pending_syncs = 0;
                continue;
            }
            c.win.stats.record_io(
                s.dir, s.len, res as u64, s.intended, s.start, s.issue, t_done, true,
            );
            if let Some(l) = c.lat_log.as_mut() {
                l.io(s.dir, s.len, s.offset, s.start, s.issue, t_done, true);
            }
            if s.dir == READ && err.is_none() {
                // SAFETY: the kernel is done with slot si's buffer (its CQE is here).
                let b = unsafe { std::slice::from_raw_parts(buf_ptrs[si], res as usize) };
                if let Err(e) = verify::after_read(&c.verify, b, s.offset) {
                    err = Some(e);
                    c.stop.store(true, Ordering::SeqCst);
                    issuing = false;
                    pending_syncs = 0;
                    continue;
                }
            }
            c.completed_one(s.dir, res as u64, t_done - s.start, t_done);
            if s.sync_after && err.is_none() {
                pending_syncs += 1;
            }
        }
        if let Some(e) = c.min_rate_check(t_done) {
            if err.is_none() {
                err = Some(e);
                c.stop.store(true, Ordering::SeqCst);
            }
            issuing = false;
            pending_syncs = 0;
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// verify's read-back through the ring (see `verify::back`): reads the blocks `b` gives
/// at the job's iodepth, submitting and reaping as the workload does (fio's
/// `iodepth_batch_*`: with the defaults the queue stays full, one out, one in), and hands
/// each completion to `b`, which checks it. Every read in flight is reaped before it
/// returns, an error's included; the blocks fit the slots' buffers (`read_back` checks).
pub(super) fn read_back(c: &Ctx, r: &mut Ring, b: &mut verify::Backlog) -> Result<(), ProbeError> {
    let depth = c.depth.max(1) as usize;
    let fixed_bufs = r.fixed_bufs;
    let buf_ptrs: Vec<*mut u8> = r.bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let (submitter, mut sq, mut cq) = r.ring.split();
    let file = types::Fixed(0);
    let batch = (c.timing.batch_submit.max(1) as usize).min(depth);
    let cmin = c.timing.complete_min.max(1) as usize;
    let cmax = c.timing.complete_max.max(c.timing.complete_min).max(1) as usize;
    let mut slots = vec![verify::ReadSlot::default(); depth];
    let mut free: Vec<u32> = (0..depth as u32).rev().collect();
    let mut queued: Vec<u32> = Vec::with_capacity(depth);
    let mut issuing = true;
    let mut err: Option<ProbeError> = None;
    loop {
        while issuing && !free.is_empty() && !sq.is_full() && queued.len() < batch {
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
            let (p, n) = (buf_ptrs[si], len as u32);
            let sqe = if fixed_bufs {
                opcode::ReadFixed::new(file, p, n, si as u16)
                    .offset(off)
                    .build()
            } else {
                opcode::Read::new(file, p, n).offset(off).build()
            }
            .user_data(si as u64);
            // SAFETY: slot si's buffer (at least len bytes) is the kernel's until its CQE.
            unsafe { sq.push(&sqe) }.expect("room checked with is_full");
            queued.push(si as u32);
        }
        sq.sync();
        let inflight = depth - free.len();
        if inflight == 0 {
            break;
        }
        if !queued.is_empty() {
            if let Err(e) = submitter.submit() {
                if !transient(&e) {
                    return Err(enter_error(c, e));
                }
            }
            let t_issue = monotonic_ns();
            for &si in &queued {
                slots[si as usize].issue = t_issue;
            }
            queued.clear();
        }
        // Reap once the queue is full or nothing more is to go (fio's `queue_full`).
        if issuing && !free.is_empty() && !sq.is_full() {
            continue;
        }
        if let Err(e) = submitter.submit_and_wait(cmin.min(inflight).max(1)) {
            if !transient(&e) {
                return Err(enter_error(c, e));
            }
        }
        let t_done = monotonic_ns();
        cq.sync();
        let max = if issuing { cmax } else { usize::MAX };
        for cqe in (&mut cq).take(max) {
            let si = cqe.user_data() as usize;
            free.push(si as u32);
            if err.is_some() {
                continue;
            }
            let res = cqe.result();
            // SAFETY: the kernel is done with slot si's buffer (its CQE is here).
            let buf = unsafe { std::slice::from_raw_parts(buf_ptrs[si], res.max(0) as usize) };
            if let Err(e) = b.reaped(c, slots[si], res as i64, buf, t_done) {
                err = Some(e);
                issuing = false;
            }
        }
    }
    err.map_or(Ok(()), Err)
}

/// Whether this kernel lets us create an io_uring (the error says why not).
pub fn uring_available() -> Result<(), ProbeError> {
    match io_uring::IoUring::new(2) {
        Ok(_) => Ok(()),
        Err(e) => Err(ProbeError::UringUnavailable {
            hint: super::error::uring_hint(&e),
            source: e,
        }),
    }
}
