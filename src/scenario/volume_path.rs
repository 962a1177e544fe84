//! A scenario volume's `path`, checked at `--dry-run` as the run would meet it: absolute,
//! a directory (or, with `create`, one whose parent is), on a disk-backed file system.
//! Nothing is created here.

use std::path::Path;

/// A volume `path`: absolute, an existing directory, or with `create` a missing one whose
/// parent is a directory (one level is made, never a tree). The problem, or None.
pub(super) fn check(name: &str, p: &str, create: bool) -> Option<String> {
    let path = Path::new(p);
    let fix =
        "create it first, or declare a lab volume (lab = { size = \"1G\" }) that diskpulse makes";
    if !path.is_absolute() {
        return Some(format!(
            "volume '{name}': path '{p}' is not absolute; write the directory as /dir"
        ));
    }
    let pseudo = |dir: &Path| {
        collectors::probe::target::pseudo_fs_name(dir).map(|fs| {
            format!(
                "volume '{name}': path '{p}' is on {fs}, a kernel pseudo file system, not storage; name a directory on a disk-backed file system, or declare a lab volume (lab = {{ size = \"1G\" }})"
            )
        })
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => pseudo(path),
        Ok(_) => Some(format!(
            "volume '{name}': path '{p}' is not a directory; {fix}"
        )),
        Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
            let parent = path.parent().unwrap_or(Path::new("/"));
            if !parent.is_dir() {
                return Some(format!(
                    "volume '{name}': path '{p}': its parent {} is not a directory; create = true makes only the last directory, never a tree",
                    parent.display()
                ));
            }
            pseudo(parent)
        }
        Err(e) => Some(format!(
            "volume '{name}': path '{p}': {e}; {fix}{}",
            if create {
                ""
            } else {
                ", or add create = true to make its last directory"
            }
        )),
    }
}
