//! A job's files, as fio names and sizes them (fio 3.33's `filesetup.c`, checked with
//! fio's own runs in tests/fio_vs_probe.rs):
//! - `filename=a:b:c` names several files (`\:` is a colon inside a name); each relative
//!   name is taken in `directory` when it is given;
//! - without `filename`, `nrfiles=N` files (default 1) are named by `filename_format`
//!   (default `$jobname.$jobnum.$filenum`) in `directory` (default the current one);
//! - sizes: `filesize` is each file's size (`filesize=LO-HI`: each file's drawn from the
//!   range, a multiple of the block size, as fio draws them); without it, `size` is shared
//!   out evenly (`size=32m` over two files: 16 MiB each); without either, an existing
//!   file's own size (a new file gets the default);
//! - `file_service_type` picks the file of each I/O (`collectors::probe::files`).
//!
//! What several files do not run with yet (refused in one line): verify, fsync/fdatasync,
//! fill_device, sizes in %, several job sections (a job set shares files between jobs).

use std::path::{Path, PathBuf};

use collectors::probe::files::FileService;
use format::usage;

use super::args_where::{SizeArg, WhereArgs};

/// A job's files: (path, its size if the job gives one), in `Op::file` order.
pub(crate) struct JobFiles {
    pub files: Vec<(PathBuf, Option<u64>)>,
    pub service: FileService,
}

/// fio's `filename` list: split at `:` that are not escaped (`\:`).
fn split_names(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                out.last_mut().expect("one").push(':');
                chars.next();
            }
            ':' => out.push(String::new()),
            c => out.last_mut().expect("one").push(c),
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// `filesize` as (low, high) bytes.
fn filesize_range(w: &WhereArgs) -> anyhow::Result<Option<(u64, u64)>> {
    let Some(s) = &w.filesize else {
        return Ok(None);
    };
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let one = |v: &str| {
        format::cli::parse_size(v.trim()).map_err(|_| {
            usage!("--filesize takes a size or a range LOW-HIGH like 8m or 4m-16m; got '{s}'")
        })
    };
    let (lo, hi) = (one(a)?, one(b)?);
    if lo == 0 || hi < lo {
        return Err(usage!(
            "--filesize {s}: the low end must be above 0 and at most the high end"
        ));
    }
    Ok(Some((lo, hi)))
}

/// The job's files and their sizes. `size`: the job's `--size` (its total, shared out
/// when `filesize` is not given); `bs`: the largest block size (a drawn size is a multiple).
pub(crate) fn resolve(
    w: &WhereArgs,
    filename: Option<&Path>,
    name: Option<&str>,
    size: Option<SizeArg>,
    bs: u64,
    seed: u64,
) -> anyhow::Result<JobFiles> {
    let service = match w.file_service_type.as_deref() {
        None => FileService::RoundRobin,
        Some(t) => FileService::parse(t).ok_or_else(|| {
            usage!("--file_service_type takes roundrobin, random or sequential; got '{t}'")
        })?,
    };
    if let Some(dir) = w.directory.as_ref().filter(|d| !d.is_dir()) {
        return Err(usage!(
            "--directory {}: no such directory; create it or pass another",
            dir.display()
        ));
    }
    let in_dir = |p: PathBuf| match &w.directory {
        Some(d) if p.is_relative() => d.join(p),
        _ => p,
    };
    let names: Vec<PathBuf> = match filename {
        Some(f) => split_names(&f.to_string_lossy())
            .into_iter()
            .map(|n| in_dir(PathBuf::from(n)))
            .collect(),
        None if w.directory.is_none() && w.nrfiles.unwrap_or(1) == 1 => vec![],
        None => {
            let n = w.nrfiles.unwrap_or(1);
            if !(1..=4096).contains(&n) {
                return Err(usage!("--nrfiles takes 1 to 4096; got {n}"));
            }
            let fmt = w
                .filename_format
                .as_deref()
                .unwrap_or("$jobname.$jobnum.$filenum");
            (0..n)
                .map(|i| {
                    in_dir(PathBuf::from(
                        fmt.replace("$jobname", name.unwrap_or("diskpulse"))
                            .replace("$jobnum", "0")
                            .replace("$filenum", &i.to_string()),
                    ))
                })
                .collect()
        }
    };
    let n = names.len().max(1) as u64;
    let sizes: Vec<Option<u64>> = match (filesize_range(w)?, size) {
        (Some((lo, hi)), _) => {
            // SplitMix64 (the probe's own generator), seeded by the job's randseed.
            let mut x = seed ^ 0xF5;
            let mut next = move || {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            (0..n)
                .map(|_| {
                    let v = lo + next() % (hi - lo + 1);
                    Some((v / bs.max(1) * bs.max(1)).max(lo.min(bs)))
                })
                .collect()
        }
        (None, Some(SizeArg::Bytes(b))) => vec![Some(b / n); n as usize],
        (None, Some(SizeArg::Pct(_))) if n > 1 => {
            return Err(usage!(
            "--size in % with several files per job is not run by diskpulse probe yet; give bytes"
        ))
        }
        (None, Some(SizeArg::Pct(_))) | (None, None) => vec![None; n as usize],
    };
    Ok(JobFiles {
        files: names.into_iter().zip(sizes).collect(),
        service,
    })
}

/// What several files per job do not run with yet, in one line (None: they run).
pub(crate) fn refusal(
    n: usize,
    verify: bool,
    fsync: bool,
    fill_device: bool,
) -> Option<&'static str> {
    if n < 2 {
        return None;
    }
    Some(if verify {
        "verify with several files per job"
    } else if fsync {
        "fsync/fdatasync with several files per job"
    } else if fill_device {
        "fill_device with several files per job"
    } else {
        return None;
    })
}

