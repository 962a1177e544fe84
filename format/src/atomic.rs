//! Every file diskpulse writes into a directory it did not create goes through here
//! (issue 25, class 1): `report`'s outputs in a run directory someone else made (or
//! mailed), `export --out`, `load --csv` and its chart, a study's pages, `probe.json`.
//!
//! What must stay true:
//! - The bytes go to a temporary file created in the target's own directory with a
//!   unique name and `O_CREAT|O_EXCL` ([`tempfile::Builder::tempfile_in`]): it never
//!   opens an existing file, so a symlink planted at any name is never followed and a
//!   user's file is never truncated; two writers never share one.
//! - The temporary file is renamed over the target: `rename(2)` replaces a symlink
//!   itself, never the file it points to, and a reader sees the old file or the new
//!   one, never half of one. On any error the temporary file is removed.
//! - The new file's mode is 0666 less the umask, as a plain create gives.
//! - Errors name the target and say the OS error once.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file and a rename (see the module doc).
pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_with(path, |f| f.write_all(bytes))
}

/// Like [`write`], the bytes coming from `fill` (given the temporary file, buffered by
/// the caller as it needs); its value is returned once the file is in place.
pub fn write_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
) -> anyhow::Result<T> {
    put(path, fill, false)
}

/// Like [`write_with`] for a file that must be new (`export --out`): the temporary file
/// takes the name only if nothing has it (link(2), which never replaces), so of two
/// writers of one new name the second fails with `AlreadyExists` and the first's file
/// stays whole (both renamed, and the second replaced the first's).
pub fn write_new_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
) -> anyhow::Result<T> {
    put(path, fill, true)
}

fn put<T>(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
    new: bool,
) -> anyhow::Result<T> {
    let fail = |e: std::io::Error| anyhow::anyhow!("cannot write {}: {}", path.display(), plain(e));
    let (dir, name) = split(path)?;
    use std::os::unix::fs::PermissionsExt as _;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".diskpulse-tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(&dir)
        .map_err(fail)?;
    let v = fill(tmp.as_file_mut()).map_err(fail)?;
    tmp.as_file_mut().flush().map_err(fail)?;
    if new {
        tmp.persist_noclobber(path).map_err(|e| fail(e.error))?;
    } else {
        tmp.persist(path).map_err(|e| fail(e.error))?;
    }
    Ok(v)
}

/// Checks before a long run that [`write`] will be able to put `path` in place, writing
/// nothing a user would see: the target is not a directory, and a temporary file can be
/// made in its directory (made and removed at once; an existing target is not touched).
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory; name a file", path.display());
    }
    let (dir, name) = split(path)?;
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".diskpulse-tmp")
        .tempfile_in(&dir)
        .map(drop)
        .map_err(|e| anyhow::anyhow!("cannot write into {}: {}", dir.display(), plain(e)))
}

/// The directory a file goes into ("." for a bare name) and the file's name.
fn split(path: &Path) -> anyhow::Result<(PathBuf, String)> {
    let Some(name) = path.file_name() else {
        anyhow::bail!(
            "cannot write {}: not a file name; name a file",
            path.display()
        );
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_string_lossy().into_owned()))
}

/// The OS error alone: tempfile's errors end with " at path \"/dir/.name.XXXX\"", a
/// random name the user never gave; the messages here name the user's path instead.
pub fn plain(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.find(" at path ") {
        Some(i) if e.get_ref().is_some() => std::io::Error::new(e.kind(), text[..i].to_string()),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_at_the_target_is_replaced_and_its_victim_kept() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let t = d.path().join("summary.json");
        std::os::unix::fs::symlink(&victim, &t).unwrap();
        write(&t, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&t).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("rates.csv");
        std::fs::write(&t, "old").unwrap();
        let e = write_with(&t, |_| -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("rates.csv") && text.contains("os error 28"),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "old");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_new_file_is_never_replaced() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("x.lp");
        write_new_with(&t, |f| f.write_all(b"first")).unwrap();
        let e = write_new_with(&t, |f| f.write_all(b"second")).unwrap_err();
        assert!(format!("{e:#}").contains("x.lp"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "first");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_os_error_is_said_once() {
        let e = write(Path::new("/proc/no-such-dir/x.csv"), b"x").unwrap_err();
        let text = format!("{e:#}");
        assert_eq!(text.matches("os error").count(), 1, "{text}");
        assert!(text.contains("/proc/no-such-dir/x.csv"), "{text}");
    }
}
