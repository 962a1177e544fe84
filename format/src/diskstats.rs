//! `diskstats.csv.gz`: the raw block-device counters, every sample of the 1 ms sampler
//! (written by `recording::samplers`, which formats rows with itoa into a reused buffer:
//! no allocation per sample; the header comes from here).
//!
//! Columns: `t_ns,device,major,minor` then the 17 counters of [`collectors::diskstats`]
//! in kernel order ([`FIELD_NAMES`]): `reads,reads_merged,sectors_read,read_ms,writes,
//! writes_merged,sectors_written,write_ms,in_flight,io_ms,weighted_io_ms,discards,
//! discards_merged,sectors_discarded,discard_ms,flushes,flush_ms`. Units: sectors are
//! 512 B; `*_ms` are milliseconds and wrap at 2^32; `in_flight` is a gauge, the rest
//! counters since boot. A cell is empty where the kernel prints fewer fields (discards
//! before 4.18, flushes before 5.5). `t_ns` is the sample's instant (not a window). A
//! device's row is written when a counter changed since its previous sample, together
//! with that previous sample if it was not written, and at least once a second: the
//! difference of two consecutive rows is always exact. Gzip, as a series of whole members
//! (one per flush of `recording::writer`, about 5 a second), so
//! `zcat` reads a recording cut by `kill -9` up to its last whole member.

use std::path::Path;

pub use collectors::diskstats::{FIELD_NAMES, MAX_FIELDS};

use super::csv::{for_each_line_until, t_ns_cell, Bad, Flow};

pub const FILE: &str = "diskstats.csv.gz";

/// The columns before the counters.
const KEY_COLUMNS: [&str; 4] = ["t_ns", "device", "major", "minor"];

/// Every column, in file order.
pub fn columns() -> Vec<&'static str> {
    KEY_COLUMNS
        .iter()
        .chain(FIELD_NAMES.iter())
        .copied()
        .collect()
}

/// The header line (without newline).
pub fn header() -> String {
    columns().join(",")
}

/// The raw rows of one device.
#[derive(Debug, Clone, Default)]
pub struct DiskRows {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub t_ns: Vec<u64>,
    /// Counters per row ([`Row::get`]: `None` where the kernel did not print the field).
    pub f: Vec<Row>,
}

/// One row's counters, 8 bytes a field: a missing field (an empty cell) is held as
/// [`Row::NONE`], a value no kernel counter reaches, so a report of an hour's rows takes
/// half the memory `[Option<u64>; MAX_FIELDS]` took (issue 13 item 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row([u64; MAX_FIELDS]);

impl Default for Row {
    fn default() -> Self {
        Row([Row::NONE; MAX_FIELDS])
    }
}

impl Row {
    /// What a missing field is held as (a cell of `u64::MAX` reads as missing).
    pub const NONE: u64 = u64::MAX;

    /// Field `i`'s counter, `None` where the kernel did not print it (or `i` is past
    /// [`MAX_FIELDS`]).
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).copied().filter(|&v| v != Row::NONE)
    }

    /// Sets field `i` (`None`: missing).
    #[inline]
    pub fn set(&mut self, i: usize, v: Option<u64>) {
        self.0[i] = v.unwrap_or(Row::NONE);
    }

    /// A row from the fields as `Option`s.
    #[cfg(test)]
    fn from_options(f: [Option<u64>; MAX_FIELDS]) -> Row {
        Row(f.map(|v| v.unwrap_or(Row::NONE)))
    }
}

/// The largest counter a row may hold: 2^63 (the kernel's are unsigned long; no disk
/// wraps a 64-bit sector count, 4 ZiB). Past it the cell is damaged.
pub const MAX_COUNTER: u64 = 1 << 63;

/// The directory of a chunked recording's closed chunks (`record --chunk`): `chunks/`
/// beside meta.json holds `diskstats.000001.csv.gz`, `diskstats.000002.csv.gz`, ..., each
/// a whole gzip file with its header, never written again once there; the chunk being
/// written (and, at the end, the last one) is `diskstats.csv.gz` as in a run that was not
/// chunked.
pub const CHUNK_DIR: &str = "chunks";

/// The name of closed chunk number `seq` (1-based) in [`CHUNK_DIR`].
pub fn chunk_name(seq: u64) -> String {
    super::csv::chunk_name_of(FILE, seq)
}

