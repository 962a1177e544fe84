//! CPU and scheduling use of a job thread or the whole probe, from `getrusage` (times in
//! ns; counts since the thread or process began, so a use is the difference of two).

/// CPU and scheduling use from `getrusage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub usr_ns: u64,
    pub sys_ns: u64,
    pub ctx: u64,
    pub minflt: u64,
    pub majflt: u64,
}

impl Usage {
    fn now(who: libc::c_int) -> Usage {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out pointer; RUSAGE_THREAD/SELF exist on Linux.
        unsafe { libc::getrusage(who, &mut r) };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        Usage {
            usr_ns: ns(r.ru_utime),
            sys_ns: ns(r.ru_stime),
            ctx: (r.ru_nvcsw + r.ru_nivcsw) as u64,
            minflt: r.ru_minflt as u64,
            majflt: r.ru_majflt as u64,
        }
    }

    /// The calling thread's use.
    pub fn thread() -> Usage {
        Usage::now(libc::RUSAGE_THREAD)
    }

    /// The whole process's use.
    pub fn process() -> Usage {
        Usage::now(libc::RUSAGE_SELF)
    }

    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            usr_ns: self.usr_ns.saturating_sub(earlier.usr_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
            ctx: self.ctx.saturating_sub(earlier.ctx),
            minflt: self.minflt.saturating_sub(earlier.minflt),
            majflt: self.majflt.saturating_sub(earlier.majflt),
        }
    }
}
