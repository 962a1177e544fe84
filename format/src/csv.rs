//! What every CSV of the run directory shares: a header line of column names, one row a
//! line, `,` between cells, a cell holding `,`, `"` or a newline in double quotes (with
//! `""` for `"`), an empty cell for "no value". Readers stop quietly at a cut-off last
//! line (a crash, `kill -9`), saying so in a warning, skip a damaged line with a warning
//! naming file:line, refuse a file that is empty, not gzip or lacks a column they need
//! (an error naming the file), and read gzip files (`.gz`, a series of members) through
//! flate2's `MultiGzDecoder`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// A cell as CSV: quoted when it holds `,`, `"` or a line break.
pub fn quote(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// One CSV line of cells, quoted as needed, with its newline.
pub fn line<S: AsRef<str>>(cells: &[S]) -> String {
    let mut out = String::new();
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&quote(c.as_ref()));
    }
    out.push('\n');
    out
}

/// Splits one CSV line; a cell in double quotes may hold commas and `""`.
pub fn split(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `names` joined as a header line (without newline).
pub fn header(names: &[&str]) -> String {
    names.join(",")
}

fn open_maybe_gz(p: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let f = super::regular::open(p)?;
    let r: Box<dyn Read> = if p.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, r)))
}

/// What a reader's callback says about one line.
pub enum Bad {
    /// The line is damaged: skip it, with this reason in a warning naming file:line.
    Line(String),
    /// The file is not what it should be (a wrong header): stop with this error.
    File(anyhow::Error),
}

/// The warnings of one file's reading: a damaged line (`FILE:LINE: why; skipped`, the
/// first few and a count) and a cut-off end (`FILE: cut short after line N`).
#[derive(Debug, Default)]
struct LineWarnings {
    first: Vec<String>,
    skipped: usize,
    /// Skipped lines by cause ([`cause_of`]), for the count per cause.
    causes: BTreeMap<String, usize>,
}

/// A reason with its values taken out (`ops '-5' is not a count` -> `ops '…' is not a
/// count`, numbers as `N`), so lines skipped for the same cause count together.
fn cause_of(why: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut digits = false;
    for c in why.chars() {
        if c == '\'' {
            quoted = !quoted;
            out.push_str(if quoted { "'…" } else { "'" });
            continue;
        }
        if quoted {
            continue;
        }
        if c.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
            continue;
        }
        digits = false;
        out.push(c);
    }
    out
}

/// How many damaged lines a warning lists by line number before it only counts.
const LISTED_BAD_LINES: usize = 3;

/// The name of closed chunk `seq` (1-based) of a file `record --chunk` cuts, in the run
/// directory's `chunks/`: the number goes after the name's first part
/// (`meminfo.csv` -> `meminfo.000001.csv`, `diskstats.csv.gz` -> `diskstats.000001.csv.gz`).
pub fn chunk_name_of(file: &str, seq: u64) -> String {
    match file.split_once('.') {
        Some((stem, ext)) => format!("{stem}.{seq:06}.{ext}"),
        None => format!("{file}.{seq:06}"),
    }
}