/// The number of a closed chunk's file name (`diskstats.000042.csv.gz` -> 42).
fn chunk_seq(name: &str) -> Option<u64> {
    let n = name.strip_prefix("diskstats.")?.strip_suffix(".csv.gz")?;
    (n.len() >= 6 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The files of a run's diskstats in time order: the closed chunks in `chunks/` by
/// number, then `diskstats.csv.gz` (the current or last chunk; a run from before chunking
/// has only this one), or a plain `diskstats.csv`. Empty when the run has none. The one
/// place that knows the layout: every reader of a run's diskstats goes through it (or
/// [`read_run`]).
pub fn files(run_dir: &Path) -> Vec<std::path::PathBuf> {
    numbered_files(run_dir)
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

/// [`files`], each closed chunk with its number.
fn numbered_files(run_dir: &Path) -> Vec<(Option<u64>, std::path::PathBuf)> {
    let mut closed: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(run_dir.join(CHUNK_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            chunk_seq(name.to_str()?).map(|n| (n, e.path()))
        })
        .collect();
    closed.sort();
    // A chunk meta.json does not list is another run's: left out (the report says so).
    let foreign = super::chunklist::foreign_chunks(run_dir);
    let mut out: Vec<_> = closed
        .into_iter()
        .filter(|(_, p)| !foreign.contains(p))
        .map(|(n, p)| (Some(n), p))
        .collect();
    let gz = run_dir.join(FILE);
    let plain = run_dir.join("diskstats.csv");
    if gz.exists() {
        out.push((None, gz));
    } else if plain.exists() {
        out.push((None, plain));
    }
    out
}

/// Whether `record --keep` deleted the run's first chunks (its first file is a closed
/// chunk numbered above 1): its rows then start later than its zero.
pub fn first_chunks_deleted(run_dir: &Path) -> bool {
    numbered_files(run_dir)
        .first()
        .is_some_and(|(n, _)| n.is_some_and(|n| n > 1))
}

/// A device of a run's diskstats, in order of first appearance ([`for_each_row_in`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

/// Reads a run's diskstats across its chunks ([`files`]) as one recording: rows grouped
/// by device in time order, as [`read`] gives one file's; every row in memory (144 bytes
/// a row: `report` streams them with [`for_each_row_in`] instead). The rules (holes where
/// `record --keep` deleted chunks, an empty current chunk, warnings, errors) are
/// [`for_each_row_in`]'s. No file at all: an error saying so.
pub fn read_run(run_dir: &Path) -> anyhow::Result<(Vec<DiskRows>, Vec<String>)> {
    let files = files(run_dir);
    if files.is_empty() {
        anyhow::bail!(
            "{} has no {FILE} (nor {CHUNK_DIR}/{})",
            run_dir.display(),
            chunk_name(1)
        );
    }
    collect(&files)
}

/// Reads `diskstats.csv.gz` (or a plain `diskstats.csv`) grouped by device, in order of
/// first appearance, with the reading's warnings; every row in memory. The rules are
/// [`for_each_row_in`]'s. A run's rows: [`read_run`].
pub fn read(p: &Path) -> anyhow::Result<(Vec<DiskRows>, Vec<String>)> {
    collect(&[p])
}

fn collect<P: AsRef<Path>>(files: &[P]) -> anyhow::Result<(Vec<DiskRows>, Vec<String>)> {
    let mut disks: Vec<DiskRows> = vec![];
    let (devices, warnings) = for_each_row_in(files, |k, dev, t, row| {
        if k == disks.len() {
            disks.push(DiskRows {
                name: dev.name.clone(),
                major: dev.major,
                minor: dev.minor,
                ..Default::default()
            });
        }
        disks[k].t_ns.push(t);
        disks[k].f.push(*row);
    })?;
    debug_assert_eq!(devices.len(), disks.len());
    Ok((disks, warnings))
}

/// Streams the rows of a run's diskstats files one after the other ([`files`]: the
/// closed chunks in order, then the current one; or one file), calling `f` with each
/// row: the device's index in order of first appearance, the device, `t_ns` and the
/// counters. Nothing is held but the device list (`report`'s one pass goes through it;
/// [`read_run`] and [`read`] collect it). Returns the devices and the reading's warnings.
///
/// Each file is read by [`for_each_row`] (header, damaged rows skipped with a warning
/// naming file:line, a cut-off end read up to its last whole row). A row whose `t_ns` is
/// before its device's previous row is skipped with a warning naming file:line. Where
/// chunks were deleted (`record --keep`: the closed chunks' numbers jump), each device
/// gets a row without values 1 ns after its last row before the hole, so no interval
/// spans it (a rate over the hole would spread hours of bytes evenly over it): the hole
/// reads as "no value", not as zeros or a smear; a warning names it, and one says where
/// the run starts when its first chunks are gone. A current chunk that is empty (the
/// recorder was killed between closing one chunk and writing the next one's header) is
/// passed over with a warning. No whole row at all: an error naming the first file.
pub fn for_each_row_in<P: AsRef<Path>>(
    files: &[P],
    f: impl FnMut(usize, &Device, u64, &Row),
) -> anyhow::Result<(Vec<Device>, Vec<String>)> {
    for_each_row_until(files, None, f)
}

/// [`for_each_row_in`] for a run whose end may be known (a finished recording: meta.json's
/// duration and slack, `limit_ns`). A row more than [`JUMP_NS`] ahead of its device's
/// previous row is held until the device's next row: if that one goes back below it (but
/// not below the rows before it), the held row was damage (a flipped byte in a gzip stream
/// read as a time, or another run's row) and is skipped with a warning naming file:line;
/// a held last row past `limit_ns` is skipped so too. Taken, such a row moved its device's
/// time hours ahead (every later row "before the previous row", skipped) and, as the
/// run's last row, stretched the report's windows to it (6 h of 1 ms windows filled the
/// disk with scratch files).
pub fn for_each_row_until<P: AsRef<Path>>(
    files: &[P],
    limit_ns: Option<u64>,
    mut f: impl FnMut(usize, &Device, u64, &Row),
) -> anyhow::Result<(Vec<Device>, Vec<String>)> {
    let mut devices: Vec<Device> = vec![];
    let mut order = Order {
        last_t: vec![],
        emitted_t: vec![],
        held: vec![],
        jumped: vec![],
    };
    let mut warnings = vec![];
    let last = files.len().saturating_sub(1);
    let mut prev: Option<u64> = None;
    let no_values = Row::default();
    for (i, p) in files.iter().enumerate() {
        let p = p.as_ref();
        // The current chunk may be empty when the recorder stopped right after a
        // rotation: nothing of it is lost.
        if i == last && i > 0 && std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
            warnings.push(format!(
                "{}: empty (the recording stopped as this chunk began)",
                p.display()
            ));
            continue;
        }
        let seq = p.file_name().and_then(|n| n.to_str()).and_then(chunk_seq);
        // Why chunks a..=b are not here: --keep, or lost (meta.json says which).
        let why = |a: u64, b: u64| {
            let run_dir = p.parent().and_then(Path::parent).unwrap_or(Path::new("."));
            let names: Vec<String> = (a..=b)
                .map(|n| format!("{CHUNK_DIR}/{}", chunk_name(n)))
                .collect();
            super::chunklist::gone_why(run_dir, &names)
        };
        match (prev, seq) {
            (None, Some(n)) if i == 0 && n > 1 => warnings.push(format!(
                "{}: {} {}; the recording starts at this chunk",
                p.display(),
                chunks_text(1, n - 1),
                why(1, n - 1)
            )),
            (Some(a), Some(b)) if b > a + 1 => {
                let h = order.flush(&devices, limit_ns, &mut f);
                warnings.extend(h);
                let from = no_value_rows(&devices, &mut order.last_t, &mut f, &no_values);
                warnings.push(format!(
                    "{}: {} {}; no value from {:.3} s to this chunk",
                    p.display(),
                    chunks_text(a + 1, b - 1),
                    why(a + 1, b - 1),
                    from as f64 / 1e9
                ));
            }
            _ => {}
        }
        if seq.is_some() {
            prev = seq;
        }
        let mut back: Vec<String> = vec![];
        let mut back_n = 0usize;
        let read = for_each_row(p, |r| {
            let k = match devices.iter().position(|d| d.name == r.device) {
                Some(k) => k,
                None => {
                    devices.push(Device {
                        name: r.device.to_string(),
                        major: r.major,
                        minor: r.minor,
                    });
                    // A device that appears later jumps from the run's time so far.
                    let base = order
                        .emitted_t
                        .iter()
                        .copied()
                        .max()
                        .map_or(r.t_ns, |t| t.min(r.t_ns));
                    order.last_t.push(base);
                    order.emitted_t.push(base);
                    order.held.push(None);
                    devices.len() - 1
                }
            };
            let dev = &devices[k];
            order.row(k, &r, p, &mut back, &mut back_n, |t, row| f(k, dev, t, row));
            Flow::Go
        });
        let w = match read {
            Ok((w, _)) => w,
            // One chunk that cannot be read at all (errors come before its first row):
            // a hole, said with the span lost, not the whole recording refused.
            Err(e) => {
                let w = super::csv::skip_chunk(p, e, files.len() > 1)?;
                let h = order.flush(&devices, limit_ns, &mut f);
                warnings.extend(h);
                no_value_rows(&devices, &mut order.last_t, &mut f, &no_values);
                vec![w]
            }
        };
        warnings.extend(w);
        if back_n > back.len() {
            back.push(format!(
                "{}: {back_n} rows before their device's previous row skipped in all",
                p.display()
            ));
        }
        warnings.extend(back);
        warnings.append(&mut order.jumped);
    }
    let h = order.flush(&devices, limit_ns, &mut f);
    warnings.extend(h);
    if devices.is_empty() {
        return Err(anyhow::anyhow!(
            "{} holds no whole row of samples; the recording is damaged or was cut before its first flush",
            files
                .first()
                .map(|p| p.as_ref())
                .unwrap_or(Path::new("diskstats"))
                .display()
        ));
    }
    warnings.shrink_to_fit();
    Ok((devices, warnings))
}

/// The order of a device's rows ([`for_each_row_until`]): the last row taken, the last
/// handed on, a row held back for its jump.
struct Order {
    last_t: Vec<u64>,
    emitted_t: Vec<u64>,
    held: Vec<Option<Held>>,
    jumped: Vec<String>,
}

impl Order {
    /// Row `r` of device `k`: what stands of it (and of a held row before it) goes to
    /// `emit`; a row back in time is counted in `back_n` (the first three named in `back`).
    fn row(
        &mut self,
        k: usize,
        r: &RowRef,
        p: &Path,
        back: &mut Vec<String>,
        back_n: &mut usize,
        mut emit: impl FnMut(u64, &Row),
    ) {
        if r.t_ns < self.last_t[k] {
            // Back below a row held for its jump, not below the rows before it: the
            // held row was the damage.
            match self.held[k].take_if(|_| r.t_ns >= self.emitted_t[k]) {
                Some(h) => {
                    self.jumped.push(format!(
                        "{}: t_ns {} is {:.0} s ahead of the rows around it (damaged, or another run's row); skipped",
                        h.at,
                        h.t,
                        (h.t - r.t_ns) as f64 / 1e9
                    ));
                    self.last_t[k] = self.emitted_t[k];
                }
                None => {
                    *back_n += 1;
                    if back.len() < 3 {
                        back.push(format!(
                            "{}:{}: t_ns {} is before the device's previous row ({}); skipped",
                            p.display(),
                            r.line,
                            r.t_ns,
                            self.last_t[k]
                        ));
                    }
                    return;
                }
            }
        }
        if let Some(h) = self.held[k].take() {
            emit(h.t, &h.row);
            self.emitted_t[k] = h.t;
        }
        self.last_t[k] = r.t_ns;
        if r.t_ns > self.emitted_t[k].saturating_add(JUMP_NS) {
            self.held[k] = Some(Held {
                t: r.t_ns,
                row: *r.f,
                at: format!("{}:{}", p.display(), r.line),
            });
            return;
        }
        emit(r.t_ns, r.f);
        self.emitted_t[k] = r.t_ns;
    }
}

/// A row that jumps further ahead of its device's previous row than rows are ever apart
/// (a row is written at least once a second; a stopped recorder resumes with a jump too)
/// is held until the device's next row says whether it was damage.
const JUMP_NS: u64 = 10_000_000_000;

/// A row held back for its jump ([`JUMP_NS`]).
struct Held {
    t: u64,
    row: Row,
    at: String,
}

impl Order {
    /// Hands the held rows to `f` (a hole or the end comes next: nothing says they were
    /// damage), but a row past the run's end (`limit_ns`), which is skipped and named.
    fn flush(
        &mut self,
        devices: &[Device],
        limit_ns: Option<u64>,
        f: &mut impl FnMut(usize, &Device, u64, &Row),
    ) -> Vec<String> {
        let mut w = vec![];
        for (k, h) in self.held.iter_mut().enumerate() {
            let Some(h) = h.take() else { continue };
            match limit_ns {
                Some(l) if h.t > l => {
                    w.push(format!(
                        "{}: t_ns {} is {:.0} s past the run's end (damaged, or another run's row); skipped",
                        h.at,
                        h.t,
                        (h.t - l) as f64 / 1e9
                    ));
                    self.last_t[k] = self.emitted_t[k];
                }
                _ => {
                    f(k, &devices[k], h.t, &h.row);
                    self.emitted_t[k] = h.t;
                }
            }
        }
        w
    }
}

/// `chunks A to B` (a hole in the chunk numbers).
fn chunks_text(a: u64, b: u64) -> String {
    format!("chunks {a} to {b}")
}

/// Gives each device a row without values 1 ns after its last one, so no interval spans
/// a hole; returns the latest such time.
fn no_value_rows(
    devices: &[Device],
    last_t: &mut [u64],
    f: &mut impl FnMut(usize, &Device, u64, &Row),
    no_values: &Row,
) -> u64 {
    let mut from = 0;
    for (k, d) in devices.iter().enumerate() {
        let t = last_t[k] + 1;
        last_t[k] = t;
        from = from.max(t);
        f(k, d, t, no_values);
    }
    from
}

/// One row of diskstats.csv.gz as [`for_each_row`] hands it over (borrowed: nothing is
/// allocated per row).
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    /// 1-based line number in the file (for warnings).
    pub line: usize,
    pub t_ns: u64,
    pub device: &'a str,
    pub major: u32,
    pub minor: u32,
    pub f: &'a Row,
}

/// Streams the rows of `diskstats.csv.gz` (or a plain `diskstats.csv`) in file order,
/// holding one row at a time: `f` returns [`Flow::Stop`] to stop reading (and
/// decompressing) there. The one function every reader of the raw rows goes through
/// ([`read`], and through [`for_each_run_row_from`] over a run's chunks,
/// `report::zoom_data` and `diskpulse view`). Checks as [`read`]
/// (header, damaged rows skipped with a warning naming file:line, a cut-off end read up
/// to its last whole row); returns the warnings and whether a whole row was read.
pub fn for_each_row(
    p: &Path,
    f: impl FnMut(RowRef<'_>) -> Flow,
) -> anyhow::Result<(Vec<String>, bool)> {
    for_each_row_from(p, 0, f)
}

/// [`for_each_row`] for the rows at or after `from_ns`: earlier rows are skipped after
/// reading their `t_ns` (their counters are not parsed), so a reader of a span late in
/// the file spends its time decompressing, not parsing.
fn for_each_row_from(
    p: &Path,
    from_ns: u64,
    mut f: impl FnMut(RowRef<'_>) -> Flow,
) -> anyhow::Result<(Vec<String>, bool)> {
    let want = header();
    let mut any = false;
    let warnings = for_each_line_until(p, |n, line| {
        if n == 1 {
            if line != want {
                return Err(Bad::File(anyhow::anyhow!(
                    "{} line 1: not the diskstats header (want '{want}'); the file is damaged or not diskpulse's",
                    p.display()
                )));
            }
            return Ok(Flow::Go);
        }
        let mut cells = line.split(',');
        let (Some(t), Some(name), Some(ma), Some(mi)) =
            (cells.next(), cells.next(), cells.next(), cells.next())
        else {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                line.split(',').count(),
                KEY_COLUMNS.len() + MAX_FIELDS
            )));
        };
        if from_ns > 0 {
            // Only a whole number is a row's time; anything else is checked below.
            if let Ok(t) = t.parse::<u64>() {
                if t < from_ns {
                    any = true;
                    return Ok(Flow::Go);
                }
            }
        }
        let mut row = Row::default();
        let mut k = 0;
        for v in cells {
            if k == MAX_FIELDS {
                k += 1;
                break;
            }
            if !v.is_empty() {
                let c = v
                    .parse::<u64>()
                    .map_err(|_| Bad::Line(format!("{} '{v}' is not a counter", FIELD_NAMES[k])))?;
                if c > MAX_COUNTER {
                    return Err(Bad::Line(format!(
                        "{} {c} is past any counter the kernel keeps (2^63: a damaged cell, or a -1)",
                        FIELD_NAMES[k]
                    )));
                }
                row.set(k, Some(c));
            }
            k += 1;
        }
        if k != MAX_FIELDS {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                line.split(',').count(),
                KEY_COLUMNS.len() + MAX_FIELDS
            )));
        }
        let t = t_ns_cell(t).map_err(Bad::Line)?;
        let (Ok(major), Ok(minor)) = (ma.parse::<u32>(), mi.parse::<u32>()) else {
            return Err(Bad::Line(format!(
                "major:minor '{ma}:{mi}' are not numbers"
            )));
        };
        any = true;
        Ok(f(RowRef {
            line: n,
            t_ns: t,
            device: name,
            major,
            minor,
            f: &row,
        }))
    })?;
    Ok((warnings, any))
}

