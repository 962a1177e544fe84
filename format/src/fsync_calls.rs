//! `fsync_calls.csv.gz`: `record --trace` (issue 11), one row per traced sync call of the
//! traced processes (`--trace-pid`, `--trace-comm`, the command of `record -- CMD`, the
//! embedded brokers of demo/load/run), in completion order. Read from the kernel's
//! `syscalls:sys_enter_*`/`sys_exit_*` tracepoints through tracefs and paired per thread.
//!
//! Columns: `t_ns` (the call's start, run clock, ns), `dur_ns` (enter to exit, ns),
//! `pid` (the process, tgid), `tid` (the thread), `comm` (the thread's name as the
//! kernel has it, at most 15 bytes), `call` (`fsync`, `fdatasync`, `sync_file_range`,
//! `msync`, `io_uring_fsync`), `fd` (empty for `msync`, which takes an address), `file`
//! (the path behind the fd from /proc/PID/fd/N, empty when it could not be resolved;
//! quoted when it holds a comma), `ret` (the return value: 0, or a negative errno).
//!
//! Timestamps come from the `mono` trace clock, which is CLOCK_MONOTONIC: meta.json's
//! `trace` section records the offset bound measured at the start.

use std::path::Path;

use super::csv::{push_cell, push_i64, push_u64, read_rows_chunked, t_ns_cell};

pub const FILE: &str = "fsync_calls.csv.gz";

/// The header: every column, in file order.
pub const HEADER: &str = "t_ns,dur_ns,pid,tid,comm,call,fd,file,ret";

/// The longest call a reader accepts: a row claiming more is damaged (a day).
pub(crate) const MAX_DUR_NS: u64 = 24 * 3600 * 1_000_000_000;

/// The calls recorded.
pub const CALLS: [&str; 5] = [
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
    "io_uring_fsync",
];

/// One traced sync call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsyncCall {
    /// The call's start (sys_enter), run clock, ns.
    pub t_ns: u64,
    /// sys_enter to sys_exit, ns.
    pub dur_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// One of [`CALLS`].
    pub call: String,
    /// `None` for msync (an address, not an fd).
    pub fd: Option<i64>,
    /// The path behind the fd; empty when unresolved.
    pub file: String,
    /// 0 or a negative errno.
    pub ret: i64,
}

impl FsyncCall {
    /// Appends the row as a CSV line, with its newline (no allocation).
    pub fn write_line(&self, buf: &mut Vec<u8>) {
        push_u64(buf, self.t_ns);
        buf.push(b',');
        push_u64(buf, self.dur_ns);
        buf.push(b',');
        push_u64(buf, self.pid.into());
        buf.push(b',');
        push_u64(buf, self.tid.into());
        buf.push(b',');
        push_cell(buf, &self.comm);
        buf.push(b',');
        push_cell(buf, &self.call);
        buf.push(b',');
        if let Some(fd) = self.fd {
            push_i64(buf, fd);
        }
        buf.push(b',');
        push_cell(buf, &self.file);
        buf.push(b',');
        push_i64(buf, self.ret);
        buf.push(b'\n');
    }

    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        let mut b = Vec::with_capacity(96);
        self.write_line(&mut b);
        String::from_utf8(b).expect("the cells are UTF-8")
    }

    /// The call's end on the run clock, ns.
    pub fn t_end_ns(&self) -> u64 {
        self.t_ns + self.dur_ns
    }
}

/// Reads `fsync_calls.csv.gz` of a run, its closed chunks first (`record --chunk`:
/// `chunks/fsync_calls.NNNNNN.csv.gz`) as one file: the rows and the reader's warnings
/// (a damaged line is skipped, naming file:line; a cut-off tail is left out). Empty when
/// the run has none.
pub fn read(dir: &Path) -> anyhow::Result<(Vec<FsyncCall>, Vec<String>)> {
    let mut rows = vec![];
    let warnings = for_each(dir, |r| rows.push(r))?;
    Ok((rows, warnings))
}

/// As [`read`], each row handed to `f` as it is read instead of collected (the
/// report's pass over a traced run of hours: memory bounded by what `f` keeps).
/// Returns the reader's warnings.
pub fn for_each(dir: &Path, mut f: impl FnMut(FsyncCall)) -> anyhow::Result<Vec<String>> {
    let needed: Vec<&str> = HEADER.split(',').collect();
    let warnings = read_rows_chunked(dir, FILE, &needed, |c| {
        let num = |name: &str| -> Result<u64, String> {
            c.str(name)
                .parse::<u64>()
                .map_err(|_| format!("{name} '{}' is not a whole number", c.str(name)))
        };
        let t_ns = t_ns_cell(c.str("t_ns"))?;
        let dur_ns = num("dur_ns")?;
        if dur_ns > MAX_DUR_NS {
            return Err(format!("dur_ns {dur_ns} is longer than a day"));
        }
        let id = |name: &str| -> Result<u32, String> {
            u32::try_from(num(name)?).map_err(|_| format!("{name} is past 2^32"))
        };
        let call = c.str("call");
        if !CALLS.contains(&call) {
            return Err(format!("call '{call}' is none of {}", CALLS.join(", ")));
        }
        let fd = match c.str("fd") {
            "" => None,
            s => Some(
                s.parse::<i64>()
                    .map_err(|_| format!("fd '{s}' is not a number"))?,
            ),
        };
        let ret = c
            .str("ret")
            .parse::<i64>()
            .map_err(|_| format!("ret '{}' is not a number", c.str("ret")))?;
        f(FsyncCall {
            t_ns,
            dur_ns,
            pid: id("pid")?,
            tid: id("tid")?,
            comm: c.str("comm").to_string(),
            call: call.to_string(),
            fd,
            file: c.str("file").to_string(),
            ret,
        });
        Ok(())
    })?;
    Ok(warnings.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(path: &Path, text: &str) {
        let f = std::fs::File::create(path).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    }

    #[test]
    fn rows_read_back_with_quoted_paths_and_damaged_lines_skipped() {
        let d = tempfile::tempdir().unwrap();
        let a = FsyncCall {
            t_ns: 1_000,
            dur_ns: 38_000_000,
            pid: 10,
            tid: 12,
            comm: "nats-server".into(),
            call: "fdatasync".into(),
            fd: Some(7),
            file: "/var/lib/nats/jetstream/$G/streams/a,b/msgs/1.blk".into(),
            ret: 0,
        };
        let b = FsyncCall {
            call: "msync".into(),
            fd: None,
            file: String::new(),
            ret: -5,
            ..a.clone()
        };
        let text = format!(
            "{HEADER}\n{}{}5,6,1,1,x,sync,3,,0\n9,nine,1,1,x,fsync,3,,0\n{}",
            a.to_line(),
            b.to_line(),
            a.to_line().trim_end()
        );
        gz(&d.path().join(FILE), &text);
        let (rows, warnings) = read(d.path()).unwrap();
        assert_eq!(rows, vec![a.clone(), b]);
        assert_eq!(rows[0].t_end_ns(), 38_001_000);
        assert!(warnings
            .iter()
            .any(|w| w.contains(":4:") && w.contains("call 'sync'")));
        assert!(warnings
            .iter()
            .any(|w| w.contains(":5:") && w.contains("dur_ns")));
        assert!(warnings.iter().any(|w| w.contains("cut off")));
        assert!(read(&d.path().join("none")).unwrap().0.is_empty());
    }
}
