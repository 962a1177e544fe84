//! `block_requests.csv.gz`: `record --trace` (issue 11), one row per block request that
//! completed on a device of the run (every device when the run lists none), in
//! completion order. Read from the kernel's `block:block_rq_insert`, `block_rq_issue` and
//! `block_rq_complete` tracepoints through tracefs, paired by (device, sector).
//!
//! Columns: `t_ns` (the request's issue to the driver, run clock, ns), `device` (name,
//! e.g. `loop3`), `major`, `minor`, `op` (`read`, `write`, `flush`, `discard`,
//! `write_zeroes`, `other`), `flags` (the kernel's rwbs string: `W` write, `R` read, `F`
//! in front = PREFLUSH, `F` after the op = FUA, `S` sync, `M` metadata, `A` readahead,
//! `D` discard, `N` none/other; e.g. `WS`, `FWFS`, `RA`), `sector` (512-byte sectors
//! from the device's start), `bytes` (the request's size at issue), `queue_ns` (insert
//! into the scheduler to issue, ns; empty when no insert was seen: requests that go to
//! the driver directly), `service_ns` (issue to completion, ns: the device's time),
//! `error` (0 or the errno the request ended with), `comm` (the task that issued it, as
//! the issue tracepoint says; often a kworker, not the writer).

use std::path::Path;

use super::csv::{push_cell, push_i64, push_u64, read_rows_chunked, t_ns_cell};

pub const FILE: &str = "block_requests.csv.gz";

/// The header: every column, in file order.
pub const HEADER: &str =
    "t_ns,device,major,minor,op,flags,sector,bytes,queue_ns,service_ns,error,comm";

/// The ops a row may have.
const OPS: [&str; 6] = ["read", "write", "flush", "discard", "write_zeroes", "other"];

/// The longest queue or service time a reader accepts (a day): past it the row is damaged.
pub(crate) const MAX_DUR_NS: u64 = 24 * 3600 * 1_000_000_000;

/// One completed block request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRequest {
    /// Issue to the driver, run clock, ns.
    pub t_ns: u64,
    pub device: String,
    pub major: u32,
    pub minor: u32,
    /// One of [`OPS`].
    pub op: String,
    /// The kernel's rwbs string.
    pub flags: String,
    /// 512-byte sectors.
    pub sector: u64,
    pub bytes: u64,
    /// Insert to issue; `None` when no insert was seen.
    pub queue_ns: Option<u64>,
    /// Issue to completion.
    pub service_ns: u64,
    /// 0 or an errno.
    pub error: i32,
    pub comm: String,
}

/// The op of a kernel rwbs string (`blk_fill_rwbs`): a leading `F` is a PREFLUSH and a
/// trailing one FUA, so the op is the first of `W`, `R`, `D`, `E` (secure erase, a
/// discard), `Z` (write zeroes); a bare `F`/`FN` is a flush; anything else `other`.
pub fn op_of_rwbs(rwbs: &str) -> &'static str {
    for c in rwbs.chars() {
        match c {
            'W' => return "write",
            'R' => return "read",
            'D' | 'E' => return "discard",
            'Z' => return "write_zeroes",
            _ => {}
        }
    }
    if rwbs.starts_with('F') {
        "flush"
    } else {
        "other"
    }
}

/// A row to write, borrowing its text: what the trace thread writes for each request
/// without allocating (at 100,000 requests a second the dozen strings a row of
/// [`BlockRequest::to_line`] allocated were most of the trace's CPU time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRequestRef<'a> {
    pub t_ns: u64,
    pub device: &'a str,
    pub major: u32,
    pub minor: u32,
    pub op: &'a str,
    pub flags: &'a str,
    pub sector: u64,
    pub bytes: u64,
    pub queue_ns: Option<u64>,
    pub service_ns: u64,
    pub error: i32,
    pub comm: &'a str,
}

impl BlockRequestRef<'_> {
    /// Appends the row as a CSV line, with its newline.
    pub fn write_line(&self, buf: &mut Vec<u8>) {
        push_u64(buf, self.t_ns);
        buf.push(b',');
        push_cell(buf, self.device);
        buf.push(b',');
        push_u64(buf, self.major.into());
        buf.push(b',');
        push_u64(buf, self.minor.into());
        buf.push(b',');
        push_cell(buf, self.op);
        buf.push(b',');
        push_cell(buf, self.flags);
        buf.push(b',');
        push_u64(buf, self.sector);
        buf.push(b',');
        push_u64(buf, self.bytes);
        buf.push(b',');
        if let Some(q) = self.queue_ns {
            push_u64(buf, q);
        }
        buf.push(b',');
        push_u64(buf, self.service_ns);
        buf.push(b',');
        push_i64(buf, self.error.into());
        buf.push(b',');
        push_cell(buf, self.comm);
        buf.push(b'\n');
    }
}

impl BlockRequest {
    /// The row borrowed, for [`BlockRequestRef::write_line`].
    pub fn as_ref(&self) -> BlockRequestRef<'_> {
        BlockRequestRef {
            t_ns: self.t_ns,
            device: &self.device,
            major: self.major,
            minor: self.minor,
            op: &self.op,
            flags: &self.flags,
            sector: self.sector,
            bytes: self.bytes,
            queue_ns: self.queue_ns,
            service_ns: self.service_ns,
            error: self.error,
            comm: &self.comm,
        }
    }

    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        let mut b = Vec::with_capacity(96);
        self.as_ref().write_line(&mut b);
        String::from_utf8(b).expect("the cells are UTF-8")
    }

    /// Whether the request carried PREFLUSH (a leading `F` before the op letter).
    pub fn preflush(&self) -> bool {
        self.flags.starts_with('F') && self.flags.len() > 1 && self.op != "flush"
    }

    /// Whether the request carried FUA (an `F` right after the op letter).
    pub fn fua(&self) -> bool {
        let f = self.flags.trim_start_matches('F');
        f.len() > 1 && f[1..].starts_with('F')
    }
}

