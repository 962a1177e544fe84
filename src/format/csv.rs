//! What every CSV of the run directory shares: a header line of column names, one row a
//! line, `,` between cells, a cell holding `,`, `"` or a newline in double quotes (with
//! `""` for `"`), an empty cell for "no value". Readers stop quietly at a cut-off last
//! line (a crash, `kill -9`) and read gzip files (`.gz`, a series of members) through
//! flate2's `MultiGzDecoder`.

use std::collections::BTreeMap;
use std::fs::File;
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
    let f = File::open(p)?;
    let r: Box<dyn Read> = if p.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, r)))
}

/// Calls `f` with each whole line (without its line break); stops quietly at a
/// truncated end.
pub fn for_each_line(p: &Path, mut f: impl FnMut(&str)) -> std::io::Result<()> {
    let mut r = open_maybe_gz(p)?;
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                if !line.ends_with('\n') {
                    break; // a cut-off last row
                }
                f(line.trim_end_matches(['\n', '\r']));
            }
            Err(_) => break, // truncated gzip stream: keep what was read
        }
    }
    Ok(())
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

/// Reads a CSV by its header and hands each whole row that has as many cells as the
/// header to `f`; `Ok(false)` when the file does not exist.
pub fn read_rows(p: &Path, mut f: impl FnMut(&Cells)) -> anyhow::Result<bool> {
    if !p.exists() {
        return Ok(false);
    }
    let mut columns: Option<Vec<String>> = None;
    for_each_line(p, |l| match &columns {
        None => columns = Some(split(l)),
        Some(cols) => {
            let cells = split(l);
            if cells.len() == cols.len() {
                f(&Cells {
                    columns: cols,
                    cells,
                });
            }
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(true)
}

/// A CSV with `t_ns` first and numeric columns (NaN where a cell is empty).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub t_ns: Vec<u64>,
    pub cols: Vec<Vec<f64>>,
}

impl Table {
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

/// Reads a `t_ns,...` CSV of numbers.
pub fn read_table(p: &Path) -> anyhow::Result<Table> {
    let mut t = Table::default();
    let mut first = true;
    for_each_line(p, |line| {
        if first {
            first = false;
            let cols: Vec<String> = line.split(',').map(|s| s.to_string()).collect();
            t.columns = cols[1..].to_vec();
            t.cols = vec![vec![]; t.columns.len()];
            return;
        }
        let mut it = line.split(',');
        let Some(ts) = it.next().and_then(|s| s.parse::<u64>().ok()) else {
            return;
        };
        let vals: Vec<&str> = it.collect();
        if vals.len() != t.columns.len() {
            return;
        }
        t.t_ns.push(ts);
        for (i, v) in vals.iter().enumerate() {
            t.cols[i].push(v.parse::<f64>().unwrap_or(f64::NAN));
        }
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(t)
}

/// Reads a `t_ns,...` CSV with one text column `key` (load.csv's `role`, probe.csv's
/// `direction`), split into one numeric [`Table`] per key value.
pub fn read_table_by(p: &Path, key: &str) -> anyhow::Result<BTreeMap<String, Table>> {
    let mut out: BTreeMap<String, Table> = BTreeMap::new();
    let mut cols: Vec<String> = vec![];
    let mut key_i = usize::MAX;
    let mut first = true;
    for_each_line(p, |line| {
        let f: Vec<&str> = line.split(',').collect();
        if first {
            first = false;
            key_i = f.iter().position(|c| *c == key).unwrap_or(usize::MAX);
            cols = f.iter().map(|s| s.to_string()).collect();
            return;
        }
        if f.len() != cols.len() || key_i >= f.len() {
            return;
        }
        let Ok(t) = f[0].parse::<u64>() else { return };
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
    })
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