/// The number of `name` if it is a closed chunk of `file` ([`chunk_name_of`]).
fn chunk_seq_of(file: &str, name: &str) -> Option<u64> {
    let (stem, ext) = file.split_once('.').unwrap_or((file, ""));
    let n = name.strip_prefix(stem)?.strip_prefix('.')?;
    let n = if ext.is_empty() {
        n
    } else {
        n.strip_suffix(ext)?.strip_suffix('.')?
    };
    (n.len() >= 6 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// A run's `file` in time order: its closed chunks in `chunks/` by number (`record
/// --chunk`; a number missing is one `--keep` deleted), then `file` itself (the current,
/// at the end the last, chunk; a run that was not chunked has only this). Empty when the
/// run has neither.
pub fn chunked_files(run_dir: &Path, file: &str) -> Vec<std::path::PathBuf> {
    let mut closed: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(run_dir.join("chunks"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            chunk_seq_of(file, name.to_str()?).map(|n| (n, e.path()))
        })
        .collect();
    closed.sort();
    let foreign = super::chunklist::foreign_chunks(run_dir);
    let mut out: Vec<_> = closed
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| !foreign.contains(p))
        .collect();
    let last = run_dir.join(file);
    if last.exists() {
        out.push(last);
    }
    out
}

/// What a reader of a file cut into chunks does with one that cannot be read at all
/// (not gzip, another header, empty, not a file): with other chunks beside it
/// (`several`), it is skipped with this warning, naming the file, why, and the span of
/// rows lost (meta.json `chunks.closed`), so one damaged hour does not refuse a
/// recording of days; alone, the error stands.
pub fn skip_chunk(p: &Path, e: anyhow::Error, several: bool) -> anyhow::Result<String> {
    if !several {
        return Err(e);
    }
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_chunks = p.parent().and_then(|d| d.file_name()) == Some(std::ffi::OsStr::new("chunks"));
    let (run_dir, rel) = if in_chunks {
        let d = p.parent().and_then(Path::parent).unwrap_or(Path::new("."));
        (d, format!("chunks/{name}"))
    } else {
        (p.parent().unwrap_or(Path::new(".")), name.to_string())
    };
    let lost = match super::chunklist::chunk_span(run_dir, &rel) {
        Some((a, b)) => format!(
            "its rows from {:.3} s to {:.3} s are lost",
            a as f64 / 1e9,
            b as f64 / 1e9
        ),
        None => "its rows are lost".to_string(),
    };
    Ok(format!(
        "{e:#}; this chunk is skipped ({lost}), the rest of the recording is read"
    ))
}

/// [`read_rows`] over a run's `file` and its closed chunks ([`chunked_files`]) as one
/// file; `None` when the run has none of them.
pub(crate) fn read_rows_chunked(
    run_dir: &Path,
    file: &str,
    needed: &[&str],
    mut f: impl FnMut(&Cells) -> Result<(), String>,
) -> anyhow::Result<Option<Vec<String>>> {
    let files = chunked_files(run_dir, file);
    if files.is_empty() {
        return Ok(None);
    }
    let mut warnings = vec![];
    let several = files.len() > 1;
    for p in files {
        match read_rows(&p, needed, &mut f) {
            Ok(w) => warnings.extend(w.unwrap_or_default()),
            Err(e) => warnings.push(skip_chunk(&p, e, several)?),
        }
    }
    Ok(Some(warnings))
}

/// [`read_table`] over a run's `file` and its closed chunks ([`chunked_files`]) as one
/// table; `None` when the run has none of them. Chunks whose header differs from the
/// first one's are refused, naming both.
pub fn read_table_chunked(
    run_dir: &Path,
    file: &str,
    needed: &[&str],
) -> anyhow::Result<Option<(Table, Vec<String>)>> {
    let files = chunked_files(run_dir, file);
    let mut out: Option<(Table, Vec<String>)> = None;
    let mut skipped = vec![];
    for p in &files {
        let (t, w) = match read_table(p, needed) {
            Ok(tw) => tw,
            Err(e) => {
                skipped.push(skip_chunk(p, e, files.len() > 1)?);
                continue;
            }
        };
        match out.as_mut() {
            None => out = Some((t, w)),
            Some((all, warnings)) => {
                all.append(t, p, &files[0])?;
                warnings.extend(w);
            }
        }
    }
    match out.as_mut() {
        Some((_, w)) => w.extend(skipped),
        None if !skipped.is_empty() => anyhow::bail!("{}", skipped.join("; ")),
        None => {}
    }
    Ok(out)
}

/// Calls `f` with each whole line (its 1-based number, the text without its line
/// break). A damaged line (not UTF-8, or `f` says [`Bad::Line`]) is skipped; a torn last
/// line or a gzip stream cut short ends the reading: both become warnings in the result,
/// each naming the file and line. Errors name the file: it cannot be opened, is empty,
/// is not gzip (a `.gz` whose first bytes do not decode), or `f` said [`Bad::File`].
pub fn for_each_line(
    p: &Path,
    mut f: impl FnMut(usize, &str) -> Result<(), Bad>,
) -> anyhow::Result<Vec<String>> {
    for_each_line_until(p, |n, line| f(n, line).map(|()| Flow::Go))
}

/// Whether a reader wants more lines: [`for_each_line_until`] stops reading (and
/// decompressing) at [`Flow::Stop`], so a reader of a time span stops past its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Go,
    Stop,
}