/// Reads `block_requests.csv.gz` of a run, its closed chunks first (`record --chunk`:
/// `chunks/block_requests.NNNNNN.csv.gz`) as one file: the rows and the reader's
/// warnings (a damaged line skipped, naming file:line; a cut-off tail left out). Empty
/// when the run has none.
pub fn read(dir: &Path) -> anyhow::Result<(Vec<BlockRequest>, Vec<String>)> {
    let mut rows = vec![];
    let warnings = for_each(dir, |r| rows.push(r))?;
    Ok((rows, warnings))
}

/// As [`read`], each row handed to `f` as it is read instead of collected (the
/// report's pass over a traced run of hours: memory bounded by what `f` keeps).
/// Returns the reader's warnings.
pub fn for_each(dir: &Path, mut f: impl FnMut(BlockRequest)) -> anyhow::Result<Vec<String>> {
    let needed: Vec<&str> = HEADER.split(',').collect();
    let warnings = read_rows_chunked(dir, FILE, &needed, |c| {
        let num = |name: &str| -> Result<u64, String> {
            c.str(name)
                .parse::<u64>()
                .map_err(|_| format!("{name} '{}' is not a whole number", c.str(name)))
        };
        let dur = |name: &str| -> Result<u64, String> {
            let v = num(name)?;
            if v > MAX_DUR_NS {
                return Err(format!("{name} {v} is longer than a day"));
            }
            Ok(v)
        };
        let small = |name: &str| -> Result<u32, String> {
            u32::try_from(num(name)?).map_err(|_| format!("{name} is past 2^32"))
        };
        let op = c.str("op");
        if !OPS.contains(&op) {
            return Err(format!("op '{op}' is none of {}", OPS.join(", ")));
        }
        let queue_ns = match c.str("queue_ns") {
            "" => None,
            _ => Some(dur("queue_ns")?),
        };
        let error = c
            .str("error")
            .parse::<i32>()
            .map_err(|_| format!("error '{}' is not a number", c.str("error")))?;
        f(BlockRequest {
            t_ns: t_ns_cell(c.str("t_ns"))?,
            device: c.str("device").to_string(),
            major: small("major")?,
            minor: small("minor")?,
            op: op.to_string(),
            flags: c.str("flags").to_string(),
            sector: num("sector")?,
            bytes: num("bytes")?,
            queue_ns,
            service_ns: dur("service_ns")?,
            error,
            comm: c.str("comm").to_string(),
        });
        Ok(())
    })?;
    Ok(warnings.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_gives_the_op_and_the_flush_flags() {
        assert_eq!(op_of_rwbs("WS"), "write");
        assert_eq!(op_of_rwbs("FWFS"), "write");
        assert_eq!(op_of_rwbs("RA"), "read");
        assert_eq!(op_of_rwbs("FN"), "flush");
        assert_eq!(op_of_rwbs("F"), "flush");
        assert_eq!(op_of_rwbs("D"), "discard");
        assert_eq!(op_of_rwbs("WZ"), "write");
        assert_eq!(op_of_rwbs("Z"), "write_zeroes");
        assert_eq!(op_of_rwbs("N"), "other");
        let r = |flags: &str| BlockRequest {
            t_ns: 0,
            device: "loop3".into(),
            major: 7,
            minor: 3,
            op: op_of_rwbs(flags).into(),
            flags: flags.into(),
            sector: 0,
            bytes: 0,
            queue_ns: None,
            service_ns: 0,
            error: 0,
            comm: String::new(),
        };
        assert!(r("FWFS").preflush() && r("FWFS").fua());
        assert!(!r("WS").preflush() && !r("WS").fua());
        assert!(r("WFS").fua() && !r("WFS").preflush());
        assert!(!r("FN").preflush() && !r("FN").fua());
    }

    #[test]
    fn rows_read_back_and_a_bad_op_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let a = BlockRequest {
            t_ns: 5_000,
            device: "loop3".into(),
            major: 7,
            minor: 3,
            op: "write".into(),
            flags: "FWFS".into(),
            sector: 2048,
            bytes: 2 << 20,
            queue_ns: Some(1_500),
            service_ns: 250_000,
            error: 0,
            comm: "kworker/0:1H".into(),
        };
        assert_eq!(
            a.to_line(),
            "5000,loop3,7,3,write,FWFS,2048,2097152,1500,250000,0,kworker/0:1H\n"
        );
        let b = BlockRequest {
            queue_ns: None,
            op: "flush".into(),
            flags: "FN".into(),
            bytes: 0,
            ..a.clone()
        };
        let text = format!(
            "{HEADER}\n{}{}1,loop3,7,3,scribble,W,0,0,,1,0,x\n",
            a.to_line(),
            b.to_line()
        );
        let f = std::fs::File::create(d.path().join(FILE)).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        std::io::Write::write_all(&mut e, text.as_bytes()).unwrap();
        e.finish().unwrap();
        let (rows, warnings) = read(d.path()).unwrap();
        assert_eq!(rows, vec![a, b]);
        assert!(warnings
            .iter()
            .any(|w| w.contains(":4:") && w.contains("scribble")));
    }
}
