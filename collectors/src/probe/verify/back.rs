//! verify's read-back, as fio 3.33's verify phase (`do_verify` in its `backend.c`) does it
//! after the write phase (or instead of the workload, with `verify_only`):
//!
//! - it starts with the file's cached pages dropped when the job is buffered and has
//!   `invalidate=1` (the default): fio closes the job's files after the write phase and
//!   its verify loop opens them again, and its open drops the cache then. fio does not
//!   sync there (`do_verify` would sync and drop only files still open, and none is), so
//!   neither do we. That time is the phase's: fio's read `runtime` of a write job that
//!   verifies starts before the reopen;
//! - it reads every block the job wrote, one read per written block, through the job's
//!   engine at the job's `iodepth`: io_uring and libaio keep the queue full (fio's
//!   `iodepth_batch_*` rules, as the workload) and check each block as it completes; psync
//!   reads one block at a time;
//! - the order is fio's: a random job with a random map (fio's `file_randommap`) logs its
//!   writes in a list and reads them back in the order it wrote them; any other job keeps
//!   them in a tree sorted by offset (a block written twice is read once) and reads them
//!   in offset order. We replay the job's offset generator (a copy taken before the
//!   workload) for the first and walk the bitmap of written intervals for the second; a
//!   block is read once either way, and nothing is stored per write (the copy's random
//!   map is 1 bit per block: 32 MiB for 1 TiB of 4 KiB blocks, as the job's own);
//! - it ends at the job's `runtime` (fio's `runtime_exceeded` in the verify loop: with
//!   `runtime=`, the write phase and the read-back share it), on `stop` (Ctrl-C), or at the
//!   first bad block: that block is printed as fio prints it and is the job's error; the
//!   reads still in flight are reaped, not checked.
//!
//! What must stay true: no allocation per read; a slot's buffer is the kernel's from its
//! submission to its completion, and the engines reap every read in flight before they
//! return.

use std::os::unix::io::RawFd;
use std::sync::atomic::Ordering;

use super::super::stats::{DirStats, WindowStats, READ, WRITE};
use super::super::{engine_aio, engine_uring, workload, Ctx, ProbeError};
use super::JobVerify;
use crate::clock::monotonic_ns;
use crate::directio::AlignedBuf;

/// What the read-back did: the bytes checked, its reads (as fio's read figures count
/// them) and how long it took (the cache drop before it included).
#[derive(Default)]
pub(in crate::probe) struct ReadBack {
    pub(in crate::probe) bytes: u64,
    pub(in crate::probe) reads: DirStats,
    pub(in crate::probe) ns: u64,
}

/// The engine the read-back goes through: the job's own ring or AIO context.
pub(in crate::probe) enum Queue<'a> {
    Sync,
    Uring(&'a mut engine_uring::Ring),
    Aio(&'a mut engine_aio::Aio),
}

/// One read of the read-back in an engine's queue slot: where, how long, and when its
/// slot was filled (`start`) and its submission returned (`issue`), CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::probe) struct ReadSlot {
    pub(in crate::probe) off: u64,
    pub(in crate::probe) len: u64,
    pub(in crate::probe) start: u64,
    pub(in crate::probe) issue: u64,
}

impl<'a> Queue<'a> {
    /// The job's ring or AIO context, if it has one.
    pub(in crate::probe) fn of(
        ring: Option<&'a mut engine_uring::Ring>,
        aio: Option<&'a mut engine_aio::Aio>,
    ) -> Queue<'a> {
        match (ring, aio) {
            (Some(r), _) => Queue::Uring(r),
            (None, Some(a)) => Queue::Aio(a),
            (None, None) => Queue::Sync,
        }
    }
}

/// The blocks left to read back, in fio's order, and what the reads found.
pub(in crate::probe) struct Backlog<'a> {
    v: &'a JobVerify,
    /// Intervals written and not yet given out (a copy of the job's map).
    left: Vec<u64>,
    left_n: u64,
    /// The job's offset generator as it was before the workload (write order).
    replay: Option<workload::Gen>,
    /// Intervals per read in offset order (a block of `bs`).
    per_read: u64,
    /// Where the offset-order walk is (an interval index).
    walk: u64,
    units: u64,
    max_len: u64,
    end_ns: u64,
    stats: WindowStats,
    bytes: u64,
}