/// [`for_each_line`] whose callback may end the reading early with [`Flow::Stop`] (no
/// warning: what was not read was not wanted).
pub(crate) fn for_each_line_until(
    p: &Path,
    mut f: impl FnMut(usize, &str) -> Result<Flow, Bad>,
) -> anyhow::Result<Vec<String>> {
    let name = p.display();
    super::regular::check(p).map_err(anyhow::Error::msg)?;
    if std::fs::metadata(p).is_ok_and(|m| m.len() == 0) {
        return Err(anyhow::anyhow!(
            "{name} is empty (not even a header line); the recording is damaged, record it again"
        ));
    }
    let mut r = open_maybe_gz(p).map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"))?;
    let mut buf = Vec::new();
    let mut bad = LineWarnings::default();
    let mut tail: Option<String> = None;
    let mut n = 0usize;
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {
                if buf.last() != Some(&b'\n') {
                    tail = Some(format!(
                        "{name}: line {} is cut off (the recording was cut short?); read up to line {n}",
                        n + 1
                    ));
                    break;
                }
                n += 1;
                let why = match std::str::from_utf8(&buf) {
                    Ok(line) => match f(n, line.trim_end_matches(['\n', '\r'])) {
                        Ok(Flow::Go) => continue,
                        Ok(Flow::Stop) => break,
                        Err(Bad::File(e)) => return Err(e),
                        Err(Bad::Line(why)) => why,
                    },
                    Err(_) => "not text (UTF-8)".to_string(),
                };
                if n == 1 {
                    return Err(anyhow::anyhow!(
                        "{name} line 1 is not its header ({why}); this file is not part of a diskpulse recording"
                    ));
                }
                bad.skipped += 1;
                *bad.causes.entry(cause_of(&why)).or_default() += 1;
                if bad.first.len() < LISTED_BAD_LINES {
                    bad.first.push(format!("{name}:{n}: {why}; skipped"));
                }
            }
            Err(e) if n == 0 => {
                return Err(anyhow::anyhow!(
                    "{name} does not decode ({e}): it is not a gzip stream written by diskpulse"
                ));
            }
            Err(e) => {
                // A gzip stream cut off by a crash: keep what was read.
                tail = Some(format!(
                    "{name}: the data after line {n} does not decode ({e}; the recording was cut short?); read up to line {n}"
                ));
                break;
            }
        }
    }
    if n == 0 && tail.is_none() {
        return Err(anyhow::anyhow!(
            "{name} is empty (not even a header line); the recording is damaged, record it again"
        ));
    }
    let mut warnings = bad.first;
    if bad.skipped > LISTED_BAD_LINES {
        let per: Vec<String> = bad
            .causes
            .iter()
            .map(|(c, n)| format!("{n} × {c}"))
            .collect();
        warnings.push(format!(
            "{name}: {} damaged lines skipped in all ({})",
            bad.skipped,
            per.join("; ")
        ));
    }
    warnings.extend(tail);
    Ok(warnings)
}

/// Checks a header line against the columns a reader needs: [`Bad::File`] naming the
/// first missing column.
pub fn need_columns(p: &Path, header: &[String], needed: &[&str]) -> Result<(), Bad> {
    match needed.iter().find(|c| !header.iter().any(|h| h == *c)) {
        None => Ok(()),
        Some(c) => Err(Bad::File(anyhow::anyhow!(
            "{} line 1: the header has no column '{c}' (it needs {}); the file is damaged or not diskpulse's",
            p.display(),
            needed.join(",")
        ))),
    }
}

/// A CSV row by its header: cells looked up by column name.
pub struct Cells<'a> {
    pub columns: &'a [String],
    pub cells: Vec<String>,
}

impl Cells<'_> {
    pub fn str(&self, name: &str) -> &str {
        self.columns
            .iter()
            .position(|c| c == name)
            .and_then(|i| self.cells.get(i))
            .map(String::as_str)
            .unwrap_or("")
    }
    /// A number; `None` for an empty cell, a missing column or text.
    pub fn f64(&self, name: &str) -> Option<f64> {
        self.str(name).parse().ok()
    }
    pub fn u64(&self, name: &str) -> Option<u64> {
        self.str(name).parse().ok()
    }
}

