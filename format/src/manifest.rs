//! meta.json `manifest`: which files a recording wrote, with their sizes, so a reader can
//! tell a file of this run from one cut, replaced or copied in from another (issue 25,
//! class 7; decision 0086).
//!
//! Written once, when the recording ends (`recording::session`'s finish, after every
//! writer closed its file and retention ran): `{"FILE": {"bytes": N}, ...}` for each
//! file of the run a reader reads ([`INPUTS`], and every closed chunk in `chunks/`), by
//! its path in the run directory. [`check`] compares the directory with it and says, per
//! file, what is wrong: missing (with the span of rows lost when it is a chunk), another
//! size (cut short, or replaced: copied from another run), or not listed (a chunk of
//! another run is left out of the reading; another file is read as it is, with the
//! warning). What a report writes later (summary.json, rates.csv, report.html, ...) is
//! not in it.
//!
//! A recording cut short (kill -9, a crash) and one made before the manifest have none:
//! then the closed chunks are checked against `chunks.closed` (rewritten as each closes,
//! with their sizes) and one line says the rest could not be checked.

use std::collections::BTreeMap;
use std::path::Path;

use super::chunklist::{foreign_of, listed_chunks};
use super::diskstats::CHUNK_DIR;
use super::meta::{ChunkFile, Manifest, ManifestFile, Meta};

/// The files at the top of a run directory that readers read (a closed chunk of each is
/// in `chunks/`).
pub const INPUTS: [&str; 22] = [
    super::diskstats::FILE,
    "diskstats.csv",
    super::procfs::MEMINFO_FILE,
    super::procfs::CPU_FILE,
    super::proc_io::FILE,
    super::load::FILE,
    super::hist::LOAD_FILE,
    super::hist::PROBE_FILE,
    super::probe::FILE,
    super::fsync::FILE,
    super::fsync_calls::FILE,
    super::block_requests::FILE,
    super::monitor::VARZ_FILE,
    super::monitor::JSZ_FILE,
    super::monitor::RABBITMQ_FILE,
    super::envelopes::FILE,
    super::agents::DISKSTATS_FILE,
    super::agents::MEMINFO_FILE,
    super::agents::CPU_FILE,
    super::agents::VARZ_FILE,
    super::agents::JSZ_FILE,
    super::agents::PROC_IO_FILE,
];

/// The regular files of `dir` the manifest lists: [`INPUTS`] present and every file of
/// `chunks/`, each with its size now.
pub fn of(dir: &Path) -> Manifest {
    let mut out = Manifest::new();
    let mut add = |rel: String, p: &Path| {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if m.is_file() {
                out.insert(rel, ManifestFile { bytes: m.len() });
            }
        }
    };
    for name in INPUTS {
        add(name.to_string(), &dir.join(name));
    }
    for e in std::fs::read_dir(dir.join(CHUNK_DIR))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Some(n) = e.file_name().to_str() {
            add(format!("{CHUNK_DIR}/{n}"), &e.path());
        }
    }
    out
}

fn span_text(c: Option<&ChunkFile>) -> String {
    c.map(|c| {
        format!(
            " (its rows {:.3} s to {:.3} s are lost)",
            c.first_t_ns as f64 / 1e9,
            c.last_t_ns as f64 / 1e9
        )
    })
    .unwrap_or_default()
}

/// What is wrong with the files of run `dir` against its meta.json: one warning per
/// file, naming it and the cause (see the module doc). Empty when all is well.
pub fn check(dir: &Path, meta: &Meta) -> Vec<String> {
    let (closed, dropped) = listed_chunks(meta);
    let meta_file = dir.join(super::meta::FILE);
    let mut out = vec![];
    let mut expect: BTreeMap<String, u64> = BTreeMap::new();
    match &meta.manifest {
        Some(m) => expect.extend(m.iter().map(|(k, f)| (k.clone(), f.bytes))),
        None => {
            expect.extend(
                closed
                    .iter()
                    .filter(|(k, _)| !dropped.contains(*k))
                    .map(|(k, c)| (k.clone(), c.bytes)),
            );
            out.push(format!(
                "{}: no manifest (a recording cut short, or made before diskpulse listed its files): whether each file belongs to this run could not be checked{}",
                meta_file.display(),
                if closed.is_empty() { "" } else { " (its closed chunks were, against chunks.closed)" }
            ));
        }
    }
    for (rel, bytes) in &expect {
        let p = dir.join(rel);
        match std::fs::symlink_metadata(&p) {
            Err(_) => out.push(format!(
                "{}: missing; meta.json lists it ({bytes} bytes){}; the report covers the rest",
                p.display(),
                span_text(closed.get(rel))
            )),
            Ok(m) if !m.is_file() => {} // said by its reader, naming what it is
            Ok(m) if m.len() != *bytes => out.push(format!(
                "{}: {} bytes, but the recording left {bytes} (meta.json): it was cut short or replaced since (copied from another run?); read as it is",
                p.display(),
                m.len()
            )),
            Ok(_) => {}
        }
    }
    for p in foreign_of(dir, meta) {
        out.push(format!(
            "{}: not a chunk of this recording (meta.json does not list it: from another run?); left out",
            p.display()
        ));
    }
    if let Some(m) = &meta.manifest {
        for name in INPUTS.iter().filter(|n| !m.contains_key(**n)) {
            let p = dir.join(name);
            if p.exists() {
                out.push(format!(
                    "{}: not in meta.json's manifest (added after the recording, or from another run?); read as it is",
                    p.display()
                ));
            }
        }
    }
    out
}