impl<'a> Backlog<'a> {
    fn new(v: &'a JobVerify, replay: Option<workload::Gen>, bs: u64, end_ns: u64) -> Backlog<'a> {
        let iv = v.interval;
        // A block of `bs` is `per_read` intervals; an interval that does not divide the
        // block is read on its own.
        let per_read = if bs >= iv && bs.is_multiple_of(iv) {
            bs / iv
        } else {
            1
        };
        let max_len = (per_read * iv).max(replay.as_ref().map_or(0, |g| g.max_bs()));
        Backlog {
            v,
            left: v.written.clone(),
            left_n: v.written.iter().map(|w| w.count_ones() as u64).sum(),
            replay,
            per_read,
            walk: 0,
            units: (v.written.len() * 64) as u64,
            max_len,
            end_ns,
            stats: WindowStats::new(),
            bytes: 0,
        }
    }

    fn is_left(&self, u: u64) -> bool {
        self.left
            .get((u / 64) as usize)
            .is_some_and(|w| w & (1 << (u % 64)) != 0)
    }

    fn take(&mut self, a: u64, b: u64) {
        for u in a..b {
            if let Some(w) = self.left.get_mut((u / 64) as usize) {
                if *w & (1 << (u % 64)) != 0 {
                    *w &= !(1 << (u % 64));
                    self.left_n -= 1;
                }
            }
        }
    }

    /// The next block to read, `(offset, bytes)`: the job's writes in the order it made
    /// them (replayed), then what is left in offset order. None when every block is out.
    pub(in crate::probe) fn next(&mut self) -> Option<(u64, u64)> {
        let iv = self.v.interval;
        while self.left_n > 0 {
            let Some(op) = self.replay.as_mut().and_then(|g| g.next_op()) else {
                self.replay = None;
                break;
            };
            let (a, b) = (op.offset / iv, (op.offset + op.len).div_ceil(iv));
            if op.dir == WRITE && b > a && (a..b).all(|u| self.is_left(u)) {
                self.take(a, b);
                return Some((a * iv, (b - a) * iv));
            }
        }
        let mut u = self.walk;
        while self.left_n > 0 && u < self.units {
            if !self.is_left(u) {
                u += 1;
                continue;
            }
            let mut n = 1;
            while n < self.per_read && u + n < self.units && self.is_left(u + n) {
                n += 1;
            }
            self.take(u, u + n);
            self.walk = u + n;
            return Some((u * iv, n * iv));
        }
        self.walk = u;
        None
    }

    /// Whether to stop giving out reads now: `stop` (Ctrl-C) or the job's runtime.
    pub(in crate::probe) fn ended(&self, c: &Ctx, now: u64) -> bool {
        now >= self.end_ns || c.stop.load(Ordering::Relaxed)
    }

    /// A queued read reaped at `t_done` with the engine's result `res` (bytes, or
    /// -errno), its bytes in `buf` (`res` of them): see [`Backlog::done`].
    pub(in crate::probe) fn reaped(
        &mut self,
        c: &Ctx,
        s: ReadSlot,
        res: i64,
        buf: &[u8],
        t_done: u64,
    ) -> Result<(), ProbeError> {
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res as i32);
            return Err(c
                .target
                .io_error(e, "verifying", "read", s.off, s.len, c.direct));
        }
        let got = res as u64;
        self.done(buf, s.off, s.len, got, s.start, s.issue, t_done, true)
    }

    /// A read of `len` bytes at `off` that completed with `got` bytes in `buf`: counted in
    /// fio's read figures (times as `record_io`'s), then each interval checked. A short
    /// read or a bad block is the job's error (the block printed as fio prints it).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::probe) fn done(
        &mut self,
        buf: &[u8],
        off: u64,
        len: u64,
        got: u64,
        start: u64,
        issue: u64,
        t_done: u64,
        async_engine: bool,
    ) -> Result<(), ProbeError> {
        self.stats
            .record_io(READ, len, got, start, start, issue, t_done, async_engine);
        if got < len {
            return Err(ProbeError::Verify {
                path: self.v.path.clone(),
                offset: off + got,
                len: len - got,
                what: "the file ends before the blocks written".into(),
            });
        }
        let iv = self.v.interval as usize;
        let bad = buf[..len as usize]
            .chunks(iv)
            .enumerate()
            .find_map(|(i, blk)| self.v.check(blk, off + (i * iv) as u64).err());
        if let Some(bad) = bad {
            for l in &bad.lines {
                eprintln!("{l}");
            }
            return Err(bad.error);
        }
        self.bytes += len;
        Ok(())
    }
}