/// The largest `t_ns` a reader accepts: 400 days after the run's zero, so a recorder
/// left running for days (`record --chunk 1h --keep 6h`, issue 13) reads back, while an
/// absurd value (a damaged cell, `999999999999999999`: 31 years) is still refused naming
/// file:line rather than believed. (It was 24 h until recordings could run for days.)
pub const MAX_T_NS: u64 = MAX_DAYS * 24 * 3600 * 1_000_000_000;

/// [`MAX_T_NS`] in days.
pub const MAX_DAYS: u64 = 400;

/// `t_ns` as a number within [`MAX_T_NS`]; otherwise why not (for [`Bad::Line`]).
pub fn t_ns_cell(cell: &str) -> Result<u64, String> {
    match cell.parse::<u64>() {
        Ok(t) if t <= MAX_T_NS => Ok(t),
        Ok(t) => Err(format!(
            "t_ns {t} is {:.0} days after the run's zero, past the {MAX_DAYS} days a report reads",
            t as f64 / 8.64e13,
        )),
        Err(_) => Err(format!("t_ns '{cell}' is not a number of ns")),
    }
}

/// Reads a CSV by its header, which must hold the columns `needed`, and hands each whole
/// row to `f` (which may reject it: a warning naming file:line). `Ok(None)` when the
/// file does not exist; otherwise the warnings (see [`for_each_line`]).
pub(crate) fn read_rows(
    p: &Path,
    needed: &[&str],
    mut f: impl FnMut(&Cells) -> Result<(), String>,
) -> anyhow::Result<Option<Vec<String>>> {
    if !p.exists() {
        return Ok(None);
    }
    let mut columns: Option<Vec<String>> = None;
    let warnings = for_each_line(p, |_, l| match &columns {
        None => {
            let cols = split(l);
            need_columns(p, &cols, needed)?;
            columns = Some(cols);
            Ok(())
        }
        Some(cols) => {
            let cells = split(l);
            if cells.len() != cols.len() {
                return Err(Bad::Line(format!(
                    "{} cells, the header has {}",
                    cells.len(),
                    cols.len()
                )));
            }
            f(&Cells {
                columns: cols,
                cells,
            })
            .map_err(Bad::Line)
        }
    })?;
    Ok(Some(warnings))
}

/// A CSV with `t_ns` first and numeric columns (NaN where a cell is empty).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub t_ns: Vec<u64>,
    pub cols: Vec<Vec<f64>>,
}

impl Table {
    /// Appends the rows of `t`, read from `p`, a later chunk of the file whose first chunk
    /// is `first`: refused, naming both, when its columns differ.
    pub fn append(&mut self, t: Table, p: &Path, first: &Path) -> anyhow::Result<()> {
        if self.columns != t.columns {
            anyhow::bail!(
                "{}: its columns differ from {}'s; the recording is damaged",
                p.display(),
                first.display()
            );
        }
        self.t_ns.extend(t.t_ns);
        for (a, c) in self.cols.iter_mut().zip(t.cols) {
            a.extend(c);
        }
        Ok(())
    }

    pub fn col(&self, name: &str) -> Option<&[f64]> {
        self.columns
            .iter()
            .position(|c| c == name)
            .map(|i| self.cols[i].as_slice())
    }
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
}

/// Reads a `t_ns,...` CSV of numbers whose header holds `needed`; rows with a bad
/// `t_ns` or another number of cells are skipped (warnings, see [`for_each_line`]).
pub(crate) fn read_table(p: &Path, needed: &[&str]) -> anyhow::Result<(Table, Vec<String>)> {
    let mut t = Table::default();
    let warnings = for_each_line(p, |n, line| {
        if n == 1 {
            let cols: Vec<String> = line.split(',').map(|s| s.to_string()).collect();
            need_columns(p, &cols, needed)?;
            t.columns = cols[1..].to_vec();
            t.cols = vec![vec![]; t.columns.len()];
            return Ok(());
        }
        let mut it = line.split(',');
        let ts = t_ns_cell(it.next().unwrap_or("")).map_err(Bad::Line)?;
        let vals: Vec<&str> = it.collect();
        if vals.len() != t.columns.len() {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                vals.len() + 1,
                t.columns.len() + 1
            )));
        }
        t.t_ns.push(ts);
        for (i, v) in vals.iter().enumerate() {
            t.cols[i].push(v.parse::<f64>().unwrap_or(f64::NAN));
        }
        Ok(())
    })?;
    Ok((t, warnings))
}

