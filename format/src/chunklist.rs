//! Which closed chunks of a run are its own, and why one is gone: meta.json's `chunks`
//! lists (and its `manifest`, see `manifest.rs`) read for the readers of chunked files
//! (`csv::chunked_files`, `diskstats::files`), which leave a chunk of another run out and
//! say whether a hole is `--keep`'s or a loss. Over meta.json only, so every reader can
//! use it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::meta::{ChunkFile, Meta};

/// The directory of the closed chunks (`diskstats::CHUNK_DIR`, spelled here too: this
/// module sits below diskstats).
const CHUNK_DIR: &str = "chunks";

/// Every chunk meta.json's `chunks` lists as closed (the current file's last entry
/// too), and the ones retention dropped, by path in the run directory.
pub(crate) fn listed_chunks(meta: &Meta) -> (BTreeMap<String, ChunkFile>, BTreeSet<String>) {
    let mut closed = BTreeMap::new();
    let mut dropped = BTreeSet::new();
    if let Some(c) = &meta.chunks {
        let lists = std::iter::once((&c.closed, &c.dropped))
            .chain(c.files.values().map(|f| (&f.closed, &f.dropped)));
        for (cl, dr) in lists {
            for f in cl {
                closed.insert(f.file.clone(), f.clone());
            }
            dropped.extend(dr.iter().map(|f| f.file.clone()));
        }
    }
    (closed, dropped)
}

/// The number of a closed chunk's name (`load.000003.csv` -> `(load, 3, csv)`).
fn chunk_parts(name: &str) -> Option<(&str, u64, &str)> {
    let (stem, rest) = name.split_once('.')?;
    let (num, ext) = rest.split_once('.').unwrap_or((rest, ""));
    (num.len() >= 6 && num.bytes().all(|b| b.is_ascii_digit()))
        .then(|| Some((stem, num.parse().ok()?, ext)))
        .flatten()
}

/// The chunk files in `chunks/` that are not of this run: not in the manifest, or (a
/// run without one) not in meta.json's `chunks` lists, save the one that closed just
/// before a crash (the number after the last listed of its file). Readers leave them
/// out; [`check`] says so. Empty when meta.json cannot be read or lists no chunks.
pub fn foreign_chunks(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(meta) = Meta::read(dir) else {
        return BTreeSet::new();
    };
    foreign_of(dir, &meta)
}

pub(crate) fn foreign_of(dir: &Path, meta: &Meta) -> BTreeSet<PathBuf> {
    let (closed, dropped) = listed_chunks(meta);
    let mut last: BTreeMap<(String, String), u64> = BTreeMap::new();
    for f in closed.keys() {
        let name = f.strip_prefix("chunks/").unwrap_or(f);
        if let Some((stem, n, ext)) = chunk_parts(name) {
            let e = last.entry((stem.into(), ext.into())).or_default();
            *e = (*e).max(n);
        }
    }
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir.join(CHUNK_DIR))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let rel = format!("{CHUNK_DIR}/{name}");
        let ours = match &meta.manifest {
            Some(m) => m.contains_key(&rel),
            None if meta.chunks.is_none() => true,
            None => {
                closed.contains_key(&rel)
                    || dropped.contains(&rel)
                    || chunk_parts(&name).is_some_and(|(stem, n, ext)| {
                        last.get(&(stem.into(), ext.into()))
                            .is_some_and(|&l| n == l + 1)
                    })
            }
        };
        if !ours {
            out.insert(e.path());
        }
    }
    out
}

/// Why the closed chunks `names` (paths in the run directory) are not there: deleted by
/// `--keep`, or missing though meta.json lists them as kept.
pub fn gone_why(dir: &Path, names: &[String]) -> &'static str {
    let Ok(meta) = Meta::read(dir) else {
        return "are missing (meta.json does not say why)";
    };
    let (closed, dropped) = listed_chunks(&meta);
    if names.iter().all(|n| dropped.contains(n)) {
        "were deleted by --keep (meta.json chunks.dropped)"
    } else if names.iter().any(|n| closed.contains_key(n)) {
        "are missing: meta.json lists them as closed and --keep did not delete them (removed by hand, or lost?)"
    } else {
        "are missing (meta.json does not list them)"
    }
}

/// The span of rows a closed chunk held (`first_t_ns`, `last_t_ns`), as meta.json's
/// `chunks` lists it.
pub fn chunk_span(dir: &Path, rel: &str) -> Option<(u64, u64)> {
    let meta = Meta::read(dir).ok()?;
    listed_chunks(&meta)
        .0
        .get(rel)
        .map(|c| (c.first_t_ns, c.last_t_ns))
}