/// [`for_each_row_from`] over a run's files ([`files`]: the closed chunks, then the current
/// one) as one stream: a chunk that ends before `from_ns` (the next one starts at or before
/// it) is not opened past its first row, and [`Flow::Stop`] ends the whole stream. An empty
/// last chunk (the recorder stopped as it began) is passed over. No file: an error.
pub fn for_each_run_row_from(
    run_dir: &Path,
    from_ns: u64,
    mut f: impl FnMut(RowRef<'_>) -> Flow,
) -> anyhow::Result<(Vec<String>, bool)> {
    let files = files(run_dir);
    if files.is_empty() {
        anyhow::bail!(
            "{} has no {FILE} (nor {CHUNK_DIR}/{})",
            run_dir.display(),
            chunk_name(1)
        );
    }
    let first_t = |p: &Path| {
        let mut t = None;
        let _ = for_each_row(p, |r| {
            t = Some(r.t_ns);
            Flow::Stop
        });
        t
    };
    let starts: Vec<Option<u64>> = if from_ns > 0 && files.len() > 1 {
        files.iter().map(|p| first_t(p)).collect()
    } else {
        vec![]
    };
    let (mut warnings, mut any) = (vec![], false);
    let last = files.len() - 1;
    for (i, p) in files.iter().enumerate() {
        if i == last && i > 0 && std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
            continue;
        }
        if starts
            .get(i + 1)
            .copied()
            .flatten()
            .is_some_and(|next| next <= from_ns)
        {
            continue;
        }
        let mut stopped = false;
        let (w, a) = for_each_row_from(p, from_ns, |r| {
            let flow = f(r);
            stopped = matches!(flow, Flow::Stop);
            flow
        })?;
        warnings.extend(w);
        any |= a;
        if stopped {
            break;
        }
    }
    Ok((warnings, any))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_holds_missing_fields_in_8_bytes_a_field() {
        assert_eq!(std::mem::size_of::<Row>(), 8 * MAX_FIELDS);
        let mut f = [None; MAX_FIELDS];
        f[0] = Some(0);
        f[6] = Some(u64::MAX - 1);
        let r = Row::from_options(f);
        assert_eq!(r.get(0), Some(0));
        assert_eq!(r.get(6), Some(u64::MAX - 1));
        assert_eq!(r.get(1), None);
        assert_eq!(r.get(MAX_FIELDS), None);
        let mut r = Row::default();
        assert!((0..MAX_FIELDS).all(|i| r.get(i).is_none()));
        r.set(3, Some(42));
        r.set(4, None);
        assert_eq!((r.get(3), r.get(4)), (Some(42), None));
    }

    #[test]
    fn empty_cells_read_back_as_missing() {
        let p = std::env::temp_dir().join(format!("streaming-ds-{}.csv", std::process::id()));
        let row = |t: &str, dev: &str| {
            let mut c = vec![t, dev, "7", "0"];
            c.extend(std::iter::repeat_n("", MAX_FIELDS));
            c[KEY_COLUMNS.len()] = "7";
            c[KEY_COLUMNS.len() + 6] = "1000";
            c.join(",")
        };
        let text = format!(
            "{}\n{}\n{}\n",
            header(),
            row("5", "loop0"),
            row("9", "loop0")
        );
        std::fs::write(&p, text).unwrap();
        let (d, w) = read(&p).unwrap();
        std::fs::remove_file(&p).ok();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].t_ns, vec![5, 9]);
        assert_eq!(d[0].f[1].get(0), Some(7));
        assert_eq!(d[0].f[1].get(6), Some(1000));
        assert_eq!(d[0].f[1].get(1), None);
    }
}