/// Reads a `t_ns,...` CSV with one text column `key` (`monitor.csv`'s `server`), split
/// into one numeric [`Table`] per key value; damaged rows are skipped.
pub(crate) fn read_table_by(p: &Path, key: &str) -> anyhow::Result<BTreeMap<String, Table>> {
    let mut out: BTreeMap<String, Table> = BTreeMap::new();
    let mut cols: Vec<String> = vec![];
    let mut key_i = usize::MAX;
    for_each_line(p, |n, line| {
        let f: Vec<&str> = line.split(',').collect();
        if n == 1 {
            key_i = f.iter().position(|c| *c == key).unwrap_or(usize::MAX);
            cols = f.iter().map(|s| s.to_string()).collect();
            return need_columns(p, &cols, &["t_ns", key]);
        }
        if f.len() != cols.len() {
            return Err(Bad::Line(format!(
                "{} cells, the header has {}",
                f.len(),
                cols.len()
            )));
        }
        let t = t_ns_cell(f[0]).map_err(Bad::Line)?;
        let tab = out.entry(f[key_i].to_string()).or_insert_with(|| Table {
            columns: cols[1..]
                .iter()
                .enumerate()
                .filter(|(i, _)| i + 1 != key_i)
                .map(|(_, c)| c.clone())
                .collect(),
            t_ns: vec![],
            cols: vec![vec![]; cols.len() - 2],
        });
        tab.t_ns.push(t);
        let mut j = 0;
        for (i, v) in f.iter().enumerate().skip(1) {
            if i == key_i {
                continue;
            }
            tab.cols[j].push(v.parse::<f64>().unwrap_or(f64::NAN));
            j += 1;
        }
        Ok(())
    })?;
    Ok(out)
}

/// Appends a cell as CSV (quoted when it holds `,`, `"` or a line break, as [`quote`])
/// to a row being built, without allocating: the writers of the trace's hot path.
pub(crate) fn push_cell(buf: &mut Vec<u8>, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        buf.push(b'"');
        for b in s.bytes() {
            if b == b'"' {
                buf.push(b'"');
            }
            buf.push(b);
        }
        buf.push(b'"');
    } else {
        buf.extend_from_slice(s.as_bytes());
    }
}

/// Appends `v` in decimal without allocating: `itoa` (two digits a step from a table,
/// ~3x the speed of a division per digit: the trace writes seven numbers a request).
pub(crate) fn push_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends `v` in decimal without allocating.
pub(crate) fn push_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends `v` in decimal.
#[inline]
pub fn put_u64(buf: &mut Vec<u8>, v: u64) {
    let mut b = itoa::Buffer::new();
    buf.extend_from_slice(b.format(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_cells_and_numbers_read_as_the_allocating_ones() {
        let mut b = vec![];
        for v in [0u64, 7, 10, 4096, u64::MAX] {
            b.clear();
            push_u64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        for v in [0i64, -5, 42, i64::MIN, i64::MAX] {
            b.clear();
            push_i64(&mut b, v);
            assert_eq!(b, v.to_string().as_bytes());
        }
        for s in ["kworker/0:1H", "a,b", "say \"hi\"", ""] {
            b.clear();
            push_cell(&mut b, s);
            assert_eq!(b, quote(s).as_bytes());
        }
    }

    #[test]
    fn quoted_cells_keep_their_commas_and_quotes() {
        assert_eq!(
            split(r#"1,2,a,"cut short, by ""Ctrl-C""",x"#),
            vec!["1", "2", "a", r#"cut short, by "Ctrl-C""#, "x"]
        );
        assert_eq!(split(""), vec![""]);
        let l = line(&["a,b", "say \"hi\"", "plain"]);
        assert_eq!(l, "\"a,b\",\"say \"\"hi\"\"\",plain\n");
        assert_eq!(split(l.trim_end()), vec!["a,b", "say \"hi\"", "plain"]);
    }
}