/// The read-back of a job that wrote (see the module doc): `bs` the write block size,
/// `end_ns` the job's end by its runtime (u64::MAX: none), `queue` the job's engine.
/// What was read until an error stays in `out`.
pub(in crate::probe) fn read_back(
    c: &mut Ctx,
    bs: u64,
    end_ns: u64,
    queue: Queue,
    out: &mut ReadBack,
) -> Result<(), ProbeError> {
    let Some(v) = c.verify.as_mut() else {
        return Ok(());
    };
    let replay = v.replay.take();
    let c: &Ctx = c;
    let Some(v) = c.verify.as_ref() else {
        return Ok(());
    };
    let t_start = monotonic_ns();
    if c.timing.loop_invalidate {
        // Buffered with invalidate=1 (an O_DIRECT read does not use the cache).
        super::super::drop_cached(c.fd);
    }
    let mut b = Backlog::new(v, replay, bs, end_ns);
    // The slots' buffers are the workload's largest block: a longer read (a
    // verify_interval above the block size) goes one at a time.
    let fits = b.max_len <= c.gen.max_bs();
    let r = match queue {
        Queue::Uring(ring) if fits => engine_uring::read_back(c, ring, &mut b),
        Queue::Aio(aio) if fits => engine_aio::read_back(c, aio, &mut b),
        _ => read_sync(c, &mut b),
    };
    out.bytes = b.bytes;
    out.reads = std::mem::take(&mut b.stats.dir[READ]);
    out.ns = monotonic_ns() - t_start;
    r
}

/// psync's read-back: one `pread` at a time.
fn read_sync(c: &Ctx, b: &mut Backlog) -> Result<(), ProbeError> {
    let mut buf = AlignedBuf::new(b.max_len as usize);
    loop {
        let t0 = monotonic_ns();
        if b.ended(c, t0) {
            return Ok(());
        }
        let Some((off, len)) = b.next() else {
            return Ok(());
        };
        let got = pread_full(c.fd, &mut buf.as_mut_slice()[..len as usize], off).map_err(|e| {
            c.target
                .io_error(e, "verifying", "read", off, len, c.direct)
        })?;
        let t1 = monotonic_ns();
        b.done(buf.as_slice(), off, len, got as u64, t0, t0, t1, false)?;
    }
}

/// `verify_only`: marks what the job's workload would write (its generator replayed,
/// no I/O; a time-based job's whole region, since it wraps).
pub(in crate::probe) fn mark_only(c: &mut Ctx, time_based: bool, size: u64) {
    let Some(v) = c.verify.as_mut() else {
        return;
    };
    if time_based {
        v.mark(0, size);
        return;
    }
    while let Some(op) = c.gen.next_op() {
        if op.dir == WRITE {
            v.mark(op.offset, op.len);
        }
    }
}

fn pread_full(fd: RawFd, buf: &mut [u8], mut off: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the slice is valid for its length; fd is open.
        let r = unsafe {
            libc::pread(
                fd,
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                off as libc::off_t,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            break;
        }
        done += r as usize;
        off += r as u64;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use super::super::{VerifyKind, VerifySpec};
    use crate::probe::place::Placement;
    use crate::probe::workload::{Gen, JobShape};

    fn job() -> JobVerify {
        let s = VerifySpec {
            kind: VerifyKind::Crc32c,
            pattern: vec![],
            interval: 0,
            do_verify: true,
            only: false,
        };
        JobVerify::new(&s, 4096, 1 << 20, 0, 1, Path::new("/x/f"), false)
    }

    fn gen(random: bool, place: &Placement) -> Gen {
        Gen::new(JobShape {
            random,
            read_pct: 0.0,
            bs: [4096, 4096],
            place,
            target_size: 1 << 20,
            size: Some(64 << 10),
            job: 0,
            seed: 7,
            sync_every: 0,
            time_based: false,
            trim: crate::probe::workload::TrimMode::None,
        })
    }

    fn all(b: &mut Backlog) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| b.next()).collect()
    }

    #[test]
    fn a_random_job_with_a_map_reads_back_in_write_order_others_in_offset_order() {
        let place = Placement::default();
        let mut g = gen(true, &place);
        let replay = g.clone();
        let mut v = job();
        let mut wrote = vec![];
        while let Some(op) = g.next_op() {
            v.mark(op.offset, op.len);
            wrote.push((op.offset, op.len));
        }
        assert_eq!(wrote.len(), 16);
        let sorted = {
            let mut s = wrote.clone();
            s.sort();
            s
        };
        assert_ne!(wrote, sorted, "a random pass is not in offset order");
        assert_eq!(
            all(&mut Backlog::new(&v, Some(replay), 4096, u64::MAX)),
            wrote
        );
        assert_eq!(all(&mut Backlog::new(&v, None, 4096, u64::MAX)), sorted);
    }

    #[test]
    fn a_block_written_twice_is_read_once_and_offset_order_groups_intervals_by_bs() {
        let mut v = job();
        v.mark(8192, 4096);
        v.mark(8192, 4096);
        v.mark(0, 4096);
        v.mark(65536, 16384);
        // Offset order: 8192 once, and two intervals per 8 KiB block where both were
        // written.
        let b = &mut Backlog::new(&v, None, 8192, u64::MAX);
        assert_eq!(
            all(b),
            [(0, 4096), (8192, 4096), (65536, 8192), (73728, 8192)]
        );
    }
}