/// `--show-job`'s lines for the job's files: `filename=` (several joined by `:`, as
/// fio reads them back), then each file's size (`size=` for one, `filesize=` for several
/// of one size, else a comment per file) and `file_service_type` for several.
pub(crate) fn render(r: &super::args::Resolved) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let names: Vec<String> = r
        .files
        .iter()
        .map(|(p, _)| p.display().to_string().replace(':', "\\:"))
        .collect();
    let _ = writeln!(o, "filename={}", names.join(":"));
    let sizes: Vec<Option<u64>> = r.files.iter().map(|f| f.1).collect();
    match (sizes.as_slice(), r.size) {
        ([_], Some(s)) => {
            let _ = writeln!(o, "size={}", super::output::fmt_size(s));
        }
        ([_], None) => {
            let _ = writeln!(
                o,
                "; size: an existing file's or device's, else {}",
                super::output::fmt_size(super::args::DEFAULT_SIZE)
            );
        }
        ([Some(first), rest @ ..], _) if rest.iter().all(|s| *s == Some(*first)) => {
            let _ = writeln!(o, "filesize={}", super::output::fmt_size(*first));
        }
        _ => {
            for ((p, s), n) in r.files.iter().zip(&names) {
                let _ = match s {
                    Some(s) => writeln!(o, "; {n}: {}", super::output::fmt_size(*s)),
                    None => writeln!(o, "; {}: its own size", p.display()),
                };
            }
        }
    }
    if r.files.len() > 1 {
        let _ = writeln!(o, "file_service_type={}", r.spec.files.name());
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(dir: Option<&Path>, nrfiles: Option<u32>, filesize: Option<&str>) -> WhereArgs {
        WhereArgs {
            directory: dir.map(Path::to_path_buf),
            nrfiles,
            filesize: filesize.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_colon_list_is_several_files_in_the_directory_sharing_size() {
        let d = tempfile::tempdir().unwrap();
        let j = resolve(
            &w(Some(d.path()), None, None),
            Some(Path::new("a.dat:b\\:x.dat:/abs.dat")),
            None,
            Some(SizeArg::Bytes(32 << 20)),
            4096,
            1,
        )
        .unwrap();
        let names: Vec<_> = j.files.iter().map(|f| f.0.clone()).collect();
        assert_eq!(
            names,
            vec![
                d.path().join("a.dat"),
                d.path().join("b:x.dat"),
                PathBuf::from("/abs.dat")
            ]
        );
        assert!(j.files.iter().all(|f| f.1 == Some((32 << 20) / 3)));
        assert_eq!(j.service, FileService::RoundRobin, "fio's default");
    }

    #[test]
    fn nrfiles_are_named_by_filename_format_and_sized_by_filesize() {
        let d = tempfile::tempdir().unwrap();
        let j = resolve(
            &w(Some(d.path()), Some(4), Some("8m")),
            None,
            Some("nrfiles"),
            None,
            4096,
            1,
        )
        .unwrap();
        assert_eq!(j.files.len(), 4);
        assert_eq!(j.files[3].0, d.path().join("nrfiles.0.3"));
        assert!(j.files.iter().all(|f| f.1 == Some(8 << 20)));
        // A range: each file's size in it, a multiple of the block size.
        let j = resolve(
            &w(Some(d.path()), Some(8), Some("1m-4m")),
            None,
            None,
            None,
            4096,
            1,
        )
        .unwrap();
        let s: Vec<u64> = j.files.iter().map(|f| f.1.unwrap()).collect();
        assert!(s
            .iter()
            .all(|v| (1 << 20..=4 << 20).contains(v) && v % 4096 == 0));
        assert!(s.iter().any(|v| *v != s[0]), "drawn, not all alike: {s:?}");
    }

    #[test]
    fn one_file_without_directory_is_left_to_the_caller() {
        let j = resolve(&w(None, None, None), None, None, None, 4096, 1).unwrap();
        assert!(j.files.is_empty());
        let e = resolve(
            &WhereArgs {
                file_service_type: Some("lru".into()),
                ..Default::default()
            },
            None,
            None,
            None,
            4096,
            1,
        );
        assert!(e.err().unwrap().to_string().contains("'lru'"));
    }
}
